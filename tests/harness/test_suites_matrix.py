"""Selecting, sharding and emitting the matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import UsageError
from harness.suites import Entry, Estimate, Shard, Suite, format_matrix, matrix_rows, select, shard_of, split_shards


def entry(entry_id: str, **kw) -> Entry:
    return Entry(id=entry_id, recipe=Path("recipes") / f"{entry_id}.yaml", hardware=kw.pop("hardware", "h200"), **kw)


def estimate(hours: float) -> Estimate:
    return Estimate(recipe="r", hours=hours, gpu_hours=16 * hours, world=16, timeout_s=hours * 3600,
                    source="estimated_hours")


def test_shards_balance_estimated_hours_longest_first():
    hours = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 2.0, "f": 1.0}
    entries = [entry(k) for k in hours]
    shards = split_shards(entries, {k: estimate(v) for k, v in hours.items()}, 3)
    loads = [sum(hours[e.id] for e in shard) for shard in shards]
    assert loads == [6.0, 6.0, 6.0]
    assert sorted(e.id for shard in shards for e in shard) == sorted(hours)  # each entry exactly once


def test_shard_of_keeps_suite_order_and_is_deterministic():
    hours = {"a": 1.0, "b": 2.0, "c": 3.0}
    entries = [entry(k) for k in hours]
    ests = {k: estimate(v) for k, v in hours.items()}
    first = [e.id for e in shard_of(entries, ests, Shard(index=1, count=2))]
    second = [e.id for e in shard_of(entries, ests, Shard(index=2, count=2))]
    assert first == ["c"] and second == ["a", "b"]
    assert shard_of(entries, ests, None) == entries


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--shard"):
        Shard.parse(text)


def test_select_by_hardware_tags_and_ids():
    suite = Suite(name="s", path=Path("s.yaml"), budget_gpu_hours=0, entries=(
        entry("a", tags=("perf",)), entry("b", hardware="cpu", tags=("smoke",)), entry("c", tags=("smoke", "moe"))))
    assert [e.id for e in select(suite, hardware=["h200"])] == ["a", "c"]
    assert [e.id for e in select(suite, tags=["smoke"])] == ["b", "c"]
    assert [e.id for e in select(suite, ids=["b"])] == ["b"]
    with pytest.raises(UsageError, match="no entry 'z'"):
        select(suite, ids=["z"])


def test_github_format_is_strategy_matrix_of_enabled_entries():
    import datetime as dt

    from harness.suites import Disabled
    suite = Suite(name="s", path=Path("s.yaml"), budget_gpu_hours=0, entries=(
        entry("a", overrides=("x.y=1", "env.A='b c'")),
        entry("b", disabled=Disabled(reason="r", owner="o", until=dt.date(2027, 1, 1)))))
    rows = matrix_rows(suite, suite.entries, {"a": estimate(2.0), "b": estimate(1.0)})
    data = json.loads(format_matrix(rows, "github"))
    assert list(data) == ["include"] and [r["id"] for r in data["include"]] == ["a"]
    row = data["include"][0]
    assert row["overrides"] == "x.y=1 'env.A='\"'\"'b c'\"'\"''" and row["gpu_hours"] == 32.0
    assert [r["id"] for r in json.loads(format_matrix(rows, "json"))] == ["a", "b"]
    text = format_matrix(rows, "text")
    assert "b (disabled)" in text and text.splitlines()[0].split()[:3] == ["id", "hardware", "scale"]


def test_harness_matrix_on_the_repository_suites(capsys):
    assert main(["matrix", "release", "--format", "github", "--shard", "2/2"]) == 0
    rows = json.loads(capsys.readouterr().out)["include"]
    assert [r["id"] for r in rows] == ["qwen3_5_35b-tq"] and rows[0]["hardware"] == "h200"
    assert main(["matrix", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "arith_grpo_cpu" in out and "qwen3_5_35b-tiny" in out and "0.0 GPU-hours" in out


def test_harness_matrix_unknown_suite_is_a_usage_error(capsys):
    assert main(["matrix", "nightlly"]) == 2
    assert "did you mean 'nightly'" in capsys.readouterr().err
