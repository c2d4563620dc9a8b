"""Which metric each threshold check plots, and at what lines: every bound of every check, since
several checks (or hardware classes' checks) can hold one metric to different bounds."""

from __future__ import annotations

from typing import Sequence

from harness.report.plots import PlotSpec
from harness.thresholds import ThresholdCheck, metric_names
from harness.thresholds.tree import Call, Compare, Expr, constant_value


def plot_specs(checks: Sequence[ThresholdCheck]) -> list[PlotSpec]:
    """A spec per bound: `agg(metric) <op> constant` draws its constant, `lo < agg(metric) < hi` both;
    a metric that no check bounds by a constant gets one spec without a line."""
    specs: list[PlotSpec] = []
    for check in checks:
        metric, bounds = _bounds(check.tree)
        if metric is not None:
            specs.extend(PlotSpec(metric=metric, threshold=value, label=check.name) for value in bounds)
            continue
        specs.extend(PlotSpec(metric=m, threshold=None, label=check.name) for m in metric_names(check.tree))
    bounded = {s.metric for s in specs if s.threshold is not None}
    bare: set[str] = set()
    kept: list[PlotSpec] = []
    for spec in specs:  # a spec without a line only for a metric that has none, and once
        if spec.threshold is None and (spec.metric in bounded or spec.metric in bare):
            continue
        if spec.threshold is None:
            bare.add(spec.metric)
        kept.append(spec)
    return kept


def _bounds(tree: Expr) -> tuple[str | None, list[float]]:
    """(metric, constants) of a comparison chain of one aggregate call and constants, else (None, [])."""
    if not isinstance(tree, Compare):
        return None, []
    operands = [tree.left, *tree.rights]
    calls = [node for node in operands if isinstance(node, Call)]
    values = [constant_value(node) for node in operands if not isinstance(node, Call)]
    if len(calls) != 1 or not values or any(v is None for v in values):
        return None, []
    return calls[0].metric, [v for v in values if v is not None]
