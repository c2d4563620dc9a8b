"""`algorithm.loss.prev_logprobs: training`: the pre-update log-probs from the training forward.

A GRPO step is one optimizer step over its rows, so the training forward runs with the weights a
separate pass would have seen. Proven here on both backends (padded and packed rows): the step's
answered `prev_logprobs` equal that pass's, and the update, loss and metrics equal the step given
the pass's log-probs, to float rounding. Then the path back to the driver: legacy (with the metrics,
rows in the batch's order over replicas) and TQ (written to the store), and the refusals.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util

import pytest
import torch
from rank_processes import run_ranks
from train_batches import padded_train_batch

from rl.algorithms.loss import LossConfig, prev_logprobs_refusal
from rl.backends.train_step import train_fields
from rl.config import ModelConfig, OptimizerConfig, PolicyConfig, SequencePackingConfig
from rl.data import BatchedDataDict, DataIntegrityError, MemoryStore
from rl.data.plane import CallRows, LegacyPlane, StoreRows, TQPlane
from rl.workers.group import PolicyGroup

VOCAB, ROWS, LENGTH, PROMPT = 64, 6, 14, 4
OPT = OptimizerConfig(lr=1e-2, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)
CFG = ModelConfig(family="qwen3_5",
                  config={"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2})
PASS = LossConfig(is_correction=True)
TRAINING = dataclasses.replace(PASS, prev_logprobs="training")


def _batch() -> dict[str, torch.Tensor]:
    return padded_train_batch(rows=ROWS, length=LENGTH, prompt=PROMPT, vocab=VOCAB, seed=3)


def _both_ways(backend_name: str, packed: bool) -> dict[str, object]:
    """One step given the pass's log-probs, one taking its own; what each returned and left."""
    from rl.backends import get_backend
    from rl.models import build_model

    weights = build_model(CFG, vocab_size=VOCAB, seed=0).state_dict()

    def backend():
        return get_backend(backend_name)(
            model=CFG, vocab_size=VOCAB, weights=weights, seed=0, policy=PolicyConfig(
                optimizer=OPT, micro_batch_size=4,
                sequence_packing=SequencePackingConfig(enabled=packed, max_tokens_per_row=2 * LENGTH)))

    batch = _batch()
    n = int(batch["response_mask"].sum())
    given = backend()
    prev = given.logprobs(batch["input_ids"], batch["attention_mask"])
    with_pass = given.train_step({**batch, "prev_logprobs": prev}, num_tokens=n, loss_cfg=PASS, step=1)
    own = backend()
    with_training = own.train_step(batch, num_tokens=n, loss_cfg=TRAINING, step=1)
    return dict(prev=prev * batch["response_mask"], pass_=with_pass, training=with_training,
                mask=batch["response_mask"], weights=(given.state_dict(), own.state_dict()))


def _assert_same_step(got: dict[str, object]) -> None:
    answered = got["training"].pop("prev_logprobs") * got["mask"]
    assert "prev_logprobs" not in got["pass_"]
    assert answered.abs().sum() > 0
    torch.testing.assert_close(answered, got["prev"], rtol=0, atol=2e-6)
    for key in ("loss", "pg_loss", "grad_norm", "token_mult_prob_error", "gen_kl_error"):
        assert got["training"][key] == pytest.approx(got["pass_"][key], abs=2e-6), key
    assert got["training"]["clip_fraction"] == 0.0  # r = 1 exactly
    a, b = got["weights"]
    moved = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert moved < 1e-5


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_torch_backend_takes_them_from_its_training_forward(packed: bool) -> None:
    _assert_same_step(_both_ways("torch", packed))


def _megatron(rank: int, port: int, packed: bool) -> dict[str, object]:
    import torch.distributed as dist

    from rl.backends.megatron import shims

    shims.apply()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=1)
    return _both_ways("megatron", packed)


@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="megatron-core not installed")
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_megatron_backend_takes_them_from_its_training_forward(packed: bool) -> None:
    _assert_same_step(run_ranks(functools.partial(_megatron, packed=packed))[0])


def test_a_step_that_takes_them_reads_no_prev_column() -> None:
    assert "prev_logprobs" in train_fields(PASS)
    assert "prev_logprobs" not in train_fields(TRAINING)


class _ReplicaCluster:
    """Each replica answers its rows' prev_logprobs (its input's first column, negated)."""

    def call(self, handles, method, per_worker_args, *, timeout_s, **kwargs):
        return [{"loss": 0.5, "rows": float(len(args[0]["input_ids"])),
                 "prev_logprobs": -args[0]["input_ids"].float()} for args in per_worker_args]


def test_legacy_rows_come_back_in_the_batch_order_beside_the_metrics() -> None:
    group = PolicyGroup(cluster=_ReplicaCluster(), ranks=[0, 1], flops_cfg=None, device="cpu",  # type: ignore[arg-type]
                        num_ranks=2, record_invariant=lambda _: None)
    group.step_flops = lambda lengths, teacher=None: {}  # no model config here
    ids = torch.arange(8).reshape(4, 2)
    plane = LegacyPlane(group_size=2)
    batch = plane.put_rollout(step=1, uids=["a", "a", "b", "b"], columns={"input_ids": ids,
                              "attention_mask": torch.ones(4, 2, dtype=torch.long)}, lengths=[2] * 4)
    out = plane.train(batch, group, advantages=torch.zeros(4), sample_mask=torch.ones(4), num_tokens=8,
                      loss_cfg=TRAINING, step=1)
    assert out == {"loss": 1.0, "rows": 4.0}  # the column left the metrics
    assert torch.equal(plane.read(batch, ("prev_logprobs",))["prev_logprobs"], -ids.float())


def test_legacy_refuses_a_replica_that_did_not_answer() -> None:
    class Partial(_ReplicaCluster):
        def call(self, *a, **k):
            out = super().call(*a, **k)
            del out[1]["prev_logprobs"]
            return out

    group = PolicyGroup(cluster=Partial(), ranks=[0, 1], flops_cfg=None, device="cpu",  # type: ignore[arg-type]
                        num_ranks=2, record_invariant=lambda _: None)
    batch = BatchedDataDict({"input_ids": torch.zeros(4, 2), "attention_mask": torch.ones(4, 2)})
    with pytest.raises(DataIntegrityError, match="1 of 2 replicas answered prev_logprobs"):
        group.train(batch, num_tokens=1, loss_cfg=TRAINING, step=1)


@pytest.mark.parametrize("rows_cls", [CallRows, StoreRows])
def test_a_rank_answers_them_as_get_logprobs_does(rows_cls) -> None:
    """Legacy: the column travels back with the metrics; TQ: it is written to the store, and the
    metrics stay floats."""
    from rl.workers.policy import PolicyWorker

    store = MemoryStore()
    plane = TQPlane(store=store, group_size=2) if rows_cls is StoreRows else LegacyPlane(group_size=2)
    columns = {k: v for k, v in _batch().items() if k in ("input_ids", "attention_mask", "response_mask",
                                                          "gen_logprobs")}
    handle = plane.put_rollout(step=1, uids=["a"] * 2 + ["b"] * 2 + ["c"] * 2, columns=columns, lengths=[LENGTH] * 6)
    handle = store.put(handle, columns={"advantages": torch.zeros(6), "sample_mask": torch.ones(6)}) \
        if rows_cls is StoreRows else BatchedDataDict({**handle, "advantages": torch.zeros(6),
                                                       "sample_mask": torch.ones(6)})
    prev = -torch.rand(6, LENGTH)

    class Backend:
        reports_metrics = True

        def train_step(self, cols, **kwargs):
            assert "prev_logprobs" not in cols
            return {"loss": 0.25, "prev_logprobs": prev}

    from rl.backends.offload import HostOffload

    worker = PolicyWorker.__new__(PolicyWorker)
    worker.backend, worker._rows, worker._train_calls, worker.device, worker.rank, worker._host = \
        Backend(), plane.worker_client, 0, "cpu", 0, HostOffload("cpu")
    out = worker.train(handle, num_tokens=1, loss_cfg=TRAINING, step=1)
    if rows_cls is CallRows:
        assert torch.equal(out.pop("prev_logprobs"), prev)
    else:
        assert torch.equal(plane.read(handle, ("prev_logprobs",))["prev_logprobs"], prev)
    assert out == {"loss": 0.25, "rows": 6}


def test_what_cannot_take_them_is_refused() -> None:
    assert prev_logprobs_refusal(PASS, algorithm="distill", pp=4) is None
    assert prev_logprobs_refusal(TRAINING, algorithm="grpo", pp=1) is None
    assert "needs policy.parallel.pp 1" in prev_logprobs_refusal(TRAINING, algorithm="grpo", pp=2)
    assert "grpo's" in prev_logprobs_refusal(TRAINING, algorithm="distill", pp=1)
    with pytest.raises(ValueError, match=r"prev_logprobs: .* is not one of \['pass', 'training'\]"):
        LossConfig(prev_logprobs="reference")
