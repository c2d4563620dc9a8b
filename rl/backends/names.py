"""The training backends by name, each with the light module that states its rules: the one list
that `policy.backend`'s choices (rl/config.py) and the rules registry (rl/backends/rules.py) read.

Why a module of its own: the config must know the names without importing the registry, whose
rules read the config (an import circle otherwise)."""

from __future__ import annotations

__all__ = ["RULES_MODULES", "backend_names"]

RULES_MODULES = {"megatron": "rl.backends.megatron.rules", "torch": "rl.backends.torch_rules"}


def backend_names() -> list[str]:
    """Every training backend, sorted."""
    return sorted(RULES_MODULES)
