"""Refit without the CPU round trip: weights packed into a few flat buckets on the device.

A state dict of hundreds of tensors becomes one flat tensor per dtype (a "bucket") and a layout
saying where each weight lives in it. On one GPU (colocated generation) the buckets go to the
generator as CUDA IPC handles (`share` / `open_shared`): the generator copies device to device
out of the trainer's memory, nothing is pickled but a few handles. On the CPU the same buckets
travel as tensors. The trainer keeps its buckets alive until the generator has copied them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Packed", "Slot", "layout_of", "open_shared", "pack", "share", "to_cpu", "unpack"]


@dataclass(frozen=True)
class Slot:
    """Where one weight lives: bucket (by dtype), element offset, shape."""

    name: str
    bucket: str
    offset: int
    shape: tuple[int, ...]


@dataclass
class Packed:
    buckets: dict[str, torch.Tensor]
    layout: list[Slot]

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buckets.values())


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def layout_of(weights: dict[str, torch.Tensor]) -> list[Slot]:
    """Where `pack` puts each weight: one bucket per dtype, in the state dict's order."""
    sizes: dict[str, int] = {}
    layout = []
    for name, tensor in weights.items():
        key = _dtype_name(tensor.dtype)
        layout.append(Slot(name=name, bucket=key, offset=sizes.get(key, 0), shape=tuple(tensor.shape)))
        sizes[key] = sizes.get(key, 0) + tensor.numel()
    return layout


def pack(weights: dict[str, torch.Tensor]) -> Packed:
    """One flat bucket per dtype on the weights' device, in the state dict's order."""
    layout = layout_of(weights)
    sizes: dict[str, int] = {}
    for slot, tensor in zip(layout, weights.values()):
        sizes[slot.bucket] = slot.offset + tensor.numel()
    first = {_dtype_name(t.dtype): t for t in weights.values()}
    buckets = {key: torch.empty(n, dtype=first[key].dtype, device=first[key].device) for key, n in sizes.items()}
    for slot, tensor in zip(layout, weights.values()):
        buckets[slot.bucket][slot.offset:slot.offset + tensor.numel()].copy_(tensor.reshape(-1))
    return Packed(buckets=buckets, layout=layout)


def unpack(packed: Packed) -> dict[str, torch.Tensor]:
    """Views of each weight in its bucket (no copy)."""
    out = {}
    for slot in packed.layout:
        numel = 1
        for dim in slot.shape:
            numel *= dim
        out[slot.name] = packed.buckets[slot.bucket][slot.offset:slot.offset + numel].view(slot.shape)
    return out


def share(packed: Packed) -> dict[str, Any]:
    """Picklable handles of `packed`: CUDA IPC handles for device buckets, the tensors for CPU."""
    from torch.multiprocessing.reductions import reduce_tensor

    handles = {key: (reduce_tensor(b) if b.is_cuda else b) for key, b in packed.buckets.items()}
    return {"layout": packed.layout, "buckets": handles}


def open_shared(shared: dict[str, Any]) -> Packed:
    """The buckets behind `share`'s handles, opened in this process (same GPU)."""
    buckets = {}
    for key, handle in shared["buckets"].items():
        if isinstance(handle, torch.Tensor):
            buckets[key] = handle
        else:
            rebuild, args = handle
            buckets[key] = rebuild(*args)
    return Packed(buckets=buckets, layout=list(shared["layout"]))


def to_cpu(obj: Any) -> Any:
    """`obj` with every tensor inside (dicts, lists, tuples) moved to the CPU: what crosses to the
    driver must not open a CUDA context there."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj
