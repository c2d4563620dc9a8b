"""A run dir belongs to one live run (run.lock), and an engine dies with its harness (issue 32 item 4).

Each test that kills or signals a process waits for its readiness file first (issue 38); the
deadlines are upper bounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.run_lock import LOCK_FILE, ORPHANED, RunDirLocked, hold, is_locked, settle_orphan

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "data" / "fake_engine.py"
RECIPE = str(REPO / "recipes" / "arith_grpo_cpu.yaml")


def wait_for(predicate, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:g} s"
        time.sleep(0.02)


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    with hold(tmp_path):
        assert is_locked(tmp_path)
        with pytest.raises(RunDirLocked, match=rf"in use by a live run \({LOCK_FILE} started by pid {os.getpid()}\)"):
            with hold(tmp_path):
                pass
    assert not is_locked(tmp_path)
    with hold(tmp_path):  # free again once the holder is done
        pass


def test_a_child_that_inherited_the_lock_holds_it_after_the_holder_let_go(tmp_path):
    with hold(tmp_path) as fd:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(fd,))
    try:
        assert is_locked(tmp_path)  # our descriptor is closed; the child's keeps the lock
    finally:
        child.kill()
        child.wait()
    assert not is_locked(tmp_path)


def test_running_with_the_lock_free_is_settled_as_failed_and_a_live_run_is_left_alone(tmp_path):
    (tmp_path / "status.json").write_text(json.dumps({"state": "running", "last_step": 3}))
    with hold(tmp_path):
        assert not settle_orphan(tmp_path)
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "running"
    assert settle_orphan(tmp_path)
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "failed" and status["error"] == ORPHANED and status["last_step"] == 3
    assert not settle_orphan(tmp_path)  # once


def test_harness_run_refuses_a_locked_dir_for_a_resume_and_for_a_new_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with hold(run_dir):
        for extra in (["--resume"], []):
            assert main(["run", RECIPE, "--no-progress", *extra, "--out", str(run_dir)]) == 2
            err = capsys.readouterr().err
            assert "in use by a live run" in err and err.count("\n") == 1, err


def test_harness_check_settles_an_orphaned_running_status(tmp_path, capsys):
    (tmp_path / "status.json").write_text(json.dumps({"state": "running", "last_step": 1}))
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "train/reward": 0.5}\n')
    assert main(["check", str(tmp_path), "--no-report"]) == 1
    assert "status.json now says 'failed'" in capsys.readouterr().out
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "failed"


HARNESS = """
import sys; from pathlib import Path
from harness.launch import launch
from harness.run_lock import hold
run_dir = Path(sys.argv[1])
with hold(run_dir) as fd:
    launch(sys.argv[2:], run_dir=run_dir, env={}, timeout_s=600, total_steps=2, progress=False, keep_fds=(fd,))
"""


def test_an_engine_gets_sigterm_when_its_harness_is_sigkilled_and_the_lock_goes_with_it(tmp_path):
    engine = [sys.executable, str(FAKE), "--out", str(tmp_path), "--steps", "2", "--hang"]
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path), *engine], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    wait_for(lambda: (tmp_path / "ready").exists(), "ready engine")
    pid = int((tmp_path / "engine.pid").read_text())
    harness.kill()
    harness.wait()
    wait_for(lambda: gone(pid), "end of the engine")  # its default SIGTERM disposition: it ends at once
    wait_for(lambda: not is_locked(tmp_path), "free lock")
