"""Suites: recipe runs as data (recipes/suites/*.yaml), validated, budgeted, sharded.

`load_suite` reads a file, `validate_suite` resolves every entry and checks dates and budget,
`select`/`shard_of`/`matrix_rows` build the CI matrix. See docs/nightly.md.
"""

from harness.suites.load import SuiteError, find_suite, find_suites, is_suite_path, load_suite
from harness.suites.matrix import FORMATS, Shard, format_matrix, matrix_rows, select, shard_of, split_shards
from harness.suites.model import Disabled, Entry, Expect, Gate, SignalAt, Suite
from harness.suites.validate import Estimate, SuiteCheck, estimate_entry, suite_problems, validate_suite

__all__ = [
    "FORMATS", "Disabled", "Entry", "Estimate", "Expect", "Gate", "Shard", "Suite", "SignalAt", "SuiteCheck",
    "SuiteError",
    "estimate_entry", "find_suite", "find_suites", "format_matrix", "is_suite_path", "load_suite",
    "matrix_rows", "select", "shard_of", "split_shards", "suite_problems", "validate_suite",
]
