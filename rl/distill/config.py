"""The recipe's `algorithm.distill` section, torch-free: rl/config.py (and through it the
preflight) reads it without importing the distillation maths (rl/distill/loss.py)."""

from __future__ import annotations

from dataclasses import dataclass

from rl.recipe.key import Section, key

__all__ = ["DistillConfig", "RESPONSES"]

RESPONSES = ("dataset",)


@dataclass(kw_only=True, frozen=True)
class DistillConfig(Section):
    """The recipe's `algorithm.distill` section."""

    kl_weight: float = key(1.0, ge=0, doc='weight of KL(teacher || student) over aligned chunks')
    ce_weight: float = key(0.0, ge=0, doc="weight of the student's own next-token cross-entropy")
    temperature: float = key(1.0, gt=0, doc="both sides' logits divided by it; the KL multiplied by its square")
    vocab_topk: int = key(16, ge=1, doc='teacher ids per chunk the KL is taken over')
    projection_topk: int = key(4, ge=1, doc='teacher pieces kept per student token in the projection')
    responses: str = key("dataset", choices=RESPONSES, doc="where responses come from: the task's answers")
