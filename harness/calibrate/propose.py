"""Propose one check from the calibration runs: each bound of each part placed by the rules.

Per part (harness/calibrate/bounds.py), in this order:
* no bound (`all_finite(x)`, `a > b`): kept as written;
* a bound on its metric's domain edge (`min(total_flops) > 0`, harness/selftest/domains.py):
  it says what the metric must be, not where a seed ends, so it is kept;
* every metric the statistic reads is bit-identical in every run (the same steps, the same
  values): `statistic == value`, an exact check with tolerance 0, unless the statistic is
  rounding error (harness/calibrate/rounding.py), which another CPU rounds differently;
* otherwise each bound is placed outside the runs' spread (harness/calibrate/margin.py), an
  upper bound on rounding error at least two decades above it and the metric's floor.
A default check's constants are placeholders: they are always placed, never kept as edges.
A part whose statistic cannot be measured on some run, or an `==` the runs do not agree on,
leaves the check unwritten, with the reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from harness.calibrate.bounds import HIGH, LOW, VALUE_FUNCS, Part, exact, joined, parts_of, with_bounds
from harness.calibrate.margin import NoBound, fmt, margins_of, placed
from harness.calibrate.rounding import above_rounding, rounding_of
from harness.calibrate.runs import CalibrationRun, shown
from harness.checks.judge import judge_threshold
from harness.selftest.domains import DOMAINS
from harness.selftest.trials import magnitude
from harness.thresholds import ThresholdCheck, ThresholdSyntaxError, metric_names, parse, unparse
from harness.thresholds.tree import Call

KEPT, EDGE, EXACT, BAND = "kept", "edge", "exact", "band"


@dataclass(frozen=True, kw_only=True)
class PartChange:
    """What calibrate did to one part; values: the statistic per run (none for a kept part)."""

    rule: str
    old: str
    new: str
    statistic: str | None = None
    values: tuple[float, ...] = ()
    evidence: str = ""


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """One check as calibrate proposes it; `check` is None when it cannot be written (`problem`)."""

    source: ThresholdCheck
    default: bool
    check: ThresholdCheck | None = None
    parts: tuple[PartChange, ...] = ()
    problem: str | None = None
    unproven: str | None = None  # the expression the proof rejected
    not_applicable: bool = False  # a default whose metric no run logged

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def changed(self) -> bool:
        return self.check is not None and unparse(self.check.tree) != unparse(self.source.tree)

    def rejected(self, problem: str) -> Proposal:
        return dataclasses.replace(self, check=None, problem=problem,
                                   unproven=self.check.expr if self.check is not None else None)


def per_run(values: Sequence[tuple[float, ...]], runs: Sequence[CalibrationRun]) -> str:
    """`0.61 (seed 42), ...`; a seed whose variants measured differently: `0.61 legacy / 0.62 tq (seed 42)`."""
    def one(measured: tuple[float, ...], run: CalibrationRun) -> str:
        if len(set(measured)) == 1:
            return f"{fmt(measured[0])} ({run.label})"
        return " / ".join(f"{fmt(v)} {variant.name}" for v, variant in zip(measured, run.variants)) + f" ({run.label})"
    return ", ".join(one(measured, run) for measured, run in zip(values, runs))


def seed_values(values: Sequence[tuple[float, ...]], side: str) -> list[float]:
    """One value per seed for a bound: the variant nearest the bound (the lowest for a lower bound)."""
    return [min(measured) if side == LOW else max(measured) for measured in values]


def measure(part: Part, source: ThresholdCheck,
            runs: Sequence[CalibrationRun]) -> tuple[list[tuple[float, ...]], str | None]:
    """The part's statistic on each run's variants, judged as `harness check` judges each; or why it
    cannot be."""
    check = dataclasses.replace(source, tree=part.tree, expr=part.text)
    values = []
    for run in runs:
        measured = []
        for variant in run.variants:
            result = judge_threshold(check, variant.metrics, run.recipe["algorithm"]["num_steps"])
            value = result.value
            if result.closed or isinstance(value, bool) or not isinstance(value, (int, float)):
                return [], (f"{unparse(part.statistic)} cannot be measured on {run.label_of(variant)} "
                            f"({shown(variant.run_dir)}): {result.reason}")
            measured.append(float(value))
        values.append(tuple(measured))
    return values, None


def edge_reason(part: Part, value: float) -> str | None:
    """Why `value` is an edge of the statistic's domain (a value statistic of one metric), or None."""
    stat = part.statistic
    if not isinstance(stat, Call) or stat.func not in VALUE_FUNCS:
        return None
    for pattern, domain, reason in DOMAINS:
        if fnmatchcase(stat.metric, pattern):
            return f"{fmt(value)} is the edge of {stat.metric}'s domain ({reason})" if value in (
                domain.low, domain.high) else None
    return None


def identical(part: Part, runs: Sequence[CalibrationRun]) -> bool:
    """Every metric the statistic reads has the same steps and values in every run and variant."""
    names = metric_names(part.statistic)
    first = runs[0].variants[0].metrics
    return all(first[name] == variant.metrics[name] for name in names for run in runs for variant in run.variants)


def _typical(part: Part, runs: Sequence[CalibrationRun]) -> float:
    values = [v for run in runs for variant in run.variants for name in metric_names(part.statistic)
              for v in variant.metrics[name].values() if math.isfinite(v)]
    return magnitude(values) if values else 1.0


def calibrate_part(part: Part, runs: Sequence[CalibrationRun], values: list[tuple[float, ...]], *,
                   placeholders: bool) -> PartChange | str:
    """The part's change by the rules (module docstring), or the reason it cannot be written."""
    stat = unparse(part.statistic)
    measured = f"{stat} per run: {per_run(values, runs)}"
    edges = [None if placeholders else edge_reason(part, bound.value) for bound in part.bounds]
    if all(edges):
        return PartChange(rule=EDGE, old=part.text, new=part.text, statistic=stat, values=tuple(values),
                          evidence=f"{part.text} kept: {'; '.join(edges)}; {measured}")
    rounding = rounding_of(part.statistic)
    if identical(part, runs) and rounding is None:
        new = unparse(exact(part.statistic, values[0][0]))
        return PartChange(rule=EXACT, old=part.text, new=new, statistic=stat, values=tuple(values),
                          evidence=f"{stat} = {values[0][0]!r} on every run, its series bit-identical step by step: "
                                   f"exact, tolerance 0")
    if any(bound.side is None for bound in part.bounds):
        if rounding is not None:
            return f"{part.text} is exact on rounding error, which differs between CPUs: {measured}"
        return f"{part.text} is exact, but the runs differ: {measured}"
    margins = margins_of(metric_names(part.statistic))
    new_values, rules = [], []
    for bound, edge in zip(part.bounds, edges):
        if edge:
            new_values.append(bound.value)
            rules.append(f"{fmt(bound.value)} kept: {edge}")
        else:
            seeds = seed_values(values, bound.side)
            try:
                placement = placed(seeds, bound.side, margins=margins, typical=_typical(part, runs))
            except NoBound as error:
                return f"{part.text}: {error}; {measured}"
            if rounding is not None and bound.side == HIGH:
                placement = above_rounding(placement, seeds, rounding)
            new_values.append(placement.bound)
            rules.append(f"sd {fmt(statistics.stdev(seeds))}, {placement.rule}")
    return PartChange(rule=BAND, old=part.text, new=unparse(with_bounds(part, new_values)), statistic=stat,
                      values=tuple(values), evidence=f"{measured}; {'; '.join(rules)}")


def propose(source: ThresholdCheck, runs: Sequence[CalibrationRun], *, hardware: str, today: dt.date,
            provenance: str, default: bool = False, placeholders: bool = False) -> Proposal:
    """One check proposed from the runs (not yet proven: harness/calibrate/prove.py).

    provenance: the sentence that closes a generated `why` (date, commit, run dirs).
    """
    proposal = Proposal(source=source, default=default)
    for name in metric_names(source.tree):
        lacking = [(run, variant) for run in runs for variant in run.variants if name not in variant.metrics]
        if len(lacking) == sum(len(run.variants) for run in runs):  # a default's metric this engine does not log
            return dataclasses.replace(proposal, problem=f"no run logs {name}", not_applicable=default)
        if lacking:
            run, variant = lacking[0]
            return proposal.rejected(f"{run.label_of(variant)} ({shown(variant.run_dir)}) never logged {name}")
    changes = []
    for part in parts_of(source.tree):
        if part.statistic is None:
            changes.append(PartChange(rule=KEPT, old=part.text, new=part.text,
                                      evidence=f"{part.text} holds on every run"))
            continue
        values, problem = measure(part, source, runs)
        change = calibrate_part(part, runs, values, placeholders=placeholders) if problem is None else problem
        if isinstance(change, str):
            return proposal.rejected(change)
        changes.append(change)
    return _written(proposal, changes, hardware=hardware, today=today, provenance=provenance)


def _written(proposal: Proposal, changes: list[PartChange], *, hardware: str, today: dt.date,
             provenance: str) -> Proposal:
    source = proposal.source
    try:
        tree = joined([parse(change.new) for change in changes])
    except ThresholdSyntaxError as error:  # a bound past the language's limits (1e18)
        return dataclasses.replace(proposal, parts=tuple(changes)).rejected(f"the proposed bound cannot be "
                                                                            f"written: {error}")
    unchanged = all(change.new == change.old for change in changes)  # `a and (b and c)` rejoined is no move
    if unchanged and not proposal.default:  # nothing moved: its why, since and scope still say how it was set
        return dataclasses.replace(proposal, check=source, parts=tuple(changes))
    evidence = "; ".join(change.evidence for change in changes)
    why = f"{source.why} {evidence}. {provenance}" if proposal.default else f"{evidence}. {provenance}"
    check = ThresholdCheck(name=source.name, expr=unparse(tree), tree=tree, why=why, since=today, hardware=(hardware,),
                           path="<proposed>", line=0)
    return dataclasses.replace(proposal, check=check, parts=tuple(changes))
