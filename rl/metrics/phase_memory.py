"""Each step phase's peak device memory per GPU, set against `harness plan`'s two phases.

Why: the plan states a training and a generation phase per GPU (harness/plan: the colocated
replica beside training; the training state offloaded while the replica decodes) and refuses a
recipe whose phase does not fit; only a measurement of the same two phases can show the plan
right. A GPU holds policy rank i's process and, colocated, generation replica i's: a phase's
figure is, per GPU, the peak of the rank's process plus the peak of its replica's since the phase
began (an upper bound of their joint peak: in generation the rank's memory stays flat while the
replica's moves, in training the other way round), the largest over the GPUs. A replica with a
GPU of its own (`generation.colocated: false`) is a GPU of its own. Allocated tensors only (torch's
caching allocator may reserve more; the plan counts tensors too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rl.cluster.placement import per_gpu

__all__ = ["PhaseMemory"]


class PhaseMemory:
    """`start()` at a phase's beginning, `peak()` at its end (GiB). `call(handles, method, reset)`
    runs a worker method on each handle and returns their answers: each worker's
    `device_memory(reset)` is (allocated, peak since its last reset) in GiB."""

    def __init__(self, call: Callable[[Sequence[Any], bool], list[tuple[float, float]]], ranks: Sequence[Any],
                 gens: Sequence[Any], *, colocated: bool) -> None:
        self._call, self._ranks, self._gens, self._colocated = call, list(ranks), list(gens), colocated

    def start(self) -> None:
        self._call([*self._ranks, *self._gens], True)

    def peak(self) -> float:
        answers = self._call([*self._ranks, *self._gens], False)
        ranks, gens = answers[:len(self._ranks)], answers[len(self._ranks):]
        return gpu_peaks(ranks, gens, colocated=self._colocated)


def gpu_peaks(ranks: Sequence[tuple[float, float]], gens: Sequence[tuple[float, float]], *, colocated: bool) -> float:
    """The largest per-GPU peak: rank i's plus replica i's where they share a GPU (colocated),
    every process alone otherwise."""
    gpus = per_gpu([peak for _, peak in ranks], [peak for _, peak in gens], colocated=colocated)
    return max((sum(peaks) for peaks in gpus), default=0.0)
