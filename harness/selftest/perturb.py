"""The self-test's ways to break a run, made in memory on the parsed series: nothing is re-run.

Each function returns a new Metrics (or list of invariant records) and leaves its input alone;
only the series it changes is copied, so one perturbation costs one series of memory.
"""

from __future__ import annotations

import math

from harness.metrics import Metrics
from harness.selftest.domains import Domain


def _clipped(series: dict[int, float], values: list[float], domain: Domain) -> dict[int, float]:
    """The series' steps with `values` pulled into the domain (NaN compares false and stays NaN)."""
    low, high = domain.low, domain.high
    if low > -math.inf or high < math.inf:
        values = [low if v < low else high if v > high else v for v in values]
    return dict(zip(series, values))


def shifted(metrics: Metrics, name: str, by: float, domain: Domain) -> Metrics:
    """Every value of `name` moved by `by`, kept inside the metric's domain."""
    series = metrics[name]
    return metrics.replacing(name, _clipped(series, [v + by for v in series.values()], domain))


def scaled(metrics: Metrics, name: str, factor: float, domain: Domain) -> Metrics:
    """Every value of `name` multiplied by `factor` (>= 0), kept inside the metric's domain."""
    series = metrics[name]
    return metrics.replacing(name, _clipped(series, [v * factor for v in series.values()], domain))


def first_finite(series: dict[int, float]) -> float | None:
    return next((value for value in series.values() if math.isfinite(value)), None)


def flat(metrics: Metrics, name: str) -> Metrics:
    """`name` frozen at its first finite value: a metric that never moved (a run that did nothing)."""
    value = first_finite(metrics[name])
    if value is None:
        raise ValueError(f"flat({name}): the series has no finite value (the caller checks first)")
    return metrics.replacing(name, dict.fromkeys(metrics[name], value))


def with_nan(metrics: Metrics, name: str, step: int) -> Metrics:
    """`name` is NaN at one step."""
    return metrics.replacing(name, {**metrics[name], step: math.nan})


def removed(metrics: Metrics, name: str) -> Metrics:
    """The run never logged `name`."""
    return metrics.replacing(name, None)


def half_step(metrics: Metrics) -> int:
    """The last step a run truncated to half its steps keeps."""
    return (metrics.last_step or 0) // 2


def truncated(metrics: Metrics) -> Metrics:
    """The run stopped after half its steps: every series cut there."""
    cut = half_step(metrics)
    rows = {name: {step: value for step, value in series.items() if step <= cut} for name, series in metrics.items()}
    return Metrics.from_rows(rows, source=metrics.source)


def truncated_records(records: list[dict], cut: int) -> list[dict]:
    """The invariant records a run that stopped after step `cut` would have written."""
    return [record for record in records if not (type(record.get("step")) is int and record["step"] > cut)]


def planted_failure(records: list[dict], kind: str) -> list[dict]:
    """records with the first `kind` record turned into a violation."""
    planted = {"check": kind, "ok": False, "detail": "planted by the self-test"}
    index = next((i for i, record in enumerate(records) if record["check"] == kind), None)
    if index is None:
        return [*records, planted]
    return [*records[:index], {**records[index], **planted}, *records[index + 1:]]
