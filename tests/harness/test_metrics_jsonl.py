"""metrics.jsonl reader: torn last line tolerated, corruption elsewhere an error, NaN kept."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from harness.metrics import Metrics, MetricsError, read_metrics


def _write(path, lines: list[str], *, newline_at_end: bool = True) -> None:
    text = "\n".join(lines) + ("\n" if newline_at_end else "")
    path.write_text(text)


def test_reads_steps_in_order(tmp_path):
    _write(tmp_path / "metrics.jsonl", [
        json.dumps({"step": 1, "train/reward": 0.25, "train/loss": 3}),
        json.dumps({"step": 2, "train/reward": 0.5}),
    ])
    metrics = read_metrics(tmp_path)
    assert isinstance(metrics, Metrics)
    assert list(metrics) == ["train/reward", "train/loss"]
    assert list(metrics["train/reward"].items()) == [(1, 0.25), (2, 0.5)]
    assert metrics["train/loss"] == {1: 3.0} and type(metrics["train/loss"][1]) is float
    assert metrics.last_step == 2
    assert metrics.notes == ()


@pytest.mark.parametrize("value", [None, True, False, "x", "", [1], {"a": 1}])
def test_a_value_that_is_not_a_number_is_kept_as_nan(tmp_path, value):
    """Dropping it would let all_finite pass over a diverged metric (issue 12)."""
    _write(tmp_path / "metrics.jsonl", [json.dumps({"step": 1, "loss": 1.0}), json.dumps({"step": 2, "loss": value})])
    series = read_metrics(tmp_path)["loss"]
    assert series[1] == 1.0 and math.isnan(series[2])


def test_old_nan_and_inf_strings_stay_non_finite(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": "nan", "b": "inf", "c": "-inf"}'])
    metrics = read_metrics(tmp_path)
    assert math.isnan(metrics["a"][1]) and metrics["b"][1] == math.inf and metrics["c"][1] == -math.inf


def test_a_huge_integer_is_inf_and_a_too_long_one_an_error_naming_the_line(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1%s}' % ("0" * 400)])
    assert read_metrics(tmp_path)["a"][1] == math.inf
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1.0}', '{"step": 2, "a": 1%s}' % ("0" * 4300)])
    with pytest.raises(MetricsError, match=r"metrics.jsonl:2: not readable as numbers"):
        read_metrics(tmp_path)


def test_nan_and_inf_are_kept(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "loss": NaN, "gn": Infinity}', '{"step": 2, "loss": -Infinity}'])
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert math.isnan(metrics["loss"][1]) and metrics["loss"][2] == -math.inf and metrics["gn"][1] == math.inf


def test_torn_last_line_is_ignored_with_a_note(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1.0}', '{"step": 2, "a": 2.0}', '{"step": 3, "a'],
           newline_at_end=False)
    metrics = read_metrics(tmp_path)
    assert metrics["a"] == {1: 1.0, 2: 2.0}
    assert len(metrics.notes) == 1 and "metrics.jsonl:3" in metrics.notes[0] and "torn" in metrics.notes[0]


def test_bad_last_line_with_newline_is_corruption_not_a_tear(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1.0}', '{"step": 2, "a'])
    with pytest.raises(MetricsError, match=r"metrics.jsonl:2: not valid JSON"):
        read_metrics(tmp_path)


def test_torn_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1.0}', '{"step": 2, "a', '{"step": 3, "a": 3.0}'])
    with pytest.raises(MetricsError) as info:
        read_metrics(tmp_path)
    assert "metrics.jsonl:2:" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("line, message", [
    ('{"a": 1.0}', "'step' must be an integer"),
    ('{"step": "3", "a": 1.0}', "'step' must be an integer"),
    ('{"step": 1.5}', "'step' must be an integer"),
    ("[1, 2]", "expected a JSON object"),
    ('{"step": 2}, {"step": 4}', "not valid JSON"),
])
def test_bad_records_are_errors(tmp_path, line, message):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1, "a": 1.0}', line, '{"step": 3, "a": 1.0}'])
    with pytest.raises(MetricsError, match=message):
        read_metrics(tmp_path)


def test_integral_float_step_and_blank_lines_are_accepted(tmp_path):
    _write(tmp_path / "metrics.jsonl", ['{"step": 1.0, "a": 1.0}', "", '{"step": 2, "a": 2.0}'])
    assert read_metrics(tmp_path)["a"] == {1: 1.0, 2: 2.0}


@pytest.mark.parametrize("steps, line, message", [
    ([1, 2, 2], 3, "step 2 after step 2"),        # repeated (the engine cuts back on resume: never)
    ([1, 3, 2], 3, "step 2 after step 3"),        # decreasing
    ([3, 2, 1], 2, "step 2 after step 3"),        # reversed
])
def test_steps_must_strictly_increase(tmp_path, steps, line, message):
    _write(tmp_path / "metrics.jsonl", [json.dumps({"step": s, "a": 1.0}) for s in steps])
    with pytest.raises(MetricsError, match=rf"metrics.jsonl:{line}: {message}"):
        read_metrics(tmp_path)


def test_empty_file_reads_as_no_metrics(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    metrics = read_metrics(tmp_path)
    assert len(metrics) == 0 and metrics.last_step is None


def test_missing_run_dir_and_unknown_format(tmp_path):
    with pytest.raises(MetricsError, match="no metrics found"):
        read_metrics(tmp_path)
    with pytest.raises(MetricsError, match="no such file"):
        read_metrics(tmp_path / "nope.jsonl")
    (tmp_path / "m.csv").write_text("step,a\n")
    with pytest.raises(MetricsError, match="unknown metrics file type"):
        read_metrics(tmp_path / "m.csv")
    with pytest.raises(ValueError, match="format"):
        read_metrics(tmp_path, format="csv")


@pytest.mark.timeout(20)
def test_ten_thousand_steps_of_thirty_metrics(tmp_path):
    """The size `harness check` must handle quickly; correctness here, timing in bench/bench_check.py."""
    with open(tmp_path / "metrics.jsonl", "w") as out:
        for step in range(1, 10_001):
            out.write(json.dumps({"step": step, **{f"m/{i}": step * 0.5 + i for i in range(30)}}) + "\n")
    metrics = read_metrics(tmp_path)
    assert len(metrics) == 30 and metrics.last_step == 10_000
    assert metrics["m/29"][10_000] == 5029.0


def test_importing_the_readers_stays_light():
    code = ("import sys, harness.metrics, harness.thresholds; "
            "print([m for m in ('torch', 'ray', 'numpy', 'tensorboard', 'rl') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
