"""The driver-side policy group: DP ranks behind one object, for both data paths.

`get_logprobs` and `train` are `dp_dispatch` methods: a `BatchedDataDict` runs the legacy
bodies below (contiguous `shard_by_batch_size` blocks), a `KVBatchMeta` or one meta per rank
is sharded and fanned out by the decorator, which calls back `_run_on_ranks`,
`_record_invariant` and `_dp_post_train` here.
"""

from __future__ import annotations

from typing import Any, Callable

from rl.cluster import Cluster, WorkerHandle
from rl.data import BatchedDataDict, KVBatchMeta
from rl.data.dispatch import dp_dispatch, flops_post_train

__all__ = ["PolicyGroup", "sum_rank_metrics"]

LOGPROB_INPUTS = ("input_ids", "attention_mask")
SAME_ON_EVERY_RANK = ("grad_norm",)


def sum_rank_metrics(raw: list[dict[str, float]]) -> dict[str, float]:
    """Add per-rank metric shares in rank order (each is a share of a global mean or a count).

    Values every rank computes identically after the all-reduce (grad norm) are taken from
    rank 0. The fixed order keeps the float sums reproducible on both data paths.
    """
    out: dict[str, float] = {}
    for key in raw[0]:
        if key in SAME_ON_EVERY_RANK:
            out[key] = raw[0][key]
        else:
            total = 0.0
            for result in raw:
                total += result[key]
            out[key] = total
    return out


class PolicyGroup:
    """DP policy ranks.

    Args:
        cluster: waits on the workers (names the dead one).
        ranks: worker handles in rank order.
        flops_cfg: the model's HF config (for FLOPs of each train step).
        device: `cluster.device` (peak TFLOP/s).
        num_ranks: training ranks (world size).
        record_invariant: callback taking one invariant record.
    """

    def __init__(self, *, cluster: Cluster, ranks: list[WorkerHandle], flops_cfg: Any, device: str,
                 num_ranks: int, record_invariant: Callable[[dict[str, Any]], None],
                 timeout_s: float = 600.0) -> None:
        self.cluster = cluster
        self.ranks = ranks
        self.dp_size = len(ranks)
        self.flops_cfg = flops_cfg
        self.device = device
        self.num_ranks = num_ranks
        self._record = record_invariant
        self.timeout_s = timeout_s

    # --- dp_dispatch protocol ---------------------------------------------------------------

    def _run_on_ranks(self, method_name: str, per_rank_inputs: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        assert len(per_rank_inputs) == self.dp_size, (method_name, len(per_rank_inputs))
        return self.cluster.call(self.ranks, method_name, [(x, *args) for x in per_rank_inputs],
                                 timeout_s=self.timeout_s, **kwargs)

    def _record_invariant(self, record: dict[str, Any]) -> None:
        self._record(record)

    def _dp_post_train(self, aggregated: Any, raw: list[dict[str, float]], *,
                       shards: list[KVBatchMeta]) -> dict[str, Any]:
        """Sum the ranks' metrics, check each rank trained its shard, and add the FLOPs fields."""
        trained = [int(r["rows"]) for r in raw]
        expected = [len(s) for s in shards]
        ok = trained == expected
        self._record({"check": "dispatch_row_order", "method": "train", "ok": ok,
                      "rows": sum(expected),
                      "detail": f"rows trained per rank {trained}, shard sizes {expected}"})
        assert ok, f"train: ranks trained {trained} rows, shards have {expected}"
        return flops_post_train(sum_rank_metrics(raw), raw, shards, flops_cfg=self.flops_cfg,
                                device=self.device, num_ranks=self.num_ranks)

    # --- policy methods (legacy bodies) -----------------------------------------------------

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict, *, reference: bool = False) -> BatchedDataDict:
        """`prev_logprobs` (or `ref_logprobs`) for every row, in the batch's order."""
        inputs = BatchedDataDict({k: batch[k] for k in LOGPROB_INPUTS})
        shards = inputs.shard_by_batch_size(self.dp_size)
        results = self._run_on_ranks("get_logprobs", shards, reference=reference)
        return BatchedDataDict.from_batches(results)

    @dp_dispatch
    def train(self, batch: BatchedDataDict, *, num_tokens: int, loss_cfg: dict) -> dict[str, Any]:
        """One optimizer step over the batch; returns summed metrics plus FLOPs fields."""
        from rl.models import flops

        shards = batch.shard_by_batch_size(self.dp_size)
        raw = self._run_on_ranks("train", shards, num_tokens=num_tokens, loss_cfg=loss_cfg)
        out = sum_rank_metrics(raw)
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        out["total_flops"] = flops.total_flops(self.flops_cfg, lengths)
        out["num_ranks"] = self.num_ranks
        out["theoretical_tflops"] = flops.theoretical_tflops(self.device, self.num_ranks)
        return out

    # --- weights --------------------------------------------------------------------------

    def rank0(self) -> WorkerHandle:
        return self.ranks[0]
