"""The DataPlaneClient contract on the in-memory backend (TQ: test_data_tq_integration.py)."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl.config import DataPlaneConfig
from rl.data import DataIntegrityError, KVBatchMeta, MemoryStore, MissingDataError, make_client
from rl.data.client import split_rows, stack_rows
from rl.recipe.read import build


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def _put(store: MemoryStore, n: int = 3) -> KVBatchMeta:
    keys = [f"u{i}_g0" for i in range(n)]
    return store.put(
        keys,
        "rollout",
        {"input_ids": torch.arange(n * 4).reshape(n, 4), "reward": torch.arange(n) * 0.5},
        sequence_lengths=[4] * n,
        tags=[{"i": i} for i in range(n)],
    )


def test_put_returns_receipt_and_get_round_trips_exactly(store: MemoryStore) -> None:
    meta = _put(store)
    assert meta.partition_id == "rollout" and meta.fields == ("input_ids", "reward")
    assert [t["i"] for t in meta.tags] == [0, 1, 2]
    got = store.get(meta, ["input_ids", "reward"])
    assert torch.equal(got["input_ids"], torch.arange(12).reshape(3, 4))
    assert torch.equal(got["reward"], torch.arange(3) * 0.5)
    assert list(got) == ["input_ids", "reward"]


def test_get_follows_meta_key_order(store: MemoryStore) -> None:
    meta = _put(store, 4)
    got = store.get(meta.subset([2, 0, 3]), "reward")
    assert got["reward"].tolist() == [1.0, 0.0, 1.5]


def test_put_on_a_meta_adds_fields_and_keeps_others(store: MemoryStore) -> None:
    meta = _put(store)
    meta2 = store.put(meta.subset([1]), columns={"logprobs": torch.ones(1, 4)})
    assert meta2.fields == ("input_ids", "reward", "logprobs") and meta2.keys == ("u1_g0",)
    assert store.get(meta2, ["input_ids", "logprobs"])["input_ids"].tolist() == [[4, 5, 6, 7]]
    with pytest.raises(ValueError, match="partition 'other' differs"):
        store.put(meta, "other", {"x": torch.ones(3)})


def test_variable_length_rows_are_right_padded_with_zero(store: MemoryStore) -> None:
    rows = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
    masks = [
        torch.ones(3, dtype=torch.bool),
        torch.ones(1, dtype=torch.bool),
        torch.ones(2, dtype=torch.bool),
    ]
    meta = store.put(["a", "b", "c"], "p", {"tok": rows, "m": masks}, sequence_lengths=[3, 1, 2])
    got = store.get(meta.subset([1, 2]), ["tok", "m"])
    assert got["tok"].tolist() == [[4, 0], [5, 6]]  # padded to the longest row read
    assert got["m"].dtype == torch.bool and got["m"].tolist() == [[True, False], [True, True]]


def test_non_tensor_columns_come_back_as_lists(store: MemoryStore) -> None:
    meta = store.put(
        ["a", "b"],
        "p",
        {"text": ["x", "yy"], "info": [{"k": 1}, {"k": 2}]},
        sequence_lengths=[1, 2],
    )
    got = store.get(meta.subset([1, 0]), ["text", "info"])
    assert got == {"text": ["yy", "x"], "info": [{"k": 2}, {"k": 1}]}


def test_values_are_copied_in_and_out(store: MemoryStore) -> None:
    col = torch.zeros(2, 3)
    meta = store.put(["a", "b"], "p", {"x": col}, sequence_lengths=[3, 3])
    col += 1
    out = store.get(meta, ["x"])["x"]
    assert out.sum() == 0
    out += 5
    assert store.get(meta, ["x"])["x"].sum() == 0


def test_missing_key_field_or_partition_is_named(store: MemoryStore) -> None:
    meta = _put(store)
    ghost = KVBatchMeta(partition_id="rollout", keys=["u0_g0", "ghost_g0"], sequence_lengths=[1, 1])
    with pytest.raises(MissingDataError, match="keys not stored: 'ghost_g0'"):
        store.get(ghost, ["reward"])
    with pytest.raises(MissingDataError, match="field 'logprobs'"):
        store.get(meta, ["reward", "logprobs"])
    store.put(meta.subset([0]), columns={"lp": torch.ones(1)})
    with pytest.raises(MissingDataError, match=r"field 'lp' for keys not stored: 'u1_g0', 'u2_g0'"):
        store.get(meta, ["lp"])
    with pytest.raises(MissingDataError, match="partition 'nope'"):
        store.get(KVBatchMeta(partition_id="nope", keys=["a"], sequence_lengths=[1]), ["x"])


@pytest.mark.parametrize("fields", [[], ["a", "a"]])
def test_reads_must_name_fields(store: MemoryStore, fields: list) -> None:
    with pytest.raises(ValueError, match="fields"):
        store.get(_put(store), fields)


def test_put_validates_columns(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="column 'x' has shape"):
        store.put(["a", "b"], "p", {"x": torch.ones(3)}, sequence_lengths=[1, 1])
    with pytest.raises(ValueError, match="column 'y' has 1 entries for 2 rows"):
        store.put(["a", "b"], "p", {"y": [1]}, sequence_lengths=[1, 1])
    with pytest.raises(ValueError, match="sequence_lengths"):
        store.put(["a"], "p", {"x": torch.ones(1)})
    with pytest.raises(ValueError, match="partition"):
        store.put(["a"], None, {"x": torch.ones(1)}, sequence_lengths=[1])
    with pytest.raises(ValueError, match="columns"):
        store.put(["a"], "p", {}, sequence_lengths=[1])


def test_clear_and_partitions(store: MemoryStore) -> None:
    meta = _put(store, 4)
    store.put(["z"], "other", {"x": torch.ones(1)}, sequence_lengths=[1])
    assert store.partitions() == {"rollout": 4, "other": 1}
    store.clear(meta.subset([0, 1]))
    assert store.partitions() == {"rollout": 2, "other": 1}
    store.clear("rollout", ["u2_g0", "never"])
    store.clear("other")
    assert store.partitions() == {"rollout": 1}
    assert store.tags("rollout") == {"u3_g0": {"i": 3}}


def test_memory_store_refuses_to_travel_and_closes(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match="data_plane.backend 'tq'"):
        pickle.dumps(store)
    with store:
        _put(store)
    with pytest.raises(RuntimeError, match="closed"):
        store.partitions()


def test_make_client_from_recipe_section() -> None:
    assert isinstance(make_client(DataPlaneConfig(backend="legacy")), MemoryStore)


def test_the_section_refuses_what_the_schema_refuses_before_a_store_starts() -> None:
    for bad, message in [
        ({"backend": "memory"}, r"data_plane.backend: .*'memory'"),
        ({"backend": "redis"}, r"data_plane.backend: .*'redis'"),
        ({"backend": "tq", "tq": {"num_storage_unit": 1}}, r"unknown recipe key 'data_plane.tq.num_storage_unit'"),
        ({"backend": "tq", "tq": {"total_storage_size": 8}}, r"unknown recipe key 'data_plane.tq.total_storage_size'"),
    ]:
        with pytest.raises(ValueError, match=message):
            build(DataPlaneConfig, bad, "data_plane")


def test_stack_rows_rules() -> None:
    assert torch.equal(
        stack_rows("x", [torch.tensor(1.0), torch.tensor(2.0)]), torch.tensor([1.0, 2.0])
    )
    padded = stack_rows("x", [torch.ones(1, 2), torch.ones(3, 2)])
    assert padded.shape == (2, 3, 2) and padded[0, 1:].abs().sum() == 0
    with pytest.raises(DataIntegrityError, match="only dim 0 may differ"):
        stack_rows("x", [torch.ones(1, 2), torch.ones(1, 3)])
    assert split_rows("x", [1, "a"], 2) == [1, "a"]
