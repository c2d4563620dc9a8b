"""The learning rate of each training step, from the recipe's `policy.optimizer` section.

One pure function, so both training backends set the same lr for the same step, and a resumed
run (which passes the engine's global step, not a count of its own) picks up where it stopped.

The shape is megatron-core's `OptimizerParamScheduler`, which the reference's recipes use: a
linear warm-up from `warmup_init_lr` to `lr` over `warmup_steps` steps, then `lr` held
(`constant`) or decayed to `min_lr` (`linear`, `cosine`) by step `decay_steps` (counted from the
start of training, warm-up included) and held there. As there and in torch's LinearLR, the
scheduler moves after each optimizer step, so step 1 trains at `warmup_init_lr` and step
`warmup_steps + 1` is the first at `lr`.
"""

from __future__ import annotations

import math

from rl.config import OptimizerConfig

__all__ = ["lr_at"]


def lr_at(cfg: OptimizerConfig, step: int) -> float:
    """The lr training step `step` (the engine's, from 1) takes under `cfg`."""
    if step < 1:
        raise ValueError(f"lr_at: training steps count from 1, got {step}")
    done = step - 1  # optimizer steps before this one
    warmup = cfg.warmup_steps
    if done < warmup:
        return cfg.warmup_init_lr + (cfg.lr - cfg.warmup_init_lr) * done / warmup
    if cfg.decay == "constant":
        return cfg.lr
    if done >= cfg.decay_steps:
        return cfg.min_lr
    ratio = (done - warmup) / (cfg.decay_steps - warmup)
    if cfg.decay == "linear":
        coeff = 1.0 - ratio
    elif cfg.decay == "cosine":
        coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
    else:  # a choice rl/config.py's DECAYS gained and this function does not compute
        raise ValueError(f"policy.optimizer.decay: lr_at computes no {cfg.decay!r} decay")
    return cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)
