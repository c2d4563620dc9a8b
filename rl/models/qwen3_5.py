"""The Qwen3.5 families (dense `qwen3_5`, mixture-of-experts `qwen3_5_moe`) as HF causal LMs.

Both are hybrid stacks (gated-delta-rule linear attention plus every 4th layer full attention).
Text only for now: the vision-language classes need image inputs that no task produces yet.
Built from config the weights are fp32 and a pure function of (config, seed); from `model.path`
(rl/model_source.py: a shipped tiny checkpoint, a local directory or a Hub id) they are loaded
with `from_pretrained`, the recipe's `model.config` fields overriding the checkpoint's.
"""

from __future__ import annotations

import difflib

import torch
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    Qwen3_5ForCausalLM,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
)

from rl.model_source import resolve_model_dir
from rl.models import gdn_kernels
from rl.models.registry import ModelSection, config_registry, registry
from rl.models.tiny_configs import tiny_config

gdn_kernels.prepare()  # fla's kernels as this engine runs them, in every process that builds the model

# family -> (config class, causal LM class)
FAMILIES: dict[str, tuple[type[PretrainedConfig], type[PreTrainedModel]]] = {
    "qwen3_5": (Qwen3_5TextConfig, Qwen3_5ForCausalLM),
    "qwen3_5_moe": (Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM),
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
    refuse_unknown_fields(FAMILIES[family][0], fields, prefix="model.config.")


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
    return FAMILIES[family][0](**fields)


def text_config(model: ModelSection, vocab_size: int) -> PretrainedConfig:
    """The HF config the recipe's `model` section describes, without reading weights: `path`'s
    config.json with `config`'s fields over it, else the family's tiny defaults with them."""
    family = model.family
    if family not in FAMILIES:
        raise ValueError(f"model.family: the text families are {sorted(FAMILIES)}, got {family!r}")
    overrides = dict(model.config)
    if model.path:
        directory = resolve_model_dir(model.path)
        return FAMILIES[family][0].from_pretrained(str(directory), local_files_only=True, **overrides)
    return make_config(family, overrides, vocab_size=vocab_size)


def init_from_config(config: PretrainedConfig, model_cls: type[PreTrainedModel], seed: int) -> PreTrainedModel:
    # fork_rng: seeding must not disturb the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    return model.to(torch.float32)


def load_from_path(path: str, model_cls: type[PreTrainedModel], overrides: dict, vocab_size: int) -> PreTrainedModel:
    directory = resolve_model_dir(path)
    model = model_cls.from_pretrained(str(directory), local_files_only=True, dtype=torch.float32, **overrides)
    if model.config.vocab_size < vocab_size:
        raise ValueError(
            f"model.path: checkpoint vocab_size {model.config.vocab_size} is smaller than the tokenizer's {vocab_size}"
        )
    return model


def _builder(family: str):
    def build(model: ModelSection, *, vocab_size: int, seed: int) -> PreTrainedModel:
        if model.modality != "text":
            raise ValueError(f"model.modality: family {family!r} supports only 'text' in the rl engine")
        overrides = dict(model.config)
        model_cls = FAMILIES[family][1]
        if model.path:
            check_config_fields(family, overrides)
            built = load_from_path(model.path, model_cls, overrides, vocab_size)
        else:
            built = init_from_config(make_config(family, overrides, vocab_size=vocab_size), model_cls, seed)
        return built.eval()

    build.__name__ = f"build_{family}"
    return build


for _family in FAMILIES:
    registry[_family] = _builder(_family)
    config_registry[_family] = (lambda overrides, *, vocab_size, _f=_family:
                                make_config(_f, overrides, vocab_size=vocab_size))
