"""Training backends by name: one module per backend (megatron: a package, its class in
rl/backends/megatron/backend.py), each registers itself on import; the train-step pieces both share
are in rl/backends/train_step.py.

A backend owns the trainable policy, its optimizer and a frozen reference copy on one rank, and
offers log-probs and one optimizer step over a batch of fixed-shape tensors. The policy worker
(rl/workers/policy.py) owns the process group and the data plane; the backend only computes.
Backends are imported lazily: `megatron` pulls in megatron-core, which a CPU run never needs. What
each can run is stated once, in a light module the registry of rules names (rl/backends/rules.py);
its `implementation` is the module imported here when a worker builds the backend.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["get_backend", "register"]

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
    """The backend class registered as `name` (importing its module on first use); an unknown name
    is a `ValueError` listing the known ones."""
    if name not in _REGISTRY:
        from rl.backends.rules import backend_rules

        importlib.import_module(backend_rules(name).implementation)
    return _REGISTRY[name]
