"""dp_dispatch: caller row order for any permutation, the invariant record, FLOPs recovery."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rl.data.dispatch as dispatch_mod
from rl.data import (
    BatchedDataDict,
    DataIntegrityError,
    KVBatchMeta,
    MemoryStore,
    dp_dispatch,
    flops_post_train,
    shard_keys_by_seqlen,
)
from rl.data.sharding import ORIGINAL_INDICES
from rl.models import flops

FLOPS_CFG = flops.FlopsConfig(
    num_layers=2,
    hidden_size=64,
    q_dim=64,
    kv_dim=32,
    ffn_dim=128,
    vocab_size=97,
    num_full_attention_layers=1,
)


class FakeWorker:
    """One DP rank, in-process: reads its shard from the store like a real worker would."""

    def __init__(self, rank: int, store: MemoryStore, returns: str) -> None:
        self.rank, self.store, self.returns = rank, store, returns

    def get_logprobs(self, shard: KVBatchMeta) -> Any:
        ids = self.store.get(shard, ["input_ids"])["input_ids"]
        lp = ids.float() * 0.5
        if self.returns == "meta":
            return self.store.put(shard, columns={"logprobs": lp})
        return {"keys": list(shard.keys), "logprobs": lp, "n": (ids != 0).sum(1).tolist()}

    def train(self, shard: KVBatchMeta) -> dict[str, float]:
        return {"loss": 1.0 + self.rank, "rows": float(len(shard))}


class FakePolicyGroup:
    """The protocol dp_dispatch needs: dp_size, _run_on_ranks, optional hooks."""

    def __init__(self, dp: int, store: MemoryStore, returns: str = "dict") -> None:
        self.dp_size = dp
        self.store = store
        self.workers = [FakeWorker(r, store, returns) for r in range(dp)]
        self.records: list[dict] = []
        self.post_calls: list[tuple] = []
        self.rank_inputs: list[KVBatchMeta] = []
        self.flops_lengths: list[list[int]] = []  # what each FLOPs call was given

    def _run_on_ranks(
        self, method: str, per_rank_inputs: list[KVBatchMeta], *args: Any, **kw: Any
    ) -> list:
        self.rank_inputs = list(per_rank_inputs)
        return [
            getattr(w, method)(x, *args, **kw)
            for w, x in zip(self.workers, per_rank_inputs, strict=True)
        ]

    def _record_invariant(self, record: dict) -> None:
        self.records.append(record)

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict) -> BatchedDataDict:
        return BatchedDataDict(
            {"logprobs": batch["input_ids"].float() * 0.5, "legacy": [True] * batch.size}
        )

    def step_flops(self, lengths: list[int]) -> dict[str, Any]:
        self.flops_lengths.append(list(lengths))
        return {
            "total_flops": flops.total_flops(FLOPS_CFG, lengths),
            "num_ranks": self.dp_size,
            "theoretical_tflops": flops.theoretical_tflops("h200", self.dp_size),
        }

    @dp_dispatch
    def train(self, batch: BatchedDataDict) -> dict[str, Any]:
        return {"loss": 1.0, **self.step_flops(batch["input_lengths"].tolist())}

    def _dp_post_train(self, aggregated: dict, raw: list, *, shards: list[KVBatchMeta]) -> dict:
        self.post_calls.append((aggregated, raw, shards))
        return flops_post_train(aggregated, raw, shards, flops=self.step_flops)


def _rollout(store: MemoryStore, lengths: list[int], caller_order: list[int]) -> KVBatchMeta:
    """Put one row per length (minted keys), return the meta in `caller_order`."""
    keys = [f"uid{i // 4}_g{i % 4}" for i in range(len(lengths))]
    rows = [torch.arange(1, n + 1) for n in lengths]
    meta = store.put(keys, "rollout", {"input_ids": rows}, sequence_lengths=lengths)
    return meta.subset(caller_order)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[int], int, list[int]]:
    dp = draw(st.integers(1, 6))
    n = dp * draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    order = draw(st.permutations(list(range(n))))
    return lengths, dp, list(order)


def _legacy_logprobs(store: MemoryStore, meta: KVBatchMeta) -> torch.Tensor:
    return store.get(meta, ["input_ids"])["input_ids"].float() * 0.5


@settings(max_examples=60, deadline=None)
@given(cases(), st.sampled_from(["dict", "meta"]))
def test_rows_come_back_in_caller_order(case: tuple, returns: str) -> None:
    lengths, dp, order = case
    store = MemoryStore()
    meta = _rollout(store, lengths, order)
    group = FakePolicyGroup(dp, store, returns)
    out = group.get_logprobs(meta)
    expected = _legacy_logprobs(store, meta)
    if returns == "meta":
        assert isinstance(out, KVBatchMeta) and out.keys == meta.keys and "logprobs" in out.fields
        got = store.get(out, ["logprobs"])["logprobs"]
    else:
        assert out["keys"] == list(meta.keys)
        assert out["n"] == list(meta.sequence_lengths)
        got = out["logprobs"]
    assert torch.equal(got, expected)
    assert group.records == [
        {
            "check": "dispatch_row_order",
            "method": "get_logprobs",
            "ok": True,
            "rows": len(lengths),
            "detail": f"{len(lengths)} rows in caller order",
        }
    ]


def test_a_sharding_that_is_not_its_own_inverse_is_restored() -> None:
    store = MemoryStore()
    lengths = [5, 30, 10, 20, 25, 1]
    meta = _rollout(store, lengths, [3, 0, 5, 1, 4, 2])
    shards = shard_keys_by_seqlen(meta, 3)
    order = [i for s in shards for i in s.extra_info[ORIGINAL_INDICES]]
    assert any(order[order[i]] != i for i in range(len(order))), order  # not an involution
    group = FakePolicyGroup(3, store)
    out = group.get_logprobs(meta)
    assert out["keys"] == list(meta.keys)
    assert torch.equal(out["logprobs"], _legacy_logprobs(store, meta))


@settings(max_examples=50, deadline=None)
@given(cases())
def test_planted_inverse_permutation_bug_is_caught(case: tuple) -> None:
    lengths, dp, order = case
    store = MemoryStore()
    meta = _rollout(store, lengths, order)
    shard_order = [
        i for s in shard_keys_by_seqlen(meta, dp) for i in s.extra_info[ORIGINAL_INDICES]
    ]
    assume(any(shard_order[shard_order[i]] != i for i in range(len(shard_order))))
    group = FakePolicyGroup(dp, store)
    real = dispatch_mod.caller_order_gather
    dispatch_mod.caller_order_gather = lambda o: list(o)  # the published bug: gather with `order`
    try:
        with pytest.raises(DataIntegrityError, match="rows out of place"):
            group.get_logprobs(meta)
    finally:
        dispatch_mod.caller_order_gather = real
    assert len(group.records) == 1 and group.records[0]["ok"] is False
    assert (
        group.records[0]["method"] == "get_logprobs"
        and "out of place" in group.records[0]["detail"]
    )


def test_worker_returning_the_wrong_rows_is_caught() -> None:
    store = MemoryStore()
    meta = _rollout(store, [3, 4, 5, 6], [0, 1, 2, 3])
    group = FakePolicyGroup(2, store)
    honest = group.workers[1].get_logprobs
    group.workers[1].get_logprobs = lambda shard: {
        **honest(shard),
        "keys": list(reversed(shard.keys)),
    }  # type: ignore[method-assign]
    with pytest.raises(DataIntegrityError, match="dp_dispatch\\(get_logprobs\\)"):
        group.get_logprobs(meta)
    assert group.records[-1]["ok"] is False


@settings(max_examples=80, deadline=None)
@given(cases())
def test_flops_post_hook_equals_the_legacy_computation(case: tuple) -> None:
    lengths, dp, order = case
    store = MemoryStore()
    meta = _rollout(store, lengths, order)
    group = FakePolicyGroup(dp, store)
    legacy = group.train(
        BatchedDataDict({"input_lengths": torch.tensor(list(meta.sequence_lengths))})
    )
    tq = group.train(meta)
    for name in ("total_flops", "num_ranks", "theoretical_tflops"):
        assert tq[name] == legacy[name], name
    # the hook hands the FLOPs callable the caller-order lengths, exactly as the legacy body does
    assert group.flops_lengths == [list(meta.sequence_lengths)] * 2
    assert tq["loss"] == 1.0  # rank 0's metrics, not reordered
    aggregated, raw, shards = group.post_calls[-1]
    assert raw == [{"loss": 1.0 + r, "rows": float(len(lengths) // dp)} for r in range(dp)]
    assert [s.keys for s in shards] == [s.keys for s in group.rank_inputs]
    assert group.records == []  # train's result is not row-shaped: nothing to reorder or check


def test_legacy_batch_passes_through_untouched() -> None:
    group = FakePolicyGroup(2, MemoryStore())
    group._run_on_ranks = None  # type: ignore[assignment]  # must not be used
    batch = BatchedDataDict({"input_ids": torch.tensor([[1, 2], [3, 0], [5, 6]])})
    out = group.get_logprobs(batch)
    assert out["legacy"] == [True] * 3 and torch.equal(
        out["logprobs"], batch["input_ids"].float() * 0.5
    )
    assert group.records == []


def test_list_of_metas_is_fanned_out_as_given_and_never_reordered() -> None:
    store = MemoryStore()
    meta = _rollout(store, [9, 1, 8, 2, 7, 3], [5, 4, 3, 2, 1, 0])
    per_rank = [meta.subset([0, 1, 2]), meta.subset([3, 4, 5])]
    group = FakePolicyGroup(2, store)
    out = group.get_logprobs(per_rank)
    assert group.rank_inputs == per_rank
    assert out["keys"] == list(meta.keys)
    assert group.records[-1]["ok"] is True
    with pytest.raises(ValueError, match="got 1 metas for dp_size=2"):
        group.get_logprobs([meta])


def test_flops_from_driver_chosen_shards_use_rank_order() -> None:
    store = MemoryStore()
    meta = _rollout(store, [9, 1, 8, 2], [0, 1, 2, 3])
    group = FakePolicyGroup(2, store)
    out = group.train([meta.subset([0, 1]), meta.subset([2, 3])])
    assert out["total_flops"] == flops.total_flops(FLOPS_CFG, [9, 1, 8, 2])
    assert group.flops_lengths == [[9, 1, 8, 2]]


def test_rows_not_divisible_by_dp_is_a_clear_error() -> None:
    store = MemoryStore()
    meta = _rollout(store, [1, 2, 3], [0, 1, 2])
    with pytest.raises(
        DataIntegrityError,
        match=r"dp_dispatch\(get_logprobs\): 3 rows do not split evenly over dp_size=2",
    ):
        FakePolicyGroup(2, store).get_logprobs(meta)


_UNDER_O = """
import sys
import torch
from rl.data import DataIntegrityError, MemoryStore, dp_dispatch

class Group:
    dp_size = 2
    def _run_on_ranks(self, method, per_rank_inputs):
        return [{"keys": list(m.keys)} for m in per_rank_inputs]
    @dp_dispatch
    def get_logprobs(self, batch):
        raise RuntimeError("legacy body must not run")

store = MemoryStore()
meta = store.put(["a", "b", "c"], "rollout", {"input_ids": [torch.ones(2)] * 3}, sequence_lengths=[2, 2, 2])
try:
    Group().get_logprobs(meta)
except DataIntegrityError as exc:
    print(f"optimize={sys.flags.optimize} DataIntegrityError: {exc}")
"""


def test_three_rows_over_dp_2_is_refused_under_python_O() -> None:
    """With `assert`, -O dropped the guard and 3 rows over DP 2 died in zip(); now it raises."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-O", "-c", _UNDER_O], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "optimize=1 DataIntegrityError: dp_dispatch(get_logprobs): 3 rows do not split evenly over "
        "dp_size=2 (3 % 2 = 1); make the batch a multiple of the DP size")


def test_unknown_input_kind_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="expected BatchedDataDict, KVBatchMeta or list"):
        FakePolicyGroup(2, MemoryStore()).get_logprobs({"input_ids": torch.ones(2)})


def test_caller_order_gather_is_the_inverse() -> None:
    order = [2, 0, 1]  # concat row j is caller row order[j]
    assert dispatch_mod.caller_order_gather(order) == [1, 2, 0]
    with pytest.raises(DataIntegrityError, match="not a permutation"):
        dispatch_mod.caller_order_gather([0, 0])


def test_a_key_on_two_ranks_is_refused_before_any_worker_runs() -> None:
    store = MemoryStore()
    meta = _rollout(store, [9, 1, 8, 2], [0, 1, 2, 3])
    group = FakePolicyGroup(2, store)
    per_rank = [meta.subset([0, 1]), meta.subset([1, 2])]  # uid0_g1 on both ranks
    with pytest.raises(
        DataIntegrityError,
        match=r"dp_dispatch\(get_logprobs\): 1 key\(s\) given more than once, so their rows would "
        r"be processed twice: 'uid0_g1' on ranks \[0, 1\]",
    ):
        group.get_logprobs(per_rank)
    assert group.rank_inputs == [] and group.records == []  # no worker ran, nothing recorded


def test_a_key_twice_within_one_meta_is_refused_even_if_the_meta_was_forged() -> None:
    store = MemoryStore()
    meta = _rollout(store, [9, 1, 8, 2], [0, 1, 2, 3])
    forged = meta.subset([0, 1])
    object.__setattr__(forged, "keys", (meta.keys[0], meta.keys[0]))  # bypasses __post_init__
    group = FakePolicyGroup(2, store)
    with pytest.raises(DataIntegrityError, match=r"'uid0_g0' on ranks \[0, 0\]"):
        group.get_logprobs([forged, meta.subset([2, 3])])
    assert group.rank_inputs == []


@pytest.mark.parametrize("returns", ["meta", "dict"])
def test_a_rank_returning_too_few_rows_is_a_data_integrity_error(returns: str) -> None:
    store = MemoryStore()
    meta = _rollout(store, [3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5])
    group = FakePolicyGroup(2, store, returns)
    honest = group.workers[1].get_logprobs
    if returns == "meta":
        group.workers[1].get_logprobs = lambda shard: honest(shard.slice(0, 2))  # type: ignore[method-assign]
    else:
        group.workers[1].get_logprobs = lambda shard: {  # type: ignore[method-assign]
            k: v[:2] for k, v in honest(shard).items()}
    with pytest.raises(DataIntegrityError, match=r"ranks returned 5 rows for 6 caller rows"):
        group.get_logprobs(meta)


def test_ranks_returning_different_row_kinds_are_refused() -> None:
    store = MemoryStore()
    meta = _rollout(store, [3, 4, 5, 6], [0, 1, 2, 3])
    group = FakePolicyGroup(2, store, "meta")
    group.workers[1].returns = "dict"
    with pytest.raises(DataIntegrityError, match=r"mixed row-shaped kinds \['KVBatchMeta', 'dict'\]"):
        group.get_logprobs(meta)


def test_row_kinds_are_registered_by_type() -> None:
    meta = KVBatchMeta(partition_id="p", keys=("a",), sequence_lengths=(1,))
    assert isinstance(dispatch_mod.row_kind(meta), dispatch_mod.MetaRows)
    assert dispatch_mod.row_kind({"keys": ["a"], "x": [1]}).container is dict
    assert dispatch_mod.row_kind(BatchedDataDict({"keys": ["a"]})).container is BatchedDataDict
    assert dispatch_mod.row_kind({"loss": 1.0}) is None  # train's metrics: not row-shaped
