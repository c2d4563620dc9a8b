"""`harness check RUN_DIR`: judge a run against thresholds and invariants; exit 0 only if all pass.

RUN_DIR may also be a bare metrics file of another engine (the reference's metrics JSON,
a metrics.jsonl); its verdicts are then written beside it. `--self-test` also perturbs the run's
series to prove that each check can fail (docs/thresholds.md); a check it cannot fail exits 1.

Order: the verdict table is printed and result.json and junit.xml are written first, from
modules that import neither matplotlib nor the recipe loader; report.md and its plots (about
0.2 s a plot) come after, or not at all with `--no-report` (CI reads only the exit code and
junit.xml). The exit code is the same either way.

Another `--thresholds` file's verdict goes beside the run's own, never over it (`verdict_dir`),
and a folder that is no run dir gets nothing (docs/architecture.md, "`harness check`").
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from harness.bounded import read_json_object
from harness.checks.judge import Judgement, judge_run
from harness.console import format_verdicts
from harness.errors import UsageError, shown
from harness.report.junit import write_junit
from harness.report.result_json import write_result_json
from harness.run_lock import ORPHANED, settle_orphan

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~2 ms on `harness check`)
if TYPE_CHECKING:
    from harness.selftest import CheckSelfTest


def write_verdict_files(run_dir: Path, judgement: Judgement, *, name: str,
                        self_tests: Sequence[CheckSelfTest] | None = None) -> None:
    """result.json and junit.xml (with the self-test in result.json, if run): what CI reads."""
    status = judgement.status or {}
    extra = {"self_test": [test.to_json() for test in self_tests]} if self_tests is not None else None
    write_result_json(run_dir, recipe_name=name, verdicts=judgement.verdicts, status=status, extra=extra)
    write_junit(run_dir / "junit.xml", suite=name, verdicts=judgement.verdicts, wall_s=status.get("wall_s"))


def write_report(run_dir: Path, judgement: Judgement, *, name: str, plan: dict | None = None,
                 self_tests: Sequence[CheckSelfTest] | None = None) -> Path:
    """report.md with its plots; what it needs (matplotlib among it) is imported only here."""
    from harness.recipe.secret_env import redact_recipe  # noqa: PLC0415 - off the verdict path
    from harness.report.markdown import write_report_md  # noqa: PLC0415
    from harness.report.specs import plot_specs  # noqa: PLC0415

    return write_report_md(
        run_dir, recipe=redact_recipe(judgement.recipe or {"name": name}), plan=plan, status=judgement.status or {},
        verdicts=judgement.verdicts, metrics=judgement.metrics, thresholds=plot_specs(judgement.thresholds),
        variants=judgement.variants or None,
        self_test=None if self_tests is None else {t.name: f"{t.status}: {t.summary()}" for t in self_tests})


def write_outputs(run_dir: Path, judgement: Judgement, *, name: str, plan: dict | None = None,
                  self_tests: Sequence[CheckSelfTest] | None = None) -> None:
    """result.json, junit.xml, then report.md with its plots, all in the run dir (and the self-test, if run)."""
    write_verdict_files(run_dir, judgement, name=name, self_tests=self_tests)
    write_report(run_dir, judgement, name=name, plan=plan, self_tests=self_tests)


def read_plan(run_dir: Path) -> dict | None:
    """plan.json for the report; a missing or damaged one only leaves the plan out of it."""
    path = run_dir / "plan.json"
    if not path.exists():
        return None
    return read_json_object(path, kind="json")  # damaged, a symlink, a key twice: the report says less


RUN_DIR_MARKS = ("status.json", "recipe.yaml")  # the engine's first file and the harness's first file
CHECKS_DIR = "checks"


def refuse_non_run_dir(target: Path) -> None:
    """A folder with neither mark (`runs/`, an empty one) is not a run dir: judging it would write
    a failing verdict into a folder that holds no run."""
    if target.is_dir() and not any((target / mark).is_symlink() or (target / mark).exists() for mark in RUN_DIR_MARKS):
        raise UsageError(f"{shown(str(target))}: not a run dir (it holds neither status.json nor recipe.yaml); "
                         "name a run dir or a metrics file")


def verdict_dir(target: Path, recipe: dict | None, thresholds: str | None) -> Path:
    """Where this check's result.json, junit.xml and report.md go: the run dir, or, for a thresholds
    file other than the run's own, RUN_DIR/checks/<stem>/ (a bare metrics file: its folder)."""
    run_dir = target if target.is_dir() else target.parent
    own = ((recipe or {}).get("checks") or {}).get("thresholds")
    if not target.is_dir() or thresholds is None or (own and Path(own).resolve() == Path(thresholds).resolve()):
        return run_dir
    if (run_dir / CHECKS_DIR).is_symlink():
        raise UsageError(f"{shown(str(run_dir / CHECKS_DIR))} is a symlink: nothing is written through one")
    return run_dir / CHECKS_DIR / (Path(thresholds).stem.strip(".") or "thresholds")


def main(args: argparse.Namespace) -> int:
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1, got {args.steps}")
    target = Path(args.run_dir)
    refuse_non_run_dir(target)
    if target.is_dir() and settle_orphan(target):
        print(f"note: {target}: {ORPHANED}; status.json now says 'failed'")
    judgement = judge_run(
        target,
        thresholds=Path(args.thresholds) if args.thresholds else None,
        hardware=args.hardware,
        expected_steps=args.steps,
    )
    out = verdict_dir(target, judgement.recipe, args.thresholds)
    name = (judgement.recipe or {}).get("name") or target.stem
    print(format_verdicts(judgement.verdicts), end="")
    tests = None
    if args.self_test:
        from harness.console import format_self_test  # noqa: PLC0415
        from harness.selftest import run_to_run_sd, self_test  # noqa: PLC0415 - only for --self-test

        sd = run_to_run_sd(Path(args.history), recipe=name, hardware=judgement.hardware)
        tests = self_test(judgement, sd=sd)
        print(format_self_test(tests), end="")
    write_verdict_files(out, judgement, name=name, self_tests=tests)
    print(f"wrote {out / 'result.json'}, junit.xml", flush=True)  # CI may act on these while the report draws
    if args.report:
        plan = read_plan(target if target.is_dir() else target.parent)
        write_report(out, judgement, name=name, plan=plan, self_tests=tests)
        print(f"wrote {out / 'report.md'}")
    elif (out / "report.md").exists():
        print(f"note: {out / 'report.md'} is left from an earlier check (--no-report)")
    return 0 if judgement.ok and not _unproven(tests) else 1


def _unproven(tests: Sequence[CheckSelfTest] | None) -> bool:
    """A self-test ran and some check could not be shown to fail."""
    if tests is None:
        return False
    from harness.selftest import PROBLEMS  # noqa: PLC0415

    return any(test.status in PROBLEMS for test in tests)
