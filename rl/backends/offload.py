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

While offloaded, a tensor of the state holds no bytes and must not be read (on the CPU a read
can crash the process): the policy worker refuses its calls until `reload`.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class _Held:
    storage: torch.UntypedStorage
    host: torch.Tensor  # uint8, the storage's bytes


class HostOffload:
    """Moves the bytes of a set of tensors on `device` to host memory and back.

    On the CPU (tests) the host copy is other memory, not pinned, and the originals are freed
    all the same, so a round trip is a real one.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._held: list[_Held] = []

    @property
    def offloaded(self) -> bool:
        return bool(self._held)

    def offload(self, tensors: Iterable[torch.Tensor]) -> int:
        """Copy every distinct storage of `tensors` on this device to host memory and free it on
        the device (on CUDA, back to the driver: the caching allocator's free blocks go too, so
        the blocks training's activations left are released as well). Returns the bytes moved."""
        if self._held:
            raise RuntimeError("offload: the training state is already in host memory; reload it first")
        pin = self.device.type == "cuda"
        storages = _distinct_storages(tensors, self.device)
        held = []
        for storage in storages:
            host = torch.empty(storage.nbytes(), dtype=torch.uint8, pin_memory=pin)
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
        pin = self.device.type == "cuda"
        for item in self._held:
            item.storage.resize_(item.host.numel())
            _as_bytes(item.storage).copy_(item.host, non_blocking=pin)
        self._synchronize()
        moved = sum(item.host.numel() for item in self._held)
        self._held = []  # pinned buffers return to torch's host cache, reused by the next offload
        return moved

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


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
