"""Run-to-run standard deviations from the history database, to state a margin in noise units.

The history keeps three numbers of each run (harness/history/extract.py); each stands for one
metric: the last train/reward, the steady mean of timing/train/total and of tokens/s per GPU.
Only passing runs count (a failed run is not noise), and at least MIN_RUNS of them.
"""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path

from harness.errors import UsageError
from harness.history import query
from harness.history.extract import REWARD, STEP_TIME, TOKENS_PER_S

MIN_RUNS = 3
COLUMNS = {REWARD: "final_reward", STEP_TIME: "step_time_s", TOKENS_PER_S: "tokens_per_s"}


def run_to_run_sd(db: Path, *, recipe: str, hardware: str | None) -> dict[str, float]:
    """metric -> standard deviation over the recipe's passing runs on this hardware ({} if too few)."""
    try:
        rows = query(db, recipe=recipe, hardware=hardware)
    except (sqlite3.Error, ValueError) as error:  # not a history database: bad input, one line
        raise UsageError(f"{db}: cannot read the history ({error})") from None
    out = {}
    for metric, column in COLUMNS.items():
        values = [getattr(row, column) for row in rows if row.verdict == "pass" and getattr(row, column) is not None]
        if len(values) >= MIN_RUNS and statistics.stdev(values) > 0:
            out[metric] = statistics.stdev(values)
    return out
