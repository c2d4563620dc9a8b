"""The recorded runs a thresholds file cites: `harness validate --self-test` tests its checks on them.

A check's `why` says where its numbers came from; a word of it that names a run dir (a folder
holding status.json, relative to the working directory, as thresholds paths are) is a run the
threshold was derived from, so the threshold must pass it and be able to fail on it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from harness.thresholds import ThresholdCheck

_PATH_WORD = re.compile(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+")


def cited_runs(checks: Sequence[ThresholdCheck]) -> list[Path]:
    """The run dirs the checks' `why` names, in order of first mention."""
    found: dict[Path, None] = {}
    for check in checks:
        for word in _PATH_WORD.findall(check.why):
            path = Path(word.rstrip("."))
            if path.is_dir() and (path / "status.json").is_file():
                found.setdefault(path, None)
    return list(found)
