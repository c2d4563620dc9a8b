"""Parameter counts of a Qwen3.5-style decoder from its Hugging Face config, without torch.

The plan needs them before any GPU is spent: how many weights each rank holds decides the
memory estimate. Counts follow the Qwen3.5 layer shapes (gated full attention, gated delta-rule
linear attention, dense SwiGLU or MoE with a shared expert); norms and biases are ignored
(under 0.1% of any real model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

REQUIRED_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")


@dataclass(frozen=True, kw_only=True)
class ModelSize:
    """Parameter counts, split the way parallelism shards them."""

    dense_params: int  # sharded by TP x PP (attention, shared experts, router, norms)
    expert_params: int  # sharded by EP x ETP x PP
    embedding_params: int  # input embedding + output head, sharded by TP (first/last PP stage)
    active_params: int  # parameters one token passes through
    num_experts: int
    num_layers: int
    hidden_size: int
    vocab_size: int

    @property
    def total_params(self) -> int:
        return self.dense_params + self.expert_params + self.embedding_params


def layer_types(cfg: Mapping) -> list[str]:
    """The per-layer mixer kinds: `layer_types`, else a full-attention layer every 4th layer (as
    the engine derives them; HF's config has no `full_attention_interval` field)."""
    n = int(cfg["num_hidden_layers"])
    types = cfg.get("layer_types")
    if types:
        return list(types)
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)]


def head_dim(cfg: Mapping) -> int:
    """A full-attention head's width: `head_dim`, else hidden_size / num_attention_heads."""
    return int(cfg.get("head_dim") or int(cfg["hidden_size"]) // int(cfg["num_attention_heads"]))


@dataclass(frozen=True, kw_only=True)
class LinearAttentionShape:
    """A gated-delta-net layer's widths (Hugging Face's `linear_*` fields, Qwen3.5's defaults)."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def conv_dim(self) -> int:
        """Channels of the causal conv: query, key and value concatenated."""
        return 2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim


def linear_attention_shape(cfg: Mapping) -> LinearAttentionShape:
    return LinearAttentionShape(
        key_heads=int(cfg.get("linear_num_key_heads", 16)),
        value_heads=int(cfg.get("linear_num_value_heads", 32)),
        key_head_dim=int(cfg.get("linear_key_head_dim", 128)),
        value_head_dim=int(cfg.get("linear_value_head_dim", 128)),
        conv_kernel=int(cfg.get("linear_conv_kernel_dim", 4)),
    )


def _full_attention(cfg: Mapping, h: int) -> int:
    heads, kv, hd = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"]), head_dim(cfg)
    gate = 2 if cfg.get("attn_output_gate", True) else 1  # Qwen3.5 gates attention output via q_proj
    return h * heads * hd * gate + 2 * h * kv * hd + heads * hd * h


def _linear_attention(cfg: Mapping, h: int) -> int:
    la = linear_attention_shape(cfg)
    nk, nv, dk, dv = la.key_heads, la.value_heads, la.key_head_dim, la.value_head_dim
    qkvz = h * (2 * nk * dk + 2 * nv * dv)
    ba = h * 2 * nv
    return qkvz + ba + la.conv_dim * la.conv_kernel + nv * dv * h


def model_size(cfg: Mapping, *, family: str) -> ModelSize:
    """Count parameters of a `qwen3_5` (dense) or `qwen3_5_moe` config.

    Raises:
        KeyError: naming the first required field the config lacks.
    """
    for name in REQUIRED_FIELDS:
        if name not in cfg:
            raise KeyError(name)
    h, n = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    vocab = int(cfg.get("vocab_size", 0))
    tied = bool(cfg.get("tie_word_embeddings", False))
    embedding = vocab * h * (1 if tied else 2)

    attention = sum(
        _full_attention(cfg, h) if kind == "full_attention" else _linear_attention(cfg, h)
        for kind in layer_types(cfg)
    )
    if family == "qwen3_5_moe":
        experts = int(cfg.get("num_experts", 0))
        top_k = int(cfg.get("num_experts_per_tok", 1))
        moe_f = int(cfg.get("moe_intermediate_size", 0))
        shared_f = int(cfg.get("shared_expert_intermediate_size", 0))
        per_expert = 3 * h * moe_f
        shared = 3 * h * shared_f + (h if shared_f else 0)
        dense = attention + n * (shared + h * experts)
        expert_total = n * experts * per_expert
        active = dense + n * top_k * per_expert + embedding
    else:
        experts = 0
        dense = attention + n * 3 * h * int(cfg.get("intermediate_size", 4 * h))
        expert_total = 0
        active = dense + embedding
    return ModelSize(
        dense_params=dense,
        expert_params=expert_total,
        embedding_params=embedding,
        active_params=active,
        num_experts=experts,
        num_layers=n,
        hidden_size=h,
        vocab_size=vocab,
    )
