"""Model families by name (`build_model`, rl/models/build.py, is the entry point the engine uses).

A family builder turns a recipe's `model` section (or the distillation `teacher` section, which
describes a model the same way) into a Hugging Face `PreTrainedModel`.
Families register themselves in `registry` (one file per family, imported by
rl/models/build.py's `load_families` when a builder is first asked for); a name registered twice
is an error, so two files cannot silently fight over a family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Union

if TYPE_CHECKING:
    from transformers import PreTrainedModel

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
