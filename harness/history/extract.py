"""The key numbers of one run dir, as stored in the history.

* final_reward: `train/reward` at the last logged step.
* step_time_s: mean of `timing/train/total` over the steps, leaving out step 1 when there are
  more (it carries one-off warm-up: compilation, allocator growth, first refit).
* tokens_per_s: mean of `performance/tokens_per_sec_per_gpu`, step 1 left out the same way.
* wall_s: status.json's wall_s (the engine's wall time).
* The per-phase numbers of a GPU run (the engine logs them on the CPU too, peak memory only on a
  GPU): generation_tokens_per_s, train_tokens_per_s, mfu and refit_s as steady means like
  tokens_per_s; peak_memory_gib as the run's maximum.
Each is None when the run did not log it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.bounded import read_json_object
from harness.metrics import MetricsError, read_metrics

REWARD = "train/reward"
STEP_TIME = "timing/train/total"
TOKENS_PER_S = "performance/tokens_per_sec_per_gpu"
# history column -> (metrics.jsonl key, how a run's series becomes one number)
PHASES = {
    "generation_tokens_per_s": ("performance/generation_tokens_per_sec", "steady_mean"),
    "train_tokens_per_s": ("performance/train_tokens_per_sec", "steady_mean"),
    "mfu": ("performance/mfu", "steady_mean"),
    "peak_memory_gib": ("performance/peak_memory_gib", "max"),
    "refit_s": ("timing/train/refit", "steady_mean"),
}


@dataclass(frozen=True, kw_only=True)
class KeyMetrics:
    final_reward: float | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    wall_s: float | None = None
    generation_tokens_per_s: float | None = None
    train_tokens_per_s: float | None = None
    mfu: float | None = None
    peak_memory_gib: float | None = None
    refit_s: float | None = None


def _finite(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float range
        return None
    return number if math.isfinite(number) else None


def steady_mean(series: Mapping[int, float]) -> float | None:
    """Mean of the finite values, without the first step when there is more than one."""
    steps = sorted(series)
    if len(steps) > 1:
        steps = steps[1:]
    values = [v for v in (_finite(series[s]) for s in steps) if v is not None]
    return sum(values) / len(values) if values else None


def last_value(series: Mapping[int, float]) -> float | None:
    return _finite(series[max(series)]) if series else None


def largest(series: Mapping[int, float]) -> float | None:
    values = [v for v in (_finite(x) for x in series.values()) if v is not None]
    return max(values) if values else None


_AGGREGATE = {"steady_mean": steady_mean, "max": largest}


def metrics_path(run_dir: Path) -> Path | None:
    """The run's metrics.jsonl; for a parity run, its first variant's (the baseline the others match)."""
    run_dir = Path(run_dir)
    if (run_dir / "metrics.jsonl").exists():
        return run_dir / "metrics.jsonl"
    variants = (read_json_object(run_dir / "status.json", kind="status") or {}).get("variants")
    variants = [name for name in variants if isinstance(name, str)] if isinstance(variants, dict) else []
    for name in variants:
        if (run_dir / name / "metrics.jsonl").exists():
            return run_dir / name / "metrics.jsonl"
    return None


def key_metrics(run_dir: Path) -> KeyMetrics:
    """What the history keeps of a run dir; missing files give None fields, never an error."""
    run_dir = Path(run_dir)
    try:
        path = metrics_path(run_dir)
        metrics = read_metrics(path) if path is not None else {}
    except MetricsError:
        metrics = {}
    wall = _finite((read_json_object(run_dir / "status.json", kind="status") or {}).get("wall_s"))
    return KeyMetrics(
        final_reward=last_value(metrics[REWARD]) if REWARD in metrics else None,
        step_time_s=steady_mean(metrics[STEP_TIME]) if STEP_TIME in metrics else None,
        tokens_per_s=steady_mean(metrics[TOKENS_PER_S]) if TOKENS_PER_S in metrics else None,
        wall_s=wall,
        **{column: _AGGREGATE[how](metrics[key]) if key in metrics else None
           for column, (key, how) in PHASES.items()},
    )


def check_verdicts(run_dir: Path) -> dict[str, bool]:
    """Check name -> passed, from the run's result.json (empty when there is none)."""
    path = Path(run_dir) / "result.json"
    data = read_json_object(path, kind="json") or {}
    verdicts = data.get("verdicts")
    if not isinstance(verdicts, list):
        return {}
    return {str(v["name"]): v["ok"] is True for v in verdicts if isinstance(v, dict) and "name" in v}
