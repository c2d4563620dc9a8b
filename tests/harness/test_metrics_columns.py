"""The fast paths of `harness check`: a clean metrics.jsonl read as lazy columns, ranges found by
bisection, and the union of logged steps, each checked against the plain computation."""

from __future__ import annotations

import json
import math
import random

import pytest

from harness.metrics import MetricsError, read_metrics
from harness.metrics.series import Columns, Metrics
from harness.thresholds import evaluate
from harness.thresholds.functions import select, trim


def _write(path, rows, *, end="\n"):
    path.write_text("".join(json.dumps(row) + end for row in rows))
    return path


def _plain(rows):
    """What the reader must give: metric -> {step: float}, non-numbers as NaN, steps in order."""
    series = {}
    for row in rows:
        for name, value in row.items():
            if name != "step":
                number = float(value) if type(value) in (int, float) else math.nan
                series.setdefault(name, {})[row["step"]] = number
    return series


def _same(a, b):
    assert list(a) == list(b)
    for name in a:
        assert list(a[name]) == list(b[name]), name
        assert all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a[name].values(), b[name].values()))


def test_a_clean_file_is_read_as_columns_built_when_first_read(tmp_path):
    rows = [{"step": s, "a": s * 0.5, "b": s, "c": None if s == 2 else "x", "d": 1.0} for s in range(1, 6)]
    metrics = read_metrics(_write(tmp_path / "metrics.jsonl", rows))
    assert isinstance(metrics.series, Columns)
    assert (metrics.first_step, metrics.last_step, len(metrics)) == (1, 5, 4)
    assert "a" in metrics and "step" not in metrics
    assert metrics.series._built == {}
    assert evaluate("mean(a) > 1", metrics, expected_steps=5).ok
    assert list(metrics.series._built) == ["a"]  # the check read one column: one was converted
    _same(metrics, _plain(rows))


@pytest.mark.parametrize("change", ["missing_key", "extra_key", "crlf", "float_step", "torn_last", "blank_line"])
def test_any_other_file_reads_as_the_line_by_line_path_does(tmp_path, change):
    rows = [{"step": s, "a": s * 0.5, "b": 1.0 / s} for s in range(1, 6)]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if change == "missing_key":
        del rows[2]["b"]
        text = "".join(json.dumps(row) + "\n" for row in rows)
    elif change == "extra_key":
        rows[3]["c"] = 7.0
        text = "".join(json.dumps(row) + "\n" for row in rows)
    elif change == "crlf":
        text = text.replace("\n", "\r\n")
    elif change == "float_step":
        text = text.replace('"step": 3,', '"step": 3.0,')
    elif change == "torn_last":
        text += '{"step": 6, "a":'
    elif change == "blank_line":
        text = text.replace("\n", "\n\n", 1)
    (tmp_path / "metrics.jsonl").write_text(text)
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    _same(metrics, _plain(rows))
    assert bool(metrics.notes) == (change == "torn_last")


@pytest.mark.parametrize("raw", [b'{"step": 1, "a": "\xed\xa0\x80"}\n', b'{"step": 1, "a": "\xff"}\n'],
                         ids=["lone_surrogate", "bad_byte"])
def test_bytes_that_are_not_utf8_are_refused_on_the_fast_path_too(tmp_path, raw):
    (tmp_path / "metrics.jsonl").write_bytes(raw)
    with pytest.raises(MetricsError, match="not valid UTF-8"):
        read_metrics(tmp_path / "metrics.jsonl")


@pytest.mark.parametrize("text", ['{"step": 1, "a": 1}{"step": 2, "a": 2}\n',
                                  '{"step": 1, "a": 1},{"step": 2, "a": 2}\n',
                                  '{"step": 2, "a": 1}\n{"step": 2, "a": 2}\n',
                                  '[1, 2]\n{"step": 2, "a": 2}\n'])
def test_a_corrupt_file_is_still_an_error(tmp_path, text):
    (tmp_path / "metrics.jsonl").write_text(text)
    with pytest.raises(MetricsError, match="metrics.jsonl:[12]"):
        read_metrics(tmp_path / "metrics.jsonl")


@pytest.mark.parametrize("seed", range(20))
def test_logged_steps_is_the_union_of_the_series_steps(seed):
    rng = random.Random(seed)
    series = {}
    for name in "abc":
        steps = sorted(rng.sample(range(1, 30), rng.randint(1, 29)))
        series[name] = {s: 1.0 for s in steps}
    if seed % 2:
        series["full"] = {s: 1.0 for s in range(min(min(v) for v in series.values()),
                                                   max(max(v) for v in series.values()) + 1)}
    metrics = Metrics.from_rows(series)
    assert set(metrics.logged_steps()) == set().union(*(s.keys() for s in series.values()))


@pytest.mark.parametrize("seed", range(30))
def test_select_and_trim_match_the_plain_definitions(seed):
    rng = random.Random(seed)
    steps = sorted(rng.sample(range(1, 60), rng.randint(1, 40)))
    series = {s: rng.choice([rng.random(), 0.5]) for s in steps}
    start, end = rng.randint(-60, 60), rng.randint(-60, 60)
    points = select(series, start, end)
    last = steps[-1]
    lo, hi = start + last + 1 if start < 0 else start, end + last + 1 if end <= 0 else end
    plain = [(s, v) for s, v in series.items() if lo <= s < hi]
    assert list(zip(points.steps, points.values)) == plain
    if plain:
        top, low = rng.choice([0.0, 0.1, 0.5]), rng.choice([0.0, 0.2])
        by_value = sorted(plain, key=lambda p: (p[1], p[0]))
        n = len(by_value)
        keep_top = max(int(n * (1 - top)), 1) if top > 0 else n
        keep_low = max(int(n * (1 - low)), 1) if low > 0 else n
        kept = sorted(by_value[n - keep_low: keep_top])
        if kept:
            trimmed = trim(points, top, low)
            assert list(zip(trimmed.steps, trimmed.values)) == kept
