"""The driver-side policy group: policy ranks behind one object, for both data paths.

`get_logprobs` and `train` are `dp_dispatch` methods: a `BatchedDataDict` runs the legacy
bodies below (contiguous `shard_by_batch_size` blocks), a `KVBatchMeta` or one meta per rank
is sharded and fanned out by the decorator, which calls back `_run_on_ranks`,
`_record_invariant` and `_dp_post_train` here.

Shards are per data-parallel replica, not per rank: `dp_size` is the backend's (world / TP
with megatron). `_run_on_ranks` hands replica d's shard to every rank whose `dp_rank` is d
(TP peers compute one forward together) and keeps one answer per replica, from the rank that
`reports_metrics`, in replica order. With the torch backend every rank is its own replica.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from rl import checkpoint
from rl.algorithms.loss import LossConfig
from rl.cluster.ray_cluster import Cluster, WorkerHandle
from rl.data import BatchedDataDict, DataIntegrityError, KVBatchMeta
from rl.data.dispatch import dp_dispatch, flops_post_train
from rl.models.image_inputs import IMAGE_FIELDS

__all__ = ["PolicyGroup", "replica_layout", "sum_rank_metrics"]

LOGPROB_INPUTS = ("input_ids", "attention_mask")
SAME_ON_EVERY_RANK = ("grad_norm", "lr")


MAX_OVER_RANKS = frozenset({"peak_memory_gib"})


def sum_rank_metrics(raw: list[dict[str, float]]) -> dict[str, float]:
    """Add per-rank metric shares in rank order (each is a share of a global mean or a count).

    Values every rank computes identically (the grad norm after the all-reduce, the lr) are
    taken from rank 0. The fixed order keeps the float sums reproducible on both data paths.
    """
    out: dict[str, float] = {}
    for key in raw[0]:
        if key in SAME_ON_EVERY_RANK:
            out[key] = raw[0][key]
        elif key in MAX_OVER_RANKS:
            out[key] = max(result[key] for result in raw)
        else:
            total = 0.0
            for result in raw:
                total += result[key]
            out[key] = total
    return out


def replica_layout(topology: list[dict[str, Any]]) -> tuple[int, list[int], list[int]]:
    """(dp_size, replica of each rank, the reporting rank of each replica) from the ranks' topology."""
    dp_size = topology[0]["dp_size"]
    if not all(t["dp_size"] == dp_size for t in topology):
        raise DataIntegrityError(f"ranks disagree on dp_size: {topology}")
    replica_of = [t["dp_rank"] for t in topology]
    reporters = sorted((t["dp_rank"], r) for r, t in enumerate(topology) if t["reports_metrics"])
    if [d for d, _ in reporters] != list(range(dp_size)):
        raise DataIntegrityError(f"need exactly one reporting rank per data-parallel replica: {topology}")
    return dp_size, replica_of, [r for _, r in reporters]


class PolicyGroup:
    """DP policy ranks.

    Args:
        cluster: waits on the workers (names the dead one).
        ranks: worker handles in rank order.
        flops_cfg: the model's HF config (for FLOPs of each train step).
        device: `cluster.device` (peak TFLOP/s).
        num_ranks: training ranks (world size).
        record_invariant: callback taking one invariant record.
        topology: per rank (rank order), what its `setup` returned: `dp_rank`, `dp_size`,
            `reports_metrics`; None means every rank is its own replica.
        teacher_flops_cfg: the distillation teacher's HF config (its forward counts in FLOPs).
    """

    def __init__(self, *, cluster: Cluster, ranks: list[WorkerHandle], flops_cfg: Any, device: str,
                 num_ranks: int, record_invariant: Callable[[dict[str, Any]], None],
                 timeout_s: float = 600.0, topology: list[dict[str, Any]] | None = None,
                 teacher_flops_cfg: Any = None) -> None:
        self.cluster = cluster
        self.ranks = ranks
        topology = topology or [{"dp_rank": r, "dp_size": len(ranks), "reports_metrics": True}
                                for r in range(len(ranks))]
        self.dp_size, self.replica_of, self.reporters = replica_layout(topology)
        self.flops_cfg = flops_cfg
        self.teacher_flops_cfg = teacher_flops_cfg
        self.device = device
        self.num_ranks = num_ranks
        self._record = record_invariant
        self.timeout_s = timeout_s

    # --- dp_dispatch protocol ---------------------------------------------------------------

    def _run_on_ranks(self, method_name: str, per_rank_inputs: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Replica d's input to every rank of replica d; one result per replica, in replica order."""
        if len(per_rank_inputs) != self.dp_size:
            raise DataIntegrityError(f"{method_name}: {len(per_rank_inputs)} inputs for dp_size={self.dp_size}")
        per_rank = [(per_rank_inputs[d], *args) for d in self.replica_of]
        results = self.cluster.call(self.ranks, method_name, per_rank, timeout_s=self.timeout_s, **kwargs)
        return [results[r] for r in self.reporters]

    def _record_invariant(self, record: dict[str, Any]) -> None:
        self._record(record)

    def _check_trained_rows(self, method: str, raw: list[dict[str, float]], shards: list[KVBatchMeta]) -> None:
        trained = [int(r["rows"]) for r in raw]
        expected = [len(s) for s in shards]
        ok = trained == expected
        self._record({"check": "dispatch_row_order", "method": method, "ok": ok,
                      "rows": sum(expected),
                      "detail": f"rows trained per rank {trained}, shard sizes {expected}"})
        if not ok:
            raise DataIntegrityError(f"{method}: ranks trained {trained} rows, shards have {expected}")

    def _dp_post_train(self, aggregated: Any, raw: list[dict[str, float]], *,
                       shards: list[KVBatchMeta]) -> dict[str, Any]:
        """Sum the ranks' metrics, check each rank trained its shard, and add the FLOPs fields."""
        self._check_trained_rows("train", raw, shards)
        return flops_post_train(sum_rank_metrics(raw), raw, shards, flops=self.step_flops)

    # --- policy methods (legacy bodies) -----------------------------------------------------

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict, *, reference: bool = False) -> BatchedDataDict:
        """`prev_logprobs` (or `ref_logprobs`) for every row, in the batch's order."""
        keys = LOGPROB_INPUTS + tuple(f for f in IMAGE_FIELDS if f in batch)  # a VL model's images
        inputs = BatchedDataDict({k: batch[k] for k in keys})
        shards = inputs.shard_by_batch_size(self.dp_size)
        results = self._run_on_ranks("get_logprobs", shards, reference=reference)
        return BatchedDataDict.from_batches(results)

    @dp_dispatch
    def train(self, batch: BatchedDataDict, *, num_tokens: int, loss_cfg: LossConfig, step: int) -> dict[str, Any]:
        """One optimizer step (training step `step`) over the batch; summed metrics plus FLOPs fields
        (and the training forward's `prev_logprobs`, rows in order, when the loss takes them)."""
        shards = batch.shard_by_batch_size(self.dp_size)
        raw = self._run_on_ranks("train", shards, num_tokens=num_tokens, loss_cfg=loss_cfg, step=step)
        prev = [r.pop("prev_logprobs") for r in raw if "prev_logprobs" in r]  # replica order: the batch's
        if prev and len(prev) != len(raw):
            raise DataIntegrityError(f"train: {len(prev)} of {len(raw)} replicas answered prev_logprobs")
        out = {**sum_rank_metrics(raw), **self.step_flops(batch["attention_mask"].sum(dim=1).tolist())}
        return {**out, "prev_logprobs": torch.cat(prev)} if prev else out

    @dp_dispatch
    def distill(self, batch: BatchedDataDict, *, cfg: Any, step: int) -> dict[str, Any]:
        """One distillation step (training step `step`) over the batch; summed metrics plus FLOPs fields."""
        shards = batch.shard_by_batch_size(self.dp_size)
        raw = self._run_on_ranks("distill", shards, cfg=cfg, step=step)
        return {**sum_rank_metrics(raw), **self.step_flops(batch["attention_mask"].sum(dim=1).tolist(),
                                                            batch["teacher_attention_mask"].sum(dim=1).tolist())}

    def _dp_post_distill(self, aggregated: Any, raw: list[dict[str, float]], *,
                         shards: list[KVBatchMeta]) -> dict[str, Any]:
        """The meta path: lengths from the receipts (the teacher's from each row's tags)."""
        self._check_trained_rows("distill", raw, shards)
        lengths = [n for s in shards for n in s.sequence_lengths]
        teacher = [int(t["teacher_length"]) for s in shards for t in s.tags]
        return {**sum_rank_metrics(raw), **self.step_flops(lengths, teacher)}

    # --- FLOPs: the one place a train step's are computed ----------------------------------

    def step_flops(self, lengths: list[int], teacher_lengths: list[int] | None = None) -> dict[str, Any]:
        """`total_flops`, `num_ranks`, `theoretical_tflops` of one step over rows of these unpadded
        lengths: the policy's forward and backward, plus, for distillation, the teacher's forward
        (a third of its 3x). Both data paths come here: the legacy bodies with the batch's lengths,
        the meta path's post hooks with the lengths the receipts carry."""
        from rl.models import flops

        total = flops.total_flops(self.flops_cfg, lengths)
        if teacher_lengths is not None:
            total += flops.total_flops(self.teacher_flops_cfg, teacher_lengths) // 3
        return {"total_flops": total, "num_ranks": self.num_ranks,
                "theoretical_tflops": flops.theoretical_tflops(self.device, self.num_ranks)}

    # --- the training state's stay in host memory (generation.offload_training) -------------

    def offload(self) -> int:
        """Every rank's training state to host memory; the most bytes one rank moved."""
        return max(self.cluster.call(self.ranks, "offload", timeout_s=self.timeout_s))

    def reload(self) -> int:
        """Every rank's training state back on its device; the most bytes one rank moved."""
        return max(self.cluster.call(self.ranks, "reload", timeout_s=self.timeout_s))

    # --- weights (collectives: every rank runs them, rank 0 holds the result) --------------

    def save_checkpoint(self, directory: Path) -> dict[str, str]:
        """Every rank writes its part of a checkpoint into DIRECTORY; {file name: SHA-256}."""
        files: dict[str, str] = {}
        for written in self.cluster.call(self.ranks, "save_checkpoint", [(str(directory),)] * len(self.ranks),
                                         timeout_s=self.timeout_s):
            files.update(written)
        return files

    def load_checkpoint(self, ckpt: checkpoint.Checkpoint) -> None:
        """The checkpoint's weights to every rank, and each rank's optimizer state from its file."""
        if ckpt.ranks != len(self.ranks):
            raise ValueError(f"checkpoint: optimizer state of {ckpt.ranks} ranks, this run has "
                             f"{len(self.ranks)}; resume under the same cluster and policy.parallel")
        weights = ckpt.weights()
        self.cluster.call(self.ranks, "load_checkpoint", [(ckpt.optimizer_path(r),) for r in range(len(self.ranks))],
                          timeout_s=self.timeout_s, policy=weights["policy"], reference=weights["reference"])
