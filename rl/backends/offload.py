"""The training state waits in host memory while colocated generation replicas decode
(`generation.offload_training`), as the reference frees its GPUs with vLLM's sleep mode.

Why storages, not tensors: megatron's parameters and `main_grad`s are views into contiguous
buffers that its DDP, bucket groups and optimizer shards all hold, so giving one tensor a new
`.data` would cut it loose from its buffer. Here each storage's bytes go to host memory (pinned
on CUDA: the copies run asynchronously at the link's speed) and the storage is resized to
nothing; `reload` resizes it and copies the bytes back. Every tensor object, view, Parameter,
optimizer-state entry and hook stays the one it was; only the bytes travel, bit for bit.
megatron-core frees its grad buffers the same way (`DistributedDataParallel.offload_grad_buffers`)
but zeroes them on return; here every byte comes back.

Where the bytes wait: one host arena kept for the worker's life, sized to the state exactly and,
on CUDA, page-locked once with `cudaHostRegister`. Why not a pinned `torch.empty` per storage each
time: torch's pinned host cache rounds every block up to a power of two (megatron's 8 GiB param
buffer takes 16) and each new block is pinned page by page: a 4.4 B-parameter model's 82 GiB took
25.7 s to offload at its second step against ~2 s for the copy itself (one H200, 2026-12-04,
980c154). The state's storages go in the same order every time, so they land in the same places;
the arena grows by a segment when the state does (the optimizer's moments appear after the first
step), never copying or re-pinning what it has.

While offloaded, a tensor of the state holds no bytes and must not be read (on the CPU a read
can crash the process): the policy worker refuses its calls until `reload`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

__all__ = ["HostOffload", "state_tensors"]


def state_tensors(*, modules: Iterable[torch.nn.Module] = (), optimizers: Iterable[torch.optim.Optimizer] = (),
                  extra: Iterable[torch.Tensor | None] = ()) -> Iterator[torch.Tensor]:
    """Every tensor of a training state: each module's parameters, their `.grad` and megatron's
    `.main_grad`, and its buffers; each torch optimizer's parameters (megatron's fp32 main copies),
    their grads and its state; and `extra` (megatron's contiguous param and grad buffers)."""
    for module in modules:
        for param in module.parameters():
            yield from _with_grads(param)
        yield from (b for _, b in module.named_buffers())  # megatron's DDP shadows `buffers` with a list
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                yield from _with_grads(param)
        for state in optimizer.state.values():
            yield from (v for v in state.values() if isinstance(v, torch.Tensor))
    yield from (t for t in extra if t is not None)


def _with_grads(param: torch.Tensor) -> Iterator[torch.Tensor]:
    yield param
    for grad in (param.grad, getattr(param, "main_grad", None)):
        if isinstance(grad, torch.Tensor):
            yield grad


ALIGN = 4096  # bytes: each storage starts a whole number of pages into its segment


@dataclass(frozen=True)
class _Held:
    storage: torch.UntypedStorage
    host: torch.Tensor  # uint8, the storage's bytes: a slice of the arena


class HostOffload:
    """Moves the bytes of a set of tensors on `device` to host memory and back.

    On the CPU (tests) the arena is other memory, not page-locked, and the originals are freed all
    the same, so a round trip is a real one.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._held: list[_Held] = []
        self._arena = HostArena(pin=self.device.type == "cuda")

    @property
    def offloaded(self) -> bool:
        return bool(self._held)

    @property
    def host_bytes(self) -> int:
        """Host memory the arena holds (kept between trips)."""
        return self._arena.nbytes

    def offload(self, tensors: Iterable[torch.Tensor]) -> int:
        """Copy every distinct storage of `tensors` on this device to host memory and free it on
        the device (on CUDA, back to the driver: the caching allocator's free blocks go too, so
        the blocks training's activations left are released as well). Returns the bytes moved."""
        if self._held:
            raise RuntimeError("offload: the training state is already in host memory; reload it first")
        pin = self._arena.pin
        storages = _distinct_storages(tensors, self.device)
        places = self._arena.places([s.nbytes() for s in storages])
        held = []
        for storage, host in zip(storages, places, strict=True):
            host.copy_(_as_bytes(storage), non_blocking=pin)
            held.append(_Held(storage, host))
        self._synchronize()
        for item in held:
            item.storage.resize_(0)
        self._held = held
        if pin:
            torch.cuda.empty_cache()
        return sum(item.host.numel() for item in held)

    def reload(self) -> int:
        """Give every offloaded storage its bytes back on the device; returns the bytes moved."""
        if not self._held:
            raise RuntimeError("reload: nothing is offloaded")
        pin = self._arena.pin
        for item in self._held:
            item.storage.resize_(item.host.numel())
            _as_bytes(item.storage).copy_(item.host, non_blocking=pin)
        self._synchronize()
        moved = sum(item.host.numel() for item in self._held)
        self._held = []  # the arena stays: the next offload puts the same storages in the same places
        return moved

    def release(self) -> None:
        """Give the arena's host memory back (the next offload makes it anew). For a caller that
        needs host memory of the state's size itself, such as a checkpoint's host copy: the arena
        and that copy together can outgrow the host (a 4.4 B-parameter model's 82 GiB arena and
        its checkpoint passed 128 GiB on one H200's host, 2026-12-04)."""
        if self._held:
            raise RuntimeError("release: the training state is in host memory; reload it first")
        self._arena = HostArena(pin=self._arena.pin)

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class HostArena:
    """Host memory in a few large segments, handed out as byte slices in a stable order.

    `places(sizes)` lays the sizes out one after another (each on an `ALIGN` boundary), filling the
    segments it has and adding one segment for whatever does not fit, sized exactly to it. With
    `pin`, each segment is page-locked once (`cudaHostRegister`) so copies to and from a GPU run
    asynchronously at the link's speed; it is unregistered when the segment is freed.
    """

    def __init__(self, pin: bool) -> None:
        self.pin = pin
        self._segments: list[torch.Tensor] = []

    @property
    def nbytes(self) -> int:
        return sum(seg.numel() for seg in self._segments)

    def places(self, sizes: list[int]) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        segment, cursor = 0, 0
        for i, size in enumerate(sizes):
            while segment < len(self._segments) and cursor + size > self._segments[segment].numel():
                segment, cursor = segment + 1, 0
            if segment == len(self._segments):
                self._grow(sum(_aligned(n) for n in sizes[i:]))
            out.append(self._segments[segment][cursor:cursor + size])
            cursor = _aligned(cursor + size)
        return out

    def _grow(self, nbytes: int) -> None:
        segment = torch.empty(nbytes, dtype=torch.uint8)
        if self.pin and nbytes:
            _register(segment)
        self._segments.append(segment)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _register(segment: torch.Tensor) -> None:
    """Page-lock `segment` for the GPU until it is freed."""
    cudart = torch.cuda.cudart()
    ptr = segment.data_ptr()
    err = cudart.cudaHostRegister(ptr, segment.numel(), 0)
    if int(err) != 0:
        raise RuntimeError(f"offload: cudaHostRegister of {segment.numel() / 2**30:.1f} GiB of host memory failed "
                           f"(CUDA error {int(err)}): the training state cannot wait in page-locked memory")
    weakref.finalize(segment, cudart.cudaHostUnregister, ptr)


def _distinct_storages(tensors: Iterable[torch.Tensor], device: torch.device) -> list[torch.UntypedStorage]:
    """Each storage once (views and tied weights share one), on `device`'s type, holding bytes."""
    seen: dict[int, torch.UntypedStorage] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.device.type != device.type or storage.nbytes() == 0 or storage.data_ptr() in seen:
            continue
        if not storage.resizable():
            raise RuntimeError(f"offload: a {tuple(tensor.shape)} {tensor.dtype} tensor's storage cannot be "
                               "freed in place (not resizable)")
        seen[storage.data_ptr()] = storage
    return list(seen.values())


def _as_bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    """A flat uint8 tensor over the whole storage."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
