"""What the harness itself writes into a run dir: atomically (a reader, or a harness killed
mid-write, sees the old file or the new one, never a torn one), and with no file left open."""

from __future__ import annotations

import copy
import gc
import json
import os
import warnings
from pathlib import Path

import pytest

import harness.report.atomic as atomic
from harness.checks.judge import Judgement
from harness.commands import run as run_command
from harness.engines import import_metrics
from harness.launch.runner import LaunchResult

OLD_STATUS = {"state": "completed", "exit_code": 0, "last_step": 3, "num_steps": 3}
EXTERNAL = {"name": "ext", "engine": {"command": ["true"], "metrics": "reference_json", "metrics_path": "metrics.json"}}


class Killed(BaseException):
    """The harness dies (SIGKILL, power cut) between writing the new bytes and the rename."""


@pytest.fixture
def killed_before_status_rename(monkeypatch):
    real = os.replace

    def replace(src, dst, **dir_fds):
        if Path(dst).name == "status.json":
            raise Killed
        return real(src, dst, **dir_fds)

    monkeypatch.setattr(atomic.os, "replace", replace)


def _old_status(run_dir: Path) -> str:
    text = json.dumps(OLD_STATUS, indent=2) + "\n"
    (run_dir / "status.json").write_text(text)
    return text


def test_import_metrics_replaces_status_json_whole(tmp_path, killed_before_status_rename):
    (tmp_path / "metrics.json").write_text(json.dumps({"train/reward": {"1": 0.1, "2": 0.2, "5": 0.5}}))
    old = _old_status(tmp_path)
    with pytest.raises(Killed):
        import_metrics(EXTERNAL, tmp_path)
    assert (tmp_path / "status.json").read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "metrics.jsonl", "status.json"]


def test_import_metrics_updates_status_json(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"train/reward": {"1": 0.1, "2": 0.2, "5": 0.5}}))
    _old_status(tmp_path)
    assert import_metrics(EXTERNAL, tmp_path) == tmp_path / "metrics.jsonl"
    assert json.loads((tmp_path / "status.json").read_text()) == {**OLD_STATUS, "last_step": 5}
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 5]


def test_import_metrics_closes_engine_log(tmp_path):
    """No metrics to import: the note goes to engine.log through a file that is closed again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert import_metrics(EXTERNAL, tmp_path) is None
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert "[harness] no metrics imported" in (tmp_path / "engine.log").read_text()


def test_parity_status_json_is_replaced_whole(tmp_path, monkeypatch, killed_before_status_rename):
    """run_parity's summary status.json, written over whatever was there, goes through a rename."""
    recipe = {"name": "par", "checks": {"parity": {"variants": {"a": {}, "b": {}}, "tolerance": 0.0}}}
    status = {"state": "completed", "wall_s": 1.0}
    monkeypatch.setattr(run_command, "apply_overrides", lambda recipe, overrides: copy.deepcopy(recipe))
    monkeypatch.setattr(run_command, "write_inputs", lambda *args: None)
    monkeypatch.setattr(run_command, "write_outputs", lambda *args, **kwargs: None)
    finished = LaunchResult(state="completed", exit_code=0, wall_s=1.0, last_step=3, error=None)
    monkeypatch.setattr(run_command, "launch_engine", lambda *args, **kwargs: finished)
    monkeypatch.setattr(run_command, "judge_run", lambda sub: Judgement(
        verdicts=[], metrics={"m": {1: 1.0}}, recipe=None, status=status))
    old = _old_status(tmp_path)
    with pytest.raises(Killed):
        run_command.run_parity(recipe, tmp_path, {}, progress=False)
    assert (tmp_path / "status.json").read_text() == old


def test_scrubbed_status_json_is_replaced_whole(tmp_path, killed_before_status_rename):
    (tmp_path / "status.json").write_text(json.dumps({"state": "failed", "error": "token s3cr3t-value leaked"}))
    old = (tmp_path / "status.json").read_text()
    with pytest.raises(Killed):
        run_command.scrub_logs(tmp_path, ["s3cr3t-value"])
    assert (tmp_path / "status.json").read_text() == old
