"""The lr schedule (rl/lr_schedule.py) at the steps where its shape changes, and the rules
`policy.optimizer` holds its keys to (each refusal names the key)."""

from __future__ import annotations

import math

import pytest
import torch

from rl.config import DECAYS, OptimizerConfig, parse_config
from rl.lr_schedule import lr_at

LR, INIT, MIN = 1.0e-3, 1.0e-4, 1.0e-5


def _cfg(**schedule) -> OptimizerConfig:
    return OptimizerConfig(lr=LR, **schedule)


WARM = {"warmup_steps": 4, "warmup_init_lr": INIT}


@pytest.mark.parametrize("step, expected", [
    (1, INIT),                          # the first step trains at the warm-up's start
    (3, INIT + (LR - INIT) * 2 / 4),    # two optimizer steps in: half way
    (4, INIT + (LR - INIT) * 3 / 4),    # the last step below lr
    (5, LR),                            # warm-up over
    (10_000, LR),                       # constant: held
])
def test_linear_warmup_then_constant(step: int, expected: float) -> None:
    assert lr_at(_cfg(**WARM), step) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("decay, step, expected", [
    ("linear", 3, INIT + (LR - INIT) * 2 / 4),                 # the same warm-up
    ("linear", 5, LR),                                         # decay starts where the warm-up ends
    ("linear", 8, MIN + 0.5 * (LR - MIN)),                     # 3 of 6 decay steps
    ("linear", 11, MIN),                                       # decay_steps reached
    ("linear", 500, MIN),                                      # and held
    ("cosine", 6, MIN + 0.5 * (math.cos(math.pi / 6) + 1) * (LR - MIN)),
    ("cosine", 8, MIN + 0.5 * (LR - MIN)),
    ("cosine", 11, MIN),
    ("cosine", 500, MIN),
])
def test_decay_to_min_lr_by_decay_steps(decay: str, step: int, expected: float) -> None:
    cfg = _cfg(**WARM, decay=decay, decay_steps=10, min_lr=MIN)
    assert lr_at(cfg, step) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("decay", DECAYS)
def test_every_decay_the_recipe_accepts_is_computed(decay: str) -> None:
    """rl/config.py states the choices, rl/lr_schedule.py the shapes: none may be missing here."""
    cfg = _cfg(**WARM, decay=decay) if decay == "constant" else _cfg(**WARM, decay=decay, decay_steps=10, min_lr=MIN)
    assert MIN <= lr_at(cfg, 8) <= LR


def test_the_dtensor_paths_linear_warmup_is_ours() -> None:
    """The reference's DTensor scheduler (grpo_math_1B: LinearLR from 0.1 over 50 steps, then
    ConstantLR, stepped after each optimizer step) is a warm-up from 0.1 x lr: what the importer
    maps it to (harness/importer/mapping.py, `torch_schedule`)."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=5.0e-6)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
        torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, end_factor=1.0, total_iters=50),
        torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=10_000_000_000)], milestones=[50])
    theirs = []
    for _ in range(60):
        theirs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    ours = OptimizerConfig(lr=5.0e-6, warmup_steps=50, warmup_init_lr=0.1 * 5.0e-6)
    assert [lr_at(ours, s) for s in range(1, 61)] == pytest.approx(theirs, rel=1e-9)


def test_no_schedule_is_the_flat_lr() -> None:
    assert [lr_at(_cfg(), s) for s in (1, 2, 1000)] == [LR] * 3


def test_steps_count_from_one() -> None:
    with pytest.raises(ValueError, match="count from 1, got 0"):
        lr_at(_cfg(), 0)


def _parse(optimizer: dict):
    return parse_config({"name": "t", "algorithm": {"prompts_per_step": 2, "generations_per_prompt": 2},
                         "policy": {"optimizer": {"lr": LR, **optimizer}}})


@pytest.mark.parametrize("optimizer, message", [
    ({"warmup_steps": -1}, r"policy\.optimizer\.warmup_steps: must be >= 0, got -1"),
    ({"warmup_init_lr": 2 * LR}, r"policy\.optimizer\.warmup_init_lr: must be in \[0, lr=0\.001\]"),
    ({"warmup_init_lr": -1.0e-6}, r"policy\.optimizer\.warmup_init_lr: must be in \[0, lr"),
    ({"decay": "step"}, r"policy\.optimizer\.decay: 'step' is not one of \['constant', 'linear', 'cosine'\]"),
    ({"decay": "linear"}, r"policy\.optimizer\.decay_steps: decay 'linear' needs it"),
    ({"decay": "cosine", "warmup_steps": 10, "decay_steps": 10},
     r"policy\.optimizer\.decay_steps: must be > warmup_steps=10 .*, got 10"),
    ({"decay_steps": 0}, r"policy\.optimizer\.decay_steps: must be >= 1 or null, got 0"),
    ({"min_lr": 2 * LR}, r"policy\.optimizer\.min_lr: must be in \[0, lr=0\.001\]"),
    ({"warmup_steps": 1.5}, r"policy\.optimizer\.warmup_steps: expected int, got 1\.5"),
])
def test_bad_schedules_are_refused_naming_the_key(optimizer: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _parse(optimizer)


def test_a_constant_decay_refuses_the_keys_it_does_not_read() -> None:
    """Nothing silently ignored: decay_steps and min_lr mean nothing to a constant decay."""
    with pytest.raises(ValueError, match=r"policy\.optimizer\.decay_steps: a constant decay does not read it"):
        _parse({"warmup_steps": 13, "decay_steps": 1000})
    with pytest.raises(ValueError, match=r"policy\.optimizer\.min_lr: a constant decay does not read it"):
        _parse({"warmup_steps": 13, "min_lr": MIN})
    cfg = _parse({"warmup_steps": 13, "warmup_init_lr": 5.0e-7}).policy.optimizer
    assert lr_at(cfg, 14) == lr_at(cfg, 2000) == LR
