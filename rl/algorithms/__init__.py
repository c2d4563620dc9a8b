"""GRPO math: advantages, the clipped policy-gradient loss, KL estimators (pure torch); the loop
that drives them is rl/loops/grpo.py.

The names below load on first use: rl/config.py reads `rl.algorithms.loss_config` without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BASELINES",
    "TRUNCATIONS",
    "LossConfig",
    "clipped_pg_loss",
    "dynamic_sampling_keep",
    "gen_kl_error",
    "grpo_advantages",
    "importance_weights",
    "k1",
    "k2",
    "k3",
    "masked_mean",
    "token_mult_prob_error",
]
_HOME = {
    "BASELINES": "rl.algorithms.advantages", "dynamic_sampling_keep": "rl.algorithms.advantages",
    "grpo_advantages": "rl.algorithms.advantages",
    "gen_kl_error": "rl.algorithms.kl", "k1": "rl.algorithms.kl", "k2": "rl.algorithms.kl", "k3": "rl.algorithms.kl",
    "masked_mean": "rl.algorithms.kl", "token_mult_prob_error": "rl.algorithms.kl",
    "TRUNCATIONS": "rl.algorithms.loss_config", "LossConfig": "rl.algorithms.loss_config",
    "clipped_pg_loss": "rl.algorithms.loss", "importance_weights": "rl.algorithms.loss",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rl.algorithms' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
