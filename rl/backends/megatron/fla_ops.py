"""The gated-delta-net layer's three kernels (causal conv, L2 norm, chunked gated delta rule) as
torch custom ops, so a compiled layer holds each as one opaque node and compiles as one graph.

Why: Dynamo cannot trace fla's autograd Functions cleanly (its gated delta rule is
`torch.compiler.disable`; its conv and L2 norm get traced into with their Triton kernels), so a
whole gated-delta-net layer broke into pieces and ran slower compiled than eager, and compiling
only around the kernels leaves about seven compiled calls per layer and direction, each paid in
host time: on one H200 the hybrid dense_1b step at micro-batch 4 was host-bound (GPU busy 235 ms
of 434 ms, 2026-12-01 at f1341d2; docs/benchmarks.md, the hybrid layout). Behind a custom op
Dynamo sees a node with a fake (shapes and dtypes only) and a registered backward, and the whole
layer becomes one graph.

Each kernel is a forward op and a backward op (`torch.library.custom_op`), wired with
`register_autograd`. On CUDA they call fla-core 0.6.0's own forward and backward functions (the
ones its autograd Functions call; the Hopper patch of `rl.models.fla_hopper` applies inside). The gated
delta rule's backward recomputes the chunk-local gate sums and the intra-chunk matrix from the
inputs (two short kernels) rather than returning fla's internals from the forward op. On the CPU
the same ops run the torch stand-ins of `gdn_torch` (the backward by autograd over a recomputed
forward), so CPU tests check the op plumbing and the single graph.
"""

from __future__ import annotations

from typing import Any

import torch

from rl.backends.megatron import gdn_torch

__all__ = ["causal_conv1d", "chunk_gated_delta_rule", "l2norm"]

CHUNK = 64  # fla's chunk length for the gated delta rule


def _vjp(fn: Any, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The CPU backward ops: the gradients of a torch stand-in by `torch.func.vjp` (autograd's own
    recording is off inside an op's kernel)."""
    _, pull = torch.func.vjp(fn, *inputs)
    return tuple(g.contiguous() for g in pull(grad))


def _no_bias(like: torch.Tensor) -> torch.Tensor:
    """What a backward op returns for an absent bias (custom ops return tensors, not None)."""
    return like.new_empty(0)


# ---- L2 norm over the last dimension --------------------------------------------------------------

@torch.library.custom_op("rl_fla::l2norm_fwd", mutates_args=(), device_types="cuda")
def _l2norm_fwd(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    from fla.modules.norm.l2norm import l2norm_fwd

    y, rstd = l2norm_fwd(x.contiguous(), eps=eps)
    return y, rstd


@_l2norm_fwd.register_kernel("cpu")
def _l2norm_fwd_cpu(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).sum(-1) + eps)
    return (xf * rstd.unsqueeze(-1)).to(x.dtype), rstd


@_l2norm_fwd.register_fake
def _(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(x.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("rl_fla::l2norm_bwd", mutates_args=(), device_types="cuda")
def _l2norm_bwd(y: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor, eps: float) -> torch.Tensor:
    from fla.modules.norm.l2norm import l2norm_bwd

    return l2norm_bwd(y, rstd, dy.contiguous(), eps=eps)


@_l2norm_bwd.register_kernel("cpu")
def _l2norm_bwd_cpu(y: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor, eps: float) -> torch.Tensor:
    yf, dyf = y.float(), dy.float()
    return ((dyf - yf * (dyf * yf).sum(-1, keepdim=True)) * rstd.unsqueeze(-1)).to(y.dtype)


@_l2norm_bwd.register_fake
def _(y: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _l2norm_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    ctx.eps = inputs[1]
    ctx.save_for_backward(*output)


def _l2norm_backward(ctx: Any, dy: torch.Tensor, _drstd: Any) -> tuple:
    y, rstd = ctx.saved_tensors
    return _l2norm_bwd(y, rstd, dy, ctx.eps), None


_l2norm_fwd.register_autograd(_l2norm_backward, setup_context=_l2norm_setup)


def l2norm(x: torch.Tensor, eps: float = 1e-6, output_dtype: Any = None) -> torch.Tensor:
    """fla's `l2norm` (megatron calls it on the stacked query/key heads)."""
    if output_dtype not in (None, x.dtype):
        raise NotImplementedError("rl_fla l2norm keeps the input's dtype")
    return _l2norm_fwd(x, eps)[0]


# ---- depthwise causal conv over time, [B, T, D] with a [D, W] weight ------------------------------

@torch.library.custom_op("rl_fla::conv_fwd", mutates_args=(), device_types="cuda")
def _conv_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None,
              cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    from fla.modules.causal_conv1d.ops import causal_conv1d

    with torch.no_grad():
        return causal_conv1d(x, weight, bias, activation=activation, cu_seqlens=cu_seqlens)[0]


@_conv_fwd.register_kernel("cpu")
def _conv_fwd_cpu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None,
                  cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    return gdn_torch.causal_conv1d(x, weight, bias, activation, cu_seqlens=cu_seqlens)[0].contiguous()


@_conv_fwd.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None,
      cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


_CONV_GRADS = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@torch.library.custom_op("rl_fla::conv_bwd", mutates_args=(), device_types="cuda")
def _conv_bwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dy: torch.Tensor,
              activation: str | None, cu_seqlens: torch.Tensor | None) -> _CONV_GRADS:
    from fla.modules.causal_conv1d.ops import _has_non_standard_layout, causal_conv1d_bwd

    chunks = _chunk_indices(cu_seqlens)
    dx, dw, db, _, _ = causal_conv1d_bwd(
        x=x, dy=dy.contiguous(), dht=None, weight=weight, bias=bias, residual=None, initial_state=None,
        activation=activation, cu_seqlens=cu_seqlens, cu_seqlens_cpu=None, chunk_indices=chunks,
        layout_fallback=_has_non_standard_layout(x=x))
    return dx, dw, _no_bias(weight) if db is None else db


@_conv_bwd.register_kernel("cpu")
def _conv_bwd_cpu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dy: torch.Tensor,
                  activation: str | None, cu_seqlens: torch.Tensor | None) -> _CONV_GRADS:
    def conv(*leaves: torch.Tensor) -> torch.Tensor:
        return gdn_torch.causal_conv1d(leaves[0], leaves[1], leaves[2] if bias is not None else None, activation,
                                       cu_seqlens=cu_seqlens)[0]

    grads = _vjp(conv, (x, weight) if bias is None else (x, weight, bias), dy)
    return grads[0], grads[1], grads[2] if bias is not None else _no_bias(weight)


@_conv_bwd.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dy: torch.Tensor, activation: str | None,
      cu_seqlens: torch.Tensor | None) -> _CONV_GRADS:
    db = _no_bias(weight) if bias is None else torch.empty_like(bias)
    return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(weight), db


def _conv_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, weight, bias, ctx.activation, cu_seqlens = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight, bias, cu_seqlens)


def _conv_backward(ctx: Any, dy: torch.Tensor) -> tuple:
    x, weight, bias, cu_seqlens = ctx.saved_tensors
    dx, dw, db = _conv_bwd(x, weight, bias, dy, ctx.activation, cu_seqlens)
    return dx, dw, db if ctx.has_bias else None, None, None


_conv_fwd.register_autograd(_conv_backward, setup_context=_conv_setup)


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  activation: str | None = None, initial_state: Any = None, output_final_state: bool = False,
                  cu_seqlens: torch.Tensor | None = None, **_: Any) -> tuple[torch.Tensor, None]:
    """fla's `causal_conv1d` as megatron's GatedDeltaNet calls it (no conv state in or out)."""
    if initial_state is not None or output_final_state:
        raise NotImplementedError("rl_fla causal_conv1d carries no conv state in or out")
    return _conv_fwd(x, weight, bias, activation, cu_seqlens), None


# ---- chunked gated delta rule ---------------------------------------------------------------------

def _chunk_indices(cu_seqlens: torch.Tensor | None) -> torch.Tensor | None:
    from fla.ops.utils.index import prepare_chunk_indices

    return None if cu_seqlens is None else prepare_chunk_indices(cu_seqlens, CHUNK)


@torch.library.custom_op("rl_fla::gdn_fwd", mutates_args=(), device_types="cuda")
def _gdn_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, scale: float,
             cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    from fla.ops.gated_delta_rule.chunk import chunk_gated_delta_rule_fwd

    q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))
    _, o, _, _, _, _ = chunk_gated_delta_rule_fwd(
        q=q, k=k, v=v, g=g, beta=beta, scale=scale, initial_state=None, output_final_state=False,
        cu_seqlens=cu_seqlens, chunk_indices=_chunk_indices(cu_seqlens), chunk_size=CHUNK)
    return o.to(q.dtype)


def _gdn_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, scale: float,
               cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    if abs(scale - q.shape[-1] ** -0.5) > 1e-12:
        raise NotImplementedError("the torch gated-delta-rule stand-in scales by head_dim ** -0.5 only")
    return gdn_torch.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu_seqlens)[0].to(q.dtype)


@_gdn_fwd.register_kernel("cpu")
def _gdn_fwd_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, scale: float,
                 cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    return _gdn_torch(q, k, v, g, beta, scale, cu_seqlens).contiguous()


@_gdn_fwd.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, scale: float,
      cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    return torch.empty_like(v, dtype=q.dtype, memory_format=torch.contiguous_format)


_GDN_GRADS = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@torch.library.custom_op("rl_fla::gdn_bwd", mutates_args=(), device_types="cuda")
def _gdn_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
             do: torch.Tensor, scale: float, cu_seqlens: torch.Tensor | None) -> _GDN_GRADS:
    from fla.ops.gated_delta_rule.chunk import (
        RCP_LN2,
        chunk_gated_delta_rule_bwd,
        chunk_gated_delta_rule_fwd_intra,
        chunk_local_cumsum,
    )

    q, k, v, g, beta, do = (t.contiguous() for t in (q, k, v, g, beta, do))
    chunks = _chunk_indices(cu_seqlens)
    g_sum = chunk_local_cumsum(g, chunk_size=CHUNK, scale=RCP_LN2, cu_seqlens=cu_seqlens, chunk_indices=chunks)
    _, _, A = chunk_gated_delta_rule_fwd_intra(k=k, v=v, g=g_sum, beta=beta, cu_seqlens=cu_seqlens,
                                               chunk_indices=chunks, chunk_size=CHUNK)
    dq, dk, dv, db, dg, _, _, _ = chunk_gated_delta_rule_bwd(
        q=q, k=k, v=v, g=g_sum, beta=beta, A=A, scale=scale, initial_state=None, do=do, dht=None,
        cu_seqlens=cu_seqlens, chunk_indices=chunks, chunk_size=CHUNK)
    return dq.to(q), dk.to(k), dv.to(v), dg.to(g), db.to(beta)


@_gdn_bwd.register_kernel("cpu")
def _gdn_bwd_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                 do: torch.Tensor, scale: float, cu_seqlens: torch.Tensor | None) -> _GDN_GRADS:
    return _vjp(lambda *leaves: _gdn_torch(*leaves, scale, cu_seqlens), (q, k, v, g, beta), do)


@_gdn_bwd.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, do: torch.Tensor,
      scale: float, cu_seqlens: torch.Tensor | None) -> _GDN_GRADS:
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v, g, beta))


def _gdn_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    q, k, v, g, beta, ctx.scale, cu_seqlens = inputs
    ctx.save_for_backward(q, k, v, g, beta, cu_seqlens)


def _gdn_backward(ctx: Any, do: torch.Tensor) -> tuple:
    q, k, v, g, beta, cu_seqlens = ctx.saved_tensors
    dq, dk, dv, dg, db = _gdn_bwd(q, k, v, g, beta, do, ctx.scale, cu_seqlens)
    return dq, dk, dv, dg, db, None, None


_gdn_fwd.register_autograd(_gdn_backward, setup_context=_gdn_setup)


def chunk_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                           scale: float | None = None, initial_state: Any = None, output_final_state: bool = False,
                           use_qk_l2norm_in_kernel: bool = False, cu_seqlens: torch.Tensor | None = None,
                           **_: Any) -> tuple[torch.Tensor, None]:
    """fla's `chunk_gated_delta_rule` as megatron's GatedDeltaNet calls it: [B, T, H, K] heads, no
    state in or out, the L2 norm done before (megatron's `l2norm`)."""
    if initial_state is not None or output_final_state or use_qk_l2norm_in_kernel:
        raise NotImplementedError("rl_fla chunk_gated_delta_rule: no state in or out, no in-kernel L2 norm")
    scale = k.shape[-1] ** -0.5 if scale is None else float(scale)
    return _gdn_fwd(q, k, v, g, beta, scale, cu_seqlens), None


def install() -> None:
    """Point megatron's GatedDeltaNet at these ops (before the model is built: the module binds its
    rule at construction). On a GPU they run fla's kernels, so fla must be installed."""
    from megatron.core.ssm.gated_delta_net import common, gdn

    if torch.cuda.is_available():
        from rl.models import gdn_kernels

        gdn_kernels.prepare()
    common.HAVE_FLA = True
    common.l2norm = l2norm
    common.causal_conv1d = gdn.causal_conv1d = causal_conv1d
    common.chunk_gated_delta_rule = gdn.chunk_gated_delta_rule = chunk_gated_delta_rule


def is_opaque(mixer: torch.nn.Module) -> bool:
    """True when a GatedDeltaNet runs these ops (so a compiled layer holds them as opaque nodes)."""
    return getattr(mixer, "gated_delta_rule", None) is chunk_gated_delta_rule
