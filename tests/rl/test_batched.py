"""BatchedDataDict: hand-written expectations plus a shard/concat/reorder round-trip property."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.data import DataIntegrityError
from rl.data.batched import BatchedDataDict, shard_indices


def _batch(n: int) -> BatchedDataDict:
    return BatchedDataDict(
        ids=torch.arange(n),
        tokens=torch.arange(n * 2).reshape(n, 2),
        names=[f"r{i}" for i in range(n)],
    )


def test_size():
    batch = _batch(3)
    assert batch.size == 3
    assert BatchedDataDict().size == 0


def test_size_asserts_on_ragged_columns():
    with pytest.raises(DataIntegrityError, match="differ in rows"):
        BatchedDataDict(a=torch.zeros(2), b=[1, 2, 3]).size


def test_shard_gives_each_rank_a_block_of_each_global_batch():
    # 8 rows, global batches of 4, 2 ranks: rank 0 gets rows 0,1 and 4,5.
    shards = _batch(8).shard_by_batch_size(2, batch_size=4)
    assert [s["ids"].tolist() for s in shards] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert shards[1]["names"] == ["r2", "r3", "r6", "r7"]
    assert shards[1]["tokens"].tolist() == [[4, 5], [6, 7], [12, 13], [14, 15]]


def test_shard_without_batch_size_is_one_global_batch():
    shards = _batch(6).shard_by_batch_size(3)
    assert [s["ids"].tolist() for s in shards] == [[0, 1], [2, 3], [4, 5]]


def test_shard_rejects_bad_sizes_with_clear_messages():
    with pytest.raises(ValueError, match=r"total rows \(6\) must be a multiple of batch_size \(4\)"):
        _batch(6).shard_by_batch_size(2, batch_size=4)
    with pytest.raises(ValueError, match=r"batch_size \(6\) must be a multiple of shards \(4\)"):
        _batch(6).shard_by_batch_size(4)


def test_from_batches_concatenates_and_right_pads():
    a = BatchedDataDict(x=torch.tensor([[1, 2, 3]]), m=torch.tensor([1.0]), t=["a"])
    b = BatchedDataDict(x=torch.tensor([[4], [5]]), m=torch.tensor([2.0, 3.0]), t=["b", "c"])
    out = BatchedDataDict.from_batches([a, b], pad_value_dict={"x": -1})
    assert out["x"].tolist() == [[1, 2, 3], [4, -1, -1], [5, -1, -1]]
    assert out["m"].tolist() == [1.0, 2.0, 3.0]
    assert out["t"] == ["a", "b", "c"]
    zero_pad = BatchedDataDict.from_batches([a, b])
    assert zero_pad["x"][1].tolist() == [4, 0, 0]


def test_from_batches_rejects_mismatched_keys():
    with pytest.raises(DataIntegrityError, match="keys"):
        BatchedDataDict.from_batches([BatchedDataDict(a=[1]), BatchedDataDict(b=[1])])


def scatter(batch: BatchedDataDict, permutation: list[int]) -> BatchedDataDict:
    """The oracle of the round trip below: row i moves to position permutation[i]."""
    gather = [0] * len(permutation)
    for src, dst in enumerate(permutation):
        gather[dst] = src
    return batch.select_indices(gather)


def test_select_slice_repeat_to():
    batch = _batch(3)
    assert batch.select_indices([2, 0, 2])["names"] == ["r2", "r0", "r2"]
    assert batch.select_indices(torch.tensor([1]))["tokens"].tolist() == [[2, 3]]
    assert batch.slice(1, 3)["ids"].tolist() == [1, 2]
    assert batch.slice(1, 3)["names"] == ["r1", "r2"]
    rep = batch.repeat_interleave(2)
    assert rep["ids"].tolist() == [0, 0, 1, 1, 2, 2]
    assert rep["names"] == ["r0", "r0", "r1", "r1", "r2", "r2"]
    moved = batch.to("cpu")
    assert isinstance(moved, BatchedDataDict) and moved["ids"].device.type == "cpu"
    assert batch["ids"].tolist() == [0, 1, 2]  # untouched


def test_shard_indices_matches_shards():
    assert shard_indices(8, 2, 4) == [[0, 1, 4, 5], [2, 3, 6, 7]]


@settings(max_examples=60, deadline=None)
@given(
    shards=st.integers(1, 4),
    per_rank=st.integers(1, 3),
    num_global=st.integers(1, 3),
    width=st.integers(1, 4),
    data=st.data(),
)
def test_shard_concat_inverse_reorder_round_trip(shards, per_rank, num_global, width, data):
    batch_size = shards * per_rank
    total = batch_size * num_global
    values = data.draw(st.permutations(list(range(total))))  # distinct, so any mix-up shows
    original = BatchedDataDict(
        v=torch.tensor(values),
        w=torch.tensor(values).repeat_interleave(width).reshape(total, width),
        s=[str(x) for x in values],
    )
    parts = original.shard_by_batch_size(shards, batch_size=batch_size)
    joined = BatchedDataDict.from_batches(parts)
    # joined row j is original row order[j]; scattering j -> order[j] restores the original.
    order = [
        g * batch_size + r * per_rank + i
        for r in range(shards)
        for g in range(num_global)
        for i in range(per_rank)
    ]
    joined = scatter(joined, order)
    assert joined.keys() == original.keys()
    assert torch.equal(joined["v"], original["v"])
    assert torch.equal(joined["w"], original["w"])
    assert joined["s"] == original["s"]
