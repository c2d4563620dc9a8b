"""The two data paths of the GRPO driver, behind one small interface.

* `LegacyPath`: the driver holds a `BatchedDataDict` with every column and passes it to the
  policy group, which shards it contiguously (`shard_by_batch_size`).
* `TQPath`: rollout columns go into the data plane under per-sample keys `f"{uid}_g{i}"`; the
  driver keeps the `KVBatchMeta` receipt plus small per-row values; log-prob workers write
  their columns back to the plane; training reads from it; each step clears its keys.

Parity by construction: training hands rank r the same contiguous block of rows on both paths
(the TQ path passes one receipt per rank, which dispatch never reorders), and log-probs, which
the TQ path shards by sequence length, are row-local and computed on fixed-shape micro-batches.
"""

from __future__ import annotations

from typing import Any

import torch

from rl.data import BatchedDataDict, DataIntegrityError, KVBatchMeta, make_key

__all__ = ["LegacyPath", "TQPath", "contiguous_blocks"]

READ_BACK = ("prev_logprobs", "ref_logprobs", "gen_logprobs", "response_mask")


def contiguous_blocks(rows: int, ranks: int) -> list[tuple[int, int]]:
    """[start, end) of rank r's rows: the legacy `shard_by_batch_size(ranks)` assignment."""
    if rows % ranks != 0:
        raise DataIntegrityError(f"{rows} rows do not split over {ranks} ranks")
    per = rows // ranks
    return [(r * per, (r + 1) * per) for r in range(ranks)]


class LegacyPath:
    """Columns travel with every call."""

    name = "legacy"

    def __init__(self, *, group_size: int) -> None:
        self.group_size = group_size

    def put_rollout(self, *, step: int, uids: list[str], columns: dict[str, torch.Tensor],
                    lengths: list[int], tags: list[dict] | None = None) -> BatchedDataDict:
        return BatchedDataDict(dict(columns))

    def logprobs(self, batch: BatchedDataDict, policy: Any, *, reference: bool) -> BatchedDataDict:
        out = policy.get_logprobs(batch, reference=reference)
        name = "ref_logprobs" if reference else "prev_logprobs"
        batch[name] = out[name]
        return batch

    def read(self, batch: BatchedDataDict, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return {f: batch[f] for f in fields}

    def train(self, batch: BatchedDataDict, policy: Any, *, advantages: torch.Tensor,
              sample_mask: torch.Tensor, num_tokens: int, loss_cfg: dict) -> dict[str, Any]:
        batch["advantages"] = advantages
        batch["sample_mask"] = sample_mask
        return policy.train(batch, num_tokens=num_tokens, loss_cfg=loss_cfg)

    def distill(self, batch: BatchedDataDict, policy: Any, *, sample_mask: torch.Tensor, cfg: Any) -> dict[str, Any]:
        batch["sample_mask"] = sample_mask
        return policy.distill(batch, cfg=cfg)

    def finish(self, batch: BatchedDataDict) -> None:
        batch.clear()

    def close(self) -> None:
        pass


class TQPath:
    """Receipts travel; the store holds the columns."""

    name = "tq"

    def __init__(self, *, store: Any, group_size: int) -> None:
        self.store = store
        self.group_size = group_size

    def put_rollout(self, *, step: int, uids: list[str], columns: dict[str, torch.Tensor],
                    lengths: list[int], tags: list[dict] | None = None) -> KVBatchMeta:
        """`tags`: small per-row values that travel with the receipt (a teacher's lengths)."""
        keys = [make_key(uid, i % self.group_size) for i, uid in enumerate(uids)]
        return self.store.put(keys, f"step_{step}", columns, sequence_lengths=[int(n) for n in lengths], tags=tags)

    def logprobs(self, meta: KVBatchMeta, policy: Any, *, reference: bool) -> KVBatchMeta:
        policy.get_logprobs(meta, reference=reference)
        return meta.with_fields("ref_logprobs" if reference else "prev_logprobs")

    def read(self, meta: KVBatchMeta, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return self.store.get(meta, list(fields))

    def train(self, meta: KVBatchMeta, policy: Any, *, advantages: torch.Tensor,
              sample_mask: torch.Tensor, num_tokens: int, loss_cfg: dict) -> dict[str, Any]:
        meta = self.store.put(meta, columns={"advantages": advantages, "sample_mask": sample_mask})
        shards = [meta.slice(a, b) for a, b in contiguous_blocks(len(meta), policy.dp_size)]
        return policy.train(shards, num_tokens=num_tokens, loss_cfg=loss_cfg)

    def distill(self, meta: KVBatchMeta, policy: Any, *, sample_mask: torch.Tensor, cfg: Any) -> dict[str, Any]:
        meta = self.store.put(meta, columns={"sample_mask": sample_mask})
        shards = [meta.slice(a, b) for a, b in contiguous_blocks(len(meta), policy.dp_size)]
        return policy.distill(shards, cfg=cfg)

    def finish(self, meta: KVBatchMeta) -> None:
        self.store.clear(meta)

    def close(self) -> None:
        self.store.close()
