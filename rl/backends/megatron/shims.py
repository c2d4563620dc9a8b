"""Everything megatron-core 0.19.2 needs to import and run on a CPU-only machine, in one place.

megatron-core is written for CUDA: it asks `torch.cuda` for the current device and for streams,
and one MoE module imports `triton` unguarded. On a GPU machine none of this is applied except the
triton stand-in (only when triton itself is missing). `apply()` is idempotent and must run before
the first `import megatron.core...` that builds models: every module of `rl.backends.megatron` that
imports megatron-core calls it first.

What is patched, and why:
* `megatron.core.transformer.moe.ops.paged_stash` (Triton kernels of the opt-in MoE "paged
  stash" feature, imported unguarded by gpt_model.py and experts.py) is replaced by a stand-in
  module whose kernels raise when called. We do not install triton (a 286 MB wheel) on CPU and
  we never enable paged stash. We replace the ops module rather than faking `triton` itself, so
  megatron's guarded `try: import triton` probes elsewhere still see "no triton".
* `torch.cuda.current_device()` returns "cpu" (RoPE buffers, the global memory buffer and DDP
  buffers pass it as `device=`).
* `torch.cuda.Stream/Event/current_stream/stream` become no-op stand-ins (megatron DDP's
  communication stream, the alltoall MoE dispatcher).
* `torch.distributed.all_to_all_single` turns numpy split sizes into lists (gloo refuses arrays).
* The optimizer, grad-clipping, grad-buffer and pipeline-schedule modules create small tensors with a hard-coded
  `device="cuda"`; in those modules (only) `torch` is replaced by a proxy whose tensor factories
  map "cuda" to "cpu", so grad norms and the distributed optimizer work unchanged.
* `clip_grad_by_total_norm_fp32` asserts CUDA grads; the optimizer module gets a CPU version
  with the same rule (scale by max_norm / (total_norm + 1e-6) when that is below 1).
* megatron's GatedDeltaNet (Qwen3.5's linear-attention layers) refuses to build without the
  `fla` (flash-linear-attention) Triton kernels. On a GPU with fla-core installed they run (with
  one backward kernel replaced where fla refuses it: rl.models.gdn_kernels, for every process). Without fla
  or a GPU, `fla_stand_in()` gives megatron's GDN modules the torch versions of the three kernels
  it calls (`gdn_torch`).
* On CPU, `eager_jit_fusers()` gives megatron's classes back the plain methods they wrap in
  `torch.compile` (`jit_fuser`: GatedDeltaNet's input prep, decay and gated norm, the attention
  output gate, L2Norm, the MoE router's and dispatcher's helpers; tests/rl/test_megatron_eager_fusers.py).
  Dynamo and Inductor compiled them anew in every process and for every new shape, to fuse a few
  elementwise ops: 7 of the 8 s of a tiny hybrid twin's log-prob pass and train step.
  `policy.compile` is GPU-only for the same reason.
* On every machine, after megatron is imported, `portable_tensor_pickles()` puts back torch's
  own `torch.storage._load_from_bytes`: `import megatron.core` replaces it, and a tensor pickled
  afterwards names megatron's function, so whichever process unpickles it (the engine's driver
  and generation worker, through Ray) would have to import megatron-core too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from typing import Any

import torch
import torch.distributed as dist

from rl.backends.megatron import gdn_torch

__all__ = ["apply", "eager_jit_fusers", "fla_stand_in", "on_cpu", "portable_tensor_pickles"]

_PAGED_STASH_OPS = "megatron.core.transformer.moe.ops.paged_stash"
_applied = False
_TORCH_LOAD_FROM_BYTES = torch.storage._load_from_bytes  # captured before megatron replaces it


def on_cpu() -> bool:
    """True when megatron must run on CPU (no CUDA device visible)."""
    return not torch.cuda.is_available()


def apply() -> None:
    """Install the shims this machine needs (idempotent)."""
    global _applied
    if _applied:
        return
    if importlib.util.find_spec("triton") is None:
        _stand_in_paged_stash_ops()
    if on_cpu():
        _cpu_cuda_api()
        _gloo_all_to_all_lists()
        _cpu_tensor_factories()
    _applied = True


def portable_tensor_pickles() -> None:
    """Tensors this process pickles unpickle without megatron-core (call after importing it).

    The bytes travel between our own processes, so torch's default (full unpickling) applies, as
    in every process of the engine that never imported megatron.
    """
    if _TORCH_LOAD_FROM_BYTES.__module__ != "torch.storage":
        raise ImportError("rl.backends.megatron.shims was imported after megatron.core; import it first")
    torch.storage._load_from_bytes = _TORCH_LOAD_FROM_BYTES


def fla_usable() -> bool:
    """True when fla's Triton kernels can run the gated delta rule here: fla installed and a GPU."""
    return importlib.util.find_spec("fla") is not None and not on_cpu()


# True: the gated-delta-net kernels run as torch custom ops (`fla_ops`), so `policy.compile` compiles
# such a layer whole. Set by bench/megatron_gpu.py `--gdn-compile ops` and by tests until the
# H200 A/B against compiling around fla's kernels decides the default (`bash bench/gpu.sh throughput`).
OPAQUE_GDN_OPS = False


def fla_stand_in() -> None:
    """Make megatron's GatedDeltaNet runnable here; call after `apply()`.

    With fla and a GPU, fla's kernels run, except the one backward kernel fla refuses on Hopper
    under Triton 3.4-3.7.0, which `rl.models.fla_hopper` replaces with torch. Elsewhere the torch
    stand-ins for all three kernels. With `OPAQUE_GDN_OPS`, either behind custom ops."""
    if OPAQUE_GDN_OPS and (fla_usable() or on_cpu()):
        from rl.backends.megatron import fla_ops

        fla_ops.install()
        return
    if fla_usable():
        from rl.models import gdn_kernels

        gdn_kernels.prepare()
        return
    from megatron.core.ssm.gated_delta_net import common, gdn

    common.HAVE_FLA = True
    common.l2norm = gdn_torch.l2norm
    common.causal_conv1d = gdn.causal_conv1d = gdn_torch.causal_conv1d
    common.chunk_gated_delta_rule = gdn.chunk_gated_delta_rule = gdn_torch.chunk_gated_delta_rule


def eager_jit_fusers() -> None:
    """On CPU, every loaded megatron class's `jit_fuser` methods as the plain functions they wrap
    (call after importing the modules whose classes build the model; idempotent)."""
    if not on_cpu():
        return
    for module in [m for name, m in list(sys.modules.items()) if name.startswith("megatron.") and m is not None]:
        for cls in [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]:
            for name, value in list(vars(cls).items()):
                plain = getattr(value, "_torchdynamo_orig_callable", None)
                if plain is not None:
                    setattr(cls, name, plain)


def _stand_in_paged_stash_ops() -> None:
    module = types.ModuleType(_PAGED_STASH_OPS)

    def _no_triton(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("MoE paged stash needs triton, which is not installed (rl.backends.megatron.shims)")

    module.GLOBAL_BLOCK_SIZE = 1024
    module.paged_stash_copy_kernel = _no_triton
    module.paged_stash_pop_kernel = _no_triton
    module.__all__ = ["GLOBAL_BLOCK_SIZE", "paged_stash_copy_kernel", "paged_stash_pop_kernel"]
    sys.modules.setdefault(_PAGED_STASH_OPS, module)


class _Stream:
    """A CUDA stream stand-in: work on CPU is already ordered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event if event is not None else _Event()


class _Event:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


_DEFAULT_STREAM = _Stream()


def _cpu_cuda_api() -> None:
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
    torch.cuda.Stream = _Stream  # type: ignore[assignment, misc]
    torch.cuda.Event = _Event  # type: ignore[assignment, misc]
    torch.cuda.current_stream = lambda device=None: _DEFAULT_STREAM  # type: ignore[assignment]
    torch.cuda.stream = lambda stream=None: contextlib.nullcontext()  # type: ignore[assignment]
    torch.cuda.synchronize = lambda device=None: None  # type: ignore[assignment]
    # Tensor.record_stream is a CUDA caching-allocator hint; a no-op on CPU.
    torch.Tensor.record_stream = lambda self, stream: None  # type: ignore[assignment]
    # Activation recompute saves the CUDA RNG state around each layer; there is none on the CPU
    # (megatron saves and restores the CPU state beside it, and setting goes through a lazy call).
    no_state = lambda device="cuda": torch.empty(0, dtype=torch.uint8)  # noqa: E731
    torch.cuda.random.get_rng_state = no_state  # type: ignore[assignment]
    torch.cuda.get_rng_state = no_state  # type: ignore[assignment]


def _gloo_all_to_all_lists() -> None:
    original = dist.all_to_all_single
    if getattr(original, "_rl_shim", False):
        return

    def all_to_all_single(output: torch.Tensor, input: torch.Tensor, output_split_sizes: Any = None,
                          input_split_sizes: Any = None, group: Any = None, async_op: bool = False) -> Any:
        as_list = lambda s: None if s is None else [int(x) for x in s]  # noqa: E731
        return original(output, input, as_list(output_split_sizes), as_list(input_split_sizes),
                        group=group, async_op=async_op)

    all_to_all_single._rl_shim = True  # type: ignore[attr-defined]
    dist.all_to_all_single = all_to_all_single


_CUDA_DEFAULT_MODULES = (
    "megatron.core.optimizer.clip_grads",
    "megatron.core.optimizer.optimizer",
    "megatron.core.optimizer.distrib_optimizer",
    "megatron.core.distributed.param_and_grad_buffer",
    "megatron.core.transformer.utils",
    "megatron.core.utils",  # local_multi_tensor_l2_norm (no apex/TE)
    "megatron.core.pipeline_parallel.schedules",  # the pipeline schedules' token counters
)
_FACTORIES = ("tensor", "zeros", "ones", "empty", "full", "arange")


class _CpuTorch(types.ModuleType):
    """`torch`, except that tensor factories asked for device "cuda" build on CPU."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(torch, name)
        if name not in _FACTORIES:
            return attr

        def factory(*args: Any, **kwargs: Any) -> Any:
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return attr(*args, **kwargs)

        return factory


def _cpu_tensor_factories() -> None:
    proxy = _CpuTorch()
    for name in _CUDA_DEFAULT_MODULES:
        module = importlib.import_module(name)
        module.torch = proxy  # type: ignore[attr-defined]
    importlib.import_module("megatron.core.optimizer.optimizer").clip_grad_by_total_norm_fp32 = _clip_on_cpu


def _clip_on_cpu(parameters: Any, max_norm: float, total_norm: float, use_decoupled_grad: bool = False) -> None:
    attr = "decoupled_grad" if use_decoupled_grad else "grad"
    grads = [getattr(p, attr) for p in parameters if getattr(p, attr, None) is not None]
    coeff = max_norm / (total_norm + 1.0e-6)
    if isinstance(coeff, torch.Tensor):
        coeff = coeff.clamp_max(1.0)
    elif coeff >= 1.0:
        return
    with torch.no_grad():
        for g in grads:
            g.mul_(coeff)
