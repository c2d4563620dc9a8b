"""What fraction of a step's token slots were padding, in generation and in training.

Generation: the decoding loops carry every row in one [rows, longest prompt + longest response]
block (a row that ended, or a prompt shorter than the longest, fills its slots with pad), so
`padding_fraction_generation` = 1 - real tokens / (rows x (longest prompt + longest response)).
Training: the log-prob and training passes read the rows right-padded to the longest row of the
step, so `padding_fraction_training` = 1 - real tokens / (rows x longest row); this is what an
unpacked pass runs (a packed pass, `policy.sequence_packing`, runs fewer slots).
"""

from __future__ import annotations

import torch


def padding_fractions(lengths: torch.Tensor, response_lengths: torch.Tensor) -> dict[str, float]:
    """The two fractions of the module docstring from each row's total and response length ([B] each)."""
    lengths, response_lengths = lengths.double(), response_lengths.double()
    real = float(lengths.sum())
    rows = lengths.numel()
    prompt_lengths = lengths - response_lengths
    generation_slots = rows * float(prompt_lengths.max() + response_lengths.max())
    training_slots = rows * float(lengths.max())
    return {"train/padding_fraction_generation": 1.0 - real / generation_slots,
            "train/padding_fraction_training": 1.0 - real / training_slots}
