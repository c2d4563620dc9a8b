"""Qwen3.5's gated-delta-net kernels, chosen once for every process that builds the model.

transformers' Qwen3.5 layers and megatron's GatedDeltaNet call fla's Triton kernels whenever fla
is importable. On a Hopper GPU under Triton 3.4-3.7.0 fla refuses one of them, the gated
`chunk_bwd_dqkwg` (wrong gradients there, fla issue #640), so the first backward through fla dies:
on one H200 with the GPU wheel set every `harness run` stopped at step 0 in the driver's warm
start (2026-12-01), because the replacement (`rl.models.fla_hopper`) was installed inside the
megatron backend only. `prepare()` installs it in whichever process calls it.

It also gives transformers' layers fla's causal conv for whole sequences (prefill, training and
log-prob passes) where the `causal-conv1d` package is missing (PyPI ships it as source needing
nvcc, which the GPU machines lack); HF's own fallback there is a depthwise `F.conv1d` plus a
separate activation. The one-token decode update stays HF's torch code: inside the compiled decode
step inductor fuses its concat and conv, and fla's update kernel would autotune inside a CUDA
graph capture.

fla's kernels are Triton on CUDA only, and transformers binds them whenever fla is importable,
whatever the tensors' device: on a GPU machine a model on the CPU (the tiny twins, the CPU tests)
died at its first gated-delta-net layer ("Pointer argument cannot be accessed from Triton").
`prepare()` therefore puts each fla-bound function behind a dispatch on the inputs' device
(`on_device`): CUDA tensors reach fla, others HF's own torch code (`__wrapped__`, which
transformers' kernel decorator keeps, in 5.17 as in 5.24).

Every module that imports transformers' Qwen3.5 classes (rl.models.qwen3_5, rl.models.vision)
calls `prepare()` at import, so the driver's warm start, both training backends, the generator,
a teacher and the benches run the same kernels. Idempotent; without fla it does nothing.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["FLA_DEVICES", "fla_importable", "on_device", "prepare", "prepared"]

FLA_DEVICES = {"cuda"}  # device types fla's kernels run on (a test adds "cpu" to play a GPU)
_DELTA_RULES = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")  # HF's names, fla-bound
_MODELING = ("transformers.models.qwen3_5.modeling_qwen3_5", "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
_done: dict[str, bool] = {}


def fla_importable() -> bool:
    """True when the `fla` package (fla-core) can be found by this process."""
    return importlib.util.find_spec("fla") is not None


def prepared() -> dict[str, bool]:
    """What `prepare()` installed: {"hopper_backward": bool, "fla_causal_conv": bool}."""
    return dict(_done)


def prepare() -> None:
    """Install fla's Hopper fix, the device dispatch of HF's fla-bound delta rules and, on a GPU,
    fla's causal conv for HF's layers (idempotent)."""
    if _done or not fla_importable():
        return
    from rl.models import fla_hopper

    _done["hopper_backward"] = fla_hopper.needs_patch()
    if _done["hopper_backward"]:
        fla_hopper.patch()
    _done["fla_causal_conv"] = torch.cuda.is_available() and importlib.util.find_spec("causal_conv1d") is None
    for name in _MODELING:
        module = importlib.import_module(name)
        for rule in _DELTA_RULES:
            bound = getattr(module, rule, None)
            if bound is not None and hasattr(bound, "__wrapped__"):
                setattr(module, rule, on_device(bound, bound.__wrapped__))
        if _done["fla_causal_conv"]:
            module.causal_conv1d_fn = on_device(_fla_causal_conv1d_fn, module.causal_conv1d_fn)


def on_device(fla_fn: Callable, torch_fn: Callable) -> Callable:
    """`fla_fn` when the first tensor argument is on a device of `FLA_DEVICES`, else `torch_fn`.

    HF's torch delta rules ignore `cu_seqlens`: packed rows there would run into each other, so
    that call is refused, as transformers refuses it without fla."""

    @functools.wraps(torch_fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        first = next(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        if first.device.type in FLA_DEVICES:
            return fla_fn(*args, **kwargs)
        if kwargs.get("cu_seqlens") is not None:
            raise ValueError(f"{torch_fn.__name__}: packed sequences (cu_seqlens) on {first.device.type} "
                             "tensors need fla's kernels, which run on CUDA only")
        return torch_fn(*args, **kwargs)

    return dispatch


def _fla_causal_conv1d_fn(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                          activation: str | None = None, **kwargs: Any) -> torch.Tensor:
    """HF's `causal_conv1d_fn` contract (x [B, D, T], weight [D, W], activation applied) on fla's
    kernel, which takes [B, T, D]: the transposes are views, and HF transposes the result back."""
    from fla.modules.causal_conv1d import causal_conv1d

    out, _ = causal_conv1d(x=hidden_states.transpose(1, 2), weight=weight, bias=bias, activation=activation)
    return out.transpose(1, 2)
