"""Align a student and a teacher token sequence of one text into chunk pairs (REFERENCE.md).

Two tokenizers split one text differently ("12" is one teacher token, two student tokens), so
a per-position comparison is meaningless. We pair runs of positions that decode to the same
text: a global dynamic programme (Needleman-Wunsch style) over canonical token strings, where

* one student token against one teacher token scores MATCH when their texts are equal and
  MISMATCH otherwise (the pair is kept, `is_correct` False);
* one token against a run of 2..MAX_SPAN tokens on the other side scores SPAN when the texts
  are equal (lower than two matches, so identical splits stay one-to-one);
* a token left out scores GAP (no chunk).

Ties are broken in a fixed order, so an alignment is a pure function of its inputs. When both
sides decode to the same text (the usual case), every character offset where both have a token
boundary is an exact anchor: the programme runs per segment between anchors (a few tokens),
so long sequences cost O(n + m) segments rather than O(n * m) cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

__all__ = ["GAP", "MATCH", "MAX_SPAN", "MISMATCH", "SPAN", "Chunk", "align", "canonical_tokens"]

MATCH, SPAN, MISMATCH, GAP = 2.0, 1.0, -1.0, -1.0
MAX_SPAN = 4
SPECIAL_ROLES = ("pad", "eos", "bos", "unk")


@dataclass(frozen=True)
class Chunk:
    """Student positions [s0, s1) and teacher positions [t0, t1) paired as one piece of text."""

    s0: int
    s1: int
    t0: int
    t1: int
    is_correct: bool


def canonical_tokens(tokenizer: Any) -> list[str]:
    """Plain text of every token id (byte-level glyphs and space markers decoded away).

    Special tokens become a marker of their role (`\\x00eos\\x00`), so one tokenizer's `<eos>`
    pairs with another's `<|end|>`; other added special tokens keep their content behind NUL,
    which no text contains.
    """
    size = max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)
    texts = tokenizer.batch_decode([[i] for i in range(size)], clean_up_tokenization_spaces=False)
    for token_id in tokenizer.all_special_ids:
        texts[token_id] = f"\x00{tokenizer.convert_ids_to_tokens(token_id)}\x00"
    for role in SPECIAL_ROLES:
        token_id = getattr(tokenizer, f"{role}_token_id", None)
        if token_id is not None:
            texts[token_id] = f"\x00{role}\x00"
    return texts


def _moves() -> list[tuple[int, int]]:
    """(student tokens, teacher tokens) a step may pair, in tie-break order."""
    spans = [(1, k) for k in range(2, MAX_SPAN + 1)] + [(k, 1) for k in range(2, MAX_SPAN + 1)]
    return [(1, 1), *spans]


def _dp(s: list[str], t: list[str], s_base: int, t_base: int) -> list[Chunk]:
    """The best-scoring chunk pairs of s against t (positions offset by the bases)."""
    n, m = len(s), len(t)
    score = [[float("-inf")] * (m + 1) for _ in range(n + 1)]
    back: list[list[tuple[int, int, bool] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    score[0][0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            if i == j == 0:
                continue
            best, how = float("-inf"), None
            for a, b in _moves():
                if a > i or b > j or score[i - a][j - b] == float("-inf"):
                    continue
                equal = "".join(s[i - a:i]) == "".join(t[j - b:j])
                if (a, b) != (1, 1) and not equal:
                    continue
                gain = (MATCH if equal else MISMATCH) if (a, b) == (1, 1) else SPAN
                if score[i - a][j - b] + gain > best:
                    best, how = score[i - a][j - b] + gain, (a, b, equal)
            for a, b in ((1, 0), (0, 1)):
                if a <= i and b <= j and score[i - a][j - b] + GAP > best:
                    best, how = score[i - a][j - b] + GAP, (a, b, False)
            score[i][j], back[i][j] = best, how
    chunks, i, j = [], n, m
    while i or j:
        a, b, equal = back[i][j]  # type: ignore[misc]
        if a and b:
            chunks.append(Chunk(s_base + i - a, s_base + i, t_base + j - b, t_base + j, equal))
        i, j = i - a, j - b
    return chunks[::-1]


def _anchors(s: list[str], t: list[str]) -> list[tuple[int, int]]:
    """(student index, teacher index) pairs at character offsets where both have a boundary."""
    s_off = {off: i for i, off in enumerate(accumulate((len(x) for x in s), initial=0))}
    t_off = list(accumulate((len(x) for x in t), initial=0))
    return [(s_off[off], j) for j, off in enumerate(t_off) if off in s_off]


def align(student: list[str], teacher: list[str]) -> list[Chunk]:
    """Chunk pairs of two canonical token sequences, in order (see the module docstring).

    A token of width 0 (an empty decode) is never its own anchor, so it joins a neighbour's
    segment; sequences whose texts differ are aligned by one programme over all of them.
    """
    if "".join(student) != "".join(teacher) or any(not x for x in (*student, *teacher)):
        return _dp(student, teacher, 0, 0)
    chunks: list[Chunk] = []
    points = _anchors(student, teacher)
    for (i0, j0), (i1, j1) in zip(points, points[1:]):
        chunks.extend(_dp(student[i0:i1], teacher[j0:j1], i0, j0))
    return chunks
