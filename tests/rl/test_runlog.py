"""Run-dir writers: durable lines, atomic JSON, resume truncation."""

import json
import math

import pytest

from rl.runlog import RunLog, read_jsonl


def test_metrics_lines_and_status(tmp_path):
    log = RunLog(tmp_path, num_steps=3)
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "running"
    log.log_metrics(1, {"train/reward": 0.5})
    log.log_metrics(2, {"train/reward": float("nan")})
    log.log_invariant({"check": "flops_fields", "ok": True})
    log.write_status("completed", exit_code=0)
    log.close()
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert math.isnan(rows[1]["train/reward"])  # a float again, not the string "nan"
    assert '"train/reward": NaN' in (tmp_path / "metrics.jsonl").read_text()
    inv = read_jsonl(tmp_path / "invariants.jsonl")
    assert inv == [{"check": "flops_fields", "ok": True, "step": 3}]
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "completed" and status["last_step"] == 2
    assert status["num_steps"] == 3 and status["dead_worker"] is None


def test_step_gap_or_duplicate_is_refused(tmp_path):
    log = RunLog(tmp_path, num_steps=3)
    log.log_metrics(1, {})
    with pytest.raises(ValueError, match="increase by one"):
        log.log_metrics(1, {})
    with pytest.raises(ValueError, match="increase by one"):
        log.log_metrics(3, {})


def test_non_finite_values_are_json_tokens(tmp_path):
    log = RunLog(tmp_path, num_steps=1)
    log.log_metrics(1, {"a": float("inf"), "b": float("-inf"), "c": float("nan")})
    log.close()
    line = (tmp_path / "metrics.jsonl").read_text()
    assert '"a": Infinity' in line and '"b": -Infinity' in line and '"c": NaN' in line


def test_invariant_ok_must_be_a_boolean(tmp_path):
    log = RunLog(tmp_path, num_steps=1)
    with pytest.raises(ValueError, match="boolean 'ok'"):
        log.log_invariant({"check": "c", "ok": "false"})
    log.close()


def test_resume_truncates_past_checkpoint_and_torn_line(tmp_path):
    log = RunLog(tmp_path, num_steps=5)
    for step in range(1, 5):
        log.log_metrics(step, {"x": step})
        log.log_invariant({"check": "c", "ok": True, "step": step})
    log.close()
    with open(tmp_path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 5, "x"')  # a crash mid-write
    log = RunLog(tmp_path, num_steps=5, resume_step=2)
    log.log_metrics(3, {"x": 30})
    log.close()
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    assert [r["step"] for r in read_jsonl(tmp_path / "invariants.jsonl")] == [1, 2]


def test_fresh_run_replaces_old_series(tmp_path):
    log = RunLog(tmp_path, num_steps=1)
    log.log_metrics(1, {})
    log.close()
    log = RunLog(tmp_path, num_steps=1)
    log.close()
    assert read_jsonl(tmp_path / "metrics.jsonl") == []
