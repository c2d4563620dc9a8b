"""Refit over a process group of two: policy rank 0 broadcasts its weight buckets to the generator.

Why: when generation is not colocated (`generation.colocated: false`) the generator has a GPU
of its own, so CUDA IPC handles (buckets.py `share`) do not reach it, and the object store
would carry every weight through host memory on every step. Instead policy rank 0 and the
generator share a group of their own, beside the policy's: NCCL between GPUs, gloo on the CPU
(how CPU tests run the same path). Rank 0 of the group is policy rank 0, rank 1 the generator.

The layout (each weight's bucket, offset and shape, buckets.py `pack`) is agreed once, when the
channel opens; then a refit is one broadcast per bucket (one per dtype) into buffers the
generator allocated once. Each refit the sender checks its layout against the agreed one, so a
changed set of weights fails loudly instead of filling the generator with shifted bytes.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch
import torch.distributed as dist

from rl.refit.buckets import Packed, Slot, unpack

__all__ = ["RefitChannel"]

TIMEOUT = datetime.timedelta(minutes=10)
SENDER, RECEIVER = 0, 1


def _bucket_sizes(layout: list[Slot]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for slot in layout:
        numel = 1
        for dim in slot.shape:
            numel *= dim
        sizes[slot.bucket] = max(sizes.get(slot.bucket, 0), slot.offset + numel)
    return sizes


class RefitChannel:
    """One end of the two-rank group. `open` on both ends at once (the group connects then)."""

    def __init__(self, group: Any, rank: int, layout: list[Slot], device: torch.device, store: Any) -> None:
        self.group, self.rank, self.layout, self.device = group, rank, list(layout), device
        self._store = store  # the group reads through it; it must outlive the group
        self._buckets: dict[str, torch.Tensor] | None = None

    @classmethod
    def open(cls, address: tuple[str, int], *, rank: int, layout: list[Slot],
             device: str | torch.device) -> "RefitChannel":
        device = torch.device(device)
        host, port = address
        store = dist.TCPStore(host, port, 2, is_master=rank == RECEIVER, timeout=TIMEOUT)
        prefixed = dist.PrefixStore("refit", store)
        if device.type == "cuda":
            options = dist.ProcessGroupNCCL.Options()
            group = dist.ProcessGroupNCCL(prefixed, rank, 2, options)
        else:
            group = dist.ProcessGroupGloo(prefixed, rank, 2, TIMEOUT)
        return cls(group, rank, layout, device, store)

    def _broadcast(self, buckets: dict[str, torch.Tensor]) -> None:
        options = dist.BroadcastOptions()
        options.rootRank = SENDER
        for key in sorted(buckets):  # the same order on both ends
            self.group.broadcast([buckets[key]], options).wait()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def send(self, packed: Packed) -> None:
        """Policy rank 0: broadcast `packed` (its layout must be the agreed one)."""
        if self.rank != SENDER:
            raise RuntimeError("RefitChannel.send: only the sender (policy rank 0) sends")
        if packed.layout != self.layout:
            changed = sorted({s.name for s in packed.layout} ^ {s.name for s in self.layout})
            raise RuntimeError(f"refit channel: the weights' layout changed since the channel opened "
                               f"({len(packed.layout)} vs {len(self.layout)} weights; differing: {changed[:3]})")
        self._broadcast(packed.buckets)

    def receive(self) -> dict[str, torch.Tensor]:
        """The generator: the sender's weights, as views of this end's buckets (valid until the next receive)."""
        if self.rank != RECEIVER:
            raise RuntimeError("RefitChannel.receive: only the receiver (the generator) receives")
        if self._buckets is None:
            dtypes = {key: getattr(torch, key) for key in _bucket_sizes(self.layout)}
            self._buckets = {key: torch.empty(n, dtype=dtypes[key], device=self.device)
                             for key, n in _bucket_sizes(self.layout).items()}
        self._broadcast(self._buckets)
        return unpack(Packed(buckets=self._buckets, layout=self.layout))
