"""PolicyGroup over model-parallel ranks: which rank gets which replica's rows, whose answer counts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rl import checkpoint as ck
from rl.data import BatchedDataDict, DataIntegrityError, MemoryStore
from rl.models import flops
from rl.models.flops import FlopsConfig
from rl.workers.group import PolicyGroup, replica_layout


def _topology(pairs: list[tuple[int, bool]], dp_size: int) -> list[dict[str, Any]]:
    return [{"dp_rank": d, "dp_size": dp_size, "reports_metrics": rep} for d, rep in pairs]


class EchoCluster:
    """Stands in for `Cluster.call`: each rank answers (its rank, its input, the kwargs)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple]]] = []

    def call(self, handles: list[Any], method: str, per_worker_args: list[tuple], *, timeout_s: float,
             **kwargs: Any) -> list[Any]:
        self.calls.append((method, per_worker_args))
        return [{"rank": h, "input": args[0], **kwargs} for h, args in zip(handles, per_worker_args)]


def _group(topology: list[dict[str, Any]] | None, world: int) -> tuple[PolicyGroup, EchoCluster]:
    cluster = EchoCluster()
    group = PolicyGroup(cluster=cluster, ranks=list(range(world)), flops_cfg=None, device="cpu",  # type: ignore[arg-type]
                        num_ranks=world, record_invariant=lambda _: None, topology=topology)
    return group, cluster


@pytest.mark.parametrize(("pairs", "dp_size", "replica_of", "reporters"), [
    ([(0, True), (1, True)], 2, [0, 1], [0, 1]),                          # torch DP2, or megatron EP2
    ([(0, True), (0, False)], 1, [0, 0], [0]),                            # TP2: one replica
    ([(0, True), (0, False), (1, True), (1, False)], 2, [0, 0, 1, 1], [0, 2]),  # TP2 x DP2
    ([(1, True), (0, True)], 2, [1, 0], [1, 0]),                          # DP order != rank order
])
def test_replica_layout(pairs, dp_size, replica_of, reporters) -> None:
    assert replica_layout(_topology(pairs, dp_size)) == (dp_size, replica_of, reporters)


@pytest.mark.parametrize(("pairs", "dp_size"), [
    ([(0, True), (0, True)], 1),       # two answers for one replica
    ([(0, True), (1, False)], 2),      # replica 1 has no reporting rank
])
def test_replica_layout_refuses_ambiguous_answers(pairs, dp_size) -> None:
    with pytest.raises(DataIntegrityError, match="one reporting rank"):
        replica_layout(_topology(pairs, dp_size))


def test_replica_layout_refuses_disagreeing_dp_size() -> None:
    topology = _topology([(0, True), (0, False)], 1)
    topology[1]["dp_size"] = 2
    with pytest.raises(DataIntegrityError, match="disagree"):
        replica_layout(topology)


def test_tp_peers_get_the_same_rows_and_only_reporters_answer() -> None:
    group, cluster = _group(_topology([(0, True), (0, False), (1, True), (1, False)], 2), 4)
    assert group.dp_size == 2
    out = group._run_on_ranks("get_logprobs", ["rows-A", "rows-B"], reference=True)
    assert [args[0] for args in cluster.calls[0][1]] == ["rows-A", "rows-A", "rows-B", "rows-B"]
    assert out == [{"rank": 0, "input": "rows-A", "reference": True},
                   {"rank": 2, "input": "rows-B", "reference": True}]


def test_without_topology_every_rank_is_a_replica() -> None:
    group, cluster = _group(None, 2)
    assert group.dp_size == 2
    out = group._run_on_ranks("train", ["a", "b"])
    assert [r["rank"] for r in out] == [0, 1] and [r["input"] for r in out] == ["a", "b"]


def _written(tmp_path, ranks: int) -> ck.Checkpoint:
    tmp = ck.begin(tmp_path, 4)
    files = {ck.WEIGHTS: ck.write(tmp, ck.WEIGHTS, {"policy": {"w": torch.ones(2)}, "reference": None})}
    files.update({ck.optimizer_file(r): ck.write(tmp, ck.optimizer_file(r), {"r": r}) for r in range(ranks)})
    return ck.load(ck.commit(tmp, step=4, cursor=0, rng={}, files=files, ranks=ranks))


def test_load_checkpoint_hands_each_rank_its_own_optimizer_file(tmp_path) -> None:
    group, cluster = _group(None, 2)
    ckpt = _written(tmp_path, 2)
    group.load_checkpoint(ckpt)
    assert cluster.calls == [("load_checkpoint", [(str(ckpt.path / "optimizer.rank0.pt"),),
                                                  (str(ckpt.path / "optimizer.rank1.pt"),)])]
    with pytest.raises(ValueError, match="optimizer state of 3 ranks"):
        group.load_checkpoint(_written(tmp_path / "three", 3))


# --- FLOPs: PolicyGroup.step_flops is where a train step's are computed, for both data paths ---

STUDENT = FlopsConfig(num_layers=2, hidden_size=64, q_dim=64, kv_dim=32, ffn_dim=128, vocab_size=97,
                      num_full_attention_layers=1)
TEACHER = FlopsConfig(num_layers=3, hidden_size=32, q_dim=32, kv_dim=32, ffn_dim=64, vocab_size=50,
                      num_full_attention_layers=3)


class RowsCluster:
    """Each rank trains its rows and reports half a loss and its row count, as PolicyWorker does."""

    def call(self, handles: list[Any], method: str, per_worker_args: list[tuple], *, timeout_s: float,
             **kwargs: Any) -> list[Any]:
        return [{"loss": 0.5, "rows": float(args[0].size)} for args in per_worker_args]


def _mask(lengths: list[int], width: int = 8) -> torch.Tensor:
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()


@pytest.mark.parametrize("method", ["train", "distill"])
def test_step_flops_are_the_same_on_both_data_paths(method: str) -> None:
    lengths, teacher_lengths = [5, 3, 7, 2], [4, 4, 6, 1]
    group = PolicyGroup(cluster=RowsCluster(), ranks=[0, 1], flops_cfg=STUDENT, device="h200",  # type: ignore[arg-type]
                        num_ranks=2, record_invariant=lambda _: None, teacher_flops_cfg=TEACHER)
    batch = BatchedDataDict({"input_ids": _mask(lengths), "attention_mask": _mask(lengths),
                             "teacher_attention_mask": _mask(teacher_lengths)})
    meta = MemoryStore().put([f"u{i}_g0" for i in range(4)], "step_1", {"input_ids": _mask(lengths)},
                             sequence_lengths=lengths, tags=[{"teacher_length": n} for n in teacher_lengths])
    per_rank = [meta.slice(0, 2), meta.slice(2, 4)]
    kwargs = {"num_tokens": 17, "loss_cfg": {}, "step": 1} if method == "train" else {"cfg": None, "step": 1}
    legacy = getattr(group, method)(batch, **kwargs)
    tq = getattr(group, method)(per_rank, **kwargs)
    total = flops.total_flops(STUDENT, lengths)
    if method == "distill":  # the teacher's forward: a third of its forward-and-backward count
        total += flops.total_flops(TEACHER, teacher_lengths) // 3
        assert total > flops.total_flops(STUDENT, lengths)
    expected = {"loss": 1.0, "rows": 4.0, "total_flops": total, "num_ranks": 2, "theoretical_tflops": 2 * 989.5}
    assert legacy == expected
    assert tq == expected
