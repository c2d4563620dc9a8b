"""The calibration runs: the recipe run once per seed through nightly's runner, or run dirs given;
a parity recipe's run is one seed whose variants' sub-dirs are judged each, as `harness check` would.

Seeds run as `harness run RECIPE [overrides] algorithm.seed=S --out OUT/seed-S`, a subprocess each, through
harness/nightly/runner.py (the same retry of infrastructure failures as a nightly entry), at
most `parallel` at a time: two on the 2-core CPU box, whose engine takes both cores per run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.checks.run_files import read_run_recipe
from harness.errors import UsageError
from harness.metrics import Metrics, read_metrics


def shown(path: Path) -> str:
    """A run dir as a `why` cites it: relative to the working directory when under it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One data path judged on its own, as `harness check` judges it: a run's own dir, or a parity
    run's sub-dir for one variant (name)."""

    name: str | None
    run_dir: Path
    metrics: Metrics


@dataclass(frozen=True, kw_only=True)
class CalibrationRun:
    """One seed's run dir the bounds are derived from; label names it in the evidence (`seed 42`).

    A parity run (the recipe's checks.parity) is one seed with a variant per data path, each in
    its sub-dir: a statistic is measured on each, and the seed counts once in the spread.
    """

    run_dir: Path
    label: str
    recipe: dict
    variants: tuple[Variant, ...]

    @property
    def shown(self) -> str:
        return shown(self.run_dir)

    def label_of(self, variant: Variant) -> str:
        return f"{self.label} {variant.name}" if variant.name else self.label

    @property
    def tolerance(self) -> float | None:
        """A parity run's checks.parity.tolerance (read and checked by _read); None for a run without variants."""
        parity = self.recipe["checks"].get("parity")
        return float(parity.get("tolerance", 0.0)) if parity else None


def read_runs(run_dirs: Sequence[Path], *, recipe: dict) -> list[CalibrationRun]:
    """Each run dir's recipe.yaml and metrics; all of the recipe, with one step count, and of its
    layout: a parity recipe's runs are parity run dirs, one per seed."""
    if len(run_dirs) < 2:
        raise UsageError(f"calibrate needs at least 2 runs to measure a spread, got {len(run_dirs)}")
    runs = [_read(Path(run_dir), parity=bool(recipe["checks"].get("parity"))) for run_dir in run_dirs]
    for run in runs:
        if run.recipe["name"] != recipe["name"]:
            raise UsageError(f"{run.run_dir}: a run of recipe {run.recipe['name']!r}, not {recipe['name']!r}")
    steps = {run.recipe["algorithm"]["num_steps"] for run in runs}
    if len(steps) > 1:
        raise UsageError(f"the runs have different step counts ({', '.join(map(str, sorted(steps)))}): "
                         "a statistic over their last steps would not mean the same")
    if len({run.run_dir.resolve() for run in runs}) < len(runs):
        raise UsageError("a run dir is given twice: one run is not a spread")
    return runs


def _recipe_of(run_dir: Path) -> dict:
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run dir")
    recipe = read_run_recipe(run_dir)
    if recipe is None:
        raise UsageError(f"{run_dir}: no recipe.yaml, so not a run dir of `harness run`")
    return recipe


def _variant_names(run_dir: Path, parity: object) -> list[str]:
    """A parity run's variants, each a sub-dir of the run dir; [] for a run without parity."""
    if parity is None:
        return []
    bad = f"{run_dir / 'recipe.yaml'}: checks.parity must be a mapping of variants (plain names) and a tolerance >= 0"
    if not isinstance(parity, dict) or not isinstance(parity.get("variants"), dict):
        raise UsageError(bad)
    names = list(parity["variants"])
    tolerance = parity.get("tolerance", 0.0)
    if (not all(isinstance(n, str) and n not in ("", ".", "..") and "/" not in n for n in names)
            or isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
            or not 0 <= tolerance < float("inf")):
        raise UsageError(bad)
    return names


def _read(run_dir: Path, *, parity: bool) -> CalibrationRun:
    recipe = _recipe_of(run_dir)
    seed = (recipe.get("algorithm") or {}).get("seed")
    label = f"seed {seed}" if type(seed) is int else run_dir.name
    names = _variant_names(run_dir, recipe["checks"].get("parity"))
    if parity and not names:
        whole = run_dir.resolve().parent
        whose = ((read_run_recipe(whole) or {}).get("checks") or {}).get("parity")
        hint = f"give {shown(whole)}, the run dir of all its variants" if whose else "give the parity run dirs"
        raise UsageError(f"{run_dir}: one data path of a parity run, not a parity run dir (one seed is the run dir "
                         f"with a sub-dir per variant): {hint}")
    if not parity and names:
        raise UsageError(f"{run_dir}: a parity run dir, and the recipe has no checks.parity")
    if not names:
        return CalibrationRun(run_dir=run_dir, label=label, recipe=recipe,
                              variants=(Variant(name=None, run_dir=run_dir, metrics=read_metrics(run_dir)),))
    if len(names) != 2:
        raise UsageError(f"{run_dir}: parity compares 2 variants, the run has {len(names)}")
    variants = []
    for name in names:
        sub = run_dir / name
        if sub.is_symlink():  # another run's path would be judged as this seed's
            raise UsageError(f"{sub}: a symlink; a parity run's variant dirs are not followed")
        sub_recipe = _recipe_of(sub)
        if sub_recipe["algorithm"]["num_steps"] != recipe["algorithm"]["num_steps"]:
            raise UsageError(f"{sub}: {sub_recipe['algorithm']['num_steps']} steps, its parity run "
                             f"{recipe['algorithm']['num_steps']}")
        variants.append(Variant(name=name, run_dir=sub, metrics=read_metrics(sub)))
    return CalibrationRun(run_dir=run_dir, label=label, recipe=recipe, variants=tuple(variants))


def run_seeds(recipe_path: Path, seeds: Sequence[int], *, overrides: Sequence[str], scale: str | None,
              out_dir: Path, hardware: str, timeout_s: float, parallel: int) -> tuple[list[Path], list[str]]:
    """Run the recipe once per seed; return the run dirs (the last attempt of each) and, for each
    run that did not complete, what happened to it."""
    from harness.nightly.runner import read_state, run_entry  # noqa: PLC0415 - only when calibrate runs seeds
    from harness.suites import Entry  # noqa: PLC0415

    entries = [Entry(id=f"seed-{seed}", recipe=recipe_path.resolve(), overrides=(*overrides, f"algorithm.seed={seed}"),
                     scale=scale, hardware=hardware) for seed in seeds]
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(entry: Entry) -> Path:
        print(f"running {entry.id}: {out_dir / entry.id}", flush=True)
        result = run_entry(entry, out_dir=out_dir, max_retries=1, timeout_s=timeout_s)
        final = result.final
        print(f"{entry.id}: exit {final.exit_code}, {final.state or 'no status'}, {final.wall_s:.0f} s", flush=True)
        return Path(final.run_dir)

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(entries)))) as pool:
        run_dirs = list(pool.map(one, entries))
    failed = [f"{run_dir}: {read_state(run_dir) or 'no status.json'} (see its engine.log)"
              for run_dir in run_dirs if read_state(run_dir) != "completed"]
    return run_dirs, failed
