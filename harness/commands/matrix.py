"""`harness matrix SUITE [--hardware H] [--tag T] [--shard I/N] [--format text|json|github]`.

Lists a suite's entries, or emits them as GitHub Actions `strategy.matrix` JSON
(`{"include": [...]}`, enabled entries only) for a workflow to fan out over. The suite is
validated first, so CI never fans out over a broken or over-budget suite.
"""

from __future__ import annotations

import argparse
import sys

from harness.errors import UsageError
from harness.suites import Shard, find_suite, format_matrix, load_suite, matrix_rows, select, shard_of, validate_suite


def main(args: argparse.Namespace) -> int:
    suite = load_suite(find_suite(args.suite))
    check = validate_suite(suite)
    if not check.ok:
        raise UsageError(f"suite {suite.name} is invalid ({len(check.problems)} problems):\n  "
                         + "\n  ".join(check.problems))
    entries = select(suite, hardware=args.hardware or (), tags=args.tag or ())
    entries = shard_of(entries, check.estimates, Shard.parse(args.shard) if args.shard else None)
    rows = matrix_rows(suite, entries, check.estimates)
    sys.stdout.write(format_matrix(rows, args.format))
    if args.format == "text":
        hours = sum(r["estimated_hours"] or 0.0 for r in rows if r["enabled"])
        gpu = sum(r["gpu_hours"] or 0.0 for r in rows if r["enabled"])
        print(f"{sum(r['enabled'] for r in rows)} enabled of {len(rows)} entries; {hours:.2f} h, "
              f"{gpu:.1f} GPU-hours estimated (suite budget {suite.budget_gpu_hours:g})")
    return 0
