"""What fraction of a step's token slots were padding, in generation and in training.

Generation: a decoding loop carries every row of a call in one [rows, longest prompt + longest
response] block (a row that ended, or a prompt shorter than the longest, fills its slots with
pad), so a block holds `decoded_slots` slots; a step's `padding_fraction_generation` is 1 - real
tokens / slots over every block it decoded (with `generation.length_buckets`, one block a
group; with dynamic sampling, every round's, the groups it dropped too).
Training: the log-prob and training passes read the rows right-padded to the longest row of the
step, so `padding_fraction_training` = 1 - real tokens / (rows x longest row); this is what an
unpacked pass runs (a packed pass, `policy.sequence_packing`, runs fewer slots).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, kw_only=True)
class SlotCount:
    """Real tokens (prompt + response) and the slots that held them, over one or more decoded blocks."""

    tokens: int
    slots: int

    def __add__(self, other: SlotCount) -> SlotCount:
        return SlotCount(tokens=self.tokens + other.tokens, slots=self.slots + other.slots)


def decoded_slots(lengths: torch.Tensor, prompt_lengths: torch.Tensor) -> SlotCount:
    """The slots of one decoded block from each row's total and prompt length ([B] each)."""
    response_lengths = lengths - prompt_lengths
    rows = lengths.numel()
    return SlotCount(tokens=int(lengths.sum()), slots=rows * int(prompt_lengths.max() + response_lengths.max()))


def padding_fractions(lengths: torch.Tensor, decoded: SlotCount) -> dict[str, float]:
    """The two fractions of the module docstring: the training rows' total lengths ([B]) and the
    slots the step's decoding carried."""
    training_slots = lengths.numel() * int(lengths.max())
    return {"train/padding_fraction_generation": 1.0 - decoded.tokens / decoded.slots,
            "train/padding_fraction_training": 1.0 - int(lengths.sum()) / training_slots}
