"""A parity run's data paths, compared per seed as `harness run` compares them (harness/checks/parity.py).

Within the recipe's tolerance they must agree on every seed, or that seed's run failed and is no
evidence. Where they are bit-identical on every seed, parity is exact, tolerance 0: calibrate
says so, and that a recipe allowing more could ask for 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.calibrate.runs import CalibrationRun
from harness.checks.parity import compare_metrics
from harness.errors import UsageError


def parity_summary(runs: Sequence[CalibrationRun]) -> str | None:
    """One line on the runs' parity (None for runs without variants); raises UsageError for a
    seed whose paths disagree beyond the recipe's tolerance."""
    tolerance = runs[0].tolerance
    if tolerance is None:
        return None
    names = tuple(variant.name for variant in runs[0].variants)
    first_difference = None
    for run in runs:
        a, b = (variant.metrics for variant in run.variants)
        failed = next((v for v in compare_metrics(a, b, names=names, tolerance=run.tolerance) if not v.ok), None)
        if failed is not None:
            raise UsageError(f"{run.shown} ({run.label}) is no evidence to calibrate on: {failed.name}: "
                             f"{failed.message}")
        exact = next((v for v in compare_metrics(a, b, names=names, tolerance=0.0) if not v.ok), None)
        if exact is not None and first_difference is None:
            first_difference = f"{run.label}: {exact.message}"
    paths = " vs ".join(names)
    if first_difference is not None:
        return (f"parity       {paths}: not bit-identical ({first_difference}); within tolerance {tolerance:g} "
                "on every seed")
    loose = f"; the recipe allows {tolerance:g} (checks.parity.tolerance) and could ask for 0" if tolerance else ""
    return f"parity       {paths}: bit-identical on every seed: exact, tolerance 0{loose}"
