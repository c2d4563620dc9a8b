"""The torch training backend's rules (rl/backends/torch.py, imported only when built): a Hugging
Face model on every rank, data parallel in fp32, eager; it packs rows, trains VLMs and distills."""

from __future__ import annotations

from rl.backends.rules import BackendRules, register_rules

__all__ = ["TorchRules"]


@register_rules
class TorchRules(BackendRules):
    name = "torch"
    implementation = "rl.backends.torch"
    distills = True
    takes_device = True
