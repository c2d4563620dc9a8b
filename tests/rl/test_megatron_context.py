"""Context-parallel token layout (rl/backends/megatron/context.py): pure index arithmetic."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

from rl.backends.megatron.context import attention_mask, gathered_index, token_index  # noqa: E402


@given(st.integers(1, 8), st.integers(1, 6))
def test_ranks_partition_the_sequence_with_equal_causal_work(cp: int, chunk: int) -> None:
    total = 2 * cp * chunk
    parts = [token_index(total, cp, r) for r in range(cp)]
    assert torch.equal(torch.sort(torch.cat(parts)).values, torch.arange(total))
    assert torch.equal(gathered_index(total, cp), torch.cat(parts))
    # chunk r and chunk 2cp-1-r: every rank's queries see the same number of keys in total
    work = {int((idx + 1).sum()) for idx in parts}
    assert len(work) == 1


@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_mask_is_the_causal_mask_of_the_rank_queries(cp: int, chunk: int, data) -> None:
    total = 2 * cp * chunk
    rank = data.draw(st.integers(0, cp - 1))
    full = torch.triu(torch.ones(total, total, dtype=torch.bool), diagonal=1)
    want = full[token_index(total, cp, rank)][:, gathered_index(total, cp)]
    assert torch.equal(attention_mask(total, cp, rank)[0, 0], want)


def test_two_ranks_hold_outer_and_inner_chunks() -> None:
    assert token_index(8, 2, 0).tolist() == [0, 1, 6, 7]
    assert token_index(8, 2, 1).tolist() == [2, 3, 4, 5]


def test_length_not_a_multiple_of_two_cp_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of 2 x cp = 4"):
        token_index(10, 2, 0)
