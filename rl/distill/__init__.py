"""Cross-tokenizer distillation maths: chunk alignment, the token projection, the loss, a rank's step
(the loop that drives them is rl/loops/distill.py).

The names below load on first use: rl/config.py reads `rl.distill.config` without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Chunk", "DistillConfig", "Projection", "align", "build_projection", "canonical_tokens",
           "chunk_mask", "chunk_means", "vocab_size", "xtoken_loss"]
_HOME = {
    "Chunk": "rl.distill.align", "align": "rl.distill.align", "canonical_tokens": "rl.distill.align",
    "DistillConfig": "rl.distill.config",
    "chunk_mask": "rl.distill.loss", "chunk_means": "rl.distill.loss", "xtoken_loss": "rl.distill.loss",
    "Projection": "rl.distill.projection", "build_projection": "rl.distill.projection",
    "vocab_size": "rl.distill.projection",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rl.distill' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
