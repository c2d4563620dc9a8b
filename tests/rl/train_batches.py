"""One small GRPO training batch for backend tests: every column a train step reads."""

from __future__ import annotations

import torch


def train_batch(*, vocab: int, seed: int, rows: int = 4, length: int = 12, prompt: int = 4) -> dict[str, torch.Tensor]:
    """`rows` full rows of `length` random tokens, the first `prompt` of each the prompt; old,
    behaviour and reference log-probs all one random draw, so a first step's ratio is 1."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, length), generator=g)
    mask = torch.ones_like(ids)
    response = mask.clone()
    response[:, :prompt] = 0
    base = -torch.rand(rows, length, generator=g)
    return dict(input_ids=ids, attention_mask=mask, response_mask=response, gen_logprobs=base,
                prev_logprobs=base, ref_logprobs=base, advantages=torch.randn(rows, generator=g),
                sample_mask=torch.ones(rows))
