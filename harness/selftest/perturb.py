"""The self-test's ways to break a run, made in memory on the parsed series: nothing is re-run.

Each function returns a new Metrics (or list of invariant records) and leaves its input alone;
only the series it changes is copied, so one perturbation costs one series of memory.
"""

from __future__ import annotations

import math

from harness.metrics import Metrics
from harness.selftest.domains import Domain


def _with(metrics: Metrics, name: str, series: dict[int, float] | None) -> Metrics:
    """metrics with one series replaced (None: removed); the others are shared, not copied."""
    rows = dict(metrics.series)
    if series is None:
        del rows[name]
    else:
        rows[name] = series
    return Metrics(series=rows, source=metrics.source)


def shifted(metrics: Metrics, name: str, by: float, domain: Domain) -> Metrics:
    """Every value of `name` moved by `by`, kept inside the metric's domain."""
    return _with(metrics, name, {step: domain.clip(value + by) for step, value in metrics[name].items()})


def scaled(metrics: Metrics, name: str, factor: float, domain: Domain) -> Metrics:
    """Every value of `name` multiplied by `factor` (>= 0), kept inside the metric's domain."""
    return _with(metrics, name, {step: domain.clip(value * factor) for step, value in metrics[name].items()})


def first_finite(series: dict[int, float]) -> float | None:
    return next((value for value in series.values() if math.isfinite(value)), None)


def flat(metrics: Metrics, name: str) -> Metrics:
    """`name` frozen at its first finite value: a metric that never moved (a run that did nothing)."""
    value = first_finite(metrics[name])
    assert value is not None, "flat() needs a finite value; the caller checks"
    return _with(metrics, name, dict.fromkeys(metrics[name], value))


def with_nan(metrics: Metrics, name: str, step: int) -> Metrics:
    """`name` is NaN at one step."""
    return _with(metrics, name, {**metrics[name], step: math.nan})


def removed(metrics: Metrics, name: str) -> Metrics:
    """The run never logged `name`."""
    return _with(metrics, name, None)


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
