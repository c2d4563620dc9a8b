"""The `llama` family (Hugging Face `LlamaForCausalLM`): a teacher of another family.

Cross-tokenizer distillation pairs a Qwen3.5 student with a teacher of another family and
tokenizer (a Llama, say). Only the teacher role uses it: `model.family` (the trained policy)
stays a Qwen3.5 family, which every training backend knows. Tiny defaults below keep the CPU
teacher twin small; a recipe's `teacher.config` overrides any field, and `vocab_size` may pad
the LM head past the tokenizer (as real Llama checkpoints do), which the loss slices away.
"""

from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM, PretrainedConfig, PreTrainedModel

from rl.models.qwen3_5 import init_from_config, load_from_path, refuse_unknown_fields
from rl.models.registry import ModelSection, config_registry, registry

TINY_LLAMA: dict = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1.0e-6,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
}


def make_llama_config(overrides: dict, *, vocab_size: int) -> PretrainedConfig:
    """Tiny defaults, the recipe's overrides, and at least the tokenizer's vocabulary."""
    refuse_unknown_fields(LlamaConfig, overrides, prefix="teacher.config.")
    fields = {**TINY_LLAMA, **overrides}
    fields["vocab_size"] = int(fields.get("vocab_size", vocab_size))
    if fields["vocab_size"] < vocab_size:
        raise ValueError(f"teacher.config.vocab_size: {fields['vocab_size']} is smaller than the tokenizer's "
                         f"{vocab_size}")
    return LlamaConfig(**fields)


@registry.register("llama")
def build_llama(model: ModelSection, *, vocab_size: int, seed: int) -> PreTrainedModel:
    if model.modality != "text":
        raise ValueError("teacher: family 'llama' is text only in the rl engine")
    overrides = dict(model.config)
    if model.path:
        refuse_unknown_fields(LlamaConfig, overrides, prefix="teacher.config.")
        return load_from_path(model.path, LlamaForCausalLM, overrides, vocab_size).eval()
    return init_from_config(make_llama_config(overrides, vocab_size=vocab_size), LlamaForCausalLM, seed).eval()


config_registry["llama"] = make_llama_config
