"""Checkpoints round-trip bit for bit and appear atomically."""

import random

import numpy as np
import torch

from rl import checkpoint as ck


def _ckpt(step):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    return ck.Checkpoint(step=step, cursor=step + 1, policy=model.state_dict(),
                         optimizer=opt.state_dict(), reference=model.state_dict(),
                         rng=ck.capture_rng())


def test_round_trip_and_latest(tmp_path):
    assert ck.latest(tmp_path) is None
    a = _ckpt(2)
    ck.save(tmp_path, a)
    ck.save(tmp_path, _ckpt(10))
    (tmp_path / "checkpoints" / ".step_12.123.tmp").mkdir()  # an interrupted save
    assert ck.latest(tmp_path).name == "step_10"
    b = ck.load(tmp_path / "checkpoints" / "step_2")
    assert (b.step, b.cursor) == (2, 3)
    for k, v in a.policy.items():
        assert torch.equal(v, b.policy[k])
    assert a.optimizer["state"][0]["exp_avg"].equal(b.optimizer["state"][0]["exp_avg"])


def test_checkpoint_dir_replaces_the_run_dirs_checkpoints(tmp_path):
    shared = tmp_path / "shared" / "ckpts"
    path = ck.save(tmp_path / "run", _ckpt(3), directory=str(shared))
    assert path == shared / "step_3" and not (tmp_path / "run" / "checkpoints").exists()
    assert ck.latest(tmp_path / "another-run", directory=shared) == path  # a restarted job finds it
    assert ck.latest(tmp_path / "run") is None


def test_rng_restore_replays_streams(tmp_path):
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    ck.save(tmp_path, ck.Checkpoint(step=1, cursor=1, policy={}, optimizer={}, rng=ck.capture_rng()))
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    ck.restore_rng(ck.load(ck.latest(tmp_path)).rng)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
