"""`harness calibrate --runs`: bounds placed outside the seeds' spread, exact checks where runs are
bit-identical, every written check proven on the runs, unprovable ones reported and left out."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from calibrate_runs import check, row, write_recipe, write_runs
from hypothesis import given
from hypothesis import strategies as st

from harness.calibrate.margin import LOAD, ORDINARY, placed, rounded_outward
from harness.checks.judge import judge_run
from harness.cli import main
from harness.metrics import read_metrics
from harness.thresholds import evaluate, load_thresholds


def calibrate(tmp_path, thresholds, *, seeds=(42, 7, 123), extra=(), **kwargs):
    recipe = write_recipe(tmp_path / "recipe", thresholds=thresholds)
    runs = write_runs(tmp_path / "runs", seeds, **kwargs)
    out = tmp_path / "proposed.yaml"
    code = main(["calibrate", str(recipe), "--runs", *runs, "--out", str(out), *extra])
    return code, out, runs


def by_name(path):
    return {c.name: c for c in load_thresholds(path, hardware="cpu", recipe="r")}


def test_seed_noise_larger_than_the_bound_widens_it(tmp_path, capsys):
    # mean(train/reward, -10) is 0.61 / 0.69 / 0.55 over the seeds: 0.6 is inside their spread
    code, out, runs = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.6", hardware=["cpu"])]})
    assert code == 0, capsys.readouterr().out
    proposed = by_name(out)["reward_final"]
    # lowest 0.55, sd 0.0702: 0.55 - 3 sd = 0.3394, rounded down to 3 digits
    assert proposed.expr == "mean(train/reward, -10) > 0.339"
    assert proposed.since == dt.date.today() and proposed.hardware == ("cpu",)
    assert "0.61 (seed 42), 0.69 (seed 7), 0.55 (seed 123)" in proposed.why
    assert all(run in proposed.why for run in runs) and "lowest run - max(3 sd" in proposed.why
    for run in runs:  # passes on every calibration run, as `harness check` judges it
        judgement = judge_run(Path(run), thresholds=out, hardware="cpu")
        assert judgement.ok, [v.message for v in judgement.verdicts if not v.ok]


def test_an_upper_bound_goes_above_the_highest_seed(tmp_path):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("grad_norm_bounded", "max(train/grad_norm) < 50", hardware=["cpu"])]})
    assert code == 0
    # max grad norm 4.0 / 4.08 / 3.94, sd 0.0702: the 10% floor of 4.08 wins, 4.488 rounded up
    assert by_name(out)["grad_norm_bounded"].expr == "max(train/grad_norm) < 4.49"


def test_a_deterministic_metric_gets_an_exact_check(tmp_path):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("ranks", "max(num_ranks) < 10 and mean(train/reward, -10) > 0.2", hardware=["cpu"])]})
    assert code == 0
    proposed = by_name(out)["ranks"]
    assert proposed.expr == "max(num_ranks) == 2 and mean(train/reward, -10) > 0.339"
    assert "max(num_ranks) = 2.0 on every run, its series bit-identical step by step: exact, tolerance 0" \
        in proposed.why


def kl_rows(largest):
    """Rows whose max train/gen_kl_error is the seed's `largest`."""
    def rows(step, seed):
        return {**row(step, seed), "train/gen_kl_error": largest[seed] * (1 + step % 3) / 3}
    return rows


@pytest.mark.parametrize("largest, bound", [
    ({42: 2e-9, 7: 5e-9, 123: 8e-9}, "1e-06"),  # the CPU box: 100 x 8e-9 is under the floor
    ({42: 2e-7, 7: 5e-7, 123: 8e-7}, "8e-05"),  # still under the floor: 100 x the largest
    ({42: 0.0, 7: 0.0, 123: 0.0}, "1e-06"),  # bit-identical sides (the torch CPU recipe): the floor, not 10% of 1
])
def test_an_in_sync_error_gets_a_bound_well_above_rounding_on_any_cpu(tmp_path, capsys, largest, bound):
    # 3 sd or 10% beyond the largest seed would sit 1.3-1.5x above it: another CPU rounds past that
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("generator_in_sync", "max(train/gen_kl_error) < 1e-2", hardware=["cpu"])]}, rows=kl_rows(largest))
    assert code == 0, capsys.readouterr().out
    proposed = by_name(out)["generator_in_sync"]
    assert proposed.expr == f"max(train/gen_kl_error) < {bound}"
    assert "the metric is rounding error and rounding differs between CPUs" in proposed.why


def test_an_in_sync_error_above_the_floor_keeps_the_statistical_rule(tmp_path, capsys):
    # bf16 on an H200 (the one-H200 LLM twin, 2026-12-03): 100 x these would pass a stale refit (1e-2)
    largest = {42: 3.293e-3, 7: 2.931e-2, 123: 1.144e-2}
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("generator_in_sync", "max(train/gen_kl_error) < 1e-2", hardware=["cpu"])]}, rows=kl_rows(largest))
    assert code == 0, capsys.readouterr().out
    proposed = by_name(out)["generator_in_sync"]
    assert proposed.expr == "max(train/gen_kl_error) < 0.0693"
    assert "rounding differs between CPUs" not in proposed.why


def test_rounding_error_bit_identical_on_every_seed_is_not_made_exact(tmp_path, capsys):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("generator_in_sync", "max(train/gen_kl_error) < 1e-2", hardware=["cpu"]),
        check("kl_exact", "max(train/gen_kl_error) == 3e-9", hardware=["cpu"])]})
    assert code == 1
    assert "why not: max(train/gen_kl_error) == 3e-09 is exact on rounding error" in capsys.readouterr().out
    assert by_name(out)["generator_in_sync"].expr == "max(train/gen_kl_error) < 1e-06"


def test_same_seed_reruns_make_every_bound_exact(tmp_path):
    code, out, runs = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.5", hardware=["cpu"])]}, seeds=(42, 42))
    assert code == 0
    measured = evaluate("mean(train/reward, -10) > 0", read_metrics(runs[0]), expected_steps=None).value
    assert by_name(out)["reward_final"].expr == f"mean(train/reward, -10) == {measured!r}"


def test_a_check_that_cannot_fail_is_reported_not_written(tmp_path, capsys):
    # gen_kl_error is >= 0 by construction: no run can fail `min(...) >= 0` (harness/selftest/domains.py)
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("kl_nonnegative", "min(train/gen_kl_error) >= 0"),
        check("flops_recorded", "min(total_flops) > 0")]})
    text = capsys.readouterr().out
    assert code == 1
    assert "NOT WRITTEN  kl_nonnegative" in text and "cannot fail" in text
    written = by_name(out)
    assert "kl_nonnegative" not in written
    # a bound on its metric's domain edge is kept as it stands, and FLOPs of 0 fail it
    assert written["flops_recorded"].expr == "min(total_flops) > 0"
    assert written["flops_recorded"].why == "set by hand"


def gain_rows(slopes):
    """Rows whose 10-step reward gain is 10 x the seed's slope."""
    def rows(step, seed):
        return {**row(step, seed), "train/reward": 0.3 + slopes[seed] * step}
    return rows


def test_a_gain_bound_three_sd_would_put_below_zero_keeps_half_the_lowest_gain(tmp_path, capsys):
    # gains 0.241 / 0.158 / 0.259: lowest - 3 sd is below 0, a bound that a run learning nothing passes
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_improves", "mean(train/reward, -10) - mean(train/reward, 1, 11) > 0.1", hardware=["cpu"])]},
        rows=gain_rows({42: 0.0241, 7: 0.0158, 123: 0.0259}))
    assert code == 0, capsys.readouterr().out
    proposed = by_name(out)["reward_improves"]
    assert proposed.expr == "mean(train/reward, -10) - mean(train/reward, 1, 11) > 0.079"
    assert "raised to 50% of the lowest run = 0.079 so that a run that did nothing (0) fails it" in proposed.why


def test_a_throughput_floor_keeps_a_quarter_of_the_slowest_run(tmp_path, capsys):
    # 300 / 600 / 900 tokens/s: lowest - 3 sd (900) is -600, a floor no run can cross
    def rows(step, seed):
        return {**row(step, seed), "performance/tokens_per_sec_per_gpu": {42: 300.0, 7: 600.0, 123: 900.0}[seed]}

    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("throughput_floor", "mean(performance/tokens_per_sec_per_gpu) > 50", hardware=["cpu"])]}, rows=rows)
    assert code == 0, capsys.readouterr().out
    assert by_name(out)["throughput_floor"].expr == "mean(performance/tokens_per_sec_per_gpu) > 75"


def test_gains_that_straddle_zero_leave_no_lower_bound(tmp_path, capsys):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("loss_finite", "all_finite(train/loss)"),
        check("reward_improves", "mean(train/reward, -10) - mean(train/reward, 1, 11) > 0.1")]},
        rows=gain_rows({42: 0.02, 7: -0.001, 123: 0.03}))
    text = capsys.readouterr().out
    assert code == 1
    assert "why not: mean(train/reward, -10) - mean(train/reward, 1, 11) > 0.1: the runs straddle 0 (lowest -0.01)" \
        in text
    assert set(by_name(out)) == {"loss_finite"}


def test_a_lower_bound_on_a_negative_statistic_that_cannot_fail_is_reported_not_written(tmp_path, capsys):
    # every gain below 0: no broken-run value to keep above, so 3 sd places the bound and the proof
    # finds nothing fails it (a shift moves both means alike, a scale or a flat series brings it to 0)
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("loss_finite", "all_finite(train/loss)"),
        check("reward_holds", "mean(train/reward, -10) - mean(train/reward, 1, 11) > -0.5")]},
        rows=gain_rows({42: -0.002, 7: -0.001, 123: -0.003}))
    text = capsys.readouterr().out
    assert code == 1
    assert "why not: self-test on seed 42: cannot fail" in text
    assert set(by_name(out)) == {"loss_finite"}


def test_checks_of_other_hardware_are_copied_and_an_everywhere_check_keeps_its_other_classes(tmp_path, capsys):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.6"),
        check("gpu_only", "max(train/loss) < 9", hardware=["h200x2"])]})
    assert code == 0
    every = {(c.name, c.hardware): c.expr for c in load_thresholds(out, hardware=None, recipe="r")}
    assert every == {("reward_final", ("cpu",)): "mean(train/reward, -10) > 0.339",
                     ("reward_final", ("h200x2",)): "mean(train/reward, -10) > 0.6",
                     ("gpu_only", ("h200x2",)): "max(train/loss) < 9"}
    assert ("note: reward_final: every hardware class -> cpu, whose runs moved its bound; the current check "
            "stays for h200x2") in capsys.readouterr().out


def test_without_checks_for_the_hardware_the_default_set_is_calibrated(tmp_path, capsys):
    code, out, _ = calibrate(tmp_path, None)
    assert code == 0, capsys.readouterr().out
    written = by_name(out)
    assert set(written) == {"reward_final", "reward_improves", "loss_finite", "grad_norm_bounded",
                            "generator_in_sync", "flops_recorded"}
    assert written["reward_final"].expr == "mean(train/reward, -10) > 0.339"
    assert written["flops_recorded"].expr == "min(total_flops) > 0 and min(theoretical_tflops) > 0"
    assert written["loss_finite"].why.startswith("A NaN or inf anywhere in training")


def test_a_statistic_no_run_can_measure_is_not_written(tmp_path, capsys):
    code, out, _ = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.6"), check("val", "mean(val/reward) > 0.1")]})
    assert code == 1
    assert "why not: no run logs val/reward" in capsys.readouterr().out
    assert set(by_name(out)) == {"reward_final"}


def test_a_metric_one_run_lacks_leaves_its_check_unwritten(tmp_path, capsys):
    def rows(step, seed):
        values = row(step, seed)
        return {k: v for k, v in values.items() if not (seed == 7 and k == "train/grad_norm")}

    code, out, runs = calibrate(tmp_path, {"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.6"), check("grad", "max(train/grad_norm) < 50")]},
        rows=rows)
    assert code == 1
    assert f"why not: seed 7 ({runs[1]}) never logged train/grad_norm" in capsys.readouterr().out
    assert set(by_name(out)) == {"reward_final"}


def test_a_run_that_did_not_complete_is_no_evidence(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "recipe", thresholds={"recipe": "r", "checks": [
        check("reward_final", "mean(train/reward, -10) > 0.6")]})
    runs = write_runs(tmp_path / "runs")
    (tmp_path / "runs" / "run-1" / "status.json").write_text('{"state": "failed", "exit_code": 1}')
    assert main(["calibrate", str(recipe), "--runs", *runs, "--out", str(tmp_path / "p.yaml")]) == 2
    assert "is no evidence to calibrate on: run_completed" in capsys.readouterr().err
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("args, message", [
    (["--runs", "R0"], "at least 2 runs"),
    (["--seeds", "42", "--runs", "R0", "R1"], "--runs and --seeds: choose one"),
    (["--seeds", "4x2,7"], "a comma-separated list of integers"),
    (["--runs", "R0", "R0"], "a run dir is given twice"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, args, message):
    recipe = write_recipe(tmp_path / "recipe", thresholds=None)
    runs = write_runs(tmp_path / "runs", (42, 7))
    args = [{"R0": runs[0], "R1": runs[1]}.get(a, a) for a in args]
    assert main(["calibrate", str(recipe), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value, side, expected", [
    (0.3394, "low", 0.339), (0.3394, "high", 0.34), (4.488, "high", 4.49), (-0.0512, "low", -0.0512),
    (-0.05123, "low", -0.0513), (1e-9, "high", 1e-9), (123456.0, "low", 123000.0),
])
def test_bounds_are_rounded_outward_to_three_digits(value, side, expected):
    assert rounded_outward(value, side) == expected


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False).filter(lambda v: abs(v) > 1e-12),
       st.sampled_from(["low", "high"]))
def test_rounding_never_moves_a_bound_toward_the_runs(value, side):
    bound = rounded_outward(value, side)
    inward = bound - value if side == "low" else value - bound
    assert inward <= 1e-9 * abs(value)  # outward, or on a 3-digit number within float noise of it
    assert float(f"{bound:.2e}") == bound


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=2, max_size=5),
       st.sampled_from([ORDINARY, LOAD]))
def test_a_lower_bound_under_positive_runs_passes_them_and_fails_a_run_that_did_nothing(values, margins):
    bound = placed(values, "low", margins=margins, typical=1.0).bound
    assert 0 < bound <= min(values)
