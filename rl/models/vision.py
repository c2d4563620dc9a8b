"""The Qwen3.5 vision-language families (`model.modality: vision`) built from a config.

The recipe's `model.config` keeps the text fields flat (exactly as for a text recipe, so a VLM
recipe shares its base with the LLM one) and adds `vision_config`, the Hugging Face vision
tower fields. Missing vision fields come from `TINY_VISION_CONFIG`, a tower small enough for
CPU tiny twins (one block, width 32, 4-pixel patches). The tower's output width is the text
hidden size. The image token ids come from the recipe's tokenizer (e.g. `arith_vl`), which must
define Qwen's four vision tokens.

Built from config the weights are fp32 and a pure function of (config, seed), like the text
families; from a path they are loaded offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeConfig,
    Qwen3_5MoeForConditionalGeneration,
    Qwen3_5MoeVisionConfig,
    Qwen3_5VisionConfig,
)

from rl.model_source import resolve_model_dir
from rl.models import gdn_kernels
from rl.models.qwen3_5 import init_from_config, make_config, refuse_unknown_fields
from rl.models.registry import vision_registry

if TYPE_CHECKING:
    from rl.config import ModelConfig

__all__ = ["TINY_VISION_CONFIG", "VL_FAMILIES", "make_vl_config", "vision_token_ids"]

gdn_kernels.prepare()  # fla's kernels as this engine runs them (rl/models/gdn_kernels.py)

# family -> (VL config class, vision config class, VL model class)
VL_FAMILIES: dict[str, tuple[type[PretrainedConfig], type[PretrainedConfig], type[PreTrainedModel]]] = {
    "qwen3_5": (Qwen3_5Config, Qwen3_5VisionConfig, Qwen3_5ForConditionalGeneration),
    "qwen3_5_moe": (Qwen3_5MoeConfig, Qwen3_5MoeVisionConfig, Qwen3_5MoeForConditionalGeneration),
}

TINY_VISION_CONFIG: dict = {
    "depth": 1,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "patch_size": 4,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "num_position_embeddings": 36,  # a 6 x 6 learned grid, resampled to each image's grid
}

# config field -> the tokenizer's token (Qwen's names)
TOKEN_FIELDS = {
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
}


def vision_token_ids(tokenizer_name: str) -> dict[str, int]:
    """The VL config's token id fields, read from the recipe's tokenizer."""
    from rl.tokenizer import load_tokenizer

    vocab = load_tokenizer(tokenizer_name).get_vocab()
    missing = [tok for tok in TOKEN_FIELDS.values() if tok not in vocab]
    if missing:
        raise ValueError(f"model.tokenizer: {tokenizer_name!r} lacks the vision tokens {missing}; "
                         "a vision model needs a tokenizer such as 'arith_vl'")
    return {field: vocab[tok] for field, tok in TOKEN_FIELDS.items()}


def _vision_fields(family: str, overrides: dict, *, text_hidden_size: int) -> dict:
    refuse_unknown_fields(VL_FAMILIES[family][1], overrides, prefix="model.config.vision_config.")
    fields = {**TINY_VISION_CONFIG, **overrides}
    out = fields.setdefault("out_hidden_size", text_hidden_size)
    if out != text_hidden_size:
        raise ValueError(f"model.config.vision_config.out_hidden_size: {out} must equal the text "
                         f"hidden_size {text_hidden_size} (the tower's output feeds the language model)")
    side = int(fields["num_position_embeddings"] ** 0.5)
    if side * side != fields["num_position_embeddings"]:
        raise ValueError("model.config.vision_config.num_position_embeddings: must be a square "
                         f"(a learned side x side grid), got {fields['num_position_embeddings']}")
    return fields


def make_vl_config(family: str, overrides: dict, *, vocab_size: int, token_ids: dict[str, int]) -> PretrainedConfig:
    """A VL config: the family's tiny text config with the recipe's flat text fields, the
    vision tower from `overrides["vision_config"]`, and the tokenizer's vision token ids."""
    overrides = dict(overrides)
    vision_overrides = dict(overrides.pop("vision_config", None) or {})
    text = make_config(family, overrides, vocab_size=vocab_size)
    for field, token_id in token_ids.items():
        if token_id >= text.vocab_size:
            raise ValueError(f"model.config.vocab_size: {text.vocab_size} does not cover {field}={token_id}")
    vision = _vision_fields(family, vision_overrides, text_hidden_size=text.hidden_size)
    config_cls = VL_FAMILIES[family][0]
    return config_cls(text_config=text.to_dict(), vision_config=vision,
                      tie_word_embeddings=text.tie_word_embeddings, **token_ids)


def vl_config(model: ModelConfig, vocab_size: int) -> PretrainedConfig:
    """The HF vision-language config the recipe's `model` section describes, without reading
    weights: `path`'s config.json, else the family's tiny defaults with `config`'s fields."""
    family = model.family
    if family not in VL_FAMILIES:
        raise ValueError(f"model.family: the vision families are {sorted(VL_FAMILIES)}, got {family!r}")
    if model.path:
        return VL_FAMILIES[family][0].from_pretrained(str(resolve_model_dir(model.path)), local_files_only=True)
    token_ids = vision_token_ids(model.tokenizer or "arith_vl")
    return make_vl_config(family, dict(model.config), vocab_size=vocab_size, token_ids=token_ids)


def _builder(family: str):
    def build(model: ModelConfig, *, vocab_size: int, seed: int) -> PreTrainedModel:
        model_cls = VL_FAMILIES[family][2]
        if model.path:
            path = resolve_model_dir(model.path)
            built = model_cls.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
        else:
            token_ids = vision_token_ids(model.tokenizer or "arith_vl")
            config = make_vl_config(family, dict(model.config), vocab_size=vocab_size, token_ids=token_ids)
            built = init_from_config(config, model_cls, seed)
        return built.eval()

    build.__name__ = f"build_{family}_vl"
    return build


for _family in VL_FAMILIES:
    vision_registry[_family] = _builder(_family)
