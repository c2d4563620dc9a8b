"""The summary's pictures: wall time per entry, and one metric's curve for every entry at once.

Like harness/report/plots.py: matplotlib's object API on an Agg canvas, imported only here, and
written atomically, so a summary never shows half a PNG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.report.atomic import write_atomic

COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#6a1b9a", "not run": "#9e9e9e"}


def _figure(height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def wall_time_chart(path: Path, bars: Sequence[tuple[str, float, str]]) -> Path:
    """Horizontal bars of (entry, wall seconds, result), coloured by result."""
    if not bars:
        raise ValueError("bars: no entry ran, nothing to draw")
    fig = _figure(1.2 + 0.35 * len(bars))
    ax = fig.add_subplot()
    names = [b[0] for b in bars]
    ax.barh(range(len(bars)), [b[1] / 60.0 for b in bars], color=[COLOURS.get(b[2], "#9e9e9e") for b in bars])
    ax.set_yticks(range(len(bars)), names, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("wall time (minutes, all attempts)")
    ax.set_title("wall time per entry (green passed, red failed)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return write_atomic(Path(path), lambda f: fig.savefig(f, format="png"))


def overlay_chart(path: Path, *, metric: str, curves: Mapping[str, Mapping[int, float]]) -> Path:
    """`metric` over steps, one line per entry."""
    if not curves:
        raise ValueError(f"curves: no entry logged {metric}")
    from matplotlib.ticker import MaxNLocator

    fig = _figure(3.8)
    ax = fig.add_subplot()
    for name, series in curves.items():
        steps = sorted(series)
        ax.plot(steps, [series[s] for s in steps], linewidth=1.4, label=name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per entry")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return write_atomic(Path(path), lambda f: fig.savefig(f, format="png"))
