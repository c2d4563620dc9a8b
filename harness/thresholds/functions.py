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

import bisect
import math
import operator
from collections.abc import Callable


class Points:
    """The selected steps of one metric and their values, as two parallel lists in step order.

    Two lists rather than (step, value) pairs: most functions read only the values, which then
    need no copying out of 10,000 tuples on a long run.
    """

    __slots__ = ("steps", "values")

    def __init__(self, steps: list[int], values: list[float]) -> None:
        self.steps = steps
        self.values = values

    def __len__(self) -> int:
        return len(self.steps)


class Failure(Exception):
    """An evaluation that cannot produce a trustworthy value: becomes a failing verdict."""


def select(series: dict[int, float], start: int, end: int) -> Points:
    """The points with start <= step < end, resolving negative/zero bounds.

    `series` is ordered by step (as every Metrics series is), so the range is found by bisection
    and sliced out in C rather than tested point by point.
    """
    last = next(reversed(series))
    if start < 0:
        start += last + 1
    if end <= 0:
        end += last + 1
    steps = list(series)
    lo, hi = bisect.bisect_left(steps, start), bisect.bisect_left(steps, end)
    if lo >= hi:
        return Points([], [])
    return Points(steps[lo:hi], list(series.values())[lo:hi])


def first_non_finite(points: Points) -> tuple[int, float] | None:
    """The first (step, value) whose value is NaN or infinite, or None (one pass in C when there is none)."""
    if all(map(math.isfinite, points.values)):
        return None
    return next((step, value) for step, value in zip(points.steps, points.values) if not math.isfinite(value))


def _kept(count: int, fraction: float) -> int:
    return max(int(count * (1.0 - fraction)), 1) if fraction > 0 else count


def trim(points: Points, top: float, low: float) -> Points:
    """Drop the highest `top` and lowest `low` fractions of values; keeps step order."""
    if top <= 0 and low <= 0:
        return points
    ordered = sorted(zip(points.values, points.steps))  # by value, ties by step
    n = len(ordered)
    drop_top, drop_low = n - _kept(n, top), n - _kept(n, low)
    kept = ordered[drop_low : n - drop_top]
    if not kept:
        raise Failure(f"trimming {top:g} top and {low:g} low of {n} values leaves none")
    kept.sort(key=operator.itemgetter(1))  # back to step order (steps are unique)
    return Points([step for _, step in kept], [value for value, _ in kept])


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
    steps = list(map(float, points.steps))
    values = points.values
    mean_step, mean_value = _mean(steps), _mean(values)
    spread = math.fsum((s - mean_step) ** 2 for s in steps)
    assert spread > 0, "distinct steps guaranteed by a dict with >= 2 points"
    return math.fsum((s - mean_step) * (v - mean_value) for s, v in zip(steps, values)) / spread


def ratio_above(values: list[float], threshold: float) -> float:
    """The fraction of values >= threshold (inclusive, like the reference's ratio_above)."""
    return sum(1 for v in values if v >= threshold) / len(values)


ValueFn = Callable[[Points, dict[str, float]], float | bool]

APPLY: dict[str, ValueFn] = {
    "mean": lambda p, a: _mean(p.values),
    "median": lambda p, a: _median(p.values),
    "min": lambda p, a: min(p.values),
    "max": lambda p, a: max(p.values),
    "first": lambda p, a: p.values[0],
    "last": lambda p, a: p.values[-1],
    "std": lambda p, a: _std(p.values),
    "slope": lambda p, a: slope(p),
    "percentile": lambda p, a: percentile(p.values, a["q"]),
    "ratio_above": lambda p, a: ratio_above(p.values, a["x"]),
    "count": lambda p, a: float(len(p)),
    "all_finite": lambda p, a: first_non_finite(p) is None,
}
