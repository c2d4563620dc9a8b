"""`build_model`, the one entry point the engine uses to build a recipe's model.

The family files register their builders in rl/models/registry.py when imported; this module
imports them (`load_families`) so that importing the registry alone stays cheap.
"""

from __future__ import annotations

from transformers import PreTrainedModel

from rl.models.registry import ModelSection, registry, vision_registry

__all__ = ["build_model", "load_families"]


def load_families() -> None:
    """Import every family's file (each registers its builders); cheap after the first call."""
    from rl.models import llama, qwen3_5, vision  # noqa: F401 - imported for their registrations


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
    load_families()
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
