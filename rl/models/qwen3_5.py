"""The Qwen3.5 families (dense `qwen3_5`, mixture-of-experts `qwen3_5_moe`) as HF causal LMs.

Both are hybrid stacks (gated-delta-rule linear attention plus every 4th layer full attention).
Text only for now: the vision-language classes need image inputs that no task produces yet.
Built from config the weights are fp32 and a pure function of (config, seed); from `model.path`
(rl/model_source.py: a shipped tiny checkpoint, a local directory or a Hub id) they are loaded
with `from_pretrained`, the recipe's `model.config` fields overriding the checkpoint's.
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig, PreTrainedModel, Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM

from rl.model_source import resolve_model_dir
from rl.models import gdn_kernels
from rl.models.hf_configs import TEXT_CONFIGS, check_config_fields, make_config, refuse_unknown_fields, text_config
from rl.models.registry import ModelSection, config_registry, registry

gdn_kernels.prepare()  # fla's kernels as this engine runs them, in every process that builds the model

# family -> (config class, causal LM class)
FAMILIES: dict[str, tuple[type[PretrainedConfig], type[PreTrainedModel]]] = {
    "qwen3_5": (TEXT_CONFIGS["qwen3_5"], Qwen3_5ForCausalLM),
    "qwen3_5_moe": (TEXT_CONFIGS["qwen3_5_moe"], Qwen3_5MoeForCausalLM),
}
__all__ = ["FAMILIES", "check_config_fields", "init_from_config", "load_from_path", "make_config",
           "refuse_unknown_fields", "text_config"]


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
