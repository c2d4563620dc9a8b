"""A GRPO train step's rows for the backend tests: right-padded rows of random lengths, each a
prompt then its response, with every column a train step reads but the pre-update and reference
log-probs (`rl.backends.train_step.TRAIN_FIELDS`)."""

from __future__ import annotations

import torch


def train_batch(*, rows: int, length: int, prompt: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    response = mask.clone()
    response[:, :prompt] = 0
    return dict(input_ids=torch.randint(1, vocab, (rows, length), generator=g) * mask, attention_mask=mask,
                response_mask=response, gen_logprobs=-torch.rand(rows, length, generator=g) * response,
                advantages=torch.randn(rows, generator=g), sample_mask=torch.ones(rows))
