"""`harness compare RUN_A RUN_B [--out DIR]`: per-step parity of two existing run dirs, both complete.

`--out DIR` also writes the comparison's verdicts, whole, as DIR/result.json and DIR/junit.xml
(a CI gate's artifact); never into either run dir, whose own verdict files they would replace.

It read only metrics, so two runs whose status.json says failed, with the steps they got to
equal, passed: a parity gate went green on two crashed runs. Each run is now judged complete
first (harness.checks.completion, as `harness check` does) and a run that is not fails the
comparison with a verdict naming it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

from harness.checks.completion import check_completion
from harness.checks.parity import compare_metrics
from harness.checks.run_files import StatusError, read_run_recipe, read_status, read_yaml
from harness.checks.verdict import Verdict
from harness.console import format_verdicts
from harness.dir_path import dir_problem
from harness.errors import UsageError, shown
from harness.metrics import Metrics, read_metrics

MAX_LISTED = 8


def leaf_differences(a: object, b: object, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two resolved recipes."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += leaf_differences(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def describe_recipes(runs: list[Path]) -> str:
    """One line saying how the two runs' recipe.yaml differ, so a stale or mismatched run shows."""
    paths = [run / "recipe.yaml" for run in runs]
    if not all(p.exists() for p in paths):
        return "recipes: not both runs have a recipe.yaml; cannot say what differs"
    a, b = (read_yaml(p) for p in paths)
    diff = leaf_differences(a, b)
    if not diff:
        return "recipes: identical"
    more = f" (+{len(diff) - MAX_LISTED} more)" if len(diff) > MAX_LISTED else ""
    return "recipes differ in: " + ", ".join(diff[:MAX_LISTED]) + more


def completion(run: Path, metrics: Metrics) -> Verdict:
    """`run_completed:<run>`: whether `run` finished, as its status.json, recipe and metrics say."""
    name = f"run_completed:{run.name}"
    try:
        status = read_status(run)
    except StatusError as error:
        return Verdict(name=name, kind="completion", ok=False, message=f"{run}: {error}")
    recipe = read_run_recipe(run)
    steps = recipe["algorithm"]["num_steps"] if recipe else (status or {}).get("num_steps")
    if type(steps) is not int:
        return Verdict(name=name, kind="completion", ok=False,
                       message=f"{run}: the step count is unknown (no recipe.yaml, no num_steps in status.json)")
    verdict = check_completion(status=status, steps=metrics.logged_steps(), expected_steps=steps)
    return replace(verdict, name=name, message=f"{run}: {verdict.message}")


def main(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):  # NaN would pass `< 0`
        raise UsageError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    runs = [Path(args.run_a), Path(args.run_b)]
    for run in runs:
        if not run.exists():
            raise UsageError(f"{run}: no such run dir")
    out = getattr(args, "out", None)
    check_out(out, runs)
    print(describe_recipes(runs))
    a, b = (read_metrics(run) for run in runs)
    verdicts = [completion(run, metrics) for run, metrics in zip(runs, (a, b))]
    verdicts += compare_metrics(a, b, names=(runs[0].name, runs[1].name), tolerance=args.tolerance)
    print(format_verdicts(verdicts), end="")
    if out:
        write_files(Path(out), verdicts, runs)
    return 0 if all(v.ok for v in verdicts) else 1


def check_out(out: str | None, runs: list[Path]) -> None:
    """--out must be a folder this user can write and neither run dir (exit 2 before comparing)."""
    if out is None:
        return
    problem = dir_problem(out)
    if problem is not None:
        raise UsageError(f"--out {problem}")
    if any(Path(out).resolve() == run.resolve() for run in runs):
        raise UsageError(f"--out {shown(out)} is one of the compared run dirs: its own result.json and junit.xml "
                         "would be replaced (choose another folder)")


def write_files(out: Path, verdicts: list[Verdict], runs: list[Path]) -> None:
    from harness.report.junit import write_junit  # noqa: PLC0415 - only with --out
    from harness.report.result_json import write_result_json  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    name = f"compare:{runs[0].name}:{runs[1].name}"
    write_result_json(out, recipe_name=name, verdicts=verdicts, status={"runs": [str(run) for run in runs]})
    write_junit(out / "junit.xml", suite=name, verdicts=verdicts)
    print(f"wrote {out / 'result.json'}, junit.xml")
