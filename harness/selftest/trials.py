"""The perturbations tried on one check, and what each did to it.

Per metric the check reads: a shift and a scale toward the check's bound (each direction is
searched, the smaller failing change kept), the series frozen flat, a NaN at one step, the
metric removed. Per run: truncation to half the steps; for an invariant, a planted violation.
A change is `gross` when it is more than an order of magnitude: a shift beyond 10 run-to-run
standard deviations (10 times the metric's typical size when the history has no spread for it),
a scale factor outside [0.1, 10].
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from harness.metrics import Metrics
from harness.selftest.domains import domain_of
from harness.selftest.perturb import (
    first_finite,
    flat,
    half_step,
    planted_failure,
    removed,
    scaled,
    shifted,
    truncated,
    truncated_records,
    with_nan,
)
from harness.selftest.probes import FAILS, HOLDS, RANK, Probe
from harness.selftest.search import smallest_failing

GROSS = 10.0  # an order of magnitude


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One perturbation tried on one check.

    amount: for a shift, the smallest failing shift (signed, in the metric's units); for a scale,
    the factor. sigmas: |shift| in run-to-run standard deviations, when the history has them.
    """

    perturbation: str  # shift, scale, flat, nan, removed, truncated, invariant
    outcome: str  # holds, fails, fails closed
    metric: str | None = None
    amount: float | None = None
    sigmas: float | None = None
    gross: bool = False
    detail: str = ""

    @property
    def kills(self) -> bool:
        """Failed the check by its own comparison."""
        return self.outcome == FAILS

    def label(self) -> str:
        words = [self.perturbation] + ([self.metric] if self.metric else [])
        if self.perturbation == "shift" and self.amount is not None:
            words.append(f"{self.amount:+.3g}" + (f" ({self.sigmas:.2g} sd)" if self.sigmas is not None else ""))
        elif self.perturbation == "scale" and self.amount is not None:
            words.append(f"x{self.amount:.3g}")
        return " ".join(words + ([self.detail] if self.detail else []))

    def to_json(self) -> dict:
        return {"perturbation": self.perturbation, "metric": self.metric, "outcome": self.outcome,
                "amount": self.amount, "sigmas": self.sigmas, "gross": self.gross, "detail": self.detail}


def magnitude(values: list[float]) -> float:
    """A metric's typical size: the median |value|, else its largest, else 1."""
    sizes = [abs(v) for v in values]
    return statistics.median(sizes) or max(sizes) or 1.0


def _fails(probe: Probe, records: list[dict]):
    return lambda metrics: probe(metrics, records).result == FAILS


def shift_trial(probe: Probe, metrics: Metrics, records: list[dict], name: str, sd: float | None) -> Trial:
    values = [v for v in metrics[name].values() if math.isfinite(v)]
    domain, unit, fails = domain_of(name), magnitude(values), _fails(probe, records)
    found = []
    for sign, edge in ((1.0, domain.high - min(values)), (-1.0, max(values) - domain.low)):
        amount = smallest_failing(lambda a: fails(shifted(metrics, name, sign * a, domain)), unit=unit, edge=edge)
        if amount is not None:
            found.append(sign * amount)
    if not found:
        return Trial(perturbation="shift", outcome=HOLDS, metric=name, detail="(no shift inside its domain fails)")
    shift = min(found, key=abs)
    sigmas = abs(shift) / sd if sd else None
    gross = sigmas > GROSS if sigmas is not None else abs(shift) > GROSS * unit
    return Trial(perturbation="shift", outcome=FAILS, metric=name, amount=shift, sigmas=sigmas, gross=gross)


def scale_trial(probe: Probe, metrics: Metrics, records: list[dict], name: str) -> Trial:
    domain, fails = domain_of(name), _fails(probe, records)
    factors = []
    down = smallest_failing(lambda a: fails(scaled(metrics, name, 1.0 - a, domain)), unit=1.0, edge=1.0)
    if down is not None:
        factors.append(1.0 - down)
    up = smallest_failing(lambda a: fails(scaled(metrics, name, 1.0 + a, domain)), unit=1.0, edge=math.inf)
    if up is not None:
        factors.append(1.0 + up)
    if not factors:
        return Trial(perturbation="scale", outcome=HOLDS, metric=name, detail="(no factor from 0 to 1e12 fails)")
    factor = min(factors, key=lambda k: math.inf if k <= 0 else abs(math.log(k)))
    return Trial(perturbation="scale", outcome=FAILS, metric=name, amount=factor,
                 gross=not 1.0 / GROSS <= factor <= GROSS)


def _tried(perturbation: str, probe: Probe, metrics: Metrics, records: list[dict], **fields) -> Trial:
    outcome = probe(metrics, records)
    return Trial(perturbation=perturbation, outcome=outcome.result, **fields)


def nan_trial(probe: Probe, metrics: Metrics, records: list[dict], name: str) -> Trial:
    """A NaN at the first, middle or last step: the one that says most (a kill, else a guard)."""
    steps = list(metrics[name])
    tried = [_tried("nan", probe, with_nan(metrics, name, step), records, metric=name, detail=f"at step {step}")
             for step in dict.fromkeys((steps[-1], steps[len(steps) // 2], steps[0]))]
    return max(tried, key=lambda trial: RANK[trial.outcome])


def metric_trials(probe: Probe, metrics: Metrics, records: list[dict], name: str, sd: float | None) -> list[Trial]:
    """Every perturbation of one metric the check reads (one that the run never logged: none)."""
    if name not in metrics:
        return []
    trials = []
    if first_finite(metrics[name]) is not None:
        trials += [shift_trial(probe, metrics, records, name, sd), scale_trial(probe, metrics, records, name),
                   _tried("flat", probe, flat(metrics, name), records, metric=name)]
    trials.append(nan_trial(probe, metrics, records, name))
    trials.append(_tried("removed", probe, removed(metrics, name), records, metric=name))
    return trials


def truncation_trial(probe: Probe, metrics: Metrics, records: list[dict]) -> Trial:
    cut = half_step(metrics)
    return _tried("truncated", probe, truncated(metrics), truncated_records(records, cut), detail=f"to step {cut}")


def invariant_trial(probe: Probe, metrics: Metrics, records: list[dict], kind: str) -> Trial:
    return _tried("invariant", probe, metrics, planted_failure(records, kind), detail=f"{kind} violated")


def trials_for(probe: Probe, *, kind: str, name: str, reads: tuple[str, ...], metrics: Metrics,
               records: list[dict], sd: Mapping[str, float]) -> list[Trial]:
    """The perturbations that apply to a check of this kind, each tried once."""
    trials = [t for metric in reads for t in metric_trials(probe, metrics, records, metric, sd.get(metric))]
    if kind == "invariant":
        trials.append(invariant_trial(probe, metrics, records, name.split(":", 1)[1]))
    if metrics.last_step:
        trials.append(truncation_trial(probe, metrics, records))
    return trials

