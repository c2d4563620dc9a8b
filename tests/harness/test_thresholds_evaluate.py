"""evaluate() fails closed: no evidence is never a pass, and nothing raises out of it."""

from __future__ import annotations

import math

import pytest

from harness.metrics import Metrics
from harness.thresholds import Evaluation, evaluate, parse

RUN = Metrics.from_rows({
    "train/reward": {step: step / 10 for step in range(1, 21)},
    "train/loss": {step: 1.0 for step in range(1, 21)},
})


def test_a_holding_comparison_shows_its_values():
    result = evaluate("mean(train/reward, -5) > mean(train/reward, 1, 5) + 0.1", RUN, expected_steps=20)
    assert result == Evaluation(
        ok=True, value=1.8, metrics=("train/reward",),
        reason="holds: mean(train/reward, -5) = 1.8 > mean(train/reward, 1, 5) + 0.1 = 0.35",
    )


def test_a_failing_comparison_says_which_part_is_false():
    result = evaluate("last(train/loss) < 0.5 and max(train/reward) > 1", RUN, expected_steps=None)
    assert not result.ok and result.value is False
    assert result.reason == "fails: last(train/loss) = 1 < 0.5 is false; max(train/reward) = 2 > 1"
    assert result.metrics == ("train/loss", "train/reward")


def test_parsed_tree_is_accepted_too():
    assert evaluate(parse("count(train/loss) == 20"), RUN, expected_steps=20).ok


def test_absent_metric_lists_what_the_run_has():
    result = evaluate("mean(train/rewrd) > 0", RUN, expected_steps=None)
    assert not result.ok and result.value is None
    assert result.reason == ("metric 'train/rewrd' not in run; did you mean 'train/reward'? "
                             "(have: train/loss, train/reward)")


def test_absent_metric_in_the_other_branch_of_or_still_fails():
    result = evaluate("max(train/reward) > 0 or max(nope) > 0", RUN, expected_steps=None)
    assert not result.ok and "metric 'nope' not in run" in result.reason


def test_truncated_run_fails_even_where_the_logged_steps_would_pass():
    short = Metrics.from_rows({"train/reward": {step: 1.0 for step in range(1, 8)}})
    result = evaluate("mean(train/reward) > 0", short, expected_steps=20)
    assert not result.ok and result.reason == "run stopped at step 7 of 20"
    assert evaluate("mean(train/reward) > 0", short, expected_steps=7).ok
    assert evaluate("mean(train/reward) > 0", short, expected_steps=None).ok


def test_a_plain_unordered_mapping_is_read_in_step_order():
    plain = {"a": {3: 1.0, 1: 2.0}, "b": {}}
    result = evaluate("last(a) == 1 and first(a, -3) == 2", plain, expected_steps=3)
    assert result.ok, result.reason
    assert evaluate("max(a) > 0", plain, expected_steps=4).reason == "run stopped at step 3 of 4"


def test_run_without_metrics_fails():
    assert evaluate("max(a) > 0", Metrics.from_rows({}), expected_steps=None).reason == "run has no metrics"


def test_empty_range_fails_naming_the_range_and_the_steps_there_are():
    result = evaluate("mean(train/reward, 30, 40) > 0", RUN, expected_steps=None)
    assert not result.ok
    assert result.reason == "mean(train/reward, 30, 40): no steps in range [30, 40) (train/reward has steps 1..20)"
    assert not evaluate("mean(train/reward, -5, 16) > 0", RUN, expected_steps=None).ok  # [16, 16)


def test_nan_or_inf_in_the_range_fails_with_the_step():
    series = {step: 1.0 for step in range(1, 11)}
    run = Metrics.from_rows({"loss": {**series, 4: math.nan}, "gn": {**series, 9: -math.inf}})
    result = evaluate("max(loss) < 2", run, expected_steps=10)
    assert not result.ok and result.reason == "loss is nan at step 4 (read by max(loss))"
    assert evaluate("max(gn) < 2", run, expected_steps=10).reason == "gn is -inf at step 9 (read by max(gn))"
    assert not evaluate("mean(loss, trim=0.5) < 2", run, expected_steps=10).ok  # trimming does not hide it
    assert evaluate("max(loss, 5) < 2", run, expected_steps=10).ok  # outside the range: not read


def test_division_by_zero_fails():
    result = evaluate("max(train/reward) / (last(train/loss) - 1) > 0", RUN, expected_steps=None)
    assert not result.ok
    assert result.reason == ("division by zero: last(train/loss) - 1 is 0 in "
                             "max(train/reward) / (last(train/loss) - 1)")


def test_too_few_values_for_std_and_slope():
    for func in ("std", "slope"):
        result = evaluate(f"{func}(train/reward, -1) > 0", RUN, expected_steps=None)
        assert not result.ok and "needs at least 2 values, the range has 1" in result.reason


def test_arguments_computed_at_run_time_are_validated():
    run = Metrics.from_rows({"x": {1: 1.0, 2: 2.0}, "half": {1: 0.5}, "two": {1: 2.0}})
    assert evaluate("mean(x, trim=last(half)) == 1", run, expected_steps=None).ok
    assert "trim = 2 is outside [0, 1)" in evaluate("mean(x, trim=last(two)) > 0", run, expected_steps=None).reason
    assert "start = 0.5 is not a whole step" in evaluate("mean(x, last(half)) > 0", run, expected_steps=None).reason
    result = evaluate("percentile(x, last(two) * 100) > 0", run, expected_steps=None)
    assert "q = 200 is outside [0, 100]" in result.reason
    assert evaluate("ratio_above(x, mean(x)) == 0.5", run, expected_steps=None).ok


def test_syntax_errors_become_failing_verdicts():
    result = evaluate("mean(x) >", RUN, expected_steps=None)
    assert not result.ok and result.reason == (
        "syntax error: expected a number, '(' or a function call, got end of expression at column 10")


def test_value_of_a_non_comparison_is_its_truth():
    result = evaluate("all_finite(train/loss)", RUN, expected_steps=20)
    assert result.value is True and result.reason == "holds: all_finite(train/loss) = True"


def test_all_finite_names_the_first_bad_step():
    run = Metrics.from_rows({"loss": {1: 1.0, 2: math.inf, 3: math.nan}, "x": {1: 1.0, 2: 1.0, 3: 1.0}})
    result = evaluate("all_finite(loss) and max(x) < 2", run, expected_steps=3)
    assert not result.ok and result.value is False
    assert result.reason == "fails: all_finite(loss) is false: loss is inf at step 2; max(x) = 1 < 2"


def test_value_is_the_measured_operand_not_a_literal_bound():
    result = evaluate("0.5 < max(train/reward) < 3", RUN, expected_steps=None)
    assert result.ok and result.value == 2.0



@pytest.mark.parametrize("expr", ["1 < 2", "not 1 > 2", "2 * 3 >= 6"])
def test_a_check_that_reads_no_metric_fails(expr):
    """docs/thresholds.md: a check with no evidence fails (issue 12, item 7)."""
    result = evaluate(expr, RUN, expected_steps=None)
    assert not result.ok and "reads no metric" in result.reason


@pytest.mark.parametrize("expr", ["percentile(x, 50) > 0", "percentile(x, 50) != 1", "not percentile(x, 50) < 0"])
def test_a_comparison_over_a_non_finite_value_fails(expr):
    """Finite inputs can still give inf (here -1.7e308 + inf): inf > 0 is no evidence (issue 12, item 1)."""
    run = Metrics.from_rows({"x": {1: -1.7e308, 2: 1.7e308}})
    result = evaluate(expr, run, expected_steps=2)
    assert not result.ok and "percentile(x, 50) is inf, which cannot be compared" in result.reason
