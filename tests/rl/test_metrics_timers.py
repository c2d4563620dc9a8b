"""Timer accumulation with a fake clock, and the MFU arithmetic."""

import pytest

from rl.metrics import PEAK_TFLOPS, Timer, mfu, performance_metrics, theoretical_tflops


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_timer_accumulates_named_durations_and_total():
    clock = FakeClock()
    timer = Timer(prefix="timing/train/", clock=clock)
    with timer:
        for _ in range(2):
            with timer.time("forward"):
                clock.now += 1.5
            clock.now += 0.25
        with timer.time("optimizer"):
            clock.now += 2.0
    assert timer.metrics() == {
        "timing/train/forward": 3.0,
        "timing/train/optimizer": 2.0,
        "timing/train/total": 5.5,
    }
    assert timer.seconds("forward") == 3.0 and timer.seconds("never") == 0.0
    timer.reset()
    assert timer.metrics() == {}


def test_timer_records_on_exception():
    clock = FakeClock()
    timer = Timer(clock=clock)
    with pytest.raises(RuntimeError):
        with timer.time("step"):
            clock.now += 1.0
            raise RuntimeError("boom")
    assert timer.metrics() == {"timing/step": 1.0}


def test_theoretical_tflops_sums_device_peaks():
    assert theoretical_tflops("h200", 16) == pytest.approx(16 * 989.5)
    assert theoretical_tflops("H100", 1) == 989.5
    assert theoretical_tflops("a100", 2) == 624.0
    assert theoretical_tflops("cpu", 2) == pytest.approx(2 * PEAK_TFLOPS["cpu"])
    with pytest.raises(ValueError, match=r"cluster.device: .*known: \['a100', 'cpu', 'h100', 'h200'\]"):
        theoretical_tflops("tpu", 1)
    with pytest.raises(ValueError, match="num_ranks"):
        theoretical_tflops("h100", 0)


def test_mfu_and_performance_metrics():
    # 2 ranks of 989.5 TFLOP/s for 4 s can do 7916e12 FLOPs; half of that is 50% MFU.
    assert mfu(3958e12, 4.0, 2 * 989.5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="seconds"):
        mfu(1.0, 0.0, 1.0)
    # GRPO: 8000 tokens in a 5 s step whose training took 4 s and generation 0.5 s, on 2 ranks.
    perf = performance_metrics(tokens=8000, total_flops=3958e12, theoretical_tflops=2 * 989.5, num_ranks=2,
                               step_seconds=5.0, train_seconds=4.0, generated_tokens=600.0, generation_seconds=0.5)
    assert perf == pytest.approx({
        "performance/tokens_per_sec_per_gpu": 800.0,
        "performance/mfu": 0.5,
        "performance/generation_tokens_per_sec": 1200.0,
        "performance/train_tokens_per_sec": 2000.0,
    })
    # Distillation generates nothing: no generation rate. A zero-length phase divides by 1e-9.
    perf = performance_metrics(tokens=10, total_flops=1e9, theoretical_tflops=0.1, num_ranks=1,
                               step_seconds=0.0, train_seconds=2.0)
    assert perf == pytest.approx({
        "performance/tokens_per_sec_per_gpu": 1e10,
        "performance/mfu": 1e9 / 2.0 / 0.1e12,
        "performance/train_tokens_per_sec": 5.0,
    })
    with pytest.raises(ValueError, match="seconds"):
        performance_metrics(tokens=1, total_flops=1.0, theoretical_tflops=1.0, num_ranks=1,
                            step_seconds=1.0, train_seconds=0.0)


def test_timer_keeps_each_span_on_the_epoch_clock():
    clock, epoch = FakeClock(), iter(range(1000, 2000, 10))
    timer = Timer(prefix="timing/train", clock=clock, epoch_ns=lambda: next(epoch))
    with timer:
        with timer.time("generation"):
            with timer.time("offload"):
                pass
        with timer.time("training"):
            pass
    assert timer.spans() == [("offload", 1010, 1020), ("generation", 1000, 1030), ("training", 1040, 1050)]
    timer.reset()
    assert timer.spans() == []
