"""Which metric each threshold check plots, and at what line."""

from __future__ import annotations

from typing import Sequence

from harness.report.plots import PlotSpec
from harness.thresholds import ThresholdCheck, metric_names
from harness.thresholds.tree import Call, Compare, constant_value


def plot_specs(checks: Sequence[ThresholdCheck]) -> list[PlotSpec]:
    """One plot per checked metric; a `agg(metric) <op> constant` check also draws its threshold."""
    specs: dict[str, PlotSpec] = {}
    for check in checks:
        tree = check.tree
        if isinstance(tree, Compare) and len(tree.ops) == 1 and isinstance(tree.left, Call):
            value = constant_value(tree.rights[0])
            if value is not None:
                specs[tree.left.metric] = PlotSpec(metric=tree.left.metric, threshold=value, label=check.name)
                continue
        for metric in metric_names(tree):
            specs.setdefault(metric, PlotSpec(metric=metric, threshold=None, label=check.name))
    return list(specs.values())
