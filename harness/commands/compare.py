"""`harness compare RUN_A RUN_B`: per-step parity of two existing run dirs."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.checks.parity import compare_metrics
from harness.console import format_verdicts
from harness.errors import UsageError
from harness.metrics import read_metrics


def main(args: argparse.Namespace) -> int:
    if args.tolerance < 0:
        raise UsageError(f"--tolerance must be >= 0, got {args.tolerance}")
    runs = [Path(args.run_a), Path(args.run_b)]
    for run in runs:
        if not run.exists():
            raise UsageError(f"{run}: no such run dir")
    a, b = (read_metrics(run) for run in runs)
    verdicts = compare_metrics(a, b, names=(runs[0].name, runs[1].name), tolerance=args.tolerance)
    print(format_verdicts(verdicts), end="")
    return 0 if all(v.ok for v in verdicts) else 1
