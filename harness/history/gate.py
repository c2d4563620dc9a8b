"""The performance gate: is this run's step time, tokens/s or a per-phase number (generation and
train tokens/s, MFU, peak GPU memory, refit seconds) outside the noise of its history?

The noise band of a metric comes from the last `window` passing runs of the same suite entry on
the same hardware (the run being judged left out):

    centre = median(values)
    spread = max(1.4826 * MAD(values), rel_floor * |centre|)
    band   = [centre - k * spread, centre + k * spread]

MAD (median absolute deviation) scaled by 1.4826 estimates the standard deviation of normal
noise but, unlike it, ignores a few outliers, so one bad night does not widen the band for the
next twenty. The relative floor stops a perfectly steady history (MAD = 0) from flagging a 0.1%
wobble. Step time, peak memory and refit seconds above the band are a regression, below it an
improvement; the throughputs and MFU the other way round. With fewer than `min_runs` values there
is no verdict ("insufficient"). A per-phase number neither this run nor its history logged (peak
GPU memory on a CPU entry) is left out; one the history has and this run lacks is "missing".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.history.db import HistoryRow
from harness.suites.model import Gate

MAD_TO_SIGMA = 1.4826
# metric column -> True when higher is better
GATED = {"step_time_s": False, "tokens_per_s": True, "generation_tokens_per_s": True, "train_tokens_per_s": True,
         "mfu": True, "peak_memory_gib": False, "refit_s": False}
ALWAYS = ("step_time_s", "tokens_per_s")  # reported even when never logged


@dataclass(frozen=True, kw_only=True)
class Band:
    centre: float
    low: float
    high: float
    count: int


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """One metric's gate outcome; status is ok, regression, improved, insufficient or missing."""

    metric: str
    status: str
    value: float | None
    band: Band | None
    message: str

    @property
    def regression(self) -> bool:
        return self.status == "regression"


def noise_band(values: Sequence[float], *, k: float, rel_floor: float) -> Band:
    """The band described above; `values` must not be empty."""
    assert values, "noise_band needs at least one value"
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    spread = max(MAD_TO_SIGMA * mad, rel_floor * abs(centre))
    return Band(centre=centre, low=centre - k * spread, high=centre + k * spread, count=len(values))


def baseline(history: Sequence[HistoryRow], current: HistoryRow, metric: str, window: int) -> list[float]:
    """The metric's values in the last `window` passing runs of the same entry and hardware."""
    rows = [r for r in history
            if r.entry == current.entry and r.hardware == current.hardware and r.verdict == "pass"
            and getattr(r, metric) is not None and (current.id is None or r.id != current.id)]
    return [float(getattr(r, metric)) for r in rows[-window:]]


def gate_metric(current: HistoryRow, history: Sequence[HistoryRow], metric: str, gate: Gate) -> GateResult:
    value = getattr(current, metric)
    if value is None:
        return GateResult(metric=metric, status="missing", value=None, band=None,
                          message=f"{metric}: the run did not log it")
    values = baseline(history, current, metric, gate.window)
    if len(values) < gate.min_runs:
        return GateResult(metric=metric, status="insufficient", value=value, band=None,
                          message=f"{metric} = {value:.4g}: {len(values)} earlier passing runs, "
                                  f"the gate needs {gate.min_runs}")
    band = noise_band(values, k=gate.k, rel_floor=gate.rel_floor)
    higher_is_better = GATED[metric]
    worse = value < band.low if higher_is_better else value > band.high
    better = value > band.high if higher_is_better else value < band.low
    status = "regression" if worse else "improved" if better else "ok"
    where = {"regression": "outside", "improved": "outside", "ok": "inside"}[status]
    return GateResult(metric=metric, status=status, value=value, band=band,
                      message=f"{metric} = {value:.4g} is {where} the noise band [{band.low:.4g}, {band.high:.4g}] "
                              f"(median {band.centre:.4g} of {band.count} runs): {status}")


def gate_run(current: HistoryRow, history: Sequence[HistoryRow], gate: Gate) -> list[GateResult]:
    """Gate results of the GATED metrics; empty when the gate is off or the run failed."""
    if gate.mode == "off" or current.verdict != "pass":
        return []
    return [gate_metric(current, history, metric, gate) for metric in GATED
            if metric in ALWAYS or getattr(current, metric) is not None
            or baseline(history, current, metric, gate.window)]
