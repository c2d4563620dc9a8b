"""The performance gate: a planted regression is flagged, noise inside the band is not."""

from __future__ import annotations

import random

import pytest

from harness.history import HistoryRow, gate_run, noise_band
from harness.history.gate import gate_metric
from harness.suites import Gate

GATE = Gate(mode="fail", window=20, min_runs=5, k=3.0, rel_floor=0.02)


def run(step: float | None, tokens: float | None = 1000.0, *, verdict: str = "pass", entry: str = "perf",
        hardware: str = "h200", id: int | None = None) -> HistoryRow:
    return HistoryRow(time="t", suite="performance", entry=entry, recipe="qwen", recipe_path="q.yaml",
                      commit_sha=None, hardware=hardware, verdict=verdict, step_time_s=step, tokens_per_s=tokens,
                      id=id)


def noisy_history(n: int = 20, seed: int = 0) -> list[HistoryRow]:
    """Step time around 10 s with about 1% noise; tokens/s around 1000 likewise."""
    rng = random.Random(seed)
    return [run(10.0 * (1 + rng.gauss(0, 0.01)), 1000.0 * (1 + rng.gauss(0, 0.01)), id=i) for i in range(n)]


def statuses(current: HistoryRow, history: list[HistoryRow], gate: Gate = GATE) -> dict[str, str]:
    return {r.metric: r.status for r in gate_run(current, history, gate)}


def test_noise_band_is_median_plus_minus_k_scaled_mad():
    band = noise_band([10, 11, 9, 10, 12, 10, 8], k=3.0, rel_floor=0.0)
    # median 10, absolute deviations 0 1 1 0 2 0 2 -> MAD 1 -> spread 1.4826
    assert band.centre == 10 and band.count == 7
    assert band.low == pytest.approx(10 - 3 * 1.4826) and band.high == pytest.approx(10 + 3 * 1.4826)


def test_relative_floor_keeps_a_steady_history_from_flagging_a_wobble():
    band = noise_band([10.0] * 8, k=3.0, rel_floor=0.02)
    assert (band.low, band.high) == pytest.approx((9.4, 10.6))
    assert statuses(run(10.05), [run(10.0) for _ in range(8)])["step_time_s"] == "ok"


def test_planted_step_time_regression_is_flagged():
    history = noisy_history()
    result = gate_metric(run(11.5), history, "step_time_s", GATE)  # +15%
    assert result.status == "regression" and result.regression
    assert "is outside the noise band" in result.message and "of 20 runs" in result.message


def test_variation_inside_the_band_is_not_flagged():
    history = noisy_history()
    for seed in range(50):  # fresh draws from the same noise as the history
        current = noisy_history(1, seed=1000 + seed)[0]
        assert statuses(current, history) == {"step_time_s": "ok", "tokens_per_s": "ok"}


def test_tokens_per_second_regresses_downwards_and_improves_upwards():
    history = noisy_history()
    assert statuses(run(10.0, 800.0), history)["tokens_per_s"] == "regression"
    assert statuses(run(10.0, 1200.0), history)["tokens_per_s"] == "improved"
    assert statuses(run(8.0), history)["step_time_s"] == "improved"


def test_one_outlier_night_does_not_widen_the_band():
    history = noisy_history()
    history[5] = run(30.0, 300.0, id=5)
    assert statuses(run(11.5), history)["step_time_s"] == "regression"


def test_too_little_history_gives_no_verdict():
    history = noisy_history(4)
    result = gate_metric(run(50.0), history, "step_time_s", GATE)
    assert result.status == "insufficient" and "4 earlier passing runs, the gate needs 5" in result.message


def test_baseline_uses_only_passing_runs_of_the_same_entry_and_hardware_in_the_window():
    history = noisy_history()
    others = [run(20.0, entry="other") for _ in range(10)] + [run(20.0, hardware="h100") for _ in range(10)]
    failed = [run(20.0, verdict="fail") for _ in range(10)]
    assert statuses(run(10.0), others + history + failed)["step_time_s"] == "ok"
    slow_then_fast = [run(20.0, id=100 + i) for i in range(20)] + [run(10.0, id=200 + i) for i in range(5)]
    assert statuses(run(10.0), slow_then_fast, Gate(window=5, min_runs=5))["step_time_s"] == "ok"
    assert statuses(run(10.0), slow_then_fast, Gate(window=25, min_runs=5))["step_time_s"] == "improved"


def test_no_gate_for_failed_runs_missing_metrics_or_mode_off():
    history = noisy_history()
    assert gate_run(run(50.0, verdict="fail"), history, GATE) == []
    assert gate_run(run(50.0), history, Gate(mode="off")) == []
    assert statuses(run(None, None), history) == {"step_time_s": "missing", "tokens_per_s": "missing"}


def test_the_judged_run_is_not_its_own_baseline():
    history = [run(10.0, id=i) for i in range(5)]
    current = run(13.0, id=99)
    assert statuses(current, history + [current], Gate(min_runs=5))["step_time_s"] == "regression"


def test_refit_seconds_and_peak_memory_regress_upwards_and_absent_phases_are_left_out():
    rng = random.Random(3)
    history = [replace_phase(run(10.0, id=i), refit_s=0.03 * (1 + rng.gauss(0, 0.01)),
                             mfu=0.4 * (1 + rng.gauss(0, 0.01))) for i in range(10)]
    slow_refit = replace_phase(run(10.0), refit_s=0.3, mfu=0.4)
    got = statuses(slow_refit, history)
    assert got["refit_s"] == "regression" and got["mfu"] == "ok"
    assert "peak_memory_gib" not in got and "generation_tokens_per_s" not in got  # never logged: left out
    assert statuses(replace_phase(run(10.0), refit_s=0.03), history)["mfu"] == "missing"  # the history has it
    assert statuses(replace_phase(run(10.0), refit_s=0.03, mfu=0.1), history)["mfu"] == "regression"


def replace_phase(row: HistoryRow, **phases: float) -> HistoryRow:
    from dataclasses import replace

    return replace(row, **phases)
