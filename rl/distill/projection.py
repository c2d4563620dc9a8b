"""The sparse teacher-to-student token projection W (student vocab x teacher vocab).

Row v says which teacher tokens student token v's text is made of: the text is re-encoded by
the teacher tokenizer into pieces p1..pn weighted 0.9 * 0.1**(i-1) (the first piece carries the
meaning; n = 2 gives 0.909 / 0.091 after normalising), a token whose text is a whole teacher
token is pinned to its twin with weight 1, rows are normalised to sum 1 and the `topk` largest
weights kept. A row with no text (an id past the tokenizer, padding of the LM head) is empty.

Its shape is the CONFIGURED vocabulary of each side, max(tokenizer size, largest id + 1), never
the largest index seen in a batch: the reference's seed sized it from the batch, so any token
past the largest one seen fell off the projection (planted here as the fault
`xtoken_projection_from_max_index`, rl/faults.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl.distill.align import canonical_tokens

__all__ = ["FIRST_PIECE", "PIECE_DECAY", "Projection", "build_projection", "vocab_size"]

FIRST_PIECE, PIECE_DECAY = 0.9, 0.1


def vocab_size(tokenizer: Any) -> int:
    """A tokenizer's configured vocabulary: max(its size, largest id + 1)."""
    return max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)


@dataclass(frozen=True)
class Projection:
    """W as `topk` (teacher id, weight) pairs per student row; unused slots have weight 0."""

    indices: torch.Tensor  # [V_student, k] long
    weights: torch.Tensor  # [V_student, k] float32
    num_teacher: int

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.indices.shape[0]), self.num_teacher

    def apply(self, probs: torch.Tensor) -> torch.Tensor:
        """probs [N, V_student] @ W -> [N, V_teacher], differentiable in `probs`."""
        rows, k = self.indices.shape
        src = (probs[:, :, None] * self.weights.to(probs)[None]).reshape(probs.shape[0], rows * k)
        out = torch.zeros(probs.shape[0], self.num_teacher, dtype=probs.dtype, device=probs.device)
        return out.index_add(1, self.indices.reshape(-1).to(probs.device), src)

    def cropped(self, rows: int, cols: int) -> Projection:
        """The first `rows` x `cols` block (only the planted fault builds one)."""
        keep = self.indices[:rows] < cols
        return Projection(indices=torch.where(keep, self.indices[:rows], 0),
                          weights=torch.where(keep, self.weights[:rows], 0.0), num_teacher=cols)


def _row(pieces: list[int], twin: int | None, topk: int) -> list[tuple[int, float]]:
    if twin is not None:
        return [(twin, 1.0)]
    weights: dict[int, float] = {}
    for i, piece in enumerate(pieces):
        weights[piece] = weights.get(piece, 0.0) + FIRST_PIECE * PIECE_DECAY**i
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:topk]
    kept = sum(w for _, w in ranked)
    return [(i, w / kept) for i, w in ranked]


def build_projection(student: Any, teacher: Any, *, topk: int) -> Projection:
    """W from the two tokenizers (module docstring); shape = both configured vocab sizes."""
    if topk < 1:
        raise ValueError(f"algorithm.distill.projection_topk: must be >= 1, got {topk}")
    s_text, t_text = canonical_tokens(student), canonical_tokens(teacher)
    twin: dict[str, int] = {}
    for token_id, text in enumerate(t_text):
        twin.setdefault(text, token_id)
    plain = [t if t and not t.startswith("\x00") else "" for t in s_text]
    encoded = teacher(plain, add_special_tokens=False)["input_ids"]
    indices = torch.zeros(len(s_text), topk, dtype=torch.long)
    weights = torch.zeros(len(s_text), topk, dtype=torch.float32)
    for v, text in enumerate(s_text):
        row = _row(encoded[v] if plain[v] else [], twin.get(text) if text else None, topk)
        for slot, (token_id, weight) in enumerate(row):
            indices[v, slot], weights[v, slot] = token_id, weight
    return Projection(indices=indices, weights=weights, num_teacher=vocab_size(teacher))
