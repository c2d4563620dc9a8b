"""The per-step padding fractions count the slots the decode and the passes carry."""

from __future__ import annotations

import pytest
import torch

from rl.metrics.padding import padding_fractions


def test_padding_fractions() -> None:
    # prompts 2 and 4, responses 3 and 1: decode block 2 x (4 + 3) = 14 slots, rows 2 x 5 = 10
    out = padding_fractions(torch.tensor([5, 5]), torch.tensor([3, 1]))
    assert out["train/padding_fraction_generation"] == pytest.approx(1 - 10 / 14)
    assert out["train/padding_fraction_training"] == 0.0
    same = padding_fractions(torch.tensor([7, 7]), torch.tensor([3, 3]))
    assert same == {"train/padding_fraction_generation": 0.0, "train/padding_fraction_training": 0.0}
