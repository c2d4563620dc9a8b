"""GRPO advantages: a per-prompt baseline subtracted from each reward, optionally over std.

The batch holds `group_size` generations per prompt in contiguous rows (the driver repeats each
prompt with `repeat_interleave`), so group g is rows `[g*G, (g+1)*G)`.

Semantics follow the reference (NeMo-RL's per-prompt baseline and std):

* baseline `leave_one_out` (RLOO): row i's baseline is the mean reward of the OTHER valid rows
  of its group; `mean`: the mean of all valid rows of its group.
* std is the Bessel-corrected std of the same rows the baseline averaged over: for
  leave-one-out, the G-1 other rows (divisor G-2); for mean, all G rows (divisor G-1).
  When fewer than two values remain, std is 0.
* a group with at most one valid row gets baseline = reward (advantage 0) and std 0.
* `A = r - b`; when normalizing, rows with std > 0 are divided by `std + 1e-6`; rows with
  std == 0 keep `r - b` ("don't sharpen what has no variation").
"""

from __future__ import annotations

import torch

__all__ = ["BASELINES", "NORMALIZE_EPS", "grpo_advantages", "dynamic_sampling_keep"]

BASELINES = ("leave_one_out", "mean")
NORMALIZE_EPS = 1e-6


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """`rewards` viewed as [num_groups, group_size]; ValueError when it does not fit."""
    if group_size <= 0:
        raise ValueError(f"generations_per_prompt (group_size) must be positive, got {group_size}")
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D [batch], got shape {tuple(rewards.shape)}")
    if rewards.numel() % group_size != 0:
        raise ValueError(
            f"rewards has {rewards.numel()} rows, not a multiple of "
            f"generations_per_prompt (group_size) {group_size}"
        )
    return rewards.view(-1, group_size)


def grpo_advantages(
    rewards: torch.Tensor,
    *,
    group_size: int,
    baseline: str = "leave_one_out",
    normalize: bool = True,
    valid_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row GRPO advantages.

    Args:
        rewards: [B] float rewards, `group_size` contiguous rows per prompt.
        group_size: generations per prompt (G).
        baseline: `leave_one_out` or `mean`.
        normalize: divide by `std + 1e-6` where std > 0.
        valid_mask: [B] 0/1; rows with 0 are left out of every baseline and std.

    Returns:
        (advantages [B], baseline [B], std [B]), all float on the rewards' device.

    Raises:
        ValueError: unknown `baseline`, or rows not a multiple of `group_size`.
    """
    if baseline not in BASELINES:
        raise ValueError(f"algorithm.baseline must be one of {list(BASELINES)}, got {baseline!r}")
    dtype = torch.promote_types(rewards.dtype, torch.float32)
    r = _groups(rewards.to(dtype), group_size)
    v = torch.ones_like(r) if valid_mask is None else valid_mask.to(dtype).view_as(r)

    n_valid = v.sum(dim=1, keepdim=True)  # [N, 1]
    total = (v * r).sum(dim=1, keepdim=True)
    total_sq = (v * r * r).sum(dim=1, keepdim=True)
    if baseline == "leave_one_out":
        count = n_valid - 1
        mean = (total - v * r) / count
        mean_sq = (total_sq - v * r * r) / count
    else:
        count = n_valid.expand_as(r)
        mean = total.expand_as(r) / count
        mean_sq = total_sq.expand_as(r) / count
    count = count.expand_as(r)

    # Sample (Bessel) variance of the averaged rows; rounding can make it slightly negative.
    var = ((mean_sq - mean * mean) * count / (count - 1)).clamp(min=0.0)
    std = torch.where(count > 1, var.sqrt(), torch.zeros_like(var))

    degenerate = (n_valid <= 1).expand_as(r)  # no valid peer: ignore the group in the loss
    base = torch.where(degenerate, r, mean)
    std = torch.where(degenerate, torch.zeros_like(std), std)

    adv = r - base
    if normalize:
        adv = torch.where(std > 0, adv / (std + NORMALIZE_EPS), adv)
    return adv.reshape(-1), base.reshape(-1), std.reshape(-1)


def dynamic_sampling_keep(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Bool mask [num_groups]: True for groups whose rewards are not all equal.

    A group with identical rewards has zero std, so all its advantages are 0 and it carries
    no gradient; dynamic sampling (DAPO) drops it and samples more prompts. Expand to rows with
    `keep.repeat_interleave(group_size)`.

    Note: the reference filters per ROW on its leave-one-out std, which can split a group
    (in [1, 0, 0, 0] the row with reward 1 has zero leave-one-out std). We keep or drop whole
    groups, which keeps the `group_size` rows-per-prompt layout intact.
    """
    r = _groups(rewards, group_size)
    return r.amax(dim=1) != r.amin(dim=1)
