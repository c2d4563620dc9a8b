"""The packing plan (rl/models/packing.py): every token goes to one packed place and comes back
to its own, no packed row holds more than the budget, a row longer than it is refused."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.backends.train_step import packed_micro_batches
from rl.data.errors import DataIntegrityError
from rl.models.packing import first_fit_decreasing, row_lengths


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], int, int, int]:
    """(row lengths, row width T, budget >= the longest row, packed rows per forward)."""
    width = draw(st.integers(1, 40))
    lengths = draw(st.lists(st.integers(0, width), min_size=1, max_size=24))
    budget = draw(st.integers(max(max(lengths), 1), 2 * width))
    return lengths, width, budget, draw(st.integers(1, 4))


def _rows(lengths: list[int], width: int) -> dict[str, torch.Tensor]:
    """Right-padded rows whose every real token is a distinct positive number (padding 0)."""
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = (torch.arange(len(lengths) * width).reshape(-1, width) + 1) * mask
    return {"input_ids": ids, "attention_mask": mask}


@settings(max_examples=200, deadline=None)
@given(batches())
def test_every_token_returns_to_its_place_and_no_packed_row_exceeds_the_budget(batch) -> None:
    lengths, width, budget, size = batch
    columns = _rows(lengths, width)
    forwards = packed_micro_batches(columns, size, budget)
    held = torch.cat([rows for _, rows, _ in forwards])
    assert sorted(held.tolist()) == list(range(len(lengths)))  # each row in exactly one forward
    for mb, rows, packing in forwards:
        assert torch.equal(mb["input_ids"], columns["input_ids"][rows])
        packed = packing.pack(mb["input_ids"])
        assert packed.shape == (size, budget)  # one shape for every forward
        assert int((packing.sequence >= 0).sum(1).max()) <= budget
        assert int((packed > 0).sum()) == sum(lengths[r] for r in rows.tolist())  # nothing lost, nothing doubled
        assert torch.equal(packing.unpack(packed), mb["input_ids"])
        index, valid = packing.sequence_index()
        for i, row in enumerate(rows.tolist()):
            n = lengths[row]
            mine = packing.sequence == i
            assert torch.equal(packed[mine], mb["input_ids"][i, :n])  # contiguous, in order
            assert packing.positions[mine].tolist() == list(range(n))  # positions restart per sequence
            assert torch.equal(packed.reshape(-1)[index[i, :n]], mb["input_ids"][i, :n])
            assert int(valid[i].sum()) == n


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(50, 120))
def test_first_fit_decreasing_is_deterministic_and_no_two_packed_rows_could_merge(lengths, budget) -> None:
    bins = first_fit_decreasing(lengths, budget)
    assert bins == first_fit_decreasing(lengths, budget)
    assert sorted(r for b in bins for r in b) == list(range(len(lengths)))
    loads = [sum(lengths[r] for r in b) for b in bins]
    assert all(load <= budget for load in loads)
    # first fit opens a packed row only for a row the earlier ones had no room for
    assert all(loads[i] + loads[j] > budget for i in range(len(loads)) for j in range(i + 1, len(loads)))


@settings(max_examples=100, deadline=None)
@given(batches())
def test_the_attention_mask_is_causal_within_each_sequence_only(batch) -> None:
    lengths, width, budget, size = batch
    ((_, _, packing), *_) = packed_micro_batches(_rows(lengths, width), size, budget)
    mask = packing.attention_mask()[:, 0]
    seq = packing.sequence
    same = seq[:, :, None] == seq[:, None, :]
    causal = torch.ones(budget, budget, dtype=torch.bool).tril()
    real = (seq >= 0)[:, :, None] & (seq >= 0)[:, None, :]
    assert torch.equal(mask & real, same & causal & real)  # a real token sees its own sequence's past, all of it
    assert mask.any(-1).all()  # no query without a key (SDPA would give NaN)


def test_a_row_longer_than_the_budget_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"^policy\.sequence_packing\.max_tokens_per_row: row 2 has 9 tokens, "
                                         r"more than the 8 a packed row holds"):
        first_fit_decreasing([3, 8, 9, 1], 8)
    with pytest.raises(ValueError, match="max_tokens_per_row: row 0 has 5 tokens"):
        packed_micro_batches(_rows([5, 2], 6), 2, 4)


def test_rows_must_be_right_padded() -> None:
    assert row_lengths(torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])) == [2, 3, 0]
    with pytest.raises(DataIntegrityError, match="right-padded"):
        row_lengths(torch.tensor([[1, 0, 1]]))
