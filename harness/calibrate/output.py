"""The checks of the proposed file: the calibrated ones for the hardware, and what other classes keep.

Runs on one hardware class say nothing about another, so a calibrated check that moved is
written for the calibrated class only; the current check stays, as it was, for the other classes
it named (an everywhere check: for the other classes the file names). Another class's checks are
copied as they are. The order is the current file's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.calibrate.propose import Proposal
from harness.thresholds import ThresholdCheck


def file_checks(current: Sequence[ThresholdCheck], proposals: Sequence[Proposal], *,
                hardware: str) -> tuple[list[ThresholdCheck], list[str]]:
    """(the checks to write, a note for each check whose reach changed)."""
    by_name = {p.name: p for p in proposals if not p.default}
    classes = sorted({c for check in current for c in check.hardware or ()} - {hardware})
    out: list[ThresholdCheck] = []
    notes: list[str] = []
    for check in current:
        if check.hardware is not None and hardware not in check.hardware:
            out.append(check)
            continue
        proposed = by_name[check.name].check
        if proposed is not None:
            out.append(proposed)
        if proposed is check:
            continue
        rest = tuple(c for c in (check.hardware or classes) if c != hardware)
        if rest:
            out.append(dataclasses.replace(check, hardware=rest))
            notes.append(f"{check.name}: the current check stays for {', '.join(rest)}")
        elif check.hardware is None:
            notes.append(f"{check.name}: applied to every hardware class; the proposed file has it "
                         + (f"for {hardware} only" if proposed is not None else "for none (not proven)"))
    out += [p.check for p in proposals if p.default and p.check is not None]
    return out, notes
