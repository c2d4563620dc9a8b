"""The SQLite history: rows round-trip, queries filter, key metrics come from the run dir."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from harness.history import HistoryRow, append, check_verdicts, current_commit, key_metrics, query


def row(**kw) -> HistoryRow:
    base = dict(time="2026-11-30T00:00:00+00:00", suite="nightly", entry="qwen", recipe="qwen3_5_35b",
                recipe_path="/r/recipes/qwen3_5_35b.yaml", commit_sha="abc", hardware="h200", verdict="pass")
    return HistoryRow(**{**base, **kw})


def test_rows_round_trip_oldest_first(tmp_path):
    db = tmp_path / "sub" / "history.sqlite"
    first = append(db, row(verdicts={"reward": True, "kl": False}, step_time_s=1.5, tokens_per_s=900.0))
    second = append(db, row(entry="other", verdict="fail", attempts=2))
    assert (first, second) == (1, 2)
    got = query(db)
    assert [r.id for r in got] == [1, 2]
    assert got[0].verdicts == {"kl": False, "reward": True} and got[0].step_time_s == 1.5
    assert got[1].attempts == 2 and got[1].tokens_per_s is None


def test_query_filters_and_matches_recipe_by_name_or_file(tmp_path):
    db = tmp_path / "h.sqlite"
    append(db, row())
    append(db, row(entry="qwen-tq", hardware="h100"))
    append(db, row(recipe="arith", recipe_path="/r/recipes/arith.yaml", entry="arith", hardware="cpu"))
    assert len(query(db, recipe="qwen3_5_35b")) == 2
    assert len(query(db, recipe="recipes/qwen3_5_35b.yaml")) == 2
    assert [r.entry for r in query(db, hardware="h100")] == ["qwen-tq"]
    assert [r.entry for r in query(db, last=2)] == ["qwen-tq", "arith"]
    assert query(tmp_path / "none.sqlite") == []


def test_a_newer_schema_is_refused(tmp_path):
    db = tmp_path / "h.sqlite"
    append(db, row())
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 9")
    with pytest.raises(ValueError, match="schema version 9"):
        query(db)


def test_unknown_verdict_is_our_bug():
    with pytest.raises(AssertionError):
        row(verdict="flaky")


def write_run(run_dir: Path, rows: list[dict], status: dict | None = None) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if status is not None:
        (run_dir / "status.json").write_text(json.dumps(status))
    return run_dir


def test_key_metrics_leave_out_the_warm_up_step(tmp_path):
    run = write_run(tmp_path / "run", [
        {"step": 1, "train/reward": 0.1, "timing/train/total": 9.0, "performance/tokens_per_sec_per_gpu": 10.0},
        {"step": 2, "train/reward": 0.4, "timing/train/total": 2.0, "performance/tokens_per_sec_per_gpu": 100.0},
        {"step": 3, "train/reward": 0.7, "timing/train/total": 4.0, "performance/tokens_per_sec_per_gpu": 200.0},
    ], status={"state": "completed", "wall_s": 31.5})
    numbers = key_metrics(run)
    assert numbers.final_reward == 0.7
    assert numbers.step_time_s == 3.0 and numbers.tokens_per_s == 150.0 and numbers.wall_s == 31.5


def test_key_metrics_of_a_one_step_run_and_of_an_empty_dir(tmp_path):
    run = write_run(tmp_path / "one", [{"step": 1, "timing/train/total": 5.0}])
    numbers = key_metrics(run)
    assert numbers.step_time_s == 5.0 and numbers.final_reward is None and numbers.wall_s is None
    (tmp_path / "empty").mkdir()
    assert key_metrics(tmp_path / "empty").step_time_s is None


def test_check_verdicts_from_result_json(tmp_path):
    verdicts = [{"name": "a", "ok": True}, {"name": "b", "ok": False}]
    (tmp_path / "result.json").write_text(json.dumps({"verdicts": verdicts}))
    assert check_verdicts(tmp_path) == {"a": True, "b": False}
    assert check_verdicts(tmp_path / "missing") == {}


def test_commit_prefers_github_sha(monkeypatch, tmp_path):
    monkeypatch.delenv("HARNESS_COMMIT", raising=False)
    monkeypatch.setenv("GITHUB_SHA", "f" * 40)
    assert current_commit() == "f" * 40
    monkeypatch.setenv("HARNESS_COMMIT", "8eedb7b")  # a tree copy whose .git is stale: it wins
    assert current_commit() == "8eedb7b"
    monkeypatch.delenv("HARNESS_COMMIT")
    monkeypatch.delenv("GITHUB_SHA")
    assert current_commit(tmp_path) is None  # not a git checkout


def test_key_metrics_take_the_per_phase_gpu_numbers(tmp_path):
    phase = {"performance/generation_tokens_per_sec": (100.0, 9000.0, 11000.0),
             "performance/train_tokens_per_sec": (10.0, 900.0, 1100.0), "performance/mfu": (0.0, 0.2, 0.4),
             "performance/peak_memory_gib": (1.5, 1.0, 1.25), "timing/train/refit": (3.0, 0.02, 0.04)}
    run = write_run(tmp_path / "gpu", [{"step": s + 1, **{k: v[s] for k, v in phase.items()}} for s in range(3)])
    numbers = key_metrics(run)
    assert numbers.generation_tokens_per_s == 10000.0 and numbers.train_tokens_per_s == 1000.0
    assert numbers.mfu == pytest.approx(0.3) and numbers.refit_s == pytest.approx(0.03)
    assert numbers.peak_memory_gib == 1.5  # the run's maximum, warm-up step included


def test_a_version_1_file_gains_the_per_phase_columns(tmp_path):
    db = tmp_path / "v1.sqlite"
    with sqlite3.connect(db) as conn:  # the version-1 table, as the first nightly wrote it
        conn.executescript("""CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL,
            suite TEXT NOT NULL, entry TEXT NOT NULL, recipe TEXT NOT NULL, recipe_path TEXT NOT NULL,
            commit_sha TEXT, hardware TEXT NOT NULL, verdict TEXT NOT NULL, verdicts TEXT NOT NULL,
            attempts INTEGER NOT NULL, final_reward REAL, step_time_s REAL, tokens_per_s REAL, wall_s REAL,
            run_dir TEXT);
            INSERT INTO runs (time, suite, entry, recipe, recipe_path, hardware, verdict, verdicts, attempts,
            step_time_s) VALUES ('t0', 'nightly', 'qwen', 'qwen3_5_35b', 'q.yaml', 'h200', 'pass', '{}', 1, 2.5);
            PRAGMA user_version = 1;""")
    append(db, row(refit_s=0.03, peak_memory_gib=1.0))
    old, new = query(db)
    assert old.step_time_s == 2.5 and old.refit_s is None
    assert new.refit_s == 0.03 and new.peak_memory_gib == 1.0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
