"""Issue 35: a metric got at most one threshold line in its plot, the last check's; every
bound of every applicable check is drawn, each labelled with its check."""

from __future__ import annotations

import datetime as dt

from harness.report.markdown import threshold_lines
from harness.report.plots import metric_figure
from harness.report.specs import plot_specs
from harness.thresholds import ThresholdCheck, parse

SERIES = {s: s / 10 for s in range(1, 11)}


def _check(name: str, expr: str) -> ThresholdCheck:
    return ThresholdCheck(name=name, expr=expr, tree=parse(expr), why="w", since=dt.date(2026, 12, 1),
                          hardware=None, path="t.yaml", line=1)


def _dashed(specs, metric):
    fig = metric_figure(name=metric, series=SERIES, thresholds=threshold_lines(specs, metric), title=metric)
    (ax,) = fig.axes
    return sorted((line.get_ydata()[0], line.get_label()) for line in ax.get_lines() if line.get_linestyle() == "--")


def test_two_checks_on_one_metric_draw_two_labelled_lines():
    specs = plot_specs([_check("reward_rises", "mean(train/reward, -3) >= 0.5"),
                        _check("reward_bounded", "max(train/reward) <= 1.5"),
                        _check("loss_finite", "max(train/loss) < 10")])
    assert _dashed(specs, "train/reward") == [(0.5, "reward_rises: 0.5"), (1.5, "reward_bounded: 1.5")]
    assert _dashed(specs, "train/loss") == [(10.0, "loss_finite: 10")]


def test_a_range_draws_both_bounds_and_a_check_without_a_constant_draws_none():
    specs = plot_specs([_check("kl_band", "0.001 < mean(train/kl) < 0.2"),
                        _check("kl_falls", "last(train/kl) < first(train/kl)")])
    assert _dashed(specs, "train/kl") == [(0.001, "kl_band: 0.001"), (0.2, "kl_band: 0.2")]
    assert [s.metric for s in plot_specs([_check("kl_falls", "last(train/kl) < first(train/kl)")])] == ["train/kl"]
