"""Run the engine-launching tests first.

With `pytest -n 2` (xdist's load scheduling hands out the collected order round-robin) the
minute-long `integration` tests then start on both workers at once and the fast tests fill in
behind them, instead of one long run finishing alone at the end of the suite.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 2

    items.sort(key=weight)  # stable: each group keeps its collected order
