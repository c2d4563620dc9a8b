"""Planted calibration runs for the calibrate tests: run dirs written by hand, as test_cli.py does.

Each run is 20 steps of a recipe `r` whose seed moves the reward by a fixed offset, so the
spread of every reward statistic is known; num_ranks and total_flops are the same in every run
unless a test says otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
STEPS = 20
OFFSETS = {42: 0.0, 7: 0.08, 123: -0.06}  # mean(train/reward, -10): 0.61, 0.69, 0.55


PARITY = {"variants": {"legacy": {"data_plane.backend": "legacy"}, "tq": {"data_plane.backend": "tq"}},
          "tolerance": 0.0}


def write_recipe(folder: Path, *, thresholds: dict | None, parity: dict | None = None) -> Path:
    """A recipe `r` (the CPU arith recipe, 20 steps) whose thresholds file holds `thresholds`; with
    `parity`, a parity recipe (checks.parity) as recipes/arith_grpo_cpu_parity.yaml is."""
    folder.mkdir(parents=True, exist_ok=True)
    if thresholds is not None:
        (folder / "thresholds.yaml").write_text(yaml.safe_dump(thresholds, sort_keys=False))
    recipe = folder / "r.yaml"
    checks = {"thresholds": "thresholds.yaml", "hardware": "cpu", **({"parity": parity} if parity else {})}
    recipe.write_text(yaml.safe_dump({
        "defaults": str(REPO / "recipes" / "arith_grpo_cpu.yaml"), "name": "r",
        "algorithm": {"num_steps": STEPS}, "checks": checks}))
    return recipe


def row(step: int, seed: int) -> dict:
    return {"step": step, "train/reward": 0.3 + 0.02 * step + OFFSETS[seed], "train/loss": 1.0 / step,
            "train/grad_norm": 2.0 + 0.1 * step + OFFSETS[seed], "train/gen_kl_error": 1e-9 * (1 + step % 3),
            "num_ranks": 2, "total_flops": 3.5e8, "theoretical_tflops": 0.2}


def write_run(run_dir: Path, seed: int, *, rows=row) -> Path:
    """A completed run of `r` with `seed`: metrics.jsonl, status.json, invariants.jsonl, recipe.yaml."""
    run_dir.mkdir(parents=True)
    with (run_dir / "metrics.jsonl").open("w") as f:
        for step in range(1, STEPS + 1):
            f.write(json.dumps(rows(step, seed)) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"state": "completed", "exit_code": 0, "last_step": STEPS,
                                                     "num_steps": STEPS, "wall_s": 3.0}))
    (run_dir / "invariants.jsonl").write_text(
        "".join(json.dumps({"check": "flops_fields", "ok": True, "step": s}) + "\n" for s in range(1, STEPS + 1)))
    recipe = {"name": "r", "engine": "rl", "algorithm": {"num_steps": STEPS, "seed": seed},
              "data_plane": {"backend": "legacy"}, "env": {}, "checks": {"hardware": "cpu", "invariants": True}}
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return run_dir


def write_parity_run(run_dir: Path, seed: int, *, rows=row, tq_rows=None, parity=PARITY) -> Path:
    """A completed parity run of `r` with `seed`, as `harness run` lays it out: the parity recipe and
    status.json at the top, each variant's run in its sub-dir (tq_rows: the tq path's, else rows)."""
    def digested(path_rows):  # the per-sample log-prob digest that parity compares
        return lambda step, seed: {**path_rows(step, seed), "train/logprob_digest": 1000.0 * seed + step}

    for name in parity["variants"]:
        write_run(run_dir / name, seed, rows=digested(tq_rows if name == "tq" and tq_rows else rows))
    recipe = yaml.safe_load((run_dir / "legacy" / "recipe.yaml").read_text())
    recipe["checks"]["parity"] = parity
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    (run_dir / "status.json").write_text(json.dumps({
        "state": "completed", "variants": {name: "completed" for name in parity["variants"]}, "wall_s": 6.0}))
    return run_dir


def write_runs(folder: Path, seeds=(42, 7, 123), **kwargs) -> list[str]:
    return [str(write_run(folder / f"run-{i}", seed, **kwargs)) for i, seed in enumerate(seeds)]


def check(name: str, expr: str, **extra) -> dict:
    return {"name": name, "expr": expr, "why": "set by hand", "since": "2026-11-30", **extra}
