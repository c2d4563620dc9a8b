"""Plain-text tables for the terminal: verdicts first, because that is what a person looks for.

A reason is the cause of a failure and is never cut: on a terminal it is wrapped to the
terminal's width under its column; into a pipe or a file each of its lines is written whole.
(Cut at 96 characters, a worker crash showed its coloured Ray header and lost its cause.)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.checks.verdict import Verdict

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~2 ms on `harness check`)
if TYPE_CHECKING:
    from harness.selftest import CheckSelfTest

_MIN_REASON_WIDTH = 40  # narrower than this, wrapped text is harder to read than the terminal's own wrap


def _cell(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def terminal_columns() -> int | None:
    """The terminal's width when stdout is one, else None (a pipe or a file: lines are written whole)."""
    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is None or not isatty():
        return None
    import shutil  # noqa: PLC0415 - a terminal only; CI's pipe does not pay for it

    return shutil.get_terminal_size().columns


def _reason(text: str, indent: int, columns: int | None) -> str:
    """`text` from column `indent` on: its lines whole, or wrapped to `columns`; later lines indented."""
    lines = [" ".join(line.split()) for line in str(text).splitlines()] or [""]
    if columns is not None:
        import textwrap  # noqa: PLC0415 - a terminal only

        width = max(columns - indent, _MIN_REASON_WIDTH)
        lines = [part for line in lines for part in (textwrap.wrap(line, width, break_on_hyphens=False) or [""])]
    return ("\n" + " " * indent).join(lines)


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """One row per check: PASS/FAIL, name, kind and the reason, then a summary line."""
    name_w = min(max((len(v.name) for v in verdicts), default=4), 36)
    columns, indent = terminal_columns(), 4 + 2 + name_w + 2 + 10 + 2
    rows = [f"{'':4}  {'check':<{name_w}}  {'kind':<10}  reason"]
    for v in verdicts:
        mark = "PASS" if v.ok else "FAIL"
        reason = _reason(v.message, indent, columns)
        rows.append(f"{mark:4}  {_cell(v.name, name_w):<{name_w}}  {v.kind:<10}  {reason}")
    failed = sum(not v.ok for v in verdicts)
    verdict = "PASS" if verdicts and not failed else "FAIL"
    rows.append(f"{verdict}: {len(verdicts) - failed} of {len(verdicts)} checks passed")
    return "\n".join(rows) + "\n"


def format_self_test(tests: Sequence[CheckSelfTest]) -> str:
    """One row per check: its self-test status, name and the perturbations that fail it."""
    from harness.selftest import PROBLEMS, status_counts  # noqa: PLC0415 - the verdict table needs none of it

    name_w = min(max([len("check"), *(len(t.name) for t in tests)]), 36)
    columns, indent = terminal_columns(), 11 + 2 + name_w + 2
    rows = ["self-test: perturbations of the run's series, in memory (docs/thresholds.md)",
            f"{'status':<11}  {'check':<{name_w}}  what fails it"]
    for test in tests:
        summary = _reason(test.summary(), indent, columns)
        rows.append(f"{test.status:<11}  {_cell(test.name, name_w):<{name_w}}  {summary}")
    problems = [test.name for test in tests if test.status in PROBLEMS]
    rows.append(f"self-test: {len(tests)} checks, {status_counts(tests)}"
                + (f"; cannot be shown to fail: {', '.join(problems)}" if problems else ""))
    return "\n".join(rows) + "\n"
