"""`Generation`: one batch of rollouts, in the layout the log-prob and training passes read."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase


@dataclass(kw_only=True)
class Generation:
    """One batch of rollouts, right-padded to [B, P + max_new_tokens] (P: the longest prompt).

    input_ids: row b's prompt (prompt_lengths[b] tokens), its response, then pad.
    attention_mask: 1 on prompt and response tokens (including the eos).
    response_mask: 1 on generated tokens only (including the eos).
    gen_logprobs: temperature-1 log-prob of each generated token; 0 elsewhere.
    lengths: unpadded total length (prompt + response) per row.
    truncated: True where no eos was produced within max_new_tokens.
    prompt_lengths: LongTensor [B], each row's prompt length.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    gen_logprobs: torch.Tensor
    lengths: torch.Tensor
    truncated: torch.Tensor
    prompt_lengths: torch.Tensor

    def response_ids(self) -> list[list[int]]:
        """The generated token ids of each row (eos included when produced)."""
        return [row[p:n].tolist() for row, p, n in
                zip(self.input_ids, self.prompt_lengths.tolist(), self.lengths.tolist())]

    def columns(self) -> dict[str, torch.Tensor]:
        """The fields as a dict of tensors (what a generation worker returns)."""
        return {name: getattr(self, name) for name in FIELDS}

    @classmethod
    def of(cls, columns: dict[str, torch.Tensor]) -> Generation:
        """The inverse of `columns` (extra keys ignored)."""
        return cls(**{name: columns[name] for name in FIELDS})


FIELDS = ("input_ids", "attention_mask", "response_mask", "gen_logprobs", "lengths", "truncated", "prompt_lengths")


def decode_responses(tokenizer: PreTrainedTokenizerBase, gen: Generation) -> list[str]:
    """Response texts without special tokens (eos, pad): what a task's `score` reads."""
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in gen.response_ids()]
