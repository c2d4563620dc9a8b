"""One JSON line of figures per `harness run` dir: what the engine benchmarks record.

    python3 bench/run_summary.py RUN_DIR [RUN_DIR ...]

From status.json (state, steps, wall seconds, exit code), result.json (checks passed of total and
the failed ones, when the run was checked) and metrics.jsonl: medians over the steps after the first (the first
step pays compilation and CUDA-graph capture) of the step time, generation and training tokens/s,
refit seconds (and their maximum), the training state's offload and reload seconds
(`generation.offload_training`; 0 without it), the generator's KL error, the peak memory, and the mean reward
of the first and the last 10 steps. A run dir without status.json says so in its row.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

MEDIANS = {"step_s": "timing/train/total", "generation_tokens_per_s": "performance/generation_tokens_per_sec",
           "train_tokens_per_s": "performance/train_tokens_per_sec", "refit_s": "timing/train/refit",
           "offload_s": "timing/train/offload", "reload_s": "timing/train/reload",
           "gen_kl_error": "train/gen_kl_error"}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):  # absent or cut: the row leaves those figures out
        return {}


def series(rows: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]


def summary(run: Path) -> dict:
    status, result = _read_json(run / "status.json"), _read_json(run / "result.json")
    out: dict = {"run": run.name}
    if not status:
        out["error"] = "no readable status.json"
    out.update({k: status[k] for k in ("state", "last_step", "num_steps", "exit_code", "wall_s")
                if status.get(k) is not None})
    if result.get("counts"):
        out["checks"] = f"{result['counts'].get('passed')} of {result['counts'].get('total')}"
    if len(result.get("by_kind") or {}) > 1:
        out["checks_by_kind"] = {kind: f"{n.get('passed')} of {n.get('passed', 0) + n.get('failed', 0)}"
                                 for kind, n in result["by_kind"].items()}
    if result.get("failed"):
        out["failed_checks"] = result["failed"]
    metrics = run / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
    later = rows[1:] or rows
    for name, key in MEDIANS.items():
        values = series(later, key)
        if values:
            out[name] = float(f"{statistics.median(values):.4g}")
    refit, peak, reward = series(later, "timing/train/refit"), series(rows, "performance/peak_memory_gib"), \
        series(rows, "train/reward")
    if refit:
        out["refit_max_s"] = float(f"{max(refit):.4g}")
    if peak:
        out["peak_gib"] = round(max(peak), 2)
    for phase in ("generation", "training"):  # per GPU (rl/metrics/phase_memory.py), against `harness plan`
        values = series(rows, f"performance/{phase}_peak_gib")
        if values:
            out[f"{phase}_peak_gib"] = round(max(values), 2)
    if reward:
        out["reward_first10"] = round(statistics.fmean(reward[:10]), 3)
        out["reward_last10"] = round(statistics.fmean(reward[-10:]), 3)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for run in argv:
        print(json.dumps(summary(Path(run))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
