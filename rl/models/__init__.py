"""Models of the `rl` engine: Qwen3.5 Hugging Face classes built from a config, and log-probs.

    model = build_model(cfg.model, vocab_size=len(tokenizer), seed=42)
    lp = token_logprobs(model, input_ids, attention_mask)   # [B, T], out[:, 0] = 0
"""

from rl.models import llama as _llama  # noqa: F401  (registers the llama family: distillation teachers)
from rl.models import qwen3_5 as _qwen3_5  # noqa: F401  (registers the qwen3_5 families)
from rl.models import vision as _vision  # noqa: F401  (registers their vision-language classes)
from rl.models.image_inputs import IMAGE_FIELDS, ImageLayout, PromptBatch, encode_prompts
from rl.models.logprobs import gather_logprobs, token_logprobs
from rl.models.registry import ModelBuilder, Registry, build_model, registry, vision_registry
from rl.models.tiny_configs import TINY_CONFIGS, tiny_config

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
    "registry",
    "tiny_config",
    "token_logprobs",
    "vision_registry",
]
