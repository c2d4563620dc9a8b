"""shard_keys_by_seqlen: equal rows per rank, the stated balance bound, never worse than stride."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.data import DataIntegrityError, KVBatchMeta, shard_keys_by_seqlen
from rl.data.sharding import (
    _refine,
    _round_greedy,
    assign_balanced,
    assign_stride,
    round_spread_bound,
)


def _meta(lengths: list[int]) -> KVBatchMeta:
    return KVBatchMeta(
        partition_id="p", keys=[f"k{i}" for i in range(len(lengths))], sequence_lengths=lengths
    )


def _loads(ranks: list[list[int]], lengths: list[int]) -> list[int]:
    return [sum(lengths[i] for i in r) for r in ranks]


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], int]:
    dp = draw(st.integers(1, 8))
    per_rank = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(0, 5000), min_size=dp * per_rank, max_size=dp * per_rank))
    return lengths, dp


@settings(max_examples=150, deadline=None)
@given(batches())
def test_shards_partition_rows_equally_and_record_indices(batch: tuple[list[int], int]) -> None:
    lengths, dp = batch
    meta = _meta(lengths)
    shards = shard_keys_by_seqlen(meta, dp)
    assert len(shards) == dp
    assert {len(s) for s in shards} == {len(lengths) // dp}
    seen = [i for s in shards for i in s.extra_info["_dp_original_indices"]]
    assert sorted(seen) == list(range(len(lengths)))
    for s in shards:
        idx = s.extra_info["_dp_original_indices"]
        assert list(idx) == sorted(idx)  # caller's relative order kept
        assert s.keys == tuple(meta.keys[i] for i in idx)
        assert s.sequence_lengths == tuple(lengths[i] for i in idx)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_balance_within_the_stated_bound_and_no_worse_than_stride(
    batch: tuple[list[int], int],
) -> None:
    lengths, dp = batch
    ours = _loads(assign_balanced(lengths, dp), lengths)
    stride = _loads(assign_stride(lengths, dp), lengths)
    greedy = _loads(_refine(_round_greedy(lengths, dp), lengths, 4 * len(lengths)), lengths)
    spread = round_spread_bound(lengths, dp)
    # Lemma (docs/data-plane.md): the refined round greedy has max - min <= the largest
    # within-round spread S <= max length - min length.
    assert max(greedy) - min(greedy) <= spread <= max(lengths) - min(lengths)
    # Theorem: max <= mean + (dp - 1)/dp * S, in integers.
    assert dp * max(ours) <= sum(lengths) + (dp - 1) * spread
    # Never worse than the reference's sort+stride.
    assert max(ours) <= max(stride)
    assert sum(ours) == sum(lengths)


@settings(max_examples=50, deadline=None)
@given(batches())
def test_deterministic(batch: tuple[list[int], int]) -> None:
    lengths, dp = batch
    assert assign_balanced(lengths, dp) == assign_balanced(list(lengths), dp)


def test_strictly_better_than_stride_on_a_skewed_batch() -> None:
    lengths = [100, 90, 80, 70, 60, 50, 40, 30]  # stride gives rank 0 the largest of each round
    ours, stride = (
        _loads(assign_balanced(lengths, 2), lengths),
        _loads(assign_stride(lengths, 2), lengths),
    )
    assert stride == [280, 240]
    assert ours == [260, 260]


def test_row_count_not_divisible_is_a_clear_error() -> None:
    with pytest.raises(
        DataIntegrityError, match=r"5 rows cannot be split evenly over dp=2 ranks \(5 % 2 = 1\)"
    ):
        shard_keys_by_seqlen(_meta([1, 2, 3, 4, 5]), 2)
    with pytest.raises(ValueError, match="dp must be positive"):
        shard_keys_by_seqlen(_meta([1, 2]), 0)


def test_sharding_a_shard_replaces_its_indices() -> None:
    shard = shard_keys_by_seqlen(_meta([5, 1, 4, 2]), 2)[0]
    inner = shard_keys_by_seqlen(shard, 2)
    assert sorted(i for s in inner for i in s.extra_info["_dp_original_indices"]) == [0, 1]
