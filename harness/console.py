"""Plain-text tables for the terminal: verdicts first, because that is what a person looks for."""

from __future__ import annotations

from collections.abc import Sequence

from harness.checks.verdict import Verdict

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~2 ms on `harness check`)
if TYPE_CHECKING:
    from harness.selftest import CheckSelfTest

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


def format_self_test(tests: Sequence[CheckSelfTest]) -> str:
    """One row per check: its self-test status, name and the perturbations that fail it."""
    from harness.selftest import PROBLEMS, status_counts  # noqa: PLC0415 - the verdict table needs none of it

    name_w = min(max([len("check"), *(len(t.name) for t in tests)]), 36)
    rows = ["self-test: perturbations of the run's series, in memory (docs/thresholds.md)",
            f"{'status':<11}  {'check':<{name_w}}  what fails it"]
    for test in tests:
        rows.append(f"{test.status:<11}  {_cell(test.name, name_w):<{name_w}}  {_cell(test.summary(), _WIDTH + 40)}")
    problems = [test.name for test in tests if test.status in PROBLEMS]
    rows.append(f"self-test: {len(tests)} checks, {status_counts(tests)}"
                + (f"; cannot be shown to fail: {', '.join(problems)}" if problems else ""))
    return "\n".join(rows) + "\n"
