"""`harness check RUN_DIR`: judge a run against thresholds and invariants; exit 0 only if all pass.

RUN_DIR may also be a bare metrics file of another engine (the reference's metrics JSON,
a metrics.jsonl); its verdicts are then written beside it. `--self-test` also perturbs the run's
series to prove that each check can fail (docs/thresholds.md); a check it cannot fail exits 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from harness.bounded import BoundedReadError, read_text
from harness.checks.judge import Judgement, judge_run
from harness.errors import UsageError
from harness.console import format_self_test, format_verdicts
from harness.report import write_junit, write_report_md, write_result_json
from harness.recipe.secret_env import redact_recipe
from harness.report.specs import plot_specs
from harness.selftest import PROBLEMS, CheckSelfTest, run_to_run_sd, self_test


def write_outputs(run_dir: Path, judgement: Judgement, *, name: str, plan: dict | None = None,
                  self_tests: Sequence[CheckSelfTest] | None = None) -> None:
    """result.json, junit.xml and report.md with its plots, all in the run dir (and the self-test, if run)."""
    status = judgement.status or {}
    extra = {"self_test": [test.to_json() for test in self_tests]} if self_tests is not None else None
    write_result_json(run_dir, recipe_name=name, verdicts=judgement.verdicts, status=status, extra=extra)
    write_junit(run_dir / "junit.xml", suite=name, verdicts=judgement.verdicts, wall_s=status.get("wall_s"))
    write_report_md(run_dir, recipe=redact_recipe(judgement.recipe or {"name": name}), plan=plan, status=status,
                    verdicts=judgement.verdicts, metrics=judgement.metrics,
                    thresholds=plot_specs(judgement.thresholds),
                    self_test=None if self_tests is None else {t.name: f"{t.status}: {t.summary()}" for t in self_tests})


def read_plan(run_dir: Path) -> dict | None:
    """plan.json for the report; a missing or damaged one only leaves the plan out of it."""
    path = run_dir / "plan.json"
    if not path.exists():
        return None
    try:
        plan = json.loads(read_text(path, kind="json"))
    except (BoundedReadError, ValueError, RecursionError):  # the report says less, the verdicts stand
        return None
    return plan if isinstance(plan, dict) else None


def main(args: argparse.Namespace) -> int:
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1, got {args.steps}")
    target = Path(args.run_dir)
    judgement = judge_run(
        target,
        thresholds=Path(args.thresholds) if args.thresholds else None,
        hardware=args.hardware,
        expected_steps=args.steps,
    )
    run_dir = target if target.is_dir() else target.parent
    name = (judgement.recipe or {}).get("name") or target.stem
    print(format_verdicts(judgement.verdicts), end="")
    tests = None
    if args.self_test:
        sd = run_to_run_sd(Path(args.history), recipe=name, hardware=judgement.hardware)
        tests = self_test(judgement, sd=sd)
        print(format_self_test(tests), end="")
    write_outputs(run_dir, judgement, name=name, plan=read_plan(run_dir), self_tests=tests)
    print(f"wrote {run_dir / 'result.json'}, junit.xml, report.md")
    unproven = tests is not None and any(test.status in PROBLEMS for test in tests)
    return 0 if judgement.ok and not unproven else 1
