"""A resolved recipe's thresholds file, loaded for its hardware class: the one call that `run`,
`--dry-run` and `validate` make before launch, so a file that does not parse, has no check for
the run's hardware, or has a check reading a metric the run cannot write, is refused (exit 2, one
line) before any engine time is spent rather than after the run, when it could only leave the run
without result.json or junit.xml (or fail it as "metric absent")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.thresholds.engine_metrics import why_unwritten
from harness.thresholds.errors import ThresholdFileError
from harness.thresholds.thresholds_file import ThresholdCheck, load_thresholds
from harness.thresholds.tree import metric_names

__all__ = ["recipe_thresholds"]


def recipe_thresholds(recipe: Mapping) -> list[ThresholdCheck] | None:
    """The checks that apply to the recipe's `checks.hardware`, or None when it names no file.

    Raises:
        ThresholdFileError: `file:line: ...`, a user error (exit 2).
    """
    checks = recipe.get("checks") or {}
    if not checks.get("thresholds"):
        return None
    loaded = load_thresholds(Path(checks["thresholds"]), hardware=checks.get("hardware"))
    for check in loaded:
        for metric in metric_names(check.tree):
            reason = why_unwritten(recipe, metric)
            if reason is not None:
                raise ThresholdFileError(f"{check.path}:{check.line}: check {check.name!r} reads {metric}, "
                                         f"which this run does not write: {reason}")
    return loaded
