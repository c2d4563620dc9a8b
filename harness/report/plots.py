"""One PNG per checked metric: its curve over steps, with the thresholds it was held to.

matplotlib is imported only when a plot is drawn, and only its object API with the Agg canvas
(no pyplot, no global backend switch), so `harness check` stays fast and nothing needs a display.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report.atomic import write_atomic


@dataclass(frozen=True, kw_only=True)
class PlotSpec:
    """A metric to plot; threshold is the constant a check compares its aggregate to, if any."""

    metric: str
    threshold: float | None
    label: str


def plot_filename(metric: str) -> str:
    """A file name for `metric`: `train/reward` -> `train_reward.png`."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", metric).strip("_.") or "metric"
    return f"{stem}.png"


def plot_metric(path: Path, *, name: str, series: Mapping[int, float], threshold: float | None, title: str) -> Path:
    """Draws `series` (step -> value) to the PNG `path`, with `threshold` as a dashed line."""
    lines = [(threshold, f"threshold {threshold:g}")] if threshold is not None else []
    return draw_metric(path, name=name, series=series, thresholds=lines, title=title)


def draw_metric(
    path: Path,
    *,
    name: str,
    series: Mapping[int, float] | None = None,
    thresholds: Sequence[tuple[float, str]],
    title: str,
    curves: Sequence[tuple[str, Mapping[int, float]]] = (),
) -> Path:
    """Like `plot_metric`, with any number of (value, label) horizontal lines; `curves` instead of
    `series`: several labelled runs of the metric in one plot (a parity run's variants)."""
    fig = metric_figure(name=name, series=series, thresholds=thresholds, title=title, curves=curves)
    return write_atomic(Path(path), lambda f: fig.savefig(f, format="png"), follow_parent=False)


LINE_STYLES = ("-", ":", "-.")  # a parity run's curves often coincide: each stays visible; "--" is a threshold's


def metric_figure(*, name: str, series: Mapping[int, float] | None = None, thresholds: Sequence[tuple[float, str]],
                  title: str, curves: Sequence[tuple[str, Mapping[int, float]]] = ()):
    """The figure `draw_metric` saves: the curve (or each labelled curve), then a dashed line per (value, label)."""
    curves = [(label, points) for label, points in curves if points] if curves else [(name, series or {})]
    if not any(points for _, points in curves):
        raise ValueError(f"series: metric {name!r} has no points to plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for i, (label, points) in enumerate(curves):
        steps, values = envelope(sorted(points), [_as_float(points[s]) for s in sorted(points)])
        ax.plot(steps, values, marker="." if len(steps) <= 50 else None, linewidth=1.5, label=label,
                linestyle=LINE_STYLES[i % len(LINE_STYLES)], color=f"C{i % 3}")
    for i, (value, label) in enumerate(thresholds):
        ax.axhline(value, linestyle="--", linewidth=1.2, color=f"C{(i + 3) % 10}", label=label)
    ax.set_title(title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(name)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")  # "best" scans every point: slow on long runs
    fig.tight_layout()
    return fig


MAX_POINTS = 2000


def envelope(steps: list[int], values: list[float], max_points: int = MAX_POINTS) -> tuple[list[int], list[float]]:
    """At most ~max_points points: each bucket keeps its min and max, so no spike is hidden."""
    if len(steps) <= max_points:
        return steps, values
    bucket = -(-2 * len(steps) // max_points)
    out_steps, out_values = [], []
    for start in range(0, len(steps), bucket):
        chunk = range(start, min(start + bucket, len(steps)))
        finite = [i for i in chunk if not math.isnan(values[i])] or list(chunk)
        lo = min(finite, key=values.__getitem__)
        hi = max(finite, key=values.__getitem__)
        for i in sorted({lo, hi}):
            out_steps.append(steps[i])
            out_values.append(values[i])
    return out_steps, out_values


def _as_float(value: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
