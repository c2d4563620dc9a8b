"""Model families by name, and `build_model`, the one entry point the engine uses.

A family builder turns a recipe's `model` section (or the distillation `teacher` section, which
describes a model the same way) into a Hugging Face `PreTrainedModel`.
Families register themselves in `registry` (one file per family); a name registered twice is
an error, so two files cannot silently fight over a family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Union

from transformers import PreTrainedModel

if TYPE_CHECKING:
    from rl.config import ModelConfig, TeacherConfig

# The recipe sections that describe a model: family, modality, path, config, tokenizer.
ModelSection = Union["ModelConfig", "TeacherConfig"]


class ModelBuilder(Protocol):
    def __call__(self, model: ModelSection, *, vocab_size: int, seed: int) -> PreTrainedModel: ...


class Registry(dict):
    """A dict of name -> builder that refuses to overwrite a name."""

    def __setitem__(self, name: str, builder: ModelBuilder) -> None:
        if name in self:
            raise ValueError(f"model family {name!r} is already registered (by {self[name]!r})")
        super().__setitem__(name, builder)

    def register(self, name: str) -> Callable[[ModelBuilder], ModelBuilder]:
        """Decorator: `@registry.register("qwen3_5")`."""

        def deco(builder: ModelBuilder) -> ModelBuilder:
            self[name] = builder
            return builder

        return deco


registry: Registry = Registry()
# family -> `make_config(overrides, *, vocab_size)`: the HF config a builder would build from
# (the preflight checks a recipe's config through it, never building weights).
config_registry: Registry = Registry()
# `model.modality: vision` builders (vision-language classes), by the same family names.
vision_registry: Registry = Registry()


def build_model(model: ModelSection, *, vocab_size: int, seed: int) -> PreTrainedModel:
    """Build the recipe's model: from `config` (seeded init) when `path` is null, else from `path`.

    Args:
        model: the recipe's `model` section (or `teacher`): family, modality, path, config (HF field
            overrides).
        vocab_size: the tokenizer's vocabulary size (`len(tokenizer)`).
        seed: initial weights are a pure function of (config, seed).
    Raises:
        ValueError: unknown family, a family without that modality, or bad config fields.
    """
    family = model.family
    if family not in registry:
        raise ValueError(f"model.family: unknown family {family!r}; known: {sorted(registry)}")
    modality = model.modality  # one of ModelConfig's choices; a teacher is text
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    builders = vision_registry if modality == "vision" else registry
    if family not in builders:
        raise ValueError(f"model.family: {family!r} has no {modality} model; known: {sorted(builders)}")
    return builders[family](model, vocab_size=vocab_size, seed=seed)
