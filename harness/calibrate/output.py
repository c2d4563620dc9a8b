"""The checks of the proposed file: the calibrated ones for the hardware, and what other classes keep.

Runs on one hardware class say nothing about another, so a calibrated check whose bound moved is
written for the calibrated class only; the current check stays, as it was, for the other classes
it named (an everywhere check: for the other classes the file names). A check nothing moved keeps
its scope, `hardware` absent (every class) included. Another class's checks are copied as they
are. The order is the current file's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.calibrate.propose import Proposal
from harness.thresholds import ThresholdCheck


def file_checks(current: Sequence[ThresholdCheck], proposals: Sequence[Proposal], *,
                hardware: str) -> tuple[list[ThresholdCheck], dict[str, str]]:
    """(the checks to write, for each check whose scope changed: how, by name)."""
    by_name = {p.name: p for p in proposals if not p.default}
    classes = sorted({c for check in current for c in check.hardware or ()} - {hardware})
    out: list[ThresholdCheck] = []
    scopes: dict[str, str] = {}
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
        stays = (f"the current check stays for {', '.join(rest)}" if rest else
                 "the file names no other class to keep the current check for")
        if check.hardware is None:
            now = (f"{hardware}, whose runs moved its bound" if proposed is not None
                   else f"none: not proven on {hardware}")
            scopes[check.name] = f"every hardware class -> {now}; {stays}"
        elif rest:
            scopes[check.name] = stays
    out += [p.check for p in proposals if p.default and p.check is not None]
    return out, scopes
