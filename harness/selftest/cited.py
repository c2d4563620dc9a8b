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


def citing_checks(checks: Sequence[ThresholdCheck]) -> dict[Path, list[str]]:
    """Each run dir the checks' `why` names (in order of first mention) and the names of the checks
    citing it: a run is evidence for those checks, not for the file's others (a one-GPU run cited
    for a check that holds on every GPU scale need not pass the two-GPU scale's rank count)."""
    found: dict[Path, list[str]] = {}
    for check in checks:
        for word in _PATH_WORD.findall(check.why):
            path = Path(word.rstrip(".,;:)"))
            if path.is_dir() and (path / "status.json").is_file():
                names = found.setdefault(path, [])
                if check.name not in names:
                    names.append(check.name)
    return found


def cited_runs(checks: Sequence[ThresholdCheck]) -> list[Path]:
    """The run dirs the checks' `why` names, in order of first mention."""
    return list(citing_checks(checks))
