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
    series: Mapping[int, float],
    thresholds: Sequence[tuple[float, str]],
    title: str,
) -> Path:
    """Like `plot_metric`, with any number of (value, label) horizontal lines."""
    if not series:
        raise ValueError(f"series: metric {name!r} has no points to plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    steps = sorted(series)
    values = [_as_float(series[s]) for s in steps]
    fig = Figure(figsize=(6.4, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(steps, values, marker="." if len(steps) <= 50 else None, linewidth=1.5, label=name)
    for i, (value, label) in enumerate(thresholds):
        ax.axhline(value, linestyle="--", linewidth=1.2, color=f"C{(i + 3) % 10}", label=label)
    ax.set_title(title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(name)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return write_atomic(Path(path), lambda f: fig.savefig(f, format="png"))


def _as_float(value: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
