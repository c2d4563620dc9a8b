"""Tiny default Hugging Face config fields per model family, for CPU tests and tiny twins.

A recipe's `model.config` overrides any field. The shapes keep the structure of the real
Qwen3.5 models (hybrid layers: three gated-delta-rule linear attention layers then one full
attention layer; MoE with a shared expert) at a size that trains in seconds on two CPU cores.
`vocab_size` is never set here: it comes from the tokenizer.
"""

from __future__ import annotations

import copy

_SHARED: dict = {
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    # full attention
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    # linear attention (gated delta rule)
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1.0e-6,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
}

TINY_CONFIGS: dict[str, dict] = {
    "qwen3_5": {**_SHARED, "intermediate_size": 128},
    "qwen3_5_moe": {
        **_SHARED,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
        "router_aux_loss_coef": 0.001,
    },
}


def default_layer_types(num_layers: int, full_attention_interval: int = 4) -> list[str]:
    """Every `full_attention_interval`-th layer is full attention, the rest linear (as in Qwen3.5)."""
    return [
        "full_attention" if (i + 1) % full_attention_interval == 0 else "linear_attention"
        for i in range(num_layers)
    ]


def tiny_config(family: str, overrides: dict | None = None) -> dict:
    """The family's tiny fields with `overrides` applied.

    Overriding `num_hidden_layers` without `layer_types` re-derives the layer pattern, so a
    recipe can say `num_hidden_layers: 8` and still get a consistent hybrid stack.
    """
    if family not in TINY_CONFIGS:
        raise ValueError(f"model.family: no tiny config for {family!r}; known: {sorted(TINY_CONFIGS)}")
    fields = copy.deepcopy(TINY_CONFIGS[family])
    overrides = dict(overrides or {})
    if "num_hidden_layers" in overrides and "layer_types" not in overrides:
        overrides["layer_types"] = default_layer_types(int(overrides["num_hidden_layers"]))
    fields.update(copy.deepcopy(overrides))
    return fields
