"""Training backends by name: one module per backend (megatron: a package, its class in
rl/backends/megatron/backend.py), each registers itself on import; the train-step pieces both share
are in rl/backends/train_step.py.

A backend owns the trainable policy, its optimizer and a frozen reference copy on one rank, and
offers log-probs and one optimizer step over a batch of fixed-shape tensors. The policy worker
(rl/workers/policy.py) owns the process group and the data plane; the backend only computes.
Backends are imported lazily: `megatron` pulls in megatron-core, which a CPU run never needs.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["BACKEND_MODULES", "get_backend", "register"]

BACKEND_MODULES = {"torch": "rl.backends.torch", "megatron": "rl.backends.megatron.backend"}
_REGISTRY: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Class decorator; registering one name twice is an error."""

    def deco(cls: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY:
            raise ValueError(f"training backend {name!r} is already registered by {_REGISTRY[name]!r}")
        _REGISTRY[name] = cls
        return cls

    return deco


def get_backend(name: str) -> Callable[..., Any]:
    """The backend class registered as `name` (importing its module on first use)."""
    if name not in _REGISTRY:
        if name not in BACKEND_MODULES:
            raise ValueError(f"policy.backend: unknown backend {name!r}; known: {sorted(BACKEND_MODULES)}")
        importlib.import_module(BACKEND_MODULES[name])
    return _REGISTRY[name]
