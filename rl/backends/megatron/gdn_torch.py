"""Torch versions of the three fla kernels megatron's GatedDeltaNet calls, with fla's calling
conventions: where fla or a GPU is missing, `shims.fla_stand_in` patches them into megatron, and
the CPU side of the custom ops in `fla_ops` runs them.

`chunk_gated_delta_rule` is megatron's own `torch_chunk_gated_delta_rule` (the one its
deterministic mode uses, taken from Hugging Face's), `causal_conv1d` a depthwise `F.conv1d` with
the same (x [B, S, D], weight [D, W]) calling convention, and `l2norm` the fp32 formula. Same maths
as fla and HF's torch fallbacks; slower on GPU, exact enough for the tests. Packed rows (fla's
`cu_seqlens`, one batch row holding several sequences) run each sequence on its own, so no conv
window or recurrent state crosses a boundary: exactly fla's varlen contract. Megatron-core is
imported only when the gated delta rule runs, after `shims.apply()`.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["causal_conv1d", "chunk_gated_delta_rule", "l2norm"]


def _sequences(cu_seqlens: torch.Tensor, *tensors: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
    """fla's varlen layout (batch 1, `cu_seqlens` [S + 1] cutting dim 1): each sequence's slices."""
    if tensors[0].shape[0] != 1:
        raise ValueError(f"cu_seqlens needs a batch of 1 (fla's varlen layout), got {tensors[0].shape[0]}")
    bounds = cu_seqlens.tolist()
    return [tuple(t[:, a:b] for t in tensors) for a, b in zip(bounds[:-1], bounds[1:])]


def chunk_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                           initial_state: Any = None, output_final_state: bool = False, cu_seqlens: Any = None,
                           **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """megatron's `torch_chunk_gated_delta_rule`, and with `cu_seqlens` that rule per sequence."""
    from megatron.core.ssm.gated_delta_net.common import torch_chunk_gated_delta_rule

    if cu_seqlens is None:
        return torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=initial_state,
                                            output_final_state=output_final_state, **kwargs)
    if initial_state is not None or output_final_state:
        raise NotImplementedError("the torch gated-delta-rule stand-in carries no state into or out of packed rows")
    outs = [torch_chunk_gated_delta_rule(*seq, **kwargs)[0] for seq in _sequences(cu_seqlens, q, k, v, g, beta)]
    return torch.cat(outs, dim=1), None


def l2norm(x: torch.Tensor, dim: int = -1, eps: float = 1e-6, output_dtype: Any = None) -> torch.Tensor:
    xf = x.float()
    out = xf * torch.rsqrt((xf * xf).sum(dim=dim, keepdim=True) + eps)
    return out.to(output_dtype or x.dtype)


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  activation: str | None = None, initial_state: Any = None, output_final_state: bool = False,
                  cu_seqlens: Any = None, **_: Any) -> tuple[torch.Tensor, None]:
    """fla's causal_conv1d on x [B, S, D] with a depthwise weight [D, W]: returns (y [B, S, D], None);
    with `cu_seqlens`, each sequence of the one row convolved on its own."""
    if initial_state is not None or output_final_state:
        raise NotImplementedError("the torch causal_conv1d stand-in carries no conv state in or out")
    if cu_seqlens is not None:
        outs = [causal_conv1d(seq, weight, bias, activation)[0] for (seq,) in _sequences(cu_seqlens, x)]
        return torch.cat(outs, dim=1), None
    width = weight.shape[-1]
    y = torch.nn.functional.conv1d(x.transpose(1, 2), weight.unsqueeze(1), bias, padding=width - 1,
                                   groups=weight.shape[0])[..., : x.shape[1]]
    if activation in ("silu", "swish"):
        y = torch.nn.functional.silu(y)
    elif activation is not None:
        raise ValueError(f"causal_conv1d stand-in: unknown activation {activation!r}")
    return y.transpose(1, 2), None
