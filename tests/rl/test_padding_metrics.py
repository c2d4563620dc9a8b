"""The per-step padding fractions count the slots the decode and the passes carry."""

from __future__ import annotations

import pytest
import torch

from rl.metrics.padding import SlotCount, decoded_slots, padding_fractions


def test_padding_fractions() -> None:
    # prompts 2 and 4, responses 3 and 1: decode block 2 x (4 + 3) = 14 slots, rows 2 x 5 = 10
    block = decoded_slots(torch.tensor([5, 5]), torch.tensor([2, 4]))
    assert block == SlotCount(tokens=10, slots=14)
    out = padding_fractions(torch.tensor([5, 5]), block)
    assert out["train/padding_fraction_generation"] == pytest.approx(1 - 10 / 14)
    assert out["train/padding_fraction_training"] == 0.0
    same = padding_fractions(torch.tensor([7, 7]), decoded_slots(torch.tensor([7, 7]), torch.tensor([4, 4])))
    assert same == {"train/padding_fraction_generation": 0.0, "train/padding_fraction_training": 0.0}


def test_blocks_add_up() -> None:
    # two groups decoded apart: (1 + 2) x 1 rows and (4 + 1) x 1 rows = 8 slots for 8 tokens
    parts = decoded_slots(torch.tensor([3]), torch.tensor([1])) + decoded_slots(torch.tensor([5]), torch.tensor([4]))
    assert parts == SlotCount(tokens=8, slots=8)
    assert padding_fractions(torch.tensor([3, 5]), parts)["train/padding_fraction_generation"] == 0.0
