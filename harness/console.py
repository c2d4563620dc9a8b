"""Plain-text tables for the terminal: verdicts first, because that is what a person looks for."""

from __future__ import annotations

from typing import Sequence

from harness.checks.verdict import Verdict

_WIDTH = 96


def _cell(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """One row per check: PASS/FAIL, name, kind and the reason, then a summary line."""
    name_w = min(max((len(v.name) for v in verdicts), default=4), 36)
    rows = [f"{'':4}  {'check':<{name_w}}  {'kind':<10}  reason"]
    for v in verdicts:
        mark = "PASS" if v.ok else "FAIL"
        rows.append(f"{mark:4}  {_cell(v.name, name_w):<{name_w}}  {v.kind:<10}  {_cell(v.message, _WIDTH)}")
    failed = sum(not v.ok for v in verdicts)
    verdict = "PASS" if verdicts and not failed else "FAIL"
    rows.append(f"{verdict}: {len(verdicts) - failed} of {len(verdicts)} checks passed")
    return "\n".join(rows) + "\n"
