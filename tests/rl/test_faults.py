"""Planted faults (rl/faults.py) and the engine's answers to the disk faults, without Ray:
a full disk keeps every line already written, a garbled checkpoint is refused in one line."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rl import checkpoint, faults
from rl.run import Interrupted, _config_error, _failure
from rl.runlog import RunLog


def test_planted_parses_steps_and_refuses_unknown_names(monkeypatch):
    monkeypatch.setenv("RL_FAULTS", "nan_loss@3, worker_hang,dispatch_inverse_reorder")
    assert faults.planted() == {"nan_loss": 3, "worker_hang": 1, "dispatch_inverse_reorder": 1}
    assert faults.at("nan_loss", 3) and not faults.at("nan_loss", 2) and faults.active("worker_hang")
    monkeypatch.setenv("RL_FAULTS", "nan_los@3")
    with pytest.raises(ValueError, match="unknown fault 'nan_los'"):
        faults.planted()
    monkeypatch.setenv("RL_FAULTS", "nan_loss@x")
    with pytest.raises(ValueError, match="positive integer"):
        faults.planted()


def test_enospc_fails_the_write_and_keeps_every_earlier_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RL_FAULTS", "metrics_enospc@3")
    log = RunLog(tmp_path, num_steps=5)
    log.log_metrics(1, {"train/loss": 1.0})
    log.log_metrics(2, {"train/loss": float("nan")})
    with pytest.raises(OSError, match=r"writing metrics.jsonl: No space left on device") as info:
        log.log_metrics(3, {"train/loss": 3.0})
    assert info.value.errno == 28 and log.last_step == 2
    log.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2]  # the half line was cut back
    assert math.isnan(json.loads(lines[1])["train/loss"])


def _save(tmp_path, step: int) -> None:
    tmp = checkpoint.begin(tmp_path, step)
    files = {checkpoint.WEIGHTS: checkpoint.write(tmp, checkpoint.WEIGHTS, {"policy": {"w": torch.arange(4096.0)}}),
             checkpoint.optimizer_file(0): checkpoint.write(tmp, checkpoint.optimizer_file(0), {})}
    checkpoint.commit(tmp, step=step, cursor=7, rng={}, files=files, ranks=1)


def test_a_garbled_checkpoint_is_refused_in_one_line(tmp_path):
    _save(tmp_path, 2)
    path = checkpoint.latest(tmp_path)
    assert checkpoint.load(path).cursor == 7
    faults.garble(path / checkpoint.WEIGHTS)
    with pytest.raises(checkpoint.CheckpointError, match="weights.pt does not match the SHA-256") as info:
        checkpoint.load(path)
    assert "\n" not in str(info.value)
    (path / "state.json").write_text("{not json")
    with pytest.raises(checkpoint.CheckpointError, match="state.json is unreadable"):
        checkpoint.load(path)


def test_a_refusal_leaves_the_metrics_alone(tmp_path):
    log = RunLog(tmp_path, num_steps=3)
    log.log_metrics(1, {"train/loss": 1.0})
    log.close()
    assert _config_error(tmp_path, "cannot resume: corrupt") == 2
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "failed" and status["exit_code"] == 2 and status["last_step"] == 1
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1


def test_a_signal_wrapped_by_cython_is_still_an_interruption():
    try:
        try:
            raise Interrupted(15)
        except Interrupted as inner:
            raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set") from inner
    except SystemError as exc:
        assert _failure(exc) == (143, "interrupted", "interrupted by SIGTERM (surfaced as SystemError)")
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("worker policy-0 failed")  # noqa: B904 - the implicit context is the point
    except RuntimeError as exc:
        assert _failure(exc)[:2] == (130, "interrupted")
    assert _failure(ValueError("a bug"))[:2] == (1, "failed")


def test_a_signal_whose_exception_was_swallowed_still_ends_the_run(monkeypatch):
    from rl import run

    monkeypatch.setattr(run, "_SIGNALLED", [])
    run._check_signalled()  # nothing received: nothing raised
    with pytest.raises(Interrupted):
        run._on_signal(2, None)
    with pytest.raises(Interrupted) as info:
        run._check_signalled()
    assert info.value.exit_code == 130
    assert _failure(RuntimeError("worker policy-0 failed"))[:2] == (130, "interrupted")
