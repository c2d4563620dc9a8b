"""Both training backends step at the lr rl/lr_schedule.py gives the step they are told, and that
schedule is megatron-core's own: fp32 on the CPU, one spawned gloo rank.

Per backend, three steps of a warm-up into a linear decay (lr 1e-4, 5.5e-4, 1e-3):
* the `lr` metric and the optimizer's param groups hold the schedule's value;
* the first step moves weights by that lr (Adam's first update is lr x g / (|g| + eps), so the
  largest move is the lr to a few parts in 1e4), not the recipe's peak lr, 10 times more;
* a fresh backend loaded with the state after step 2 (whose param groups carry step 2's lr)
  and told step 3 gives step 3's weights bit for bit: the lr follows the engine's step, not a
  count of the backend's own or the restored state.
"""

from __future__ import annotations

import importlib.util
import types
from dataclasses import replace

import pytest
import torch
from rank_processes import one_gloo_rank, run_ranks
from train_batches import train_batch

from rl.config import ModelConfig, OptimizerConfig, PolicyConfig
from rl.lr_schedule import lr_at

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=25)]  # the file: 12 s alone on 2 cores, x2 in CI

VOCAB = 32
MODEL = ModelConfig(family="qwen3_5", config={"layer_types": ["full_attention"], "num_hidden_layers": 1})
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=None,
                      warmup_steps=2, warmup_init_lr=1e-4, decay="linear", decay_steps=4, min_lr=1e-5)
STEPS = (1, 2, 3)


def _batch() -> dict[str, torch.Tensor]:
    return train_batch(vocab=VOCAB, seed=3)


def _backend(name: str, weights: dict[str, torch.Tensor]):
    from rl.backends import get_backend

    return get_backend(name)(model=MODEL, vocab_size=VOCAB, seed=0, weights=weights,
                             policy=PolicyConfig(micro_batch_size=2, optimizer=OPT))


def _train(name: str) -> dict:
    from rl.algorithms.loss import LossConfig
    from rl.models import build_model

    batch = _batch()
    initial = build_model(MODEL, vocab_size=VOCAB, seed=0).state_dict()
    backend = _backend(name, initial)
    num_tokens = int(batch["response_mask"].sum())
    out: dict = {"metric": [], "groups": [], "weights": []}
    for step in STEPS:
        if step == 3:
            saved = backend.state_dict(), backend.optimizer_state()
        out["metric"].append(backend.train_step(batch, num_tokens=num_tokens, loss_cfg=LossConfig(), step=step)["lr"])
        out["groups"].append(sorted({g["lr"] for g in backend.optimizer.param_groups}))
        out["weights"].append(backend.state_dict())
    out["first_move"] = max((out["weights"][0][k] - initial[k]).abs().max().item() for k in initial)
    resumed = _backend(name, initial)
    resumed.load_state(policy=saved[0], optimizer=saved[1])
    resumed.train_step(batch, num_tokens=num_tokens, loss_cfg=LossConfig(), step=3)
    out["resumed"] = resumed.state_dict()
    return out


def _megatron_scheduler(decay: str) -> list[float]:
    """The lr of steps 1..8 under megatron-core's OptimizerParamScheduler, stepped after each
    optimizer step as the reference steps it."""
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    optimizer = types.SimpleNamespace(param_groups=[{}])
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=OPT.warmup_init_lr, max_lr=OPT.lr, min_lr=OPT.min_lr, lr_warmup_steps=OPT.warmup_steps,
        lr_decay_steps=OPT.decay_steps + 2, lr_decay_style=decay, start_wd=0.0, end_wd=0.0, wd_incr_steps=1,
        wd_incr_style="constant")
    lrs = []
    for _ in range(8):
        lrs.append(optimizer.param_groups[0]["lr"])
        scheduler.step(1)
    return lrs


def _all(rank: int, port: int) -> dict:
    one_gloo_rank(port)
    import rl.backends.megatron.backend  # noqa: F401 - registers the backend and applies the CPU shims

    return {"torch": _train("torch"), "megatron": _train("megatron"),
            "scheduler": {d: _megatron_scheduler(d) for d in ("constant", "linear", "cosine")}}


@pytest.fixture(scope="module")
def results() -> dict:
    return run_ranks(_all)[0]


@pytest.mark.parametrize("name", ["torch", "megatron"])
def test_each_step_trains_at_the_scheduled_lr(results: dict, name: str) -> None:
    out = results[name]
    expected = [lr_at(OPT, s) for s in STEPS]
    assert expected == pytest.approx([1e-4, 5.5e-4, 1e-3], rel=1e-12)
    assert out["metric"] == expected
    assert out["groups"] == [[lr] for lr in expected]
    assert out["first_move"] == pytest.approx(expected[0], rel=1e-3)


@pytest.mark.parametrize("name", ["torch", "megatron"])
def test_a_resumed_backend_takes_the_lr_of_the_step_it_is_told(results: dict, name: str) -> None:
    out = results[name]
    after_step_3 = out["weights"][2]
    assert all(torch.equal(out["resumed"][k], after_step_3[k]) for k in after_step_3)
    assert any(not torch.equal(out["weights"][1][k], after_step_3[k]) for k in after_step_3)


@pytest.mark.parametrize("decay", ["constant", "linear", "cosine"])
def test_the_schedule_is_megatron_cores(results: dict, decay: str) -> None:
    # a constant decay reads neither decay_steps nor min_lr (and ours refuses them there)
    unread = dict(decay_steps=None, min_lr=0.0) if decay == "constant" else dict(decay_steps=OPT.decay_steps + 2)
    cfg = replace(OPT, decay=decay, **unread)
    assert [lr_at(cfg, s) for s in range(1, 9)] == pytest.approx(results["scheduler"][decay], rel=1e-12)
