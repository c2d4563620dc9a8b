"""Every function, with step ranges and trimming, against values computed by hand.

The series is steps 1..10 with values 3 1 4 1 5 9 2 6 5 3 (sum 39; sorted 1 1 2 3 3 4 5 5 6 9).
"""

from __future__ import annotations

import math

import pytest

from harness.thresholds import evaluate

VALUES = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
RUN = {"x": {step: float(v) for step, v in enumerate(VALUES, start=1)}}
RESUMED = {"x": {step + 10: value for step, value in RUN["x"].items()}}  # steps 11..20


CASES = [
    ("mean(x)", 3.9),                          # 39 / 10
    ("mean(x, -5)", 5.0),                      # steps 6..10: 9 2 6 5 3
    ("mean(x, 1, 5)", 2.25),                   # steps 1..4 (end exclusive): 3 1 4 1
    ("mean(x, -6, -1)", 5.4),                  # steps 5..9: 5 9 2 6 5 (the reference's favourite)
    ("mean(x, start=3, end=0)", 35 / 8),       # steps 3..10, end=0 = through the last step
    ("mean(x, 0)", 3.9),                       # start 0 is before step 1: everything
    ("mean(x, trim=0.1)", 30 / 9),             # keep the lowest int(10 * 0.9) = 9: drops the 9
    ("mean(x, trim=0.05)", 30 / 9),            # int(10 * 0.95) = 9
    ("mean(x, trim=0.2, trim_low=0.2)", 22 / 6),  # drops 9 6 and 1 1: 2 3 3 4 5 5
    ("mean(x, -2, trim=0.9)", 3.0),            # steps 9..10: 5 3, int(2 * 0.1) = 0 -> keep one (the lowest)
    ("median(x)", 3.5),                        # (3 + 4) / 2
    ("median(x, -5)", 5.0),                    # 2 3 5 6 9
    ("median(x, 1, 4)", 3.0),                  # 3 1 4
    ("min(x, -5)", 2.0),
    ("max(x, 1, 5)", 4.0),
    ("max(x, trim=0.1)", 6.0),
    ("min(x, trim_low=0.2)", 2.0),
    ("first(x, -5)", 9.0),
    ("last(x, 1, 5)", 1.0),                    # step 4
    ("last(x, trim=0.6)", 2.0),                # keeps 1 1 2 3 at steps 2 4 7 1; last by step is step 7
    ("first(x, trim=0.1)", 3.0),
    ("std(x, 1, 5)", 1.5),                     # squares 0.5625 1.5625 3.0625 1.5625 = 6.75; / 3 = 2.25
    ("slope(x, 1, 5)", -0.3),                  # sum dx*dy = -1.5, sum dx^2 = 5
    ("slope(x, -2)", -2.0),                    # 5 -> 3 over one step
    ("percentile(x, 90)", 6.3),                # position 8.1: 6 + 0.1 * (9 - 6)
    ("percentile(x, 0)", 1.0),
    ("percentile(x, 100)", 9.0),
    ("percentile(x, 50, -5)", 5.0),
    ("percentile(x, q=25, end=5)", 1.0),       # 1 1 3 4: position 0.75 -> 1
    ("ratio_above(x, 5)", 0.4),                # 5 9 6 5 (inclusive, like the reference)
    ("ratio_above(x, 5, -5)", 0.6),            # 9 6 5 of 9 2 6 5 3
    ("ratio_above(x, 5, trim=0.1)", 3 / 9),
    ("count(x)", 10.0),
    ("count(x, -5)", 5.0),
    ("count(x, 1, 5, trim=0.5)", 2.0),         # int(4 * 0.5)
]


@pytest.mark.parametrize("expr, expected", CASES)
def test_function_values(expr, expected):
    result = evaluate(f"{expr} == {expr}", RUN, expected_steps=None)
    assert result.ok, result.reason
    assert result.value == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("expr, expected", [
    ("mean(x, -5)", 5.0), ("mean(x, -6, -1)", 5.4), ("mean(x, 11, 15)", 2.25), ("first(x)", 3.0),
])
def test_negative_ranges_count_from_the_last_step_of_a_resumed_run(expr, expected):
    result = evaluate(f"{expr} == {expr}", RESUMED, expected_steps=20)
    assert result.ok and result.value == pytest.approx(expected)


def test_all_finite_sees_nan_and_inf():
    nan_run = {"x": {1: 1.0, 2: math.nan, 3: 2.0}, "y": {1: math.inf}}
    assert evaluate("all_finite(x)", RUN, expected_steps=None).ok
    assert not evaluate("all_finite(x)", nan_run, expected_steps=None).ok
    assert not evaluate("all_finite(y)", nan_run, expected_steps=None).ok
    assert evaluate("all_finite(x, -1)", nan_run, expected_steps=None).ok
    assert evaluate("count(x) == 3", nan_run, expected_steps=None).ok


def test_arithmetic_between_functions():
    result = evaluate("(max(x) - min(x)) / 2 + -mean(x, 1, 5) * 2 == -0.5", RUN, expected_steps=None)
    assert result.ok, result.reason  # (9 - 1) / 2 - 2.25 * 2
