"""Wall time of the CPU GRPO recipe and per-step time of the TQ vs the legacy data path.

    python bench/bench_engine.py [--runs 3] [--cold]

* `harness run recipes/arith_grpo_cpu.yaml` --runs times (seeds 42, 7, 123): wall time
  including Ray start, first/last-10-step reward; --cold first empties the warm-start cache
  (RL_CACHE_DIR points at a fresh folder) for one extra run.
* `harness run recipes/arith_grpo_cpu_parity.yaml` once: median `timing/train/total` per step
  (step 1 left out as warm-up) on each path, and their ratio.
Prints markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (42, 7, 123)


def harness_run(recipe: str, out: Path, *overrides: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", "run", recipe, *overrides, "--out", str(out),
                    "--no-progress"], cwd=ROOT, check=False, capture_output=True, env={**os.environ, **(env or {})})
    return time.perf_counter() - start


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def verdict(run_dir: Path) -> str:
    return "pass" if json.loads((run_dir / "result.json").read_text())["ok"] else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="one more run with an empty warm-start cache")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_engine_"))
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores\n")
    print("| run | wall s | reward steps 1-10 | reward last 10 | checks |\n|---|---|---|---|---|")
    plan = [(f"seed {s}", [f"algorithm.seed={s}"], None) for s in SEEDS[: args.runs]]
    if args.cold:
        plan.append(("seed 42, cold warm-start cache", ["algorithm.seed=42"], {"RL_CACHE_DIR": str(work / "cache")}))
    for label, overrides, env in plan:
        out = work / label.replace(" ", "_").replace(",", "")
        wall = harness_run("recipes/arith_grpo_cpu.yaml", out, *overrides, env=env)
        reward = [r["train/reward"] for r in rows(out)]
        print(f"| {label} | {wall:.1f} | {statistics.mean(reward[:10]):.3f} | {statistics.mean(reward[-10:]):.3f} "
              f"| {verdict(out)} |")
    out = work / "parity"
    harness_run("recipes/arith_grpo_cpu_parity.yaml", out)
    per_step = {}
    for path in ("legacy", "tq"):
        per_step[path] = statistics.median(r["timing/train/total"] for r in rows(out / path)[1:])
    print("\n| data path | median s per step | ratio to legacy |\n|---|---|---|")
    for path, seconds in per_step.items():
        print(f"| {path} | {seconds:.3f} | {seconds / per_step['legacy']:.2f} |")
    print(f"\nparity verdict: {verdict(out)}")


if __name__ == "__main__":
    main()
