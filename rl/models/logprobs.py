"""Per-token log-probabilities under a causal LM (teacher forcing).

The one formula, `gather_logprobs`, is shared with the sampler so that log-probs recorded at
generation time and recomputed here differ only by the model's own numerics (the refit and
parity checks compare them).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from rl.models.image_inputs import image_forward_kwargs


def gather_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, lse: torch.Tensor | None = None) -> torch.Tensor:
    """log_softmax(logits)[..., token_ids] in fp32 as logit - logsumexp(logits); [..., V], [...] -> [...].

    Logits of any float dtype: only the picked logit and the log-sum-exp are upcast, so compiled
    (the megatron backend's `policy.compile`, the decode step) it reads bf16 logits once, with no
    [..., V] fp32 copy. `lse`: logsumexp(logits.float(), -1) when the caller has it already."""
    picked = logits.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1).float()
    return picked - (torch.logsumexp(logits.float(), dim=-1) if lse is None else lse)


def token_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    pixel_values: torch.Tensor | None = None,
    image_grid_thw: torch.Tensor | None = None,
) -> torch.Tensor:
    """out[:, t] = log p(input_ids[:, t] | input_ids[:, :t]); out[:, 0] = 0; padding gives 0.

    Sequences are right-padded, so default positions (0..T-1) are right for every row and the
    causal model never lets padding influence a real token. Differentiable when called with
    grad enabled (the training loss uses it).

    Args:
        input_ids: LongTensor [B, T].
        attention_mask: LongTensor [B, T], 1 on real tokens, a prefix of each row.
        pixel_values, image_grid_thw: a vision-language model's row-aligned image columns,
            [B, N, D] and [B, 3] (`rl.models.image_inputs`); None for text.
    Returns:
        FloatTensor [B, T] (float32).
    """
    if input_ids.shape != attention_mask.shape or input_ids.dim() != 2:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must be equal [B, T]"
        )
    images = image_forward_kwargs(model, input_ids, pixel_values, image_grid_thw)
    out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **images)
    lp = gather_logprobs(out.logits[:, :-1], input_ids[:, 1:])
    lp = lp * attention_mask[:, 1:].to(lp.dtype)
    return torch.cat([lp.new_zeros(lp.shape[0], 1), lp], dim=1)
