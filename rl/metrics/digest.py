"""`train/logprob_digest`: a float fingerprint of a step's log-probs, logged by both drivers so the
parity check can compare two runs sample by sample."""

from __future__ import annotations

import torch

__all__ = ["logprob_digest"]


def logprob_digest(logprobs: torch.Tensor, mask: torch.Tensor) -> float:
    """A float fingerprint of masked per-token log-probs in row (key) order.

    A position-weighted float64 sum: any change of a value or of the row order moves it, and
    it stays continuous, so a tolerance-based parity check can still compare it.
    """
    rows, cols = logprobs.shape
    i = torch.arange(rows, dtype=torch.float64)[:, None]
    t = torch.arange(cols, dtype=torch.float64)[None, :]
    weight = 1.0 + torch.remainder(i * 31.0 + t * 17.0, 97.0) / 97.0
    return float((logprobs.double() * mask.double() * weight).sum())
