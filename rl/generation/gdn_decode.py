"""The gated-delta-net layer's one-token decode step: one input product, the conv window, and the
delta rule as one Triton kernel that updates the cache's recurrent state in place.

Why: on the hybrid dense_1b (9 of 12 layers gated-delta-net, batch 64, 128 + 256 tokens, one H200,
2026-12-04, bench/results/profiles/generation_dense_1b_hybrid_batch64_graphs_hf_gdn_2026-12-04.txt) the
compiled decode step spent ~140 us a layer in three inductor kernels of transformers' torch
recurrence, each a pass over the fp32 state ([B, Hv, K, V], 64 MiB a layer at batch 64), with the
copy back into the cache after them; the state must only be read once and written once (~28 us at
the HBM's 4.8 TB/s). The four input products (q/k/v, z, b, a: the last two 16 columns wide) were
four launches where one does, and the conv update a cuDNN depthwise kernel plus a concat (written as
tensor arithmetic, inductor still makes three kernels of it: the window, its copy, the sum;
`gdn_conv_step` is one Triton kernel for it, the default since it measured faster on an H200).

`gdn_decode_step` (a torch op, opaque to `torch.compile`, mutating `state`): per (row, value head,
block of value columns) one program loads the state tile, applies the decay, the delta rule and
reads the output, and stores the tile back: transformers' `torch_recurrent_gated_delta_rule` with
its l2-normalised q/k (eps 1e-6) scaled by 1/sqrt(K), beta = sigmoid(b) in b's dtype and
g = -exp(A_log) softplus(a + dt_bias) in fp32. Where Triton cannot run (no Triton, a CPU tensor
without TRITON_INTERPRET=1, head sizes not powers of two) the same arithmetic runs as torch code, so
CPU tests prove the wiring.

`use_gdn_decode(model)` gives every Qwen3.5 gated-delta-net layer a forward that takes this path
for the one-token step with a cache that holds the layer's previous state, and transformers' own
forward for everything else (the prompt, training, log-probs). It reads the cache through the layer
attributes both transformers 5.17 and 5.24 have (`has_previous_state`, `record_past`,
`conv_states`, `recurrent_states`). The four input Linear layers keep their Parameters as views of
the stacked weight (`rl.generation.fused_projections.stack_linears`), so a refit updates it.
"""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F
from torch import nn

from rl.generation.fused_projections import stack_linears
from rl.generation.triton_runs import triton_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): the torch arithmetic below
    triton = None

__all__ = ["BLOCK_V", "conv_step_reference", "gdn_conv_step", "gdn_decode_step", "gdn_step_reference",
           "use_gdn_decode"]

BLOCK_V = 32  # value columns a program holds (at most): a [K, 32] fp32 tile, 32 registers a thread at K 128
L2_EPS = 1e-6  # transformers' (and fla's) l2norm epsilon for q and k



if triton is not None:

    @triton.jit
    def _round_bf16(x):
        """fp32 rounded to the nearest bf16, kept in fp32 (in bits: the interpreter's cast truncates)."""
        bits = x.to(tl.uint32, bitcast=True)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)

    @triton.jit
    def _conv_step_kernel(X, State, Weight, Bias, Out, sxb, s0, s1, s2, swd, sww, sob, channels,
                          W: tl.constexpr, BD: tl.constexpr, HAS_BIAS: tl.constexpr, ROUND_BF16: tl.constexpr):
        """Program (row b, block of BD channels): the window slides by the new token (stored back in
        place: each channel is one program's), and silu(window . weight + bias) is the output."""
        b = tl.program_id(0)
        d = tl.program_id(1) * BD + tl.arange(0, BD)
        w = tl.arange(0, W)
        live = d < channels
        x = tl.load(X + b * sxb + d, mask=live, other=0.0)
        row = State + b * s0 + d[:, None] * s1
        later = tl.load(row + (w[None, :] + 1) * s2, mask=live[:, None] & (w[None, :] < W - 1), other=0.0)
        window = tl.where(w[None, :] == W - 1, x[:, None].to(later.dtype), later)
        tl.store(row + w[None, :] * s2, window, mask=live[:, None])
        weight = tl.load(Weight + d[:, None] * swd + w[None, :] * sww, mask=live[:, None], other=0.0)
        acc = tl.sum(window.to(tl.float32) * weight.to(tl.float32), axis=1)
        if HAS_BIAS:
            acc += tl.load(Bias + d, mask=live, other=0.0).to(tl.float32)
        if ROUND_BF16:  # the conv's output is in the weight's dtype before the activation
            acc = _round_bf16(acc)
        tl.store(Out + b * sob + d, (acc * tl.sigmoid(acc)).to(Out.dtype.element_ty), mask=live)

    @triton.jit
    def _gdn_step_kernel(Mixed, A, Beta, ALog, DtBias, State, Out,
                         smb, sab, sbb, s0, s1, s2, s3, sob, soh,
                         key_dim, value_start, value_heads, eps, scale,
                         RATIO: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr,
                         BETA_BF16: tl.constexpr, BETA_F16: tl.constexpr):
        """Program (row b x value head h, block of BV value columns): the delta rule's one step on
        the state tile [K, BV], stored back in place, and the block's output."""
        bh = tl.program_id(0)
        b = bh // value_heads
        h = bh % value_heads
        hk = h // RATIO
        kk = tl.arange(0, K)
        vv = tl.program_id(1) * BV + tl.arange(0, BV)
        q = tl.load(Mixed + b * smb + hk * K + kk).to(tl.float32)
        k = tl.load(Mixed + b * smb + key_dim + hk * K + kk).to(tl.float32)
        v = tl.load(Mixed + b * smb + value_start + h * V + vv).to(tl.float32)
        state_ptr = State + b * s0 + h * s1 + kk[:, None] * s2 + vv[None, :] * s3
        state = tl.load(state_ptr).to(tl.float32)
        q = q * tl.rsqrt(tl.sum(q * q, axis=0) + eps) * scale
        k = k * tl.rsqrt(tl.sum(k * k, axis=0) + eps)
        beta = tl.sigmoid(tl.load(Beta + b * sbb + h).to(tl.float32))
        if BETA_BF16:  # transformers takes b's sigmoid in b's dtype
            beta = _round_bf16(beta)
        elif BETA_F16:
            beta = beta.to(tl.float16).to(tl.float32)
        x = tl.load(A + b * sab + h).to(tl.float32) + tl.load(DtBias + h).to(tl.float32)
        softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
        g = -tl.exp(tl.load(ALog + h).to(tl.float32)) * softplus
        state = state * tl.exp(g)
        delta = (v - tl.sum(state * k[:, None], axis=0)) * beta
        state = state + k[:, None] * delta[None, :]
        out = tl.sum(state * q[:, None], axis=0)
        tl.store(state_ptr, state.to(State.dtype.element_ty))
        tl.store(Out + b * sob + h * soh + vv, out.to(Out.dtype.element_ty))


def gdn_step_reference(mixed: torch.Tensor, a: torch.Tensor, b: torch.Tensor, a_log: torch.Tensor,
                       dt_bias: torch.Tensor, state: torch.Tensor, key_heads: int) -> torch.Tensor:
    """The step in torch (transformers' recurrence for one token), `state` updated in place."""
    batch, value_heads, k_dim, v_dim = state.shape
    key_dim = key_heads * k_dim
    q, k, v = mixed[:, :key_dim], mixed[:, key_dim:2 * key_dim], mixed[:, 2 * key_dim:]
    ratio = value_heads // key_heads
    q = q.reshape(batch, key_heads, k_dim).repeat_interleave(ratio, 1).float()
    k = k.reshape(batch, key_heads, k_dim).repeat_interleave(ratio, 1).float()
    v = v.reshape(batch, value_heads, v_dim).float()
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + L2_EPS) / math.sqrt(k_dim)
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + L2_EPS)
    beta = b.sigmoid().float()
    g = -a_log.float().exp() * F.softplus(a.float() + dt_bias)
    s = state.float() * g.exp()[..., None, None]
    delta = (v - (s * k[..., None]).sum(-2)) * beta[..., None]
    s = s + k[..., None] * delta[..., None, :]
    state.copy_(s)
    return (s * q[..., None]).sum(-2).to(mixed.dtype).unsqueeze(1)


@torch.library.custom_op("rl::gdn_decode_step", mutates_args=("state",))
def gdn_decode_step(mixed: torch.Tensor, a: torch.Tensor, b: torch.Tensor, a_log: torch.Tensor,
                    dt_bias: torch.Tensor, state: torch.Tensor, key_heads: int) -> torch.Tensor:
    """One token of the gated delta rule for every row, a torch op mutating `state`.

    Args:
        mixed: [B, 2 * key_heads * K + Hv * V], the conv's output: q, then k, then v.
        a, b: [B, Hv], the layer's `in_proj_a` and `in_proj_b` outputs.
        a_log, dt_bias: [Hv], the layer's parameters.
        state: [B, Hv, K, V], the cache's recurrent state (fp32), updated in place.
        key_heads: q/k heads; value head h reads q/k head h // (Hv // key_heads).
    Returns:
        [B, 1, Hv, V] in `mixed`'s dtype.
    """
    batch, value_heads, k_dim, v_dim = state.shape
    block = min(BLOCK_V, v_dim)
    if not triton_runs(mixed) or v_dim % block or k_dim & (k_dim - 1) or block & (block - 1):
        return gdn_step_reference(mixed, a, b, a_log, dt_bias, state, key_heads)
    out = torch.empty(batch, 1, value_heads, v_dim, dtype=mixed.dtype, device=mixed.device)
    key_dim = key_heads * k_dim
    _gdn_step_kernel[(batch * value_heads, v_dim // block)](
        mixed, a, b, a_log, dt_bias, state, out,
        mixed.stride(0), a.stride(0), b.stride(0), *state.stride(), out.stride(0), out.stride(2),
        key_dim, 2 * key_dim, value_heads, L2_EPS, 1.0 / math.sqrt(k_dim),
        RATIO=value_heads // key_heads, K=k_dim, V=v_dim, BV=block,
        BETA_BF16=b.dtype == torch.bfloat16, BETA_F16=b.dtype == torch.float16)
    return out


@gdn_decode_step.register_fake
def _(mixed, a, b, a_log, dt_bias, state, key_heads):
    batch, value_heads, _, v_dim = state.shape
    return mixed.new_empty(batch, 1, value_heads, v_dim)


def conv_step_reference(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                        activation: str) -> torch.Tensor:
    """transformers' `causal_conv1d_update` for one token in torch, x [B, D]: the window slides in
    place and the depthwise conv is a product summed over the window (fp32 sums, rounded to the
    weight's dtype as the conv's output is)."""
    from transformers.activations import ACT2FN

    window = torch.cat([conv_state[:, :, 1:], x.unsqueeze(-1).to(conv_state.dtype)], dim=-1)
    conv_state.copy_(window)
    out = (window.float() * weight.float()).sum(-1)
    if bias is not None:
        out = out + bias.float()
    return ACT2FN[activation](out.to(weight.dtype)).to(x.dtype)


@torch.library.custom_op("rl::gdn_conv_step", mutates_args=("conv_state",))
def gdn_conv_step(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  activation: str) -> torch.Tensor:
    """The layer's causal conv for one token, a torch op mutating `conv_state`: one Triton kernel
    where inductor made three (the window, its copy into the cache, the sum and silu).

    Args:
        x: [B, D], the stacked product's q/k/v columns (a strided view is fine).
        conv_state: [B, D, W], the cache's window, updated in place.
        weight: [D, W]; bias: [D] or None; activation: transformers' name ("silu" runs the kernel).
    Returns:
        [B, D] in x's dtype, contiguous.
    """
    batch, channels, width = conv_state.shape
    if not triton_runs(x) or activation not in ("silu", "swish") or width & (width - 1):
        return conv_step_reference(x, conv_state, weight, bias, activation)
    out = torch.empty(batch, channels, dtype=x.dtype, device=x.device)
    block = 128
    _conv_step_kernel[(batch, triton.cdiv(channels, block))](
        x, conv_state, weight, bias if bias is not None else weight, out, x.stride(0), *conv_state.stride(),
        *weight.stride(), out.stride(0), channels,
        W=width, BD=block, HAS_BIAS=bias is not None, ROUND_BF16=weight.dtype == torch.bfloat16)
    return out


@gdn_conv_step.register_fake
def _(x, conv_state, weight, bias, activation):
    return x.new_empty(x.shape[0], conv_state.shape[1])


def _cache_layer(self: nn.Module, args: tuple, kwargs: dict):
    """The layer's cache entry when this call is a one-token step that continues a cached state."""
    cache = args[0] if args else kwargs.get("cache", kwargs.get("cache_params"))
    if cache is None or not hasattr(cache, "layers"):
        return None
    layer = cache.layers[self.layer_idx]
    if not getattr(layer, "has_previous_state", [False])[0] or getattr(layer, "record_past", False):
        return None
    return layer


def _forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """The one-token step of a cached row batch here; anything else transformers' forward."""
    layer = _cache_layer(self, args, kwargs) if hidden_states.shape[1] == 1 else None
    if layer is None:
        return type(self).forward(self, hidden_states, *args, **kwargs)
    mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
    if mask is not None:
        hidden_states = (hidden_states * mask[:, :, None]).to(hidden_states.dtype)
    batch = hidden_states.shape[0]
    mixed, z, b, a = F.linear(hidden_states[:, 0], self.fused_in_proj).split(self.fused_in_proj_sizes, -1)
    conv = gdn_conv_step if self.gdn_conv_kernel else conv_step_reference
    mixed = conv(mixed, layer.conv_states[0], self.conv1d.weight.squeeze(1), self.conv1d.bias, self.activation)
    out = gdn_decode_step(mixed, a, b, self.A_log, self.dt_bias, layer.recurrent_states[0], self.num_k_heads)
    out = self.norm(out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
    return self.out_proj(out.reshape(batch, 1, -1))


def _layer_classes() -> tuple[type, ...]:
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeGatedDeltaNet

    return Qwen3_5GatedDeltaNet, Qwen3_5MoeGatedDeltaNet


def use_gdn_decode(model: nn.Module, *, conv_kernel: bool = True) -> int:
    """Give every Qwen3.5 gated-delta-net layer of `model` the one-token decode step above, in
    place; returns how many layers (0: none, the model is unchanged). Call it after the model has
    its final device and dtype (`.to` would copy the stacked weight's views apart).

    `conv_kernel`: the conv window through `gdn_conv_step`'s Triton kernel (hybrid dense_1b at
    batch 64 on an H200: 2.5% more tokens/s, 2026-12-05); off, its torch arithmetic, which
    inductor fuses into three kernels (bench/bench_generation.py `ours_graphs_conv_torch`)."""
    done = 0
    for module in model.modules():
        if isinstance(module, _layer_classes()) and not hasattr(module, "fused_in_proj"):
            module.fused_in_proj, module.fused_in_proj_sizes = stack_linears(
                module, ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"))
            module.gdn_conv_kernel = conv_kernel
            module.forward = types.MethodType(_forward, module)
            done += 1
    return done
