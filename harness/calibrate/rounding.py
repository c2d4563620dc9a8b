"""Metrics that are rounding error while the run is healthy, and the least upper bound of each.

`train/gen_kl_error` compares the generator's log-probs with the policy's after a refit: the same
weights, so only the kernels' arithmetic separates them (2e-9 to 8e-9 in fp32 on the CPU box).
Rounding differs between CPUs (vector width, summation order), so a bound a few times the largest
seed flakes on another machine, and an exact one on any other. While every run is below the
metric's floor (where rounding ends and a fault begins) an upper bound is therefore
max(MULTIPLE x the largest run, the floor), whatever the statistical rule would place. Runs
above the floor (bf16 on a GPU: 1e-4 to 3e-2 on an H200, where the two sides' kernels differ,
not only their rounding) keep the statistical rule: MULTIPLE x them would reach the fault's own
size (a stale refit gives 1e-2).
Such a metric is never made exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from harness.calibrate.bounds import HIGH, VALUE_FUNCS
from harness.calibrate.margin import Placement, fmt, rounded_outward
from harness.thresholds import Expr
from harness.thresholds.tree import Call

MULTIPLE = 100  # two decades above the largest seed: rounding on another CPU stays under it


@dataclass(frozen=True)
class Rounding:
    """A metric (fnmatch pattern) that is rounding error, its floor and why the floor is there."""

    pattern: str
    floor: float
    reason: str


ROUNDING = (
    Rounding("train/gen_kl_error", 1e-6,
             "generator and policy hold the same weights after a refit; a stale or missed refit gives 1e-2 and more"),
)


def rounding_of(statistic: Expr) -> Rounding | None:
    """The Rounding entry when the statistic is a value (mean, max, ...) of a rounding-error metric."""
    if not isinstance(statistic, Call) or statistic.func not in VALUE_FUNCS:
        return None
    return next((r for r in ROUNDING if fnmatchcase(statistic.metric, r.pattern)), None)


def above_rounding(placement: Placement, values: list[float], rounding: Rounding) -> Placement:
    """While every run is below the metric's floor (rounding's scale), the upper bound is
    max(MULTIPLE x the largest run, the floor), in place of the statistical rule's: margins drawn
    from the spread of rounding noise (or, when every run is 0, a fraction of 1) say nothing about
    where a fault begins. Unchanged for runs above the floor."""
    if max(values) >= rounding.floor:
        return placement
    least = max(MULTIPLE * max(values), rounding.floor)
    bound = rounded_outward(least, HIGH)
    return Placement(bound, f"{placement.rule}; set to max({MULTIPLE} x highest run = "
                            f"{fmt(MULTIPLE * max(values))}, the rounding floor {fmt(rounding.floor)}) = {fmt(bound)}: "
                            f"the metric is rounding error and rounding differs between CPUs ({rounding.reason})")
