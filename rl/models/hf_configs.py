"""The Hugging Face configs of the model families, built and checked without the model classes.

The preflight checks a recipe's `model.config` through these before launch; importing
transformers' configuration classes costs a fraction of importing its modeling stack, which
rl/models/qwen3_5.py and rl/models/vision.py (the builders) pay.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from transformers import (
    PretrainedConfig,
    Qwen3_5Config,
    Qwen3_5MoeConfig,
    Qwen3_5MoeTextConfig,
    Qwen3_5MoeVisionConfig,
    Qwen3_5TextConfig,
    Qwen3_5VisionConfig,
)

from rl.model_source import resolve_model_dir
from rl.models.tiny_configs import tiny_config

if TYPE_CHECKING:
    from rl.config import ModelConfig, TeacherConfig

__all__ = ["TEXT_CONFIGS", "TINY_VISION_CONFIG", "VL_CONFIGS", "check_config_fields", "make_config", "make_vl_config",
           "refuse_unknown_fields", "text_config", "vision_token_ids", "vl_config"]

# family -> its text config class
TEXT_CONFIGS: dict[str, type[PretrainedConfig]] = {"qwen3_5": Qwen3_5TextConfig, "qwen3_5_moe": Qwen3_5MoeTextConfig}
# family -> (vision-language config class, vision tower config class)
VL_CONFIGS: dict[str, tuple[type[PretrainedConfig], type[PretrainedConfig]]] = {
    "qwen3_5": (Qwen3_5Config, Qwen3_5VisionConfig),
    "qwen3_5_moe": (Qwen3_5MoeConfig, Qwen3_5MoeVisionConfig),
}


def refuse_unknown_fields(config_cls: type, fields: dict, *, prefix: str) -> None:
    """HF configs swallow unknown kwargs; we refuse them so that a typo is not silently ignored."""
    known = set(config_cls().to_dict())
    for key in fields:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {close}?" if close else ""
            raise ValueError(f"{prefix}{key}: not a {config_cls.__name__} field{hint}")


def check_config_fields(family: str, fields: dict) -> None:
    """The recipe's `model.config` fields must be fields of the family's HF config."""
    refuse_unknown_fields(TEXT_CONFIGS[family], fields, prefix="model.config.")


def make_config(family: str, overrides: dict, *, vocab_size: int) -> PretrainedConfig:
    """The family's tiny defaults, the recipe's overrides, and the tokenizer's vocabulary size."""
    check_config_fields(family, overrides)
    fields = tiny_config(family, overrides)
    fields["vocab_size"] = int(fields.get("vocab_size", vocab_size))
    if fields["vocab_size"] < vocab_size:
        raise ValueError(
            f"model.config.vocab_size: {fields['vocab_size']} is smaller than the tokenizer's {vocab_size}"
        )
    if len(fields["layer_types"]) != fields["num_hidden_layers"]:
        raise ValueError(
            f"model.config.layer_types: {len(fields['layer_types'])} entries for "
            f"num_hidden_layers={fields['num_hidden_layers']}"
        )
    if "full_attention" not in fields["layer_types"]:
        # transformers' Qwen3.5 cache and masks key on the attention layers: without one, the first
        # generation step fails inside transformers (after Ray and the warm start have started).
        raise ValueError(
            f"model.config.layer_types: no full_attention layer among the {fields['num_hidden_layers']} "
            "(by default every 4th layer is one): Qwen3.5 needs at least one; use num_hidden_layers >= 4 "
            "or list layer_types"
        )
    return TEXT_CONFIGS[family](**fields)


def text_config(model: ModelConfig | TeacherConfig, vocab_size: int) -> PretrainedConfig:
    """The HF config the recipe's `model` section describes, without reading weights: `path`'s
    config.json with `config`'s fields over it, else the family's tiny defaults with them."""
    family = model.family
    if family not in TEXT_CONFIGS:
        raise ValueError(f"model.family: the text families are {sorted(TEXT_CONFIGS)}, got {family!r}")
    overrides = dict(model.config)
    if model.path:
        directory = resolve_model_dir(model.path)
        return TEXT_CONFIGS[family].from_pretrained(str(directory), local_files_only=True, **overrides)
    return make_config(family, overrides, vocab_size=vocab_size)


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
    refuse_unknown_fields(VL_CONFIGS[family][1], overrides, prefix="model.config.vision_config.")
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
    config_cls = VL_CONFIGS[family][0]
    return config_cls(text_config=text.to_dict(), vision_config=vision,
                      tie_word_embeddings=text.tie_word_embeddings, **token_ids)


def vl_config(model: ModelConfig, vocab_size: int) -> PretrainedConfig:
    """The HF vision-language config the recipe's `model` section describes, without reading
    weights: `path`'s config.json, else the family's tiny defaults with `config`'s fields."""
    family = model.family
    if family not in VL_CONFIGS:
        raise ValueError(f"model.family: the vision families are {sorted(VL_CONFIGS)}, got {family!r}")
    if model.path:
        return VL_CONFIGS[family][0].from_pretrained(str(resolve_model_dir(model.path)), local_files_only=True)
    token_ids = vision_token_ids(model.tokenizer or "arith_vl")
    return make_vl_config(family, dict(model.config), vocab_size=vocab_size, token_ids=token_ids)
