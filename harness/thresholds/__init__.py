"""The threshold language: checks over a run's step series, parsed (never eval'd) and failing closed.

See docs/thresholds.md for the grammar, the functions and their step-range semantics.
"""

from harness.thresholds.errors import ThresholdFileError, ThresholdSyntaxError
from harness.thresholds.evaluate import Evaluation, evaluate
from harness.thresholds.parser import parse
from harness.thresholds.thresholds_file import ThresholdCheck, load_thresholds
from harness.thresholds.tree import FUNCTIONS, Expr, metric_names
from harness.thresholds.unparse import unparse

__all__ = [
    "FUNCTIONS",
    "Evaluation",
    "Expr",
    "ThresholdCheck",
    "ThresholdFileError",
    "ThresholdSyntaxError",
    "evaluate",
    "load_thresholds",
    "metric_names",
    "parse",
    "unparse",
]
