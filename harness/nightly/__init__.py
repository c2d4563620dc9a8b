"""`harness nightly`: suite entries as pytest items (plugin), run with retries of known
infrastructure failures (runner, signatures), recorded to history with a performance gate
(record), and summarised in one report (summary, charts). See docs/nightly.md.
"""

from harness.nightly.runner import Attempt, EntryRun, run_entry
from harness.nightly.signatures import SIGNATURES, Match, Signature, match_log, match_text

__all__ = ["SIGNATURES", "Attempt", "EntryRun", "Match", "Signature", "match_log", "match_text", "run_entry"]
