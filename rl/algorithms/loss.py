"""Clipped policy-gradient loss (PPO/GRPO) with importance-sampling correction and reference KL.

Per token t of row b, with r = exp(curr - prev) and advantage A[b]:

    pg      = max(-A * r, -A * clip(r, 1 - clip_low, 1 + clip_high))
    w       = exp(prev - gen)                 # generator -> trainer mismatch correction
              tis:    clamp(w, 0, tis_cap)
              icepop: w if icepop_low <= w <= icepop_high else 0
    kl      = exp(ref - curr) - 1 - (ref - curr)          # k3, see kl.py
    loss    = sum(mask * w * pg) / N  +  kl_beta * sum(mask * kl) / N

with `mask = token_mask * sample_mask[:, None]` and N the token count. As in the reference,
the IS weight multiplies the policy-gradient term only, not the KL term. With
`is_correction: false`, w = 1.

Data parallelism: pass `num_tokens` = the GLOBAL masked token count; each rank's loss is then
its share of the global token mean, so the sum over ranks equals the single-rank loss (and
its gradient). Every metric returned is a token (or row) mean over the same N, or a count,
so metrics are also summed over ranks.
"""

from __future__ import annotations

import torch

from rl.algorithms.kl import gen_kl_error, k3, masked_mean, ref_kl, token_mult_prob_error
from rl.algorithms.loss_config import PREV_LOGPROBS, TRUNCATIONS, LossConfig
from rl.data.errors import DataIntegrityError

__all__ = ["LOSS_METRICS", "LossConfig", "PREV_LOGPROBS", "TRUNCATIONS", "clipped_pg_loss", "clipped_pg_loss_on_device",
           "importance_weights", "needs_reference", "prev_from_training", "prev_logprobs_refusal"]

# The metrics `clipped_pg_loss` returns, in the order `clipped_pg_loss_on_device` stacks them.
LOSS_METRICS = ("loss", "pg_loss", "kl_penalty", "clip_fraction", "approx_kl", "ratio_mean", "is_weight_mean",
                "is_truncated_fraction", "token_mult_prob_error", "gen_kl_error", "num_tokens", "num_valid_samples")

def importance_weights(
    prev_logprobs: torch.Tensor, gen_logprobs: torch.Tensor, cfg: LossConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncated IS weights `exp(prev - gen)` (no grad) and the bool mask of truncated tokens.

    Non-finite weights (e.g. -inf log-probs in padding) become 0.
    """
    w = torch.exp(prev_logprobs - gen_logprobs).detach()
    w = torch.nan_to_num(w, nan=0.0, posinf=0.0, neginf=0.0)
    if cfg.truncation == "tis":
        truncated = w > cfg.tis_cap
        w = w.clamp(min=0.0, max=cfg.tis_cap)
    elif cfg.truncation == "icepop":
        truncated = (w < cfg.icepop_low) | (w > cfg.icepop_high)
        w = torch.where(truncated, torch.zeros_like(w), w)
    else:
        truncated = torch.zeros_like(w, dtype=torch.bool)
    return w, truncated


def _zero_outside(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep, x, torch.zeros_like(x))


def _check_shapes(shape: torch.Size, named: dict[str, torch.Tensor | None]) -> None:
    for name, tensor in named.items():
        if tensor is not None:
            if tensor.shape != shape:
                raise DataIntegrityError(
                    f"clipped_pg_loss: {name} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")


def needs_reference(loss_cfg: LossConfig) -> bool:
    """Whether a step needs the reference policy's log-probs: only for a KL term in the loss.

    With `kl_beta: 0` the reference pass is skipped (a full forward over every row, ~8% of an
    end-to-end step on one H200), and with it the `train/ref_kl` monitor."""
    return loss_cfg.kl_beta != 0.0


def prev_from_training(loss_cfg: LossConfig) -> bool:
    """Whether the step's `prev_logprobs` are the training forward's (no separate pass)."""
    return loss_cfg.prev_logprobs == "training"


def prev_logprobs_refusal(loss_cfg: LossConfig, *, algorithm: str, pp: int) -> str | None:
    """Why `prev_logprobs: training` cannot run this way, or None."""
    if not prev_from_training(loss_cfg):
        return None
    if algorithm != "grpo":
        return f"algorithm.loss.prev_logprobs: training is grpo's; {algorithm} has no clipped loss to take them from"
    if pp > 1:
        return ("algorithm.loss.prev_logprobs: training needs policy.parallel.pp 1 (in a pipeline only the last "
                "stage sees the log-probs); use pass")
    return None


def clipped_pg_loss(**kwargs) -> tuple[torch.Tensor, dict[str, float]]:
    """The ClippedPG loss over a [B, T] batch and its metrics as floats (`clipped_pg_loss_on_device`,
    read in one device-to-host copy): see the module docstring for how they add up over ranks."""
    loss, values = clipped_pg_loss_on_device(**kwargs)
    return loss, dict(zip(LOSS_METRICS, values.tolist()))


def clipped_pg_loss_on_device(
    *,
    curr_logprobs: torch.Tensor,
    prev_logprobs: torch.Tensor,
    gen_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    token_mask: torch.Tensor,
    sample_mask: torch.Tensor,
    cfg: LossConfig,
    num_tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ClippedPG loss over a [B, T] batch of sampled-token log-probs, and its metrics left on
    the loss's device.

    Why on the device: reading a value there waits for the GPU. A train step that read each
    micro-batch's metrics held the host until that forward had run, so the GPU then idled while the
    host queued the backward; the step sums these tensors where they are and reads them once.

    Args:
        curr_logprobs: [B, T] under the policy being trained (carries the gradient).
        prev_logprobs: [B, T] under the policy before this step's updates.
        gen_logprobs: [B, T] as reported by the generation engine.
        ref_logprobs: [B, T] under the reference policy; may be None when `kl_beta == 0`.
        advantages: [B] (broadcast over tokens) or [B, T].
        token_mask: [B, T] 1 for response tokens that count.
        sample_mask: [B] loss multiplier per row (0 drops a row, e.g. an overlong sample).
        cfg: the loss section of the recipe.
        num_tokens: divisor N; None means this batch's own masked token count. Data-parallel
            ranks pass the global count.

    Returns:
        (scalar loss, metrics): metrics a [len(LOSS_METRICS)] tensor of the loss's dtype (at least
        fp32) in LOSS_METRICS order.
    """
    shape = curr_logprobs.shape
    if curr_logprobs.ndim != 2:
        raise DataIntegrityError(f"curr_logprobs must be [B, T], got {tuple(shape)}")
    _check_shapes(
        shape,
        {"prev_logprobs": prev_logprobs, "gen_logprobs": gen_logprobs,
         "ref_logprobs": ref_logprobs, "token_mask": token_mask},
    )
    if sample_mask.shape != shape[:1]:
        raise DataIntegrityError(f"sample_mask must be [B], got {tuple(sample_mask.shape)}")
    if cfg.kl_beta != 0.0 and ref_logprobs is None:
        raise ValueError("algorithm.loss.kl_beta is non-zero but no ref_logprobs were given")
    # Loss math runs in at least fp32, also for a bf16 policy (as the reference does).
    dtype = torch.promote_types(curr_logprobs.dtype, torch.float32)
    adv = advantages[:, None] if advantages.ndim == 1 else advantages
    adv = adv.to(dtype)
    mask = token_mask.to(dtype) * sample_mask.to(dtype)[:, None]
    n = num_tokens

    # Zero the log-probs of masked-out tokens first: a -inf there would give NaN gradients
    # even through a masked sum (0 * nan = nan in backward).
    keep = mask != 0
    curr_logprobs, prev_logprobs, gen_logprobs = (
        _zero_outside(x.to(dtype), keep) for x in (curr_logprobs, prev_logprobs, gen_logprobs)
    )
    if ref_logprobs is not None:
        ref_logprobs = _zero_outside(ref_logprobs.to(dtype), keep)

    ratio = torch.exp(curr_logprobs - prev_logprobs)
    clipped_ratio = ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    pg = torch.maximum(-adv * ratio, -adv * clipped_ratio)

    w, truncated = importance_weights(prev_logprobs, gen_logprobs, cfg)
    applied = w if cfg.is_correction else torch.ones_like(w)
    pg_loss = masked_mean(applied * pg, mask, n)

    if ref_logprobs is not None:
        kl = ref_kl(curr_logprobs, ref_logprobs, mask, n)
    else:
        kl = torch.zeros((), dtype=dtype, device=curr_logprobs.device)
    loss = pg_loss + cfg.kl_beta * kl if cfg.kl_beta != 0.0 else pg_loss

    with torch.no_grad():
        # Clipping is active where it zeroes the gradient: the ratio left the trust region
        # in the direction the advantage pushes it.
        clip_active = ((ratio < 1.0 - cfg.clip_low) & (adv < 0)) | (
            (ratio > 1.0 + cfg.clip_high) & (adv > 0)
        )
        log_ratio = curr_logprobs.detach() - prev_logprobs
        values = (  # LOSS_METRICS' order
            loss.detach(),
            pg_loss.detach(),
            kl.detach(),
            masked_mean(clip_active.to(mask.dtype), mask, n),
            masked_mean(k3(prev_logprobs, curr_logprobs.detach()), mask, n),
            masked_mean(torch.exp(log_ratio), mask, n),
            masked_mean(w, mask, n),
            masked_mean(truncated.to(mask.dtype), mask, n),
            token_mult_prob_error(gen_logprobs, prev_logprobs, mask, n),
            gen_kl_error(gen_logprobs, prev_logprobs, mask, n),
            mask.sum(),
            (sample_mask != 0).sum().to(mask.dtype),
        )
        metrics = torch.stack([t.to(dtype) for t in values])
    return loss, metrics
