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

Every module that imports transformers' Qwen3.5 classes (rl.models.qwen3_5, rl.models.vision)
calls `prepare()` at import, so the driver's warm start, both training backends, the generator,
a teacher and the benches run the same kernels. Idempotent; without fla it does nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import torch

__all__ = ["fla_importable", "prepare", "prepared"]

_MODELING = ("transformers.models.qwen3_5.modeling_qwen3_5", "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
_done: dict[str, bool] = {}


def fla_importable() -> bool:
    """True when the `fla` package (fla-core) can be found by this process."""
    return importlib.util.find_spec("fla") is not None


def prepared() -> dict[str, bool]:
    """What `prepare()` installed: {"hopper_backward": bool, "fla_causal_conv": bool}."""
    return dict(_done)


def prepare() -> None:
    """Install fla's Hopper fix and, on a GPU, fla's causal conv for HF's layers (idempotent)."""
    if _done or not fla_importable():
        return
    from rl.models import fla_hopper

    _done["hopper_backward"] = fla_hopper.needs_patch()
    if _done["hopper_backward"]:
        fla_hopper.patch()
    _done["fla_causal_conv"] = torch.cuda.is_available() and importlib.util.find_spec("causal_conv1d") is None
    if _done["fla_causal_conv"]:
        for name in _MODELING:
            importlib.import_module(name).causal_conv1d_fn = _fla_causal_conv1d_fn


def _fla_causal_conv1d_fn(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                          activation: str | None = None, **kwargs: Any) -> torch.Tensor:
    """HF's `causal_conv1d_fn` contract (x [B, D, T], weight [D, W], activation applied) on fla's
    kernel, which takes [B, T, D]: the transposes are views, and HF transposes the result back."""
    from fla.modules.causal_conv1d import causal_conv1d

    out, _ = causal_conv1d(x=hidden_states.transpose(1, 2), weight=weight, bias=bias, activation=activation)
    return out.transpose(1, 2)
