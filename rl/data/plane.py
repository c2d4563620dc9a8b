"""The data-plane backends: how a step's rows travel between the driver and the policy ranks.

One interface, `DataPlane`, two implementations registered by name in `PLANES`
(`data_plane.backend` of the recipe; `plane_class` looks a name up):

* `legacy` (`LegacyPlane`): the driver holds a `BatchedDataDict` with every column and passes
  it to the policy group, which shards it contiguously (`shard_by_batch_size`).
* `tq` (`TQPlane`): rollout columns go into a store (TransferQueue in a run, any
  `DataPlaneClient` in a test) under per-sample keys `f"{uid}_g{i}"`; the driver keeps the
  `KVBatchMeta` receipt plus small per-row values; log-prob workers write their columns back
  to the store; training reads from it; each step clears its keys.

The engine asks the backend class how many whole CPUs its Ray actors take (`ray_cpus`, before
Ray starts), opens it (`open`), hands `worker_client` to every policy rank and the plane itself
to the driver, and closes it on the way out; it never names a backend. `worker_client` is the
rank's side of the same backend (`RankRows`: `CallRows` for legacy, `StoreRows` for tq): how a
rank reads the rows a call brings and answers with the columns it computed, so the policy
worker never asks which backend it serves.

Parity by construction: training hands rank r the same contiguous block of rows on both paths
(the TQ path passes one receipt per rank, which dispatch never reorders), and log-probs, which
the TQ path shards by sequence length, are row-local and computed on fixed-shape micro-batches.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import torch

from rl.data.batched import BatchedDataDict
from rl.data.client import DataPlaneClient
from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta, make_key
from rl.data.stores import make_client

__all__ = ["PLANES", "CallRows", "DataPlane", "LegacyPlane", "RankRows", "StoreRows", "TQPlane", "contiguous_blocks",
           "plane_class"]

def contiguous_blocks(rows: int, ranks: int) -> list[tuple[int, int]]:
    """[start, end) of rank r's rows: the legacy `shard_by_batch_size(ranks)` assignment."""
    if rows % ranks != 0:
        raise DataIntegrityError(f"{rows} rows do not split over {ranks} ranks")
    per = rows // ranks
    return [(r * per, (r + 1) * per) for r in range(ranks)]


class RankRows(abc.ABC):
    """A policy rank's side of a data plane: what it does with the `handle` a call brings (the
    driver's handle, or this rank's shard of it)."""

    returns_columns = False  # whether `answer` is the columns themselves (else they are stored)

    @abc.abstractmethod
    def fields(self, handle: Any) -> tuple[str, ...]:
        """The names of the columns the rows carry."""

    @abc.abstractmethod
    def read(self, handle: Any, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The named columns of the rows, in the handle's row order."""

    @abc.abstractmethod
    def answer(self, handle: Any, columns: dict[str, torch.Tensor]) -> Any:
        """What the rank returns for the columns it computed for these rows."""


class CallRows(RankRows):
    """Legacy: the handle is a `BatchedDataDict` that came with the call; the answer is the
    computed columns themselves."""

    returns_columns = True

    def fields(self, batch: BatchedDataDict) -> tuple[str, ...]:
        return tuple(batch)

    def read(self, batch: BatchedDataDict, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return {f: batch[f] for f in fields}

    def answer(self, batch: BatchedDataDict, columns: dict[str, torch.Tensor]) -> BatchedDataDict:
        return BatchedDataDict(columns)


@dataclass(frozen=True)
class StoreRows(RankRows):
    """TQ: the handle is a `KVBatchMeta` receipt; columns are read from and written back to
    `store` (a TQStore pickles to a lazy attach to the driver's store), and the answer is the
    updated receipt."""

    store: DataPlaneClient

    def fields(self, meta: KVBatchMeta) -> tuple[str, ...]:
        return meta.fields

    def read(self, meta: KVBatchMeta, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return self.store.get(meta, list(fields))

    def answer(self, meta: KVBatchMeta, columns: dict[str, torch.Tensor]) -> KVBatchMeta:
        return self.store.put(meta, columns=columns)


class DataPlane(abc.ABC):
    """A step's rows between the driver and the policy group; `handle` is what the driver holds.

    The driver calls, per step: `put_rollout` once, `logprobs` (previous, reference), `read` what
    it needs on the driver, `train` or `distill`, then `finish`; `close` once at the end.
    """

    name: str = "abstract"

    def __init__(self, *, group_size: int) -> None:
        self.group_size = group_size

    @classmethod
    def ray_cpus(cls, section: Any) -> int:
        """Whole logical CPUs the backend's own Ray actors ask for (reserved on top of the workers')."""
        return 0

    @classmethod
    @abc.abstractmethod
    def open(cls, section: Any, *, group_size: int) -> DataPlane:
        """The backend for the recipe's `data_plane` section (Ray is up); `group_size`: samples per prompt."""

    @property
    @abc.abstractmethod
    def worker_client(self) -> RankRows:
        """What each policy rank is given to read the rows a call brings and answer with its columns."""

    @abc.abstractmethod
    def put_rollout(self, *, step: int, uids: list[str], columns: dict[str, torch.Tensor],
                    lengths: list[int], tags: list[dict] | None = None) -> Any:
        """The step's rows, in order; `tags`: small per-row values that travel with the handle."""

    @abc.abstractmethod
    def logprobs(self, handle: Any, policy: Any, *, reference: bool) -> Any:
        """`prev_logprobs` (or `ref_logprobs`) added to the rows; returns the updated handle."""

    @abc.abstractmethod
    def read(self, handle: Any, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The named columns on the driver, rows in order."""

    @abc.abstractmethod
    def train(self, handle: Any, policy: Any, *, advantages: torch.Tensor, sample_mask: torch.Tensor,
              num_tokens: int, loss_cfg: Any, step: int) -> dict[str, Any]:
        """One optimizer step over the rows, rank r on the r-th contiguous block; `loss_cfg` (the
        recipe's `LossConfig`) and `step` (the run's training step: its lr) go to the ranks as they are."""

    @abc.abstractmethod
    def distill(self, handle: Any, policy: Any, *, sample_mask: torch.Tensor, cfg: Any,
                step: int) -> dict[str, Any]:
        """One distillation step (training step `step`) over the rows, rank r on the r-th contiguous block."""

    @abc.abstractmethod
    def finish(self, handle: Any) -> None:
        """Drop the step's rows."""

    def close(self) -> None:  # noqa: B027  (a no-op unless the backend holds resources)
        """Release what the backend started."""


class LegacyPlane(DataPlane):
    """Columns travel with every call."""

    name = "legacy"

    @classmethod
    def open(cls, section: Any, *, group_size: int) -> LegacyPlane:
        return cls(group_size=group_size)

    @property
    def worker_client(self) -> CallRows:
        return CallRows()

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
              sample_mask: torch.Tensor, num_tokens: int, loss_cfg: Any, step: int) -> dict[str, Any]:
        batch["advantages"] = advantages
        batch["sample_mask"] = sample_mask
        out = policy.train(batch, num_tokens=num_tokens, loss_cfg=loss_cfg, step=step)
        if "prev_logprobs" in out:  # the training forward's (algorithm.loss.prev_logprobs: training)
            batch["prev_logprobs"] = out.pop("prev_logprobs")
        return out

    def distill(self, batch: BatchedDataDict, policy: Any, *, sample_mask: torch.Tensor, cfg: Any,
                step: int) -> dict[str, Any]:
        batch["sample_mask"] = sample_mask
        return policy.distill(batch, cfg=cfg, step=step)

    def finish(self, batch: BatchedDataDict) -> None:
        batch.clear()


class TQPlane(DataPlane):
    """Receipts travel; the store holds the columns."""

    name = "tq"

    def __init__(self, *, store: DataPlaneClient, group_size: int) -> None:
        super().__init__(group_size=group_size)
        self.store = store

    @classmethod
    def ray_cpus(cls, section: Any) -> int:
        """TransferQueue's controller and each storage unit ask Ray for a whole CPU (2 cores would hang)."""
        return 1 + section.tq.num_storage_units

    @classmethod
    def open(cls, section: Any, *, group_size: int) -> TQPlane:
        """Start TransferQueue in the running Ray (about 13 s); workers attach by unpickling the store."""
        return cls(store=make_client(section), group_size=group_size)

    @property
    def worker_client(self) -> StoreRows:
        return StoreRows(self.store)

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
              sample_mask: torch.Tensor, num_tokens: int, loss_cfg: Any, step: int) -> dict[str, Any]:
        meta = self.store.put(meta, columns={"advantages": advantages, "sample_mask": sample_mask})
        shards = [meta.slice(a, b) for a, b in contiguous_blocks(len(meta), policy.dp_size)]
        return policy.train(shards, num_tokens=num_tokens, loss_cfg=loss_cfg, step=step)

    def distill(self, meta: KVBatchMeta, policy: Any, *, sample_mask: torch.Tensor, cfg: Any,
                step: int) -> dict[str, Any]:
        meta = self.store.put(meta, columns={"sample_mask": sample_mask})
        shards = [meta.slice(a, b) for a, b in contiguous_blocks(len(meta), policy.dp_size)]
        return policy.distill(shards, cfg=cfg, step=step)

    def finish(self, meta: KVBatchMeta) -> None:
        self.store.clear(meta)

    def close(self) -> None:
        self.store.close()


PLANES: dict[str, type[DataPlane]] = {"legacy": LegacyPlane, "tq": TQPlane}


def plane_class(name: str) -> type[DataPlane]:
    """The backend registered as `name` (the recipe's `data_plane.backend`)."""
    if name not in PLANES:
        raise ValueError(f"data_plane.backend: unknown backend {name!r}; valid: {sorted(PLANES)}")
    return PLANES[name]
