"""Sequence packing (`policy.sequence_packing`): right-padded rows laid end to end in packed rows
of a fixed token budget, and every token put back afterwards.

A micro-batch of right-padded rows spends compute on the padding of every row shorter than its
longest. Packing places whole rows one after another in packed rows of `budget` tokens, by first
fit decreasing (longest row first, each into the first packed row with room; ties by row index,
so the plan is a pure function of the lengths and the same rows always pack the same way). Each
packed sequence keeps its own positions (0..L-1); keeping sequences apart inside the model is
the forward's job (rl/models/packed_forward.py). `unpack` returns every token to its row and
column, so the loss and everything after it see the unpacked [B, T] layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rl.data.errors import DataIntegrityError

__all__ = ["BUDGET_KEY", "Packing", "first_fit_decreasing", "packed_groups", "row_lengths"]

BUDGET_KEY = "policy.sequence_packing.max_tokens_per_row"


def row_lengths(attention_mask: torch.Tensor) -> list[int]:
    """Each row's real tokens. Packing moves the first `length` tokens of a row, so the mask must be
    a prefix of ones (right padding), as every batch of the engine is."""
    mask = attention_mask.long()
    lengths = mask.sum(1)
    if not torch.equal(mask.cumprod(1).sum(1), lengths):
        raise DataIntegrityError("attention_mask: sequence packing needs right-padded rows (a prefix of ones)")
    return lengths.tolist()


def first_fit_decreasing(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The row indices of each packed row (ascending within a packed row); no packed row holds
    more than `budget` tokens.

    Raises:
        ValueError: a row longer than the budget (it cannot be packed, and is never cut).
    """
    if budget < 1:
        raise ValueError(f"{BUDGET_KEY}: must be >= 1, got {budget}")
    for row, n in enumerate(lengths):
        if n > budget:
            raise ValueError(f"{BUDGET_KEY}: row {row} has {n} tokens, more than the {budget} a packed row "
                             "holds; raise it (null: as long as an unpacked row)")
    bins: list[list[int]] = []
    room: list[int] = []
    for row in sorted(range(len(lengths)), key=lambda r: (-lengths[r], r)):
        for b, free in enumerate(room):
            if lengths[row] <= free:
                bins[b].append(row)
                room[b] -= lengths[row]
                break
        else:
            bins.append([row])
            room.append(budget - lengths[row])
    return [sorted(b) for b in bins]


@dataclass(frozen=True, kw_only=True)
class Packing:
    """Where each token of B right-padded rows of width T sits in P packed rows of width W.

    src / dst: flat indices of the same real token in the packed [P*W] and unpacked [B*T]
    layouts; positions: each packed token's position within its sequence (0 on padding);
    sequence: its row index (-1 on padding); order: the rows in packed order.
    """

    shape: tuple[int, int]  # (B, T)
    packed_shape: tuple[int, int]  # (P, W)
    lengths: tuple[int, ...]
    order: tuple[int, ...]
    src: torch.Tensor
    dst: torch.Tensor
    positions: torch.Tensor
    sequence: torch.Tensor

    @classmethod
    def of(cls, bins: Sequence[Sequence[int]], lengths: Sequence[int], *, width: int, budget: int,
           num_packed: int | None = None) -> Packing:
        """The packing that lays out rows as `bins` says (`first_fit_decreasing`), padded with
        empty packed rows to `num_packed` (a fixed forward shape)."""
        num_packed = len(bins) if num_packed is None else num_packed
        if num_packed < len(bins):
            raise ValueError(f"{len(bins)} packed rows do not fit in {num_packed}")
        src, dst = [], []
        positions = torch.zeros(num_packed, budget, dtype=torch.long)
        sequence = torch.full((num_packed, budget), -1, dtype=torch.long)
        for p, rows in enumerate(bins):
            offset = 0
            for row in rows:
                n = lengths[row]
                if offset + n > budget:
                    raise ValueError(f"{BUDGET_KEY}: packed row {p} would hold more than {budget} tokens")
                src.append(torch.arange(p * budget + offset, p * budget + offset + n))
                dst.append(torch.arange(row * width, row * width + n))
                positions[p, offset:offset + n] = torch.arange(n)
                sequence[p, offset:offset + n] = row
                offset += n
        order = tuple(row for rows in bins for row in rows)
        if sorted(order) != list(range(len(lengths))):
            raise ValueError(f"the packed rows must hold each of the {len(lengths)} rows once, got {order}")
        empty = torch.zeros(0, dtype=torch.long)
        return cls(shape=(len(lengths), width), packed_shape=(num_packed, budget), lengths=tuple(lengths),
                   order=order, src=torch.cat(src or [empty]), dst=torch.cat(dst or [empty]),
                   positions=positions, sequence=sequence)

    def to(self, device: torch.device | str) -> Packing:
        return dataclasses.replace(self, src=self.src.to(device), dst=self.dst.to(device),
                                   positions=self.positions.to(device), sequence=self.sequence.to(device))

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, ...] -> [P, W, ...]; padding is 0."""
        rest = x.shape[2:]
        flat = x.reshape(-1, *rest)[self.dst]
        out = x.new_zeros(self.packed_shape[0] * self.packed_shape[1], *rest)
        return out.index_put((self.src,), flat).reshape(*self.packed_shape, *rest)

    def unpack(self, y: torch.Tensor) -> torch.Tensor:
        """[P, W, ...] -> [B, T, ...]; differentiable; every place no token returns to is 0."""
        rest = y.shape[2:]
        flat = y.reshape(-1, *rest)[self.src]
        out = y.new_zeros(self.shape[0] * self.shape[1], *rest)
        return out.index_put((self.dst,), flat).reshape(*self.shape, *rest)

    def scored(self) -> torch.Tensor:
        """[P, W] bool: tokens that have a predecessor in their own sequence (a log-prob to read)."""
        return self.positions > 0

    def attention_mask(self) -> torch.Tensor:
        """[P, 1, W, W] bool, True where a query may attend a key: causal within its own sequence.
        Padding attends to the padding before it (never an empty row, which SDPA would turn to NaN)."""
        same = self.sequence[:, :, None] == self.sequence[:, None, :]
        causal = torch.ones(self.packed_shape[1], self.packed_shape[1], dtype=torch.bool,
                            device=self.sequence.device).tril()
        return (same & causal)[:, None]

    def sequence_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(index, valid), both [B, L] with L the longest row: the flat packed place of each row's
        tokens, for layers that run each sequence on its own (rl/models/packed_forward.py)."""
        rows, longest = self.shape[0], max(max(self.lengths, default=0), 1)
        valid = torch.arange(longest, device=self.src.device)[None, :] < torch.tensor(
            self.lengths, device=self.src.device)[:, None]
        index = torch.zeros(rows, longest, dtype=torch.long, device=self.src.device)
        index[valid] = self.src[torch.argsort(self.dst)]  # row-major, as boolean indexing fills
        return index, valid


def packed_groups(lengths: Sequence[int], *, width: int, budget: int,
                  rows_per_forward: int) -> list[tuple[list[int], Packing]]:
    """The forwards of a packed pass: rows first-fit-decreasing into packed rows of `budget`
    tokens, `rows_per_forward` packed rows to a forward (the last padded with empty packed rows,
    so every forward has one shape). Returns each forward's rows (ascending) and its packing of
    them (row i of the forward is `rows[i]`)."""
    bins = first_fit_decreasing(lengths, budget)
    out = []
    for start in range(0, len(bins), rows_per_forward):
        group = bins[start:start + rows_per_forward]
        rows = sorted(row for b in group for row in b)
        local = {row: i for i, row in enumerate(rows)}
        packing = Packing.of([[local[row] for row in b] for b in group], [lengths[row] for row in rows],
                             width=width, budget=budget, num_packed=rows_per_forward)
        out.append((rows, packing))
    return out
