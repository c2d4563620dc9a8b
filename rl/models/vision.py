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
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeForConditionalGeneration,
)

from rl.model_source import resolve_model_dir
from rl.models import gdn_kernels
from rl.models.hf_configs import TINY_VISION_CONFIG, VL_CONFIGS, make_vl_config, vision_token_ids, vl_config
from rl.models.qwen3_5 import init_from_config
from rl.models.registry import vision_registry

if TYPE_CHECKING:
    from rl.config import ModelConfig

__all__ = ["TINY_VISION_CONFIG", "VL_FAMILIES", "make_vl_config", "vision_token_ids", "vl_config"]

gdn_kernels.prepare()  # fla's kernels as this engine runs them (rl/models/gdn_kernels.py)

# family -> (VL config class, vision config class, VL model class)
VL_FAMILIES: dict[str, tuple[type[PretrainedConfig], type[PretrainedConfig], type[PreTrainedModel]]] = {
    "qwen3_5": (*VL_CONFIGS["qwen3_5"], Qwen3_5ForConditionalGeneration),
    "qwen3_5_moe": (*VL_CONFIGS["qwen3_5_moe"], Qwen3_5MoeForConditionalGeneration),
}


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
