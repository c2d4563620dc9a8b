"""Models of the `rl` engine: Qwen3.5 Hugging Face classes built from a config, and log-probs.

    model = build_model(cfg.model, vocab_size=len(tokenizer), seed=42)
    lp = token_logprobs(model, input_ids, attention_mask)   # [B, T], out[:, 0] = 0

The names below load on first use, so that `rl.models.hf_configs` (the preflight's config
checks) does not pay for transformers' modeling stack; the families register themselves in
rl/models/registry.py when a model is first built (`rl.models.build.load_families`).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "IMAGE_FIELDS",
    "ImageLayout",
    "ModelBuilder",
    "PromptBatch",
    "Registry",
    "TINY_CONFIGS",
    "build_model",
    "encode_prompts",
    "gather_logprobs",
    "tiny_config",
    "token_logprobs",
]
_HOME = {
    "IMAGE_FIELDS": "rl.models.image_inputs", "ImageLayout": "rl.models.image_inputs",
    "PromptBatch": "rl.models.image_inputs", "encode_prompts": "rl.models.image_inputs",
    "gather_logprobs": "rl.models.logprobs", "token_logprobs": "rl.models.logprobs",
    "ModelBuilder": "rl.models.registry", "Registry": "rl.models.registry", "build_model": "rl.models.build",
    "TINY_CONFIGS": "rl.models.tiny_configs", "tiny_config": "rl.models.tiny_configs",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rl.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
