"""report.md's "Step phases": where a step's wall time goes, from the engine's `timing/train/*`.

Every `timing/train/<phase>` series but `total` is a phase (the GRPO engine's generation, old
and reference log-probs, training, refit, data plane and other add up to total; an external
engine writes what it can time). Medians leave out step 1 when there are more steps: it holds
compilation and CUDA-graph capture, which a steady step does not pay.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

PREFIX = "timing/train/"
TOTAL = PREFIX + "total"
GPU_BUSY = "performance/gpu_busy_fraction"  # the engine's traced steps (profile.kernel_steps)


def steady(series: Mapping[int, float]) -> list[float]:
    """The values of the steps after the first (all of them for a one-step run), in step order."""
    steps = sorted(series)
    kept = steps[1:] if len(steps) > 1 else steps
    return [float(series[s]) for s in kept]


def phase_rows(metrics: Mapping[str, Mapping[int, float]]) -> list[list[object]]:
    """(phase, median seconds, share of the median step) rows, largest first; [] without a total."""
    total = metrics.get(TOTAL) or {}
    if not total:
        return []
    step = statistics.median(steady(total))
    rows = []
    for name, series in metrics.items():
        if name.startswith(PREFIX) and name != TOTAL and series:
            seconds = statistics.median(steady(series))
            rows.append([name[len(PREFIX):], round(seconds, 4), f"{seconds / step:.1%}" if step > 0 else "-"])
    rows.sort(key=lambda r: -r[1])
    return [*rows, ["total", round(step, 4), "100.0%"]]


def gpu_busy_line(metrics: Mapping[str, Mapping[int, float]]) -> str | None:
    """The traced steps' GPU-busy fraction and host overhead (their mean), with each phase's the
    engine traced (`<GPU_BUSY>/<phase>`), or None: no step traced."""
    series = metrics.get(GPU_BUSY) or {}
    if not series:
        return None
    steps = sorted(series)
    busy = statistics.mean(float(series[s]) for s in steps)
    span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    phases = [f"{name[len(GPU_BUSY) + 1:]} {statistics.mean(float(v) for v in values.values()):.1%}"
              for name, values in sorted(metrics.items()) if name.startswith(GPU_BUSY + "/") and values]
    within = f"; {', '.join(phases)}" if phases else ""
    return (f"GPU busy {busy:.1%} of the wall time of {span} (kernels traced, `profile.kernel_steps`{within}): "
            f"host overhead {1 - busy:.1%}.")
