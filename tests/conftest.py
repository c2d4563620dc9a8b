"""Longest test files first.

CI runs `pytest -n 2 --dist loadfile` (a file's tests on one worker, so a module's engine-run
fixture runs once) on two cores. xdist hands files out in collected order, so ordering them by
cost (`pytest.mark.slow(seconds=N)`: the whole file's time, measured) is the longest-first
schedule: the minute-long engine files start at once on both workers and the fast files fill in
behind them, instead of one long file finishing alone at the end.
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
