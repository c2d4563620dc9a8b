"""The errors a user can cause, gathered so the CLI reports each as one line with exit code 2."""

from __future__ import annotations

from harness.checks.invariants import InvariantsError
from harness.metrics import MetricsError
from harness.plan import PlanError
from harness.preflight import EngineRefusal
from harness.recipe import RecipeError
from harness.thresholds import ThresholdFileError, ThresholdSyntaxError


class UsageError(Exception):
    """A command was given something it cannot use (a missing run dir, a bad option value)."""


USER_ERRORS: tuple[type[Exception], ...] = (
    UsageError,
    RecipeError,
    PlanError,
    EngineRefusal,
    ThresholdFileError,
    ThresholdSyntaxError,
    MetricsError,
    InvariantsError,
)

