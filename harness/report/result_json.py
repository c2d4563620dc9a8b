"""result.json: the machine-readable verdict of one run.

"ok" needs at least one verdict: a run whose checks never ran (a crash before the first step,
an empty thresholds file) must not pass by asserting nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.checks.verdict import Verdict
from harness.report.atomic import write_json_atomic

RESERVED = ("recipe", "ok", "state", "counts", "by_kind", "failed", "verdicts", "status")


def overall_ok(verdicts: Sequence[Verdict]) -> bool:
    """All verdicts passed, and there was at least one."""
    return bool(verdicts) and all(v.ok for v in verdicts)


def summarize(verdicts: Sequence[Verdict]) -> dict[str, object]:
    """Counts overall and per kind, and the names of the failed checks."""
    by_kind: dict[str, dict[str, int]] = {}
    for v in verdicts:
        counts = by_kind.setdefault(v.kind, {"passed": 0, "failed": 0})
        counts["passed" if v.ok else "failed"] += 1
    num_passed = sum(v.ok for v in verdicts)
    return {
        "counts": {"total": len(verdicts), "passed": num_passed, "failed": len(verdicts) - num_passed},
        "by_kind": by_kind,
        "failed": [v.name for v in verdicts if not v.ok],
    }


def result_dict(*, recipe_name: str, verdicts: Sequence[Verdict], status: dict, extra: dict | None = None) -> dict:
    """The content of result.json; `extra` keys go to the top level and may not shadow ours."""
    clash = sorted(set(extra or {}) & set(RESERVED))
    if clash:
        raise ValueError(f"extra: keys {clash} are reserved in result.json ({', '.join(RESERVED)})")
    data: dict[str, object] = {
        "recipe": recipe_name,
        "ok": overall_ok(verdicts),
        "state": status.get("state"),
        **summarize(verdicts),
        "verdicts": [v.to_json() for v in verdicts],
        "status": status,
    }
    data.update(extra or {})
    return data


def write_result_json(
    run_dir: Path, *, recipe_name: str, verdicts: Sequence[Verdict], status: dict, extra: dict | None = None
) -> Path:
    """Writes run_dir/result.json atomically and returns its path."""
    data = result_dict(recipe_name=recipe_name, verdicts=verdicts, status=status, extra=extra)
    return write_json_atomic(Path(run_dir) / "result.json", data)
