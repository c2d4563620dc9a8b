"""GRPO math: advantages, the clipped policy-gradient loss, KL estimators (pure torch)."""

from rl.algorithms.advantages import BASELINES, dynamic_sampling_keep, grpo_advantages
from rl.algorithms.kl import (
    gen_kl_error,
    k1,
    k2,
    k3,
    masked_mean,
    token_mult_prob_error,
)
from rl.algorithms.loss import TRUNCATIONS, LossConfig, clipped_pg_loss, importance_weights

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
