"""The full-attention layer's one-token decode step: its query/key norms, rotary and cache write as
one Triton kernel, and the output gate applied where the attention's splits are merged.

Why: between the stacked q/k/v product and the attention, transformers' Qwen3.5 attention runs
the query and key RMS norms, the partial rotary on both, and the cache's two `index_copy_` writes;
compiled, that was ~7 small inductor kernels a layer, ~10-15 us of a dense_1b decode step's layer
at batch 64-256 where the data they touch (a row's q/k/v, ~10 KB) is read in well under one (one
H200, bench/results/profiles/generation_dense_1b_full_batch256_graphs_2026-12-05.txt). After the
attention, the output gate (`attn * sigmoid(gate)`) was one more. Here one program per (row, query
or key head) loads its head's slice of the product, normalises it (`x * rsqrt(mean(x^2) + eps) *
(1 + w)`, rounded to the model's dtype as transformers' norm rounds it), rotates its first R
columns (`x * cos + rotate_half(x) * sin`, in fp32, rounded once) and stores it: a query head into
the query, a key head (with its value head, copied) into the cache at the layer's write position,
read on the device from the cache layer's `cumulative_length` (no host sync under a CUDA graph).
The gate rides into `rl.generation.flash_decode`'s merge kernel. Measured in the dense_1b batch-64
decode step (one H200, 2026-12-05 12:08 UTC, 0e6b294): 2.3 us a layer, decode steps 48,677 ->
54,894 tokens/s (bench/bench_generation.py `ours_graphs_attention_torch` against `ours_graphs`).

`use_attention_step(model)` gives every Qwen3.5 full-attention layer whose projections are stacked
(`rl.generation.fused_projections`) a forward that takes this path for a one-token step over an
initialised static cache layer when the model's attention is `rl.generation.decode_attention`'s
Triton one, and the fused-projections forward for anything else (the prompt, training, no Triton).
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

from rl.generation.decode_attention import FLASH_DECODE, flash_fits
from rl.generation.flash_decode import default_scale, flash_decode
from rl.generation.triton_runs import triton_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): the fused-projections forward runs instead
    triton = None

__all__ = ["attention_prep", "use_attention_step"]


if triton is not None:

    @triton.jit
    def _prep_kernel(QKV, QWeight, KWeight, Cos, Sin, Keys, Values, Position, Query,
                     sxb, scb, scd, ssb, ssd, skb, skh, skn, skd, svb, svh, svn, svd, sqb, sqh,
                     heads, kv_heads, eps, D: tl.constexpr, R: tl.constexpr):
        """Program (row b, head j): j < heads a query head, else key/value head j - heads."""
        b = tl.program_id(0)
        j = tl.program_id(1)
        d = tl.arange(0, D)
        half = R // 2
        rotated = d < R
        partner = tl.where(d < half, d + half, d - half)  # rotate_half's source column
        sign = tl.where(d < half, -1.0, 1.0)
        if j < heads:
            base = j * 2 * D  # the query's D columns, then the gate's D
            w = tl.load(QWeight + d).to(tl.float32)
            wp = tl.load(QWeight + partner, mask=rotated, other=0.0).to(tl.float32)
        else:
            base = heads * 2 * D + (j - heads) * D
            w = tl.load(KWeight + d).to(tl.float32)
            wp = tl.load(KWeight + partner, mask=rotated, other=0.0).to(tl.float32)
        x = tl.load(QKV + b * sxb + base + d).to(tl.float32)
        xp = tl.load(QKV + b * sxb + base + partner, mask=rotated, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        dtype = Query.dtype.element_ty
        y = (x * r * (1.0 + w)).to(dtype).to(tl.float32)  # the norm's output, in the model's dtype
        yp = (xp * r * (1.0 + wp)).to(dtype).to(tl.float32)
        c = tl.load(Cos + b * scb + d * scd, mask=rotated, other=1.0).to(tl.float32)
        s = tl.load(Sin + b * ssb + d * ssd, mask=rotated, other=0.0).to(tl.float32)
        out = tl.where(rotated, y * c + sign * yp * s, y).to(dtype)
        if j < heads:
            tl.store(Query + b * sqb + j * sqh + d, out)
        else:
            h = j - heads
            n = tl.load(Position)
            tl.store(Keys + b * skb + h * skh + n * skn + d * skd, out)
            v = tl.load(QKV + b * sxb + heads * 2 * D + kv_heads * D + h * D + d)
            tl.store(Values + b * svb + h * svh + n * svn + d * svd, v)


@torch.library.custom_op("rl::attention_prep", mutates_args=("keys", "values"))
def attention_prep(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cos: torch.Tensor,
                   sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, position: torch.Tensor,
                   eps: float, heads: int) -> torch.Tensor:
    """The query of a one-token step, its key and value written into the cache: a torch op mutating
    `keys` and `values` (opaque to `torch.compile`). Where Triton runs only.

    Args:
        qkv: [B, heads * 2D + 2 * Hkv * D], the stacked product's row (last dimension contiguous):
            per query head its D query columns then its D gate columns, then the keys, then the values.
        q_weight, k_weight: [D], the query and key norms' weights (applied as 1 + w).
        cos, sin: [B, R], the rotary's for the token, R <= D even (a partial rotary rotates R columns).
        keys, values: [B, Hkv, L, D], the cache layer's, written at column `position`.
        position: a one-element long tensor on the device, the column.
    Returns:
        [B, heads, 1, D] in qkv's dtype.
    """
    if not triton_runs(qkv):
        raise RuntimeError("attention_prep runs where Triton does (rl.generation.triton_runs)")
    batch = qkv.shape[0]
    kv_heads, dim = keys.shape[1], keys.shape[3]
    query = torch.empty(batch, heads, 1, dim, dtype=qkv.dtype, device=qkv.device)
    _prep_kernel[(batch, heads + kv_heads)](
        qkv, q_weight, k_weight, cos, sin, keys, values, position, query,
        qkv.stride(0), cos.stride(0), cos.stride(1), sin.stride(0), sin.stride(1), *keys.stride(), *values.stride(),
        query.stride(0), query.stride(1), heads, kv_heads, eps, D=dim, R=cos.shape[-1], num_warps=1)
    return query


@attention_prep.register_fake
def _(qkv, q_weight, k_weight, cos, sin, keys, values, position, eps, heads):
    return qkv.new_empty(qkv.shape[0], heads, 1, keys.shape[3])


def _static_layer(self: nn.Module, cache):
    """The layer's cache entry when it is an initialised static one (a fixed [B, Hkv, L, D] buffer
    and a device write position), else None."""
    from transformers.cache_utils import StaticLayer

    layer = cache.layers[self.layer_idx] if cache is not None and hasattr(cache, "layers") else None
    if type(layer) is not StaticLayer or not layer.is_initialized:
        return None
    return layer


def _forward(self, hidden_states, position_embeddings, attention_mask, cache=None, past_key_values=None, **kwargs):
    """A one-token step over a static cache through the kernel above and the Triton attention with
    the gate in its merge; anything else the fused-projections forward."""
    layer = _static_layer(self, cache if cache is not None else past_key_values)
    cos, sin = position_embeddings
    batch, length, _ = hidden_states.shape
    dim = self.head_dim
    heads = self.config.num_attention_heads
    if (layer is None or self.training or self.config._attn_implementation != FLASH_DECODE or cos.shape[-1] % 2
            or not flash_fits(hidden_states, length, dim, attention_mask, 0.0, kwargs)):
        return self.projections_forward(hidden_states, position_embeddings, attention_mask, cache=cache,
                                        past_key_values=past_key_values, **kwargs)
    qkv = F.linear(hidden_states[:, 0], self.fused_qkv)
    query = attention_prep(qkv, self.q_norm.weight, self.k_norm.weight, cos[:, -1], sin[:, -1], layer.keys,
                           layer.values, layer.cumulative_length, self.q_norm.eps, heads)
    if self.step_increments is None:
        layer.cumulative_length.add_(1)  # what the cache's update does
    elif self.step_increments:  # the model's last stepped layer: every stepped layer's, in one kernel
        cache = cache if cache is not None else past_key_values
        torch._foreach_add_([cache.layers[i].cumulative_length for i in self.step_increments], 1)
    gate = qkv[:, :heads * 2 * dim].view(batch, heads, 2 * dim)[:, :, dim:]
    # `bound_by_write_position`: the columns written end at the position, plus this step's own
    # column where the position has not yet advanced (a layer before the last under one_increment)
    written = layer.cumulative_length if getattr(self, "flash_bounded", False) else None
    out = flash_decode(query, layer.keys, layer.values, attention_mask, default_scale(query, self.scaling), gate,
                       by_batch=getattr(self, "flash_by_batch", False), written=written,
                       written_offset=1 if self.step_increments == () else 0)
    return self.o_proj(out.reshape(batch, 1, -1)), None


def _layer_classes() -> tuple[type, ...]:
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeAttention

    return Qwen3_5Attention, Qwen3_5MoeAttention


def use_attention_step(model: nn.Module, *, one_increment: bool = False) -> int:
    """Give every Qwen3.5 full-attention layer of `model` whose projections are stacked the
    one-token step above, in place; returns how many layers (0: none, the model is unchanged).

    `one_increment`: the cache layers' write positions advance in one multi-tensor add in the
    model's last stepped layer, where each layer added its own (12 one-element kernels a dense_1b
    step, ~1.1 us each on an H200). Every stepped layer reads its position before that add on the
    stream; a step takes the path in all layers or none (the same cache, mask and token count).
    The generation worker's (bench/bench_generation.py `ours_graphs_layer_increments` times the
    per-layer adds beside it)."""
    stepped = [m for m in model.modules() if isinstance(m, _layer_classes()) and hasattr(m, "fused_qkv")
               and not hasattr(m, "projections_forward")]
    last = max((m.layer_idx for m in stepped), default=None)
    for module in stepped:
        module.projections_forward = module.forward
        module.forward = types.MethodType(_forward, module)
        module.step_increments = None  # its own add, as the cache's update
        if one_increment:
            module.step_increments = tuple(m.layer_idx for m in stepped) if module.layer_idx == last else ()
    return len(stepped)


def bound_by_write_position(model: nn.Module) -> int:
    """Give every stepped attention layer's `flash_decode` its cache's write position (`written`),
    in place; returns how many layers. The split kernel then loads keys under the written end,
    beside the mask's bytes instead of after them. Opt-in: not the generation worker's until timed
    in the step (bench/bench_generation.py `ours_graphs_bounded`)."""
    stepped = [m for m in model.modules() if isinstance(m, _layer_classes()) and hasattr(m, "projections_forward")]
    for module in stepped:
        module.flash_bounded = True
    return len(stepped)
