"""Longest test files first.

CI runs `pytest -n 2 --dist loadfile --no-loadscope-reorder` (a file's tests on one worker, so a
module's engine-run fixture runs once; without the flag xdist hands out the files with the most
tests first, which put the few-test engine files last) on two cores. xdist then hands files out
in collected order, so ordering them by cost (`pytest.mark.slow(seconds=N)`: the whole file's
time, measured) is the longest-first schedule: the minute-long engine files start at once on
both workers and the fast files fill in behind them, instead of one long file finishing alone at
the end.
"""

from __future__ import annotations

import pytest


def _cost(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    if marker is not None:
        return float(marker.kwargs.get("seconds", 30))
    return 1.0 if item.get_closest_marker("integration") else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -_cost(item))  # stable: a file's tests stay together, in order
