"""Refit without the CPU round trip: weights packed into a few flat buckets on the device.

A state dict of hundreds of tensors becomes one flat tensor per dtype (a "bucket") and a layout
saying where each weight lives in it. On one GPU (colocated generation) the buckets go to the
generator as CUDA IPC handles (`share` / `open_shared`): the generator copies device to device
out of the trainer's memory, nothing is pickled but a few handles. On the CPU the same buckets
travel as tensors. The trainer keeps its buckets alive until the generator has copied them.

A colocated refit streams: the weights go over in chunks of whole layers (`chunked`), each
gathered from the training layout on the device, packed, copied by the replicas and released
before the next, so the transient it adds to a GPU is one chunk (about `CHUNK_BYTES`), not a
second whole model (a 35B policy is ~65 GiB in bf16 beside its replica's own ~65).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CHUNK_BYTES", "Packed", "Slot", "chunked", "layer_of", "layout_of", "open_shared", "pack", "share",
           "to_cpu", "unpack"]

CHUNK_BYTES = 2 * 1024**3  # a streamed refit's chunk: whole layers up to this many bytes (one larger layer alone)
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def layer_of(name: str) -> int | None:
    """The decoder layer a weight belongs to (`...layers.7.mlp...` -> 7), None for the rest
    (embeddings, final norm, output layer, a vision tower's blocks are `blocks.N`)."""
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def chunked(sizes: dict[str, int], budget: int | None = None) -> list[list[str]]:
    """The names of `sizes` (name -> bytes) in refit chunks: first everything outside the decoder
    layers, then consecutive whole layers, each chunk at most `budget` bytes unless one layer alone
    is larger (`budget` None: CHUNK_BYTES). Every rank that calls it with the same names and sizes
    gets the same chunks."""
    budget = CHUNK_BYTES if budget is None else budget
    layers: dict[int, list[str]] = {}
    rest = []
    for name in sizes:
        layer = layer_of(name)
        (rest if layer is None else layers.setdefault(layer, [])).append(name)
    chunks, current, used = [rest] if rest else [], [], 0
    for layer in sorted(layers):
        names = layers[layer]
        nbytes = sum(sizes[n] for n in names)
        if current and used + nbytes > budget:
            chunks.append(current)
            current, used = [], 0
        current, used = current + names, used + nbytes
    if current:
        chunks.append(current)
    return chunks


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


def to_cpu(obj: Any, *, copy: bool = False) -> Any:
    """`obj` with every tensor inside (dicts, lists, tuples) moved to the CPU: what crosses to the
    driver must not open a CUDA context there. `copy`: CPU tensors are copied too, so the result
    is a snapshot later steps do not change (an optimizer's state for a checkpoint), built on the
    host one tensor at a time rather than deep-copied on the device first."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=copy)
    if isinstance(obj, dict):
        return {k: to_cpu(v, copy=copy) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v, copy=copy) for v in obj)
    return obj
