"""Our verdicts equal the reference check script's on the same data, for equivalent expressions.

The expected verdicts in tests/data/reference_metrics/parity_cases.json were produced by running
the reference's tests/check_metrics.py once on the fixtures beside it (see the file's _comment);
this test never runs or imports the reference. Cases cover mean, median, min, max, ratio_above,
ignore_top_p (our trim), negative and explicit ranges, a run resumed at step 11, a chained
comparison, a missing metric and an empty range.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.metrics import read_metrics
from harness.thresholds import evaluate

DATA = Path(__file__).parents[1] / "data" / "reference_metrics"
CASES = json.loads((DATA / "parity_cases.json").read_text())["cases"]


def test_the_cases_cover_passes_and_failures():
    verdicts = [case["passed"] for case in CASES]
    assert verdicts.count(True) >= 10 and verdicts.count(False) >= 10


@pytest.mark.parametrize("case", CASES, ids=[case["ours"] for case in CASES])
def test_same_verdict_and_value_as_the_reference(case):
    result = evaluate(case["ours"], read_metrics(DATA / case["fixture"]), expected_steps=None)
    assert result.ok == case["passed"], result.reason
    if case["value"] is None:
        assert result.value is None
    elif case["ours"][0].isdigit():
        # `low < f(x) < high`: the reference reports the text before the first '<' (the literal
        # low); we report the measured f(x).
        assert case["value"] == float(case["ours"].split(" < ")[0])
        measured = case["ours"].split(" < ")[1]
        expected = evaluate(f"{measured} == {measured}", read_metrics(DATA / case["fixture"]), expected_steps=None)
        assert result.value == expected.value
    else:
        assert result.value == pytest.approx(case["value"], rel=1e-12)
