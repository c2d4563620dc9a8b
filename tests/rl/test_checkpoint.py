"""Checkpoints: the ranks' files and the driver's state round-trip bit for bit, appear atomically,
and a changed or missing file is refused in one line."""

import random

import numpy as np
import pytest
import torch

from rl import checkpoint as ck


def _model_and_optimizer():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    return model, opt


def _save(run_dir, step, *, ranks=2, directory=None, drop=None):
    """What Engine._save does, the ranks' writes played here: rank 0 the weights, each rank its
    optimizer state."""
    model, opt = _model_and_optimizer()
    tmp = ck.begin(run_dir, step, directory=directory)
    files = {ck.WEIGHTS: ck.write(tmp, ck.WEIGHTS, {"policy": model.state_dict(), "reference": model.state_dict()})}
    for rank in range(ranks):
        files[ck.optimizer_file(rank)] = ck.write(tmp, ck.optimizer_file(rank), opt.state_dict())
    files.pop(drop, None)
    path = ck.commit(tmp, step=step, cursor=step + 1, rng=ck.capture_rng(), files=files, ranks=ranks)
    return path, model, opt


def test_round_trip_and_latest(tmp_path):
    assert ck.latest(tmp_path) is None
    path, model, opt = _save(tmp_path, 2)
    _save(tmp_path, 10)
    (tmp_path / "checkpoints" / ".step_12.123.tmp").mkdir()  # an interrupted save
    assert ck.latest(tmp_path).name == "step_10"
    got = ck.load(tmp_path / "checkpoints" / "step_2")
    assert (got.step, got.cursor, got.ranks, got.path) == (2, 3, 2, path)
    assert sorted(p.name for p in path.iterdir()) == ["optimizer.rank0.pt", "optimizer.rank1.pt", "state.json",
                                                      "weights.pt"]
    weights = got.weights()
    assert all(torch.equal(v, weights["policy"][k]) for k, v in model.state_dict().items())
    saved = torch.load(got.optimizer_path(1), weights_only=False)
    assert saved["state"][0]["exp_avg"].equal(opt.state_dict()["state"][0]["exp_avg"])


def test_a_rank_that_wrote_nothing_fails_the_save_and_leaves_no_checkpoint(tmp_path):
    with pytest.raises(ck.CheckpointError, match="no rank wrote optimizer.rank1.pt"):
        _save(tmp_path, 3, drop="optimizer.rank1.pt")
    assert ck.latest(tmp_path) is None


def test_a_missing_rank_file_is_refused_in_one_line(tmp_path):
    path, _, _ = _save(tmp_path, 5)
    (path / "optimizer.rank1.pt").unlink()
    with pytest.raises(ck.CheckpointError, match="optimizer.rank1.pt is missing"):
        ck.load(path)


def test_checkpoint_dir_replaces_the_run_dirs_checkpoints(tmp_path):
    shared = tmp_path / "shared" / "ckpts"
    path, _, _ = _save(tmp_path / "run", 3, directory=str(shared))
    assert path == shared / "step_3" and not (tmp_path / "run" / "checkpoints").exists()
    assert ck.latest(tmp_path / "another-run", directory=shared) == path  # a restarted job finds it
    assert ck.latest(tmp_path / "run") is None


def test_rng_restore_replays_streams(tmp_path):
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    tmp = ck.begin(tmp_path, 1)
    files = {ck.WEIGHTS: ck.write(tmp, ck.WEIGHTS, {}), ck.optimizer_file(0): ck.write(tmp, ck.optimizer_file(0), {})}
    ck.commit(tmp, step=1, cursor=1, rng=ck.capture_rng(), files=files, ranks=1)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    ck.restore_rng(ck.load(ck.latest(tmp_path)).rng)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
