"""The calibration runs: the recipe run once per seed through nightly's runner, or run dirs given.

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


@dataclass(frozen=True, kw_only=True)
class CalibrationRun:
    """One run dir the bounds are derived from; label names it in the evidence (`seed 42`)."""

    run_dir: Path
    label: str
    recipe: dict
    metrics: Metrics

    @property
    def shown(self) -> str:
        """The run dir as the `why` cites it: relative to the working directory when under it."""
        path = os.path.relpath(self.run_dir)
        return str(self.run_dir) if path.startswith("..") else path


def read_runs(run_dirs: Sequence[Path], *, recipe_name: str) -> list[CalibrationRun]:
    """Each run dir's recipe.yaml and metrics; all of one recipe, with one step count."""
    if len(run_dirs) < 2:
        raise UsageError(f"calibrate needs at least 2 runs to measure a spread, got {len(run_dirs)}")
    runs = [_read(Path(run_dir)) for run_dir in run_dirs]
    for run in runs:
        if run.recipe["name"] != recipe_name:
            raise UsageError(f"{run.run_dir}: a run of recipe {run.recipe['name']!r}, not {recipe_name!r}")
    steps = {run.recipe["algorithm"]["num_steps"] for run in runs}
    if len(steps) > 1:
        raise UsageError(f"the runs have different step counts ({', '.join(map(str, sorted(steps)))}): "
                         "a statistic over their last steps would not mean the same")
    if len({run.run_dir.resolve() for run in runs}) < len(runs):
        raise UsageError("a run dir is given twice: one run is not a spread")
    return runs


def _read(run_dir: Path) -> CalibrationRun:
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run dir")
    recipe = read_run_recipe(run_dir)
    if recipe is None:
        raise UsageError(f"{run_dir}: no recipe.yaml, so not a run dir of `harness run`")
    seed = (recipe.get("algorithm") or {}).get("seed")
    label = f"seed {seed}" if type(seed) is int else run_dir.name
    return CalibrationRun(run_dir=run_dir, label=label, recipe=recipe, metrics=read_metrics(run_dir))


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
