"""The TransferQueue backend for real: a 2-CPU local Ray, one storage unit, workers as actors.

Run: python -m pytest tests/rl/test_data_tq_integration.py -q -p no:randomly -n 0 -m integration
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from rl.config import DataPlaneConfig
from rl.data import (
    BatchedDataDict,
    DataPlaneClient,
    KVBatchMeta,
    MemoryStore,
    MissingDataError,
    dp_dispatch,
    make_client,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=45)]  # the file, measured on 2 shared cores

ray = pytest.importorskip("ray")
pytest.importorskip("transfer_queue")


@pytest.fixture(scope="module")
def tq_store() -> Iterator[DataPlaneClient]:
    from rl.cluster.ray_cluster import start_ray  # after the importorskip of ray above

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = os.environ.pop("RAY_ADDRESS", None)  # a private Ray, never a cluster the environment names
    try:  # the engine's start: again when a loaded box misses Ray's fixed 30 s raylet registration
        ray_dir = start_ray(num_cpus=2)  # the private Ray's temp dir; None when this process had a Ray
    finally:
        if address is not None:
            os.environ["RAY_ADDRESS"] = address
    store = make_client(DataPlaneConfig(backend="tq"))
    try:
        yield store
    finally:
        store.close()
        if ray_dir is not None:
            ray.shutdown()
            shutil.rmtree(ray_dir, ignore_errors=True)


def _scenario(store: DataPlaneClient, partition: str) -> dict[str, Any]:
    """The same puts and gets on any backend; returns everything read back."""
    lengths = [3, 1, 4, 2]
    keys = [f"{partition}{i // 2}_g{i % 2}" for i in range(4)]
    reward = torch.tensor([0.0, 1.0, 0.5, 1.0])
    meta = store.put(
        keys,
        partition,
        {
            "input_ids": torch.arange(16).reshape(4, 4),
            "tokens": [torch.arange(1, n + 1) for n in lengths],
            "mask": [torch.ones(n, dtype=torch.bool) for n in lengths],
            "hidden": torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(0)).bfloat16(),
            "reward": reward,
            "text": ["a", "bb", "ccc", "d"],
        },
        sequence_lengths=lengths,
        tags=[{"g": i % 2} for i in range(4)],
    )
    reward += 100.0  # the store holds a copy
    view = meta.subset([3, 0, 2])
    out = dict(store.get(view, ["input_ids", "tokens", "mask", "hidden", "reward", "text"]))
    store.put(view.slice(0, 1), columns={"logprobs": torch.full((1, 3), -1.0)})
    out["logprobs"] = store.get(view.slice(0, 1), "logprobs")["logprobs"]
    out["fields"] = meta.fields
    return out


def test_same_results_as_the_memory_backend(tq_store: DataPlaneClient) -> None:
    real, ref = _scenario(tq_store, "parity"), _scenario(MemoryStore(), "parity")
    assert real.keys() == ref.keys()
    for name, value in ref.items():
        if isinstance(value, torch.Tensor):
            assert real[name].dtype == value.dtype and torch.equal(real[name], value), name
        else:
            assert real[name] == value, name
    assert real["tokens"].tolist() == [[1, 2, 0, 0], [1, 2, 3, 0], [1, 2, 3, 4]]
    assert real["reward"].tolist() == [1.0, 0.0, 0.5]
    tq_store.clear("parity")


def test_missing_keys_and_fields_are_named_not_dropped(tq_store: DataPlaneClient) -> None:
    meta = tq_store.put(["m_g0", "m_g1"], "miss", {"x": torch.ones(2)}, sequence_lengths=[1, 1])
    ghost = KVBatchMeta(partition_id="miss", keys=["m_g0", "ghost_g0"], sequence_lengths=[1, 1])
    with pytest.raises(MissingDataError, match="keys not stored: 'ghost_g0'"):
        tq_store.get(ghost, ["x"])
    with pytest.raises(MissingDataError, match="field 'y'"):
        tq_store.get(meta, ["x", "y"])
    tq_store.put(meta.slice(0, 1), columns={"z": torch.ones(1)})
    with pytest.raises(MissingDataError, match="field 'z'"):
        tq_store.get(meta, ["z"])
    with pytest.raises(MissingDataError, match="'nopart'"):
        tq_store.get(KVBatchMeta(partition_id="nopart", keys=["a"], sequence_lengths=[1]), ["x"])
    tq_store.clear(meta)


def test_clear_partitions_and_tags(tq_store: DataPlaneClient) -> None:
    tq_store.put(
        ["c0", "c1", "c2"],
        "clr",
        {"x": torch.ones(3)},
        sequence_lengths=[1, 1, 1],
        tags=[{"t": i} for i in range(3)],
    )
    assert tq_store.partitions().get("clr") == 3
    assert tq_store.tags("clr")["c1"] == {"t": 1}
    tq_store.clear("clr", ["c0"])
    assert tq_store.partitions().get("clr") == 2
    tq_store.clear("clr")
    assert "clr" not in tq_store.partitions()


@ray.remote(num_cpus=0)
class PolicyWorker:
    """A DP rank: reads its own shard's columns and writes its result column to the store."""

    def __init__(self, store: DataPlaneClient) -> None:
        self.store = store  # arrives as an attached (non-owner) TQStore

    def get_logprobs(self, shard: KVBatchMeta) -> KVBatchMeta:
        ids = self.store.get(shard, ["tokens"])["tokens"]
        return self.store.put(
            shard,
            columns={
                "logprobs": [
                    ids[i, :n].float() * -0.1 for i, n in enumerate(shard.sequence_lengths)
                ]
            },
        )

    def close(self) -> None:
        self.store.close()  # must not shut the shared system down


class ActorPolicyGroup:
    def __init__(self, store: DataPlaneClient, dp: int) -> None:
        self.dp_size = dp
        self.workers = [PolicyWorker.remote(store) for _ in range(dp)]
        self.records: list[dict] = []

    def _run_on_ranks(self, method: str, inputs: list[KVBatchMeta]) -> list[Any]:
        return ray.get(
            [getattr(w, method).remote(x) for w, x in zip(self.workers, inputs, strict=True)]
        )

    def _record_invariant(self, record: dict) -> None:
        self.records.append(record)

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict) -> BatchedDataDict:
        raise AssertionError("legacy body must not run on the meta path")


def test_workers_put_and_get_their_own_columns_through_dispatch(tq_store: DataPlaneClient) -> None:
    assert pickle.loads(pickle.dumps(tq_store))._owner is False  # type: ignore[attr-defined]
    lengths = [5, 1, 7, 2, 3, 6]
    keys = [f"w{i // 3}_g{i % 3}" for i in range(6)]
    meta = tq_store.put(
        keys,
        "rollout",
        {"tokens": [torch.arange(1, n + 1) for n in lengths]},
        sequence_lengths=lengths,
    )
    caller = meta.subset([4, 2, 0, 5, 1, 3])
    group = ActorPolicyGroup(tq_store, 2)
    out = group.get_logprobs(caller)
    assert out.keys == caller.keys and "logprobs" in out.fields
    lp = tq_store.get(out, ["logprobs"])["logprobs"]
    for row, n in enumerate(caller.sequence_lengths):
        assert torch.allclose(lp[row, :n], torch.arange(1, n + 1).float() * -0.1)
    assert group.records[0]["ok"] is True and group.records[0]["rows"] == 6
    ray.get([w.close.remote() for w in group.workers])
    assert tq_store.partitions()["rollout"] == 6  # the system survived the workers' close()
    for w in group.workers:
        ray.kill(w)
    tq_store.clear("rollout")


def test_the_private_rays_workers_run_at_the_drivers_priority(tq_store):
    """TransferQueue's actors and every other worker of the engine's private Ray start at the
    driver's nice value, not Ray's 15 (starved beside busy processes: rl/cluster/ray_cluster.py)."""
    nice = ray.remote(num_cpus=0)(lambda: os.nice(0))  # TransferQueue holds both CPUs
    assert ray.get(nice.remote(), timeout=120) == os.nice(0)
    assert "RAY_worker_niceness" not in os.environ  # set only while the private Ray started
