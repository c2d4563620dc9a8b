"""The resource plan of a recipe, derived and checked before launch."""

from harness.plan.memory import MemoryEstimate, device_capacity_gib
from harness.plan.model_size import ModelSize, model_size
from harness.plan.resources import Plan, PlanError, make_plan

__all__ = ["MemoryEstimate", "ModelSize", "Plan", "PlanError", "device_capacity_gib", "make_plan", "model_size"]
