"""Completion, invariants and parity verdicts: each fails closed, with a reason."""

from __future__ import annotations

import json
import math

import pytest

from harness.checks.completion import check_completion
from harness.checks.invariants import InvariantsError, check_invariants, read_invariants, required_checks
from harness.checks.parity import compare_metrics

DONE = {"state": "completed", "exit_code": 0, "error": None, "dead_worker": None, "last_step": 3, "num_steps": 3}


def test_completed_run_with_every_step_passes():
    v = check_completion(status=DONE, steps={1, 2, 3}, expected_steps=3)
    assert v.ok and "3 of 3" in v.message


def test_truncated_run_fails_even_if_the_engine_says_completed():
    v = check_completion(status=DONE, steps={1, 2}, expected_steps=3)
    assert not v.ok and "miss 1 of 3 steps (first: 3)" in v.message


def test_failed_state_and_missing_status_fail():
    assert not check_completion(status=None, steps={1}, expected_steps=1).ok
    v = check_completion(status={"state": "timeout", "last_step": 2, "error": "time limit 60 s"}, steps={1, 2},
                         expected_steps=3)
    assert not v.ok and "'timeout' at step 2: time limit 60 s" in v.message


@pytest.mark.parametrize("change, message", [
    ({"exit_code": 1}, "with exit_code 1 (must be 0)"),
    ({"exit_code": None}, "with exit_code None"),
    ({"exit_code": False}, "with exit_code False"),
    ({"exit_code": "0"}, "with exit_code '0'"),
    ({"error": "OOM on rank 1"}, "records an error: 'OOM on rank 1'"),
    ({"dead_worker": "policy-1"}, "records a dead worker: 'policy-1'"),
    ({"last_step": 2}, "at last_step 2 of num_steps 3"),
    ({"last_step": "3"}, "last_step is '3', not a step count"),
    ({"num_steps": 3.0}, "num_steps is 3.0, not a step count"),
    ({"last_step": 5, "num_steps": 5}, "plans 5 steps, the recipe 3"),
])
def test_an_inconsistent_completed_status_fails(change, message):
    """'completed' alone was trusted: exit code 1, an error, a dead worker all passed (issue 12, item 3)."""
    v = check_completion(status={**DONE, **change}, steps={1, 2, 3}, expected_steps=3)
    assert not v.ok and message in v.message


def test_metrics_past_the_planned_steps_fail():
    v = check_completion(status=DONE, steps={1, 2, 3, 4}, expected_steps=3)
    assert not v.ok and "step 4, outside the recipe's 1..3" in v.message


def record(check, ok=True, step=1, **extra):
    return {"check": check, "ok": ok, "step": step, **extra}


def test_invariants_pass_when_every_required_kind_holds():
    recipe = {"data_plane": {"backend": "tq"}, "env": {"A": "1"}}
    records = [record("flops_fields"), record("dispatch_row_order", method="train"), record("env_propagated")]
    verdicts = check_invariants(records, required=required_checks(recipe))
    assert [v.ok for v in verdicts] == [True, True, True]


def test_a_violation_fails_naming_the_first_step_and_method():
    records = [record("dispatch_row_order"), record("dispatch_row_order", ok=False, step=4, method="get_logprobs",
                                                    detail="row 0 has key b, expected a")]
    [verdict] = [v for v in check_invariants(records, required=[]) if v.name == "invariant:dispatch_row_order"]
    assert not verdict.ok
    assert "1 of 2" in verdict.message and "step 4, get_logprobs" in verdict.message and "key b" in verdict.message


def test_no_record_of_a_required_check_fails():
    verdicts = check_invariants([record("flops_fields")], required=["flops_fields", "dispatch_row_order"])
    failed = [v for v in verdicts if not v.ok]
    assert [v.name for v in failed] == ["invariant:dispatch_row_order"]
    assert "no dispatch_row_order check was recorded" in failed[0].message


def test_length_buckets_require_the_generation_row_order_record():
    assert "generation_row_order" in required_checks({"generation": {"length_buckets": 4}})
    assert "generation_row_order" not in required_checks({"generation": {"length_buckets": 1}})
    assert "generation_row_order" not in required_checks({})


def test_replicas_asked_for_by_number_require_the_generation_row_order_record():
    assert "generation_row_order" in required_checks({"generation": {"replicas": 2}})
    assert "generation_row_order" not in required_checks({"generation": {"replicas": 1}})
    assert "generation_row_order" not in required_checks({"generation": {"replicas": None}})  # the engine's to derive


def test_an_empty_invariants_file_fails(tmp_path):
    (tmp_path / "invariants.jsonl").write_text("")
    verdicts = check_invariants(read_invariants(tmp_path / "invariants.jsonl"), required=[])
    assert verdicts and not any(v.ok for v in verdicts)


@pytest.mark.parametrize("tail", ['{"check": "flo', '{"check": "flops_fields", "ok": fal'])
def test_a_torn_last_invariant_line_is_a_failure_naming_its_line(tmp_path, tail):
    """The torn record may be the failing one of a crash (issue 12, item 4)."""
    path = tmp_path / "invariants.jsonl"
    path.write_text(json.dumps(record("flops_fields")) + "\n" + tail)
    with pytest.raises(InvariantsError, match=r"invariants.jsonl:2: not a JSON record"):
        read_invariants(path)


@pytest.mark.parametrize("ok", ["false", "true", 0, 1, None, [], "yes"])
def test_only_the_json_boolean_true_holds(ok):
    """`"ok": "false"` was truthy and passed (issue 12, item 4)."""
    [verdict] = check_invariants([record("flops_fields"), record("flops_fields", ok=ok, step=2)], required=[])
    assert not verdict.ok and "first at step 2" in verdict.message and f"ok is {ok!r}" in verdict.message


def series(values, start=1):
    return {start + i: v for i, v in enumerate(values)}


def test_parity_exact_match_passes_and_ignores_timing():
    a = {"train/loss": series([1.0, 0.5]), "train/logprob_digest": series([3.0, 4.0]),
         "timing/train/total": series([1, 2])}
    b = {"train/loss": series([1.0, 0.5]), "train/logprob_digest": series([3.0, 4.0]),
         "timing/train/total": series([9, 9])}
    assert all(v.ok for v in compare_metrics(a, b))


def test_parity_names_the_first_diverging_step_and_metric():
    a = {"train/loss": series([1.0, 0.5, 0.2]), "train/reward": series([0.1, 0.2, 0.3]),
         "train/logprob_digest": series([1.0, 2.0, 3.0])}
    b = {"train/loss": series([1.0, 0.5, 0.2]), "train/reward": series([0.1, 0.25, 0.3]),
         "train/logprob_digest": series([1.0, 2.0, 3.5])}
    verdicts = {v.name: v for v in compare_metrics(a, b, names=("legacy", "tq"))}
    assert not verdicts["parity:metrics"].ok
    assert "step 2, train/reward: legacy=0.2 tq=0.25" in verdicts["parity:metrics"].message
    assert "step 3" in verdicts["parity:logprob_digest"].message


def test_parity_fails_when_one_path_drops_a_metric():
    a = {"train/loss": series([1.0]), "total_flops": series([5.0]), "train/logprob_digest": series([1.0])}
    b = {"train/loss": series([1.0]), "train/logprob_digest": series([1.0])}
    [metric_set] = [v for v in compare_metrics(a, b, names=("legacy", "tq")) if v.name == "parity:metric_set"]
    assert not metric_set.ok and "only in legacy: total_flops" in metric_set.message


def test_parity_tolerance_is_relative():
    a = {"x": series([100.0]), "train/logprob_digest": series([1.0])}
    b = {"x": series([100.5]), "train/logprob_digest": series([1.0])}
    assert not all(v.ok for v in compare_metrics(a, b))
    assert all(v.ok for v in compare_metrics(a, b, tolerance=0.01))


def test_parity_against_a_run_that_logged_nothing_names_step_one():
    a = {"train/loss": series([1.0, 0.5]), "train/logprob_digest": series([1.0, 2.0])}
    [metrics] = [v for v in compare_metrics(a, {}, names=("legacy", "tq")) if v.name == "parity:metrics"]
    assert not metrics.ok and metrics.message == "first divergence at step 1: tq logged no metrics"


def test_parity_of_identical_runs_holding_an_inf_passes_at_any_tolerance():
    """inf == inf of one sign; `inf - inf` is NaN and used to fail (issue 12, item 8)."""
    a = {"x": series([1.0, math.inf, -math.inf]), "train/logprob_digest": series([1.0, 2.0, 3.0])}
    for tolerance in (0.0, 1e-6, 0.5):
        assert all(v.ok for v in compare_metrics(a, a, tolerance=tolerance))
    b = {"x": series([1.0, -math.inf, -math.inf]), "train/logprob_digest": series([1.0, 2.0, 3.0])}
    assert not all(v.ok for v in compare_metrics(a, b, tolerance=0.5))


def test_parity_fails_on_a_nan_in_either_run_naming_it():
    a = {"x": series([1.0, math.nan]), "train/logprob_digest": series([1.0, 2.0])}
    verdicts = {v.name: v for v in compare_metrics(a, a, names=("legacy", "tq"), tolerance=0.1)}
    assert not verdicts["parity:metrics"].ok
    assert verdicts["parity:metrics"].message == (
        "first divergence at step 2, x: legacy is nan, which cannot be compared")
