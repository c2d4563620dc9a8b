"""launch() against tests/data/fake_engine.py: every end state, engine.log, status.json, no orphans.

No verdict here rests on how fast a process starts (issue 38: a loaded CI machine started the fake
engine after the 1 s time limit had sent its SIGTERM). `run` launches with SIGTERM and SIGINT
blocked (`held_signals`), so a signal the harness sends early waits until the fake engine has
installed its handlers and unblocked them (its `ready` file); a test that signals a process
itself waits for that file first. Deadlines below are generous upper bounds, never the thing
under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.launch import launch

FAKE = Path(__file__).resolve().parents[1] / "data" / "fake_engine.py"


HELD = {signal.SIGTERM, signal.SIGINT}


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """SIGTERM and SIGINT blocked in this thread, so in every process it starts (a blocked mask
    survives fork and exec) until that process unblocks them: the fake engine does once ready."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def ready(run_dir: Path) -> dict:
    """The fake engine's `ready` record (which signals reached it before it was ready)."""
    return json.loads((run_dir / "ready").read_text())


def wait_for(path: Path, *, timeout_s: float = 120.0, lines: int = 0) -> None:
    """Until `path` exists (and holds `lines` lines): a generous upper bound, not a measured wait."""
    deadline = time.monotonic() + timeout_s
    while not path.exists() or path.read_text().count("\n") < lines:
        assert time.monotonic() < deadline, f"{path} not there after {timeout_s:g} s"
        time.sleep(0.02)


def run(tmp_path: Path, *flags: str, timeout_s: float = 60.0, steps: int = 4, **kw):
    cmd = [sys.executable, str(FAKE), "--out", str(tmp_path), "--steps", str(steps), *flags]
    kw.setdefault("grace_s", 2.0)
    kw.setdefault("poll_s", 0.05)
    with held_signals():
        result = launch(cmd, run_dir=tmp_path, env={"FAKE_MARK": "mark-42"}, timeout_s=timeout_s,
                        total_steps=steps, progress=False, **kw)  # fmt: skip
    status = json.loads((tmp_path / "status.json").read_text())
    return result, status, (tmp_path / "engine.log").read_text()


def gone(pid: int) -> bool:
    """True when the process no longer exists at all (not even as a zombie)."""
    return not os.path.exists(f"/proc/{pid}") if os.path.isdir("/proc") else not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_completed_run_logs_both_streams_and_keeps_engine_fields(tmp_path):
    result, status, log = run(tmp_path)
    assert (result.state, result.exit_code, result.last_step, result.error) == ("completed", 0, 4, None)
    assert "env FAKE_MARK=mark-42" in log  # env reached the engine
    assert "step 4 reward 1.0" in log and "stderr line 4" in log
    assert status["state"] == "completed" and status["engine"] == "fake" and status["num_steps"] == 4
    assert status["harness"]["outcome"] == "exited"
    assert "wall_s" in status["harness"]["engine_wrote"]  # the engine's own wall time is kept


def test_engine_log_is_appended_not_truncated(tmp_path):
    run(tmp_path, steps=1)
    run(tmp_path, steps=1)
    log = (tmp_path / "engine.log").read_text()
    assert log.count("fake engine: done") == 2


def test_crash_is_failed_with_the_traceback_in_the_error(tmp_path):
    result, status, log = run(tmp_path, "--crash-at", "3")
    assert result.state == "failed" and result.exit_code == 1
    assert "RuntimeError: boom at step 3" in result.error
    assert "without writing a terminal state" in result.error
    assert result.last_step == 2
    assert status["state"] == "failed" and status["error"] == result.error
    assert status["harness"]["engine_wrote"]["state"] == "running"


def test_completed_status_with_nonzero_exit_is_failed(tmp_path):
    result, status, _ = run(tmp_path, "--exit-code", "3")
    assert result.state == "failed" and result.exit_code == 3
    assert "says 'completed'" in result.error
    assert status["harness"]["engine_wrote"]["state"] == "completed"


def test_engine_without_status_json(tmp_path):
    ok, status, _ = run(tmp_path / "ok", "--no-status")
    assert ok.state == "completed" and status["last_step"] == 4 and status["num_steps"] == 4
    bad, _, _ = run(tmp_path / "bad", "--no-status", "--crash-at", "2")
    assert bad.state == "failed" and "no status.json" in bad.error and "boom at step 2" in bad.error


def test_timeout_kills_the_group_including_a_child_that_ignores_sigterm(tmp_path):
    result, status, log = run(tmp_path, "--hang", "--spawn-child", timeout_s=1.5, grace_s=0.5)
    assert result.state == "timeout" and result.exit_code == -signal.SIGTERM
    assert "time limit of 1.5 s" in result.error and "SIGKILL" in result.error
    assert status["state"] == "timeout" and status["last_step"] == 4
    assert "sending SIGTERM" in log and "sent SIGKILL" in log
    for name in ("engine.pid", "child.pid"):
        assert gone(int((tmp_path / name).read_text())), name


def test_timeout_of_an_engine_that_ignores_sigterm(tmp_path):
    result, _, _ = run(tmp_path, "--hang", "--ignore-sigterm", timeout_s=1.0, grace_s=0.3)
    assert result.state == "timeout" and result.exit_code == -signal.SIGKILL
    assert gone(int((tmp_path / "engine.pid").read_text()))


def test_an_engine_slow_to_install_its_handlers_still_ignores_the_time_limits_sigterm(tmp_path):
    """Its handlers come 2 s after start, past the 1 s time limit: the SIGTERM waits (held) until
    they are in place, is ignored, and SIGKILL ends the engine after the grace."""
    result, _, log = run(tmp_path, "--hang", "--ignore-sigterm", "--start-delay", "2", timeout_s=1.0, grace_s=3.0)
    assert ready(tmp_path)["pending"] == ["SIGTERM"]  # sent before the engine was ready, not lost nor fatal
    assert result.state == "timeout" and result.exit_code == -signal.SIGKILL
    assert "still running 3 s after SIGTERM: sent SIGKILL" in log


def test_leftover_helpers_of_a_finished_engine_are_stopped(tmp_path):
    result, _, log = run(tmp_path, "--spawn-child", grace_s=0.3)
    assert result.state == "completed"
    assert "left 1 process(es)" in log
    assert gone(int((tmp_path / "child.pid").read_text()))


@pytest.fixture
def ctrl_c_as_at_a_terminal():
    """Python's KeyboardInterrupt handler for SIGINT while the test runs: pytest started in the
    background by a non-interactive shell (`bash .ci/run &`) ignores SIGINT, and the test's own
    Ctrl-C would be dropped (the run then ends at its time limit)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_is_forwarded_and_the_run_is_interrupted(tmp_path, ctrl_c_as_at_a_terminal):
    metrics = tmp_path / "metrics.jsonl"

    def press_ctrl_c() -> None:
        wait_for(tmp_path / "ready")
        wait_for(metrics, lines=2)
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    result, status, log = run(tmp_path, "--hang", "--spawn-child", steps=2, grace_s=0.5)
    presser.join()
    assert result.state == "interrupted" and "Ctrl-C" in result.error
    assert status["state"] == "interrupted" and status["last_step"] == 2
    assert "sending SIGINT" in log and "fake engine: interrupted" in log
    assert metrics.read_text().count("\n") == 2  # what was written is kept
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_missing_command_is_a_failed_launch(tmp_path):
    result = launch(["/nonexistent/engine-binary"], run_dir=tmp_path, env={}, timeout_s=5, total_steps=3,
                    progress=False)
    assert result.state == "failed" and result.exit_code is None
    assert "could not start" in result.error
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "failed"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"command": []}, "command"), ({"command": "python x.py"}, "command"), ({"timeout_s": 0}, "timeout_s"),
     ({"total_steps": -1}, "total_steps"), ({"grace_s": -1}, "grace_s")],
)  # fmt: skip
def test_bad_arguments_name_the_field(tmp_path, kwargs, field):
    args = {"command": ["true"], "run_dir": tmp_path, "env": {}, "timeout_s": 5, "total_steps": 1, **kwargs}
    with pytest.raises(ValueError, match=field):
        launch(**args)


def test_timeout_reaches_a_helper_that_left_the_process_group(tmp_path):
    result, _, _ = run(tmp_path, "--hang", "--spawn-child", "--child-own-group", timeout_s=1.0, grace_s=0.3)
    assert result.state == "timeout"
    for name in ("engine.pid", "child.pid"):
        assert gone(int((tmp_path / name).read_text())), name


def test_sigterm_to_the_harness_stops_the_engine(tmp_path):
    """A cancelled CI job: the harness process gets SIGTERM and must not leave the engine running."""
    code = (
        "import sys, json; from pathlib import Path; from harness.launch import launch; "
        "r = launch(sys.argv[2:], run_dir=Path(sys.argv[1]), env={}, timeout_s=30, total_steps=2, "
        "progress=False, grace_s=0.5, poll_s=0.05); print(json.dumps(r.__dict__))"
    )
    cmd = [sys.executable, str(FAKE), "--out", str(tmp_path), "--steps", "2", "--hang", "--spawn-child"]
    harness = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), *cmd], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    wait_for(tmp_path / "ready")  # the engine is up, so the harness (which started it) has its handler set
    wait_for(tmp_path / "metrics.jsonl", lines=2)
    harness.send_signal(signal.SIGTERM)
    out, _ = harness.communicate(timeout=120)
    result = json.loads(out)
    assert harness.returncode == 0 and result["state"] == "interrupted"
    assert "harness received SIGTERM" in result["error"]
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "interrupted"
    for name in ("engine.pid", "child.pid"):
        assert gone(int((tmp_path / name).read_text())), name


LEADER = """
import os, signal, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1])
# A helper like Ray's raylet: when it is signalled, it takes the leader down with it.
helper = subprocess.Popen([sys.executable, "-c", "import os, signal, sys, time; "
    "signal.signal(signal.SIGTERM, lambda *_: (os.kill(int(sys.argv[1]), signal.SIGKILL), sys.exit(0))); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}); "
    "time.sleep(60)", str(os.getpid())])
def stop(*_):
    time.sleep(0.3)  # the engine records its outcome, then stops its own helpers
    (out / "outcome").write_text("interrupted")
    helper.kill(); helper.wait()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
(out / "metrics.jsonl").write_text('{"step": 1}\\n')
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # ready: a time limit's SIGTERM held till now lands
time.sleep(60)
"""


def test_the_engine_is_signalled_before_its_helpers_so_it_can_record_its_outcome(tmp_path):
    script = tmp_path / "leader.py"
    script.write_text(LEADER)
    with held_signals():
        result = launch([sys.executable, str(script), str(tmp_path)], run_dir=tmp_path, env={}, timeout_s=3.0,
                        total_steps=2, progress=False, grace_s=5.0, poll_s=0.05)
    assert result.state == "timeout" and result.exit_code == 143
    assert (tmp_path / "outcome").read_text() == "interrupted"
