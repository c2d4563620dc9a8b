"""Rollout generation: our own KV-cache sampling loop over a Hugging Face causal LM.

The names below load on first use: `rl.generation.decode_mode` is imported by the preflight,
which must not pay for the model stack (torch's and transformers' imports, seconds a run).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Generation", "decode_responses", "generate", "row_seeds"]
_HOME = {"Generation": "rl.generation.generation", "decode_responses": "rl.generation.generation",
         "generate": "rl.generation.sampler", "row_seeds": "rl.generation.sampler"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rl.generation' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
