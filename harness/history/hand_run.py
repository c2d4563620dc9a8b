"""A `harness run`'s row in the history database, beside the rows `harness nightly` appends.

Its suite is "run" and its entry "run:<recipe name>": a nightly entry's performance gate reads only
its own entry's rows, so a run by hand never moves a nightly noise band, while `harness history
RECIPE` (which matches by recipe) lists both. Nightly's own `harness run`s pass --no-history: their
row is the entry's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from pathlib import Path

from harness.history.db import HistoryRow, append
from harness.history.extract import check_verdicts, key_metrics

SUITE = "run"


def hand_run_row(*, recipe_name: str, recipe_path: Path, hardware: str | None, ok: bool, state: str,
                 run_dir: Path, commit: str | None) -> HistoryRow:
    """The row of one judged run: `pass` when every check held, `error` when the run did not
    complete (failed, timed out, interrupted), `fail` otherwise."""
    verdict = "pass" if ok else ("fail" if state == "completed" else "error")
    return HistoryRow(
        time=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), suite=SUITE,
        entry=f"{SUITE}:{recipe_name}", recipe=recipe_name, recipe_path=Path(recipe_path).as_posix(),
        commit_sha=commit, hardware=hardware or "unknown", verdict=verdict, verdicts=check_verdicts(run_dir),
        run_dir=str(run_dir), **asdict(key_metrics(run_dir)),
    )


def record_hand_run(db: Path, **row: object) -> int:
    """Append the run's row (`hand_run_row`'s arguments); returns its id."""
    return append(db, hand_run_row(**row))
