"""The statistics a threshold may take of one metric's steps, after range selection and trimming.

Range semantics are the reference check script's (NeMo-RL tests/check_metrics.py), so thresholds
carried over mean the same thing: steps are 1-based; `start` is inclusive and `end` exclusive;
a negative start/end counts back from the metric's last step plus one (start=-5 is the last five
steps, end=-1 stops before the last step); end=0 (the default) runs through the last step; a
positive value is a step number. A run resumed from a checkpoint (steps 11..20) therefore reads
the same as one that ran from step 1. `trim` drops the top fraction of values exactly as the
reference's ignore_top_p does (keep the lowest int(n * (1 - trim)), at least one); `trim_low`
mirrors it for the bottom.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Points = list[tuple[int, float]]


class Failure(Exception):
    """An evaluation that cannot produce a trustworthy value: becomes a failing verdict."""


def select(series: dict[int, float], start: int, end: int) -> Points:
    """The (step, value) points with start <= step < end, resolving negative/zero bounds."""
    last = next(reversed(series))
    if start < 0:
        start += last + 1
    if end <= 0:
        end += last + 1
    return [(step, value) for step, value in series.items() if start <= step < end]


def _kept(count: int, fraction: float) -> int:
    return max(int(count * (1.0 - fraction)), 1) if fraction > 0 else count


def trim(points: Points, top: float, low: float) -> Points:
    """Drop the highest `top` and lowest `low` fractions of values; keeps step order."""
    if top <= 0 and low <= 0:
        return points
    ordered = sorted(points, key=lambda point: (point[1], point[0]))
    n = len(ordered)
    drop_top, drop_low = n - _kept(n, top), n - _kept(n, low)
    kept = ordered[drop_low : n - drop_top]
    if not kept:
        raise Failure(f"trimming {top:g} top and {low:g} low of {n} values leaves none")
    return sorted(kept)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _std(values: list[float]) -> float:
    """Sample standard deviation (n - 1), like statistics.stdev."""
    centre = _mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def slope(points: Points) -> float:
    """Least-squares slope of value against step: change per step."""
    steps = [float(step) for step, _ in points]
    values = [value for _, value in points]
    mean_step, mean_value = _mean(steps), _mean(values)
    spread = math.fsum((s - mean_step) ** 2 for s in steps)
    assert spread > 0, "distinct steps guaranteed by a dict with >= 2 points"
    return math.fsum((s - mean_step) * (v - mean_value) for s, v in zip(steps, values)) / spread


def ratio_above(values: list[float], threshold: float) -> float:
    """The fraction of values >= threshold (inclusive, like the reference's ratio_above)."""
    return sum(1 for v in values if v >= threshold) / len(values)


ValueFn = Callable[[Points, dict[str, float]], float | bool]

APPLY: dict[str, ValueFn] = {
    "mean": lambda p, a: _mean([v for _, v in p]),
    "median": lambda p, a: _median([v for _, v in p]),
    "min": lambda p, a: min(v for _, v in p),
    "max": lambda p, a: max(v for _, v in p),
    "first": lambda p, a: p[0][1],
    "last": lambda p, a: p[-1][1],
    "std": lambda p, a: _std([v for _, v in p]),
    "slope": lambda p, a: slope(p),
    "percentile": lambda p, a: percentile([v for _, v in p], a["q"]),
    "ratio_above": lambda p, a: ratio_above([v for _, v in p], a["x"]),
    "count": lambda p, a: float(len(p)),
    "all_finite": lambda p, a: all(math.isfinite(v) for _, v in p),
}
