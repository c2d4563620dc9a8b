"""A resolved recipe's thresholds file, loaded for its hardware class: the one call that `run`,
`--dry-run` and `validate` make before launch, so a file that does not parse, or has no check for
the run's hardware, is refused (exit 2, one line) before any engine time is spent rather than
after the run, when it could only leave the run without result.json or junit.xml."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.thresholds.thresholds_file import ThresholdCheck, load_thresholds

__all__ = ["recipe_thresholds"]


def recipe_thresholds(recipe: Mapping) -> list[ThresholdCheck] | None:
    """The checks that apply to the recipe's `checks.hardware`, or None when it names no file.

    Raises:
        ThresholdFileError: `file:line: ...`, a user error (exit 2).
    """
    checks = recipe.get("checks") or {}
    if not checks.get("thresholds"):
        return None
    return load_thresholds(Path(checks["thresholds"]), hardware=checks.get("hardware"))
