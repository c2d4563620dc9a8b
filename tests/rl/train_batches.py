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


def padded_train_batch(*, rows: int, length: int, prompt: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    """`rows` right-padded rows of random lengths in [length // 2, length], the first `prompt` tokens
    of each the prompt; every column a train step reads but the old and reference log-probs."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    response = mask.clone()
    response[:, :prompt] = 0
    return dict(input_ids=torch.randint(1, vocab, (rows, length), generator=g) * mask, attention_mask=mask,
                response_mask=response, gen_logprobs=-torch.rand(rows, length, generator=g) * response,
                advantages=torch.randn(rows, generator=g), sample_mask=torch.ones(rows))
