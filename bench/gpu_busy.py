"""The GPU's busy fraction over a run's timed steps, from NVML's utilization sampled beside it:

    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100 > util.csv &
    ... the run ...
    python bench/gpu_busy.py RUN_DIR util.csv [--warmup 2]

Why: a step's host overhead (wall time in which no kernel runs) is what no phase timer shows.
NVML's `utilization.gpu` is the percent of its sample period in which one or more kernels ran, so
its mean over the timed steps (after the warm-up's compilation and capture) is the GPU-busy
fraction and 1 minus it the host overhead. The window runs from the end of step `warmup` to the
end of the last step (`clock/step_end_unix_s` of metrics.jsonl, the run's own clock; nvidia-smi's
timestamps are that machine's local time); steps whose kernels the engine traced
(`profile.kernel_steps`, which pay the tracing) close the run and stay out of it. A window with
fewer than 10 samples is no figure (exit 2), as is a run dir or CSV that does not parse.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.metrics import MetricsError, read_metrics  # noqa: E402

STEP_END = "clock/step_end_unix_s"
TRACED = "performance/gpu_busy_fraction"  # written by the steps the engine traced
MIN_SAMPLES = 10


def untraced_steps(run: Path, steps: list[int]) -> list[int]:
    """`steps` less the traced ones, which must all come after the rest (a traced step inside the
    window would count its tracing); MetricsError otherwise."""
    traced = set(read_metrics(run).get(TRACED) or {})
    kept = [s for s in steps if s not in traced]
    if kept and traced and min(traced) < kept[-1]:
        raise MetricsError(f"{run}: traced steps {sorted(traced)} must follow the timed ones ({kept[0]}-{kept[-1]})")
    return kept


def samples(csv: Path) -> list[tuple[float, float]]:
    """(unix seconds, utilization %) of each line of nvidia-smi's `timestamp, utilization.gpu` CSV."""
    out = []
    for number, line in enumerate(csv.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            stamp, util = (part.strip() for part in line.split(","))
            whole, _, fraction = stamp.partition(".")
            when = time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S")) + float(f"0.{fraction or 0}")
            out.append((when, float(util)))
        except ValueError as error:
            raise MetricsError(f"{csv}:{number}: not 'YYYY/MM/DD HH:MM:SS.fff, percent': {line[:80]!r}") from error
    return out


def busy(run: Path, csv: Path, warmup: int) -> dict:
    """{"gpu_busy": mean utilization / 100 over the timed steps, "host_overhead", "samples", "window_s"}."""
    if warmup < 1:
        raise MetricsError("--warmup must be at least 1: the window starts where step `warmup` ended")
    ends = read_metrics(run).get(STEP_END)
    if not ends or len(ends) <= warmup:
        raise MetricsError(f"{run}: {STEP_END} has {len(ends or {})} steps, need more than the {warmup} warm-up")
    steps = untraced_steps(run, sorted(ends))
    if len(steps) <= warmup:
        raise MetricsError(f"{run}: {len(steps)} untraced steps, need more than the {warmup} warm-up")
    start, stop = float(ends[steps[warmup - 1]]), float(ends[steps[-1]])
    window = [util for when, util in samples(csv) if start <= when <= stop]
    if len(window) < MIN_SAMPLES:
        raise MetricsError(f"{csv}: {len(window)} samples in the timed steps' {stop - start:.1f} s, need {MIN_SAMPLES}")
    fraction = statistics.mean(window) / 100.0
    return {"gpu_busy": fraction, "host_overhead": 1.0 - fraction, "samples": len(window),
            "window_s": stop - start}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--warmup", type=int, default=2, help="leading steps left out (compilation, graph capture)")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(busy(args.run, args.csv, args.warmup)))
    except (MetricsError, OSError) as error:
        print(f"gpu_busy: {str(error)[:300]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
