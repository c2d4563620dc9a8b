"""profile.kernel_steps: each GPU's busy time from its processes' traced kernels
(rl/metrics/kernel_trace.py): the GPUs' grouping, a real torch.profiler trace (CPU operators here,
CUDA kernels on a GPU) on the epoch clock, the driver's traced step, and the key's refusals. The
union of intervals against a brute-force count: tests/rl/test_busy_union.py. No hypothesis here:
bench/gpu_e2e.sh runs this file on the GPU machine, where bench/gpu_wheels.txt carries no hypothesis."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rl.config import parse_config
from rl.metrics.kernel_trace import KernelTrace, StepTrace, busy_ns, gpu_busy_fraction


def test_busy_time_of_nothing_is_zero() -> None:
    assert busy_ns([], 0, 10) == 0
    assert busy_ns([np.zeros((0, 2), np.int64)], 0, 10) == 0


def test_a_gpu_is_its_rank_and_colocated_replica() -> None:
    rank0, rank1 = np.array([[0, 40]]), np.array([[0, 10]])
    gen0, gen1 = np.array([[30, 80]]), np.array([[50, 100]])
    # colocated: GPU 0 busy 0-80 (80%), GPU 1 0-10 and 50-100 (60%): mean 70%
    whole = [(0, 100)]
    assert gpu_busy_fraction([rank0, rank1], [gen0, gen1], colocated=True, windows=whole) == pytest.approx(0.7)
    # each process a GPU of its own: 40%, 10%, 50%, 50%
    assert gpu_busy_fraction([rank0, rank1], [gen0, gen1], colocated=False, windows=whole) == pytest.approx(0.375)
    # two windows, 0-20 and 90-100: GPU 0 busy 20 of 30, GPU 1 10 + 10 of 30
    assert gpu_busy_fraction([rank0, rank1], [gen0, gen1], colocated=True,
                             windows=[(0, 20), (90, 100)]) == pytest.approx((20 / 30 + 20 / 30) / 2)
    with pytest.raises(ValueError, match="no time in the windows"):
        gpu_busy_fraction([rank0], [], colocated=True, windows=[(5, 5)])


def test_a_trace_holds_what_ran_between_start_and_stop_on_the_epoch_clock() -> None:
    trace = KernelTrace(device="cpu")  # CPU operators stand in for kernels where there is no GPU
    x = torch.randn(256, 256)
    before = time.time_ns()
    trace.start()
    for _ in range(5):
        x = torch.tanh(x @ x)
    time.sleep(0.05)  # nothing runs: the busy time must leave it out
    spans = trace.stop()
    after = time.time_ns()
    assert spans.dtype == np.int64 and spans.shape[1] == 2 and len(spans) >= 10
    assert (spans[:, 0] >= before - 10**6).all() and (spans[:, 1] <= after + 10**6).all()  # within a millisecond
    busy = busy_ns([spans], before, after)
    assert 0 < busy < after - before - 40 * 10**6
    with pytest.raises(RuntimeError, match="stopped before it started"):
        trace.stop()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="traces CUDA kernels")
def test_a_cuda_trace_sees_the_kernels_and_the_gap_between_them() -> None:
    x = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    trace = KernelTrace()
    trace.start()
    start = time.time_ns()
    for _ in range(20):
        x = torch.tanh(x @ x)
    torch.cuda.synchronize()
    time.sleep(0.1)
    stop = time.time_ns()
    spans = trace.stop()
    busy = busy_ns([spans], start, stop)
    assert len(spans) >= 40 and 0 < busy < stop - start - 90 * 10**6


def test_the_driver_traces_only_its_steps_and_asks_every_worker() -> None:
    asked = []

    def call(handles, method):
        asked.append((tuple(handles), method))
        return [np.array([[100, 150]]), np.array([[140, 200]])] if method == "kernel_trace_stop" else [None, None]

    trace = StepTrace(call, ["rank0"], ["gen0"], colocated=True, steps=[3, 4])
    assert [trace.traces(s) for s in (2, 3, 4, 5)] == [False, True, True, False]
    trace.start()
    spans = [("generation", 100, 160), ("data_plane", 160, 170), ("training", 170, 250), ("training", 280, 300)]
    got = trace.metrics(100, 300, spans)
    assert got == pytest.approx({"performance/gpu_busy_fraction": 0.5,  # 100-200 of 100-300
                                 "performance/gpu_busy_fraction/generation": 1.0,  # 100-160, all busy
                                 "performance/gpu_busy_fraction/training": 30 / 100})  # 170-200 of 170-250 + 280-300
    assert asked == [(("rank0", "gen0"), "kernel_trace_start"), (("rank0", "gen0"), "kernel_trace_stop")]
    trace.start()
    assert set(trace.metrics(100, 300)) == {"performance/gpu_busy_fraction"}  # no phase spans: no phase figure


def test_the_engine_writes_the_fraction_of_a_traced_step_only() -> None:
    from rl.run import Engine

    engine = object.__new__(Engine)
    engine.driver = SimpleNamespace(step=lambda step: {"step": step}, phase_spans=[])
    calls = []

    def call(handles, method):
        calls.append(method)
        now = time.time_ns()
        return [np.array([[now - 10**12, now + 10**12]])] if method == "kernel_trace_stop" else [None]

    engine.kernel_trace = StepTrace(call, ["rank0"], [], colocated=True, steps=[2, 2])
    assert engine._traced_step(1) == {"step": 1} and calls == []
    assert engine._traced_step(2) == {"step": 2, "performance/gpu_busy_fraction": 1.0}
    assert calls == ["kernel_trace_start", "kernel_trace_stop"]
    engine.kernel_trace = None
    assert engine._traced_step(2) == {"step": 2}


def _recipe(**profile) -> dict:
    return {"name": "t", "model": {"family": "qwen3_5"}, "cluster": {"devices_per_node": 1, "device": "h200"},
            "algorithm": {"name": "grpo", "num_steps": 5}, "task": {"name": "arith"}, "profile": profile}


@pytest.mark.parametrize("steps", [[0, 2], [3, 2], [2, 6]])
def test_steps_outside_the_run_are_refused(steps) -> None:
    with pytest.raises(ValueError, match=r"profile.kernel_steps: .* is not \[first, last\]"):
        parse_config(_recipe(kernel_steps=steps))


def test_steps_inside_the_run_are_taken() -> None:
    assert parse_config(_recipe(kernel_steps=[2, 5])).profile.kernel_steps == [2, 5]
    assert parse_config(_recipe()).profile.kernel_steps is None
