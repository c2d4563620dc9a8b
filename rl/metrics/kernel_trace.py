"""Each GPU's busy time over a step, from the kernels its processes ran (`profile.kernel_steps`).

Why: a step's host overhead, the wall time in which its GPU runs nothing, is what no phase timer
shows. NVML's utilization (bench/gpu_busy.py) counts a sample period busy when any kernel ran in
it, an upper bound. torch.profiler's CUDA activity records every kernel, copy and memset with its
start and end; the union of the intervals a GPU's processes (a policy rank and, colocated, its
generation replica) ran within the step is that GPU's busy time, and busy / step wall its busy
fraction. The step's is the mean over its GPUs; 1 minus it is the host overhead. The same over the
spans of the generation and of the training phase (the driver's timer keeps them on the epoch
clock) says which phase the overhead is in.

Clocks: kineto stamps events on the host's system clock (nanoseconds since the epoch), as the
driver's `time.time_ns()` is, so intervals of two processes and the driver's step window compare
directly; a trace whose start is not within a minute of the epoch clock is shifted onto it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rl.cluster.placement import per_gpu

__all__ = ["BUSY", "PHASES", "KernelTrace", "StepTrace", "busy_ns", "gpu_busy_fraction"]

SAME_CLOCK_NS = 60 * 10**9  # a trace start this close to time.time_ns() is on the epoch clock already
BUSY = "performance/gpu_busy_fraction"  # the step's; BUSY/<phase> each phase's of PHASES it ran
PHASES = ("generation", "training")


class KernelTrace:
    """One process's trace: `start()`, then `stop()` -> int64 [n, 2] (start, end) in epoch ns of
    every device activity. `device` "cuda" records CUDA kernels, copies and memsets; "cpu" records
    CPU operators instead (what a test can run where there is no GPU)."""

    def __init__(self, device: str = "cuda") -> None:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity

        self._activity = ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU
        self._kind = DeviceType.CUDA if device == "cuda" else DeviceType.CPU
        self._profile: Any = None
        self._epoch_at_start = 0

    def start(self) -> None:
        from torch.profiler import profile

        if self._profile is not None:
            raise RuntimeError("kernel trace: started twice")
        self._profile = profile(activities=[self._activity])
        self._profile.start()
        self._epoch_at_start = time.time_ns()

    def stop(self) -> np.ndarray:
        if self._profile is None:
            raise RuntimeError("kernel trace: stopped before it started")
        profile, self._profile = self._profile, None
        profile.stop()
        results = profile.profiler.kineto_results
        skew = self._epoch_at_start - results.trace_start_ns()
        shift = 0 if abs(skew) < SAME_CLOCK_NS else skew
        spans = [(e.start_ns(), e.end_ns()) for e in results.events() if e.device_type() == self._kind]
        return np.asarray(spans, dtype=np.int64).reshape(-1, 2) + shift


def busy_ns(intervals: Sequence[np.ndarray], start: int, stop: int) -> int:
    """Nanoseconds of [start, stop) covered by at least one of the intervals ([n, 2] arrays)."""
    spans = np.concatenate([np.asarray(i, dtype=np.int64).reshape(-1, 2) for i in intervals] or
                           [np.zeros((0, 2), np.int64)])
    spans = np.clip(spans, start, stop)
    spans = spans[spans[:, 1] > spans[:, 0]]
    if not len(spans):
        return 0
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])  # the furthest end so far
    opens = np.ones(len(spans), dtype=bool)
    opens[1:] = spans[1:, 0] > reach[:-1]  # a gap before this interval: a new busy stretch
    firsts = np.flatnonzero(opens)
    lasts = np.append(firsts[1:] - 1, len(spans) - 1)
    return int((reach[lasts] - spans[firsts, 0]).sum())


def gpu_busy_fraction(ranks: Sequence[np.ndarray], gens: Sequence[np.ndarray], *, colocated: bool,
                      windows: Sequence[tuple[int, int]]) -> float:
    """The mean over GPUs of the busy time within `windows` (disjoint (start, stop) pairs) over their
    length: each GPU's intervals are its policy rank's and, colocated, its replica's
    (rl.cluster.placement.per_gpu)."""
    length = sum(stop - start for start, stop in windows)
    if length <= 0 or any(stop < start for start, stop in windows):
        raise ValueError(f"kernel trace: no time in the windows {list(windows)[:4]}")
    gpus = per_gpu(list(ranks), list(gens), colocated=colocated)
    return float(np.mean([sum(busy_ns(g, a, b) for a, b in windows) / length for g in gpus]))


class StepTrace:
    """The driver's side: `start()` before a traced step, `metrics(start_ns, stop_ns, spans)` after it.
    `call(handles, method)` runs a worker method on each handle (their `kernel_trace_start` and
    `kernel_trace_stop`) and returns their answers."""

    def __init__(self, call: Callable[[Sequence[Any], str], list[Any]], ranks: Sequence[Any], gens: Sequence[Any],
                 *, colocated: bool, steps: Sequence[int]) -> None:
        self._call, self._ranks, self._gens, self._colocated = call, list(ranks), list(gens), colocated
        self.first, self.last = steps

    def traces(self, step: int) -> bool:
        return self.first <= step <= self.last

    def start(self) -> None:
        self._call([*self._ranks, *self._gens], "kernel_trace_start")

    def metrics(self, start: int, stop: int, spans: Sequence[tuple[str, int, int]] = ()) -> dict[str, float]:
        """BUSY over [start, stop), and BUSY/<phase> over each of PHASES' spans ((name, start, end)
        in epoch ns, the driver timer's) where the step ran it."""
        answers = self._call([*self._ranks, *self._gens], "kernel_trace_stop")
        ranks, gens = answers[:len(self._ranks)], answers[len(self._ranks):]
        out = {BUSY: gpu_busy_fraction(ranks, gens, colocated=self._colocated, windows=[(start, stop)])}
        for phase in PHASES:
            windows = [(a, b) for name, a, b in spans if name == phase]
            if sum(b - a for a, b in windows) > 0:
                out[f"{BUSY}/{phase}"] = gpu_busy_fraction(ranks, gens, colocated=self._colocated, windows=windows)
        return out
