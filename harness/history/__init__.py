"""Run history: a local SQLite file of every suite entry run, and the performance gate over it.

`append`/`query` read and write rows, `key_metrics` extracts a run dir's numbers, `gate_run`
holds step time and tokens/s to the noise band of earlier runs. See docs/nightly.md.
"""

from harness.history.db import DEFAULT_DB, HistoryRow, append, current_commit, query
from harness.history.extract import KeyMetrics, check_verdicts, key_metrics
from harness.history.gate import Band, GateResult, gate_run, noise_band

__all__ = [
    "DEFAULT_DB", "Band", "GateResult", "HistoryRow", "KeyMetrics", "append", "check_verdicts",
    "current_commit", "gate_run", "key_metrics", "noise_band", "query",
]
