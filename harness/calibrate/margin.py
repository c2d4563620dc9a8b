"""The margin rule: where a bound goes, given what a statistic measured on each calibration run.

A lower bound sits below the lowest run by the margin, an upper bound above the highest:

    margin = max(K x sd, floor x scale)

sd is the runs' sample standard deviation (n - 1) of the statistic, scale its largest |value|
over the runs (the metric's typical size when every run measured 0). The floor keeps a spread
that three seeds happened to make tiny from giving a bound a fourth seed crosses. Rates and
durations (`timing/*`, `performance/*`) get a wider floor: machine load moves them run to run,
and seeds run side by side on one machine do not sample it. The bound is then rounded outward
to DIGITS significant digits, so rounding never moves it toward the runs.

With three seeds, K = 3 puts the bound about 3.4 true standard deviations from the mean for a
normal statistic (the worst of three lies about 0.85 below the mean): a flake about 1 in 3,000
runs per check. The hand-derived CPU bounds were about 2 sd from the worst seed.

A lower bound must also fail a run that did nothing, which measures 0 (no gain, no tokens/s), so
when every run is above 0 the bound keeps at least `keep` x the lowest run: three seeds can
spread so far that lowest - 3 sd is at or below 0, a bound no broken run would cross. There the
bound trades some flake risk for being able to fail, and its `why` says so. Runs that straddle 0
leave no lower bound that separates them from a broken run: none is proposed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from harness.calibrate.bounds import HIGH, LOW

K = 3.0
DIGITS = 3
LOAD_SENSITIVE = ("timing/*", "performance/*")


@dataclass(frozen=True)
class Margins:
    """A class of metrics' margin floor (a fraction of the scale) and the least fraction of the
    lowest run that a lower bound keeps."""

    floor: float
    keep: float


ORDINARY = Margins(floor=0.1, keep=0.5)  # a bound halfway between a broken run (0) and the lowest seed
LOAD = Margins(floor=0.5, keep=0.25)  # machine load moves these; a 4x regression still fails


class NoBound(ValueError):
    """The runs leave no bound that both passes them and fails a broken run; the message says why."""


@dataclass(frozen=True)
class Placement:
    """A bound and the arithmetic that put it there, in words (for the check's `why`)."""

    bound: float
    rule: str


def load_sensitive(metrics: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pattern) for name in metrics for pattern in LOAD_SENSITIVE)


def margins_of(metrics: Sequence[str]) -> Margins:
    return LOAD if load_sensitive(metrics) else ORDINARY


def rounded_outward(value: float, side: str) -> float:
    """value at DIGITS significant digits, rounded down for a lower bound and up for an upper.

    A value within 1e-9 (relative) of a DIGITS-digit number is that number: 0.2 - 0.02 is
    0.17999999999999997 and reads 0.18, not 0.179.
    """
    if value == 0 or not math.isfinite(value):
        return value
    step = 10.0 ** (math.floor(math.log10(abs(value))) - DIGITS + 1)
    ratio = value / step
    if math.isclose(ratio, round(ratio), rel_tol=1e-9):  # 1e-9 / 1e-11 is 100.00000000000001: on a digit
        return float(f"{round(ratio) * step:.{DIGITS - 1}e}")
    units = math.floor(ratio) if side == LOW else math.ceil(ratio)
    candidate = float(f"{units * step:.{DIGITS - 1}e}")
    if (side == LOW and candidate > value) or (side == HIGH and candidate < value):  # float noise
        candidate = float(f"{(units + (-1 if side == LOW else 1)) * step:.{DIGITS - 1}e}")
    return candidate


def fmt(value: float) -> str:
    return f"{value:.4g}"


def placed(values: Sequence[float], side: str, *, margins: Margins, typical: float) -> Placement:
    """The bound outside every run's value by the margin.

    Args:
        values: the statistic on each run (at least 2).
        side: LOW (the statistic must stay above) or HIGH.
        margins: ORDINARY or LOAD, the margin's floor and a lower bound's least kept fraction.
        typical: the metrics' typical size, the scale when every run measured 0.

    Raises:
        NoBound: a lower bound whose runs straddle 0, the value of a run that did nothing.
    """
    if len(values) < 2:
        raise ValueError("a margin needs at least 2 runs")
    sd = statistics.stdev(values)
    scale = max(abs(v) for v in values) or typical
    margin = max(K * sd, margins.floor * scale)
    worst = min(values) if side == LOW else max(values)
    if side == LOW and worst <= 0 < max(values):
        raise NoBound(f"the runs straddle 0 (lowest {fmt(worst)}), what a run that did nothing measures: "
                      "no lower bound passes them and fails it")
    raw = worst - margin if side == LOW else worst + margin
    which, sign = ("lowest", "-") if side == LOW else ("highest", "+")
    rule = (f"{'lower' if side == LOW else 'upper'} bound = {which} run {sign} max({K:g} sd = {fmt(K * sd)}, "
            f"{margins.floor:.0%} of {fmt(scale)} = {fmt(margins.floor * scale)}) = {fmt(worst)} {sign} "
            f"{fmt(margin)} = {fmt(raw)}")
    if side == LOW and worst > 0 and raw < margins.keep * worst:
        raw = margins.keep * worst
        rule += (f", raised to {margins.keep:.0%} of the lowest run = {fmt(raw)} so that a run that did "
                 "nothing (0) fails it")
    bound = rounded_outward(raw, side)
    return Placement(bound, f"{rule}, rounded outward to {fmt(bound)}")
