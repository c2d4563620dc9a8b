"""Planted faults, for tests that prove a check can fail.

A check that has never been seen failing proves nothing. `RL_FAULTS` (a comma-separated list
in the engine's environment, e.g. from a recipe's `env:`) switches on known bug classes so
tests can show that the harness catches each one. Unset in every real run.

* `dispatch_inverse_reorder`: dp_dispatch restores rows with the permutation itself instead of
  its inverse: the reference's published reorder bug, right only for self-inverse orders.
"""

from __future__ import annotations

import os

KNOWN = frozenset({"dispatch_inverse_reorder"})


def active(name: str) -> bool:
    """True when fault `name` is planted in this process's environment."""
    assert name in KNOWN, f"unknown fault {name!r}"
    return name in os.environ.get("RL_FAULTS", "").split(",")
