"""`harness calibrate RECIPE [a.b=c ...] [--scale S] [--seeds 42,7,123 | --runs DIR ...] [--hardware H]
[--out FILE] [--diff]`.

Run the recipe (with its overrides and scale, as `harness run` would) once per seed, or read the
run dirs given; propose a bound for each check of the recipe's thresholds for the hardware (a
default set when it has none) from the runs' spread; prove each proposed check on every run (it
passes, and the self-test can fail it); write the proven ones with generated `why`s. `--diff`
prints them against the current file. Exit 0 when every check was written, 1 when one could not
be, 2 for bad input. docs/thresholds.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Sequence
from pathlib import Path

from harness.calibrate import (
    CalibrationRun,
    Proposal,
    RunProof,
    default_checks,
    diff_lines,
    file_checks,
    parity_summary,
    propose,
    prove,
    read_runs,
    render,
    run_seeds,
    shown,
)
from harness.errors import UsageError
from harness.history import current_commit
from harness.recipe import load_recipe
from harness.report.atomic import write_text_atomic
from harness.thresholds import ThresholdCheck, load_thresholds

DEFAULT_SEEDS = "42,7,123"


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(word) for word in text.split(",")]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: a comma-separated list of integers, like 42,7,123") from None
    if len(seeds) < 2 or len(set(seeds)) < len(seeds):
        raise UsageError(f"--seeds {text!r}: at least 2 different seeds, to measure a spread")
    return seeds


def _hardware(args: argparse.Namespace, recipe: dict, runs: Sequence[CalibrationRun]) -> str:
    """--hardware, else the class the runs were judged as (all the same), else the recipe's."""
    classes = {run.recipe["checks"].get("hardware") for run in runs}
    if args.hardware:
        return args.hardware
    if len(classes) > 1:
        raise UsageError(f"the runs are of different hardware classes ({', '.join(map(str, classes))}): "
                         "give --hardware")
    hardware = classes.pop() or recipe["checks"].get("hardware")
    if not hardware:
        raise UsageError("no hardware class: the recipe names none (checks.hardware); give --hardware")
    return hardware


def _current(recipe: dict) -> tuple[Path | None, list[ThresholdCheck]]:
    path = Path(recipe["checks"]["thresholds"]) if recipe["checks"].get("thresholds") else None
    if path is None or not path.exists():
        return path, []
    return path, load_thresholds(path, hardware=None, recipe=recipe["name"])


def _proposals(current: Sequence[ThresholdCheck], runs: Sequence[CalibrationRun], *, hardware: str,
               today: dt.date, provenance: str) -> list[Proposal]:
    applying = [c for c in current if c.hardware is None or hardware in c.hardware]
    if applying:
        return [propose(c, runs, hardware=hardware, today=today, provenance=provenance) for c in applying]
    steps = runs[0].recipe["algorithm"]["num_steps"]
    return [propose(c, runs, hardware=hardware, today=today, provenance=provenance, default=True,
                    placeholders=placed)
            for c, placed in default_checks(num_steps=steps, hardware=hardware, today=today)]


def _provenance(runs: Sequence[CalibrationRun], today: dt.date) -> str:
    commit = current_commit()
    at = f" at commit {commit[:10]}" if commit else ""
    dirs = ", ".join(shown(variant.run_dir) for run in runs for variant in run.variants)
    return f"Calibrated by harness calibrate on {today.isoformat()}{at} from {dirs}."


def format_proofs(proposals: Sequence[Proposal], proofs: dict[str, list[RunProof]]) -> str:
    """Per check: written or not, and on each run its verdict and what fails it (the margin)."""
    lines = []
    for p in proposals:
        if p.not_applicable:
            lines.append(f"n/a          {p.name}: {p.problem} (a default check for another engine)")
            continue
        word = "NOT WRITTEN" if p.check is None else "new" if p.default else "moved" if p.changed else "same"
        lines.append(f"{word:<12} {p.name}: {p.check.expr if p.check else p.source.expr}")
        if p.unproven is not None and p.unproven != p.source.expr:
            lines.append(f"             proposed: {p.unproven}")
        if p.check is None:
            lines.append(f"             why not: {p.problem}")
        for proof in proofs.get(p.name, []) if p.check is not None else []:
            lines.append(f"             {proof.label}: {proof.status}: {proof.summary}")
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    recipe_path = Path(args.recipe)
    recipe = load_recipe(recipe_path, list(args.overrides), scale=args.scale).data
    name, today = recipe["name"], dt.date.today()
    if args.runs and args.seeds:
        raise UsageError("--runs and --seeds: choose one (the runs' seeds are read from their recipe.yaml)")
    folder = Path("runs") / f"calibrate-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.runs:
        run_dirs = [Path(d) for d in args.runs]
    else:
        from harness.nightly.plugin import TIMEOUT_MARGIN_S  # noqa: PLC0415 - the margin nightly gives a run

        run_dirs, failed = run_seeds(
            recipe_path, parse_seeds(args.seeds or DEFAULT_SEEDS), overrides=args.overrides, scale=args.scale,
            out_dir=folder,
            hardware=args.hardware or recipe["checks"].get("hardware") or "cpu",
            timeout_s=float(recipe["limits"]["timeout_s"]) + TIMEOUT_MARGIN_S, parallel=args.workers)
        if failed:
            print("a seed's run did not complete, so there is no spread to calibrate on:\n  " + "\n  ".join(failed))
            return 1
    runs = read_runs(run_dirs, recipe=recipe)
    parity = parity_summary(runs)  # a seed whose paths disagree is no evidence: exit 2 before anything is proposed
    hardware = _hardware(args, recipe, runs)
    current_path, current = _current(recipe)
    proposals = _proposals(current, runs, hardware=hardware, today=today, provenance=_provenance(runs, today))
    proposals, proofs = prove(proposals, runs, recipe=name, hardware=hardware)
    print(f"calibrate {name} on {hardware} from {len(runs)} runs: "
          + ", ".join(f"{r.label} ({r.shown})" for r in runs))
    print(format_proofs(proposals, proofs), end="")
    if parity:
        print(parity)
    checks, scopes = file_checks(current, proposals, hardware=hardware)
    for check_name, scope in scopes.items():
        print(f"note: {check_name}: {scope}")
    if not any(p.check is not None for p in proposals):
        print("no check could be proven: no file written")
        return 1
    out = Path(args.out) if args.out else folder / "thresholds.yaml"
    header = [f"Thresholds of {name}, from `harness calibrate {shown(recipe_path)}` on {today.isoformat()}: "
              f"the {hardware} checks' bounds, evidence and margin rule are in each `why` (docs/thresholds.md)."]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render(name, checks, header=header))
    load_thresholds(out, hardware=hardware, recipe=name)  # what was written reads back
    print(f"wrote {out}: {sum(1 for c in checks if c.hardware is None or hardware in c.hardware)} checks for "
          f"{hardware}, {sum(1 for c in checks if c.hardware is not None and hardware not in c.hardware)} "
          "for other hardware")
    if args.diff:
        was = shown(current_path) if current_path and current_path.exists() else None
        print("\n".join(diff_lines(proposals, current=was, proposed=shown(out), scopes=scopes)))
    unwritten = [p for p in proposals if p.check is None and not p.not_applicable]
    return 1 if unwritten else 0
