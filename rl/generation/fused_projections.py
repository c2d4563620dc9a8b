"""One matrix product where Hugging Face's Qwen3.5 layers make several from the same input.

Why: a decode step reads every weight once and is bound by memory, but a small product (k_proj's
2048 x 512 at batch 64) spends more of its time starting and splitting than reading. The
attention's q/k/v projections share their input, and so do the MLP's gate and up projections:
stacking their weights into one [sum of outputs, input] tensor makes 2 products a layer of 5
(bench/bench_generation.py `ours_graphs_unfused` measures the difference).

The separate Linear layers keep their Parameters, now views of the stacked tensor, so
`state_dict` names and shapes are unchanged and a refit that writes them in place
(`load_state_dict`, rl/workers/generation.py's `_copy_in`) updates the stacked weight with them.
Call it after the model has its final device and dtype (`.to` would copy the views apart). The
forwards below are transformers' own (5.17 to 5.24, both cache conventions) with the product
fused; results equal the unfused ones up to the matrix product's rounding, so the generation
worker fuses on CUDA only, where decoding is not bitwise anyway, and CPU runs stay bit-identical
to their references.
"""

from __future__ import annotations

import inspect
import types

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["fuse_projections", "stack_linears"]


def stack_linears(module: nn.Module, names: tuple[str, ...]) -> tuple[torch.Tensor, list[int]]:
    """Stack the named Linear layers' weights into one tensor; their Parameters become its views."""
    layers = [getattr(module, name) for name in names]
    if any(layer.bias is not None for layer in layers):
        raise ValueError(f"{type(module).__name__}: fused projections take bias-free layers")
    stacked = torch.cat([layer.weight.detach() for layer in layers], dim=0)
    sizes = [layer.weight.shape[0] for layer in layers]
    start = 0
    for layer, size in zip(layers, sizes):
        layer.weight = nn.Parameter(stacked[start:start + size], requires_grad=layer.weight.requires_grad)
        start += size
    return stacked, sizes


def _attention_forward(self, hidden_states, position_embeddings, attention_mask, cache=None, past_key_values=None,
                       **kwargs):
    """transformers' Qwen3_5Attention.forward with q_proj, k_proj and v_proj as one product. Both
    cache conventions: `past_key_values` and `update(k, v, layer)` (5.17), `cache` and
    `update(k, v, layer, kwargs=kwargs)` (5.24), chosen by the installed class's signature."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import (
        ALL_ATTENTION_FUNCTIONS,
        apply_rotary_pos_emb,
        eager_attention_forward,
    )

    cache = cache if cache is not None else past_key_values
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query_gate, key_states, value_states = F.linear(hidden_states, self.fused_qkv).split(self.fused_qkv_sizes, -1)
    query_states, gate = torch.chunk(query_gate.view(*input_shape, -1, self.head_dim * 2), 2, dim=-1)
    gate = gate.reshape(*input_shape, -1)
    query_states = self.q_norm(query_states.view(hidden_shape)).transpose(1, 2)
    key_states = self.k_norm(key_states.view(hidden_shape)).transpose(1, 2)
    value_states = value_states.view(hidden_shape).transpose(1, 2)
    cos, sin = position_embeddings
    query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
    if cache is not None:
        update_kwargs = {"kwargs": kwargs} if self.fused_cache_kwargs else {}
        key_states, value_states = cache.update(key_states, value_states, self.layer_idx, **update_kwargs)
    attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
    attn_output, attn_weights = attention(self, query_states, key_states, value_states, attention_mask,
                                          dropout=0.0 if not self.training else self.attention_dropout,
                                          scaling=self.scaling, **kwargs)
    attn_output = attn_output.reshape(*input_shape, -1).contiguous() * torch.sigmoid(gate)
    return self.o_proj(attn_output), attn_weights


def _mlp_forward(self, x):
    """transformers' Qwen3_5MLP.forward with gate_proj and up_proj as one product."""
    gate, up = F.linear(x, self.fused_gate_up).split(self.fused_gate_up_sizes, -1)
    return self.down_proj(self.act_fn(gate) * up)


def _fusable() -> tuple[tuple[type, ...], tuple[type, ...]]:
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention, Qwen3_5MLP
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeAttention, Qwen3_5MoeMLP

    return (Qwen3_5Attention, Qwen3_5MoeAttention), (Qwen3_5MLP, Qwen3_5MoeMLP)


def fuse_projections(model: nn.Module) -> int:
    """Fuse every Qwen3.5 attention's q/k/v and every dense MLP's gate/up projections of `model`,
    in place; returns how many modules it fused (0: none of those classes, the model is unchanged)."""
    attentions, mlps = _fusable()
    fused = 0
    for module in model.modules():
        if isinstance(module, attentions) and not hasattr(module, "fused_qkv"):
            module.fused_qkv, module.fused_qkv_sizes = stack_linears(module, ("q_proj", "k_proj", "v_proj"))
            module.fused_cache_kwargs = "cache" in inspect.signature(type(module).forward).parameters
            module.forward = types.MethodType(_attention_forward, module)
            fused += 1
        elif isinstance(module, mlps) and not hasattr(module, "fused_gate_up"):
            module.fused_gate_up, module.fused_gate_up_sizes = stack_linears(module, ("gate_proj", "up_proj"))
            module.forward = types.MethodType(_mlp_forward, module)
            fused += 1
    return fused
