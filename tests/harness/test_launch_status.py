"""merge_status: which state wins, and nothing the engine wrote is lost."""

from __future__ import annotations

import pytest

from harness.launch.status import describe_exit, log_tail, merge_status, read_status


def merge(engine, outcome="exited", exit_code=0, error=None):
    return merge_status(engine, outcome=outcome, exit_code=exit_code, wall_s=12.3456, last_step=7,
                        total_steps=10, error=error, tail="Traceback\nValueError: x")  # fmt: skip


ENGINE_DONE = {"state": "completed", "exit_code": 0, "error": None, "last_step": 10, "num_steps": 10,
               "wall_s": 11.0, "dead_worker": None, "custom": {"k": 1}}  # fmt: skip


def test_engine_completed_and_exit_zero_is_kept():
    status = merge(ENGINE_DONE)
    assert status["state"] == "completed" and status["error"] is None
    assert status["last_step"] == 10 and status["custom"] == {"k": 1}
    assert status["wall_s"] == 12.346 and status["harness"]["engine_wrote"] == {"wall_s": 11.0}


@pytest.mark.parametrize(
    ("engine", "exit_code", "state", "needle"),
    [
        ({"state": "running", "last_step": 3}, 1, "failed",
         "code 1 without writing a terminal state (status.json still says 'running')"),
        (None, -9, "failed", "signal SIGKILL without writing a terminal state (no status.json)"),
        (None, 0, "completed", None),
        (ENGINE_DONE, 2, "failed", "says 'completed' but the engine exited with code 2"),
        ({"state": "failed", "error": "OOM on rank 1", "dead_worker": "policy-1"}, 1, "failed", "OOM on rank 1"),
        ({"state": "failed"}, 0, "failed", "reported 'failed' and exited with code 0"),
        ({"state": "running"}, 0, "failed", "code 0 without writing a terminal state"),
    ],
)  # fmt: skip
def test_harness_view_of_a_process_that_exited(engine, exit_code, state, needle):
    status = merge(engine, exit_code=exit_code)
    assert status["state"] == state and status["exit_code"] == exit_code
    if needle is None:
        assert status["error"] is None
    else:
        assert needle in status["error"]
    if state == "failed" and engine and "error" not in engine:
        assert "ValueError: x" in status["error"]  # the log tail explains it


def test_timeout_and_interrupt_win_and_the_engine_values_are_kept():
    engine = {"state": "running", "last_step": 9, "error": None, "dead_worker": None}
    status = merge(engine, outcome="timeout", exit_code=-15, error="time limit of 60 s reached")
    assert status["state"] == "timeout" and status["error"] == "time limit of 60 s reached"
    assert status["last_step"] == 9  # the larger of the engine's and the harness's count
    assert status["harness"]["engine_wrote"]["state"] == "running"
    assert merge(engine, outcome="interrupted", exit_code=130, error="Ctrl-C")["state"] == "interrupted"


def test_missing_fields_are_filled():
    status = merge({})
    assert status["num_steps"] == 10 and status["dead_worker"] is None and status["last_step"] == 7


def test_describe_exit():
    assert [describe_exit(c) for c in (None, 0, 3, -15)] == ["no exit code", "code 0", "code 3", "signal SIGTERM"]


def test_read_status_tolerates_missing_and_corrupt(tmp_path):
    assert read_status(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text('{"state": "runn')
    assert read_status(tmp_path / "bad.json") is None
    (tmp_path / "list.json").write_text("[1]")
    assert read_status(tmp_path / "list.json") is None


def test_log_tail_skips_harness_notes(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("a\n[harness] note\nb\n\nc\n")
    assert log_tail(log, num_lines=2) == "b\nc"
    assert log_tail(tmp_path / "missing.log") == ""
