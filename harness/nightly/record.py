"""After an entry ran: its history row, its performance gate, and the outcome the summary reads.

The gate compares the run with the history as it was before the run, then the row is appended,
so the noise band never contains the run it judges. The outcome is a plain dict because it
travels from a pytest-xdist worker to the controller in a report's user_properties.
"""

from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import asdict
from pathlib import Path

from harness.history import HistoryRow, append, check_verdicts, gate_run, key_metrics, query
from harness.nightly.runner import EntryRun
from harness.suites.model import Entry, Suite


def history_row(entry: Entry, suite: Suite, run: EntryRun, *, recipe_name: str, commit: str | None) -> HistoryRow:
    run_dir = Path(run.final.run_dir)
    numbers = key_metrics(run_dir)
    return HistoryRow(
        time=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        suite=suite.name, entry=entry.id, recipe=recipe_name, recipe_path=entry.recipe.as_posix(),
        commit_sha=commit, hardware=entry.hardware, verdict=run.verdict, verdicts=check_verdicts(run_dir),
        attempts=len(run.attempts), run_dir=str(run_dir), **asdict(numbers),
    )


def record(entry: Entry, suite: Suite, run: EntryRun, *, recipe_name: str, commit: str | None,
           history_db: Path | None) -> dict:
    """Gate the run against history, append it, and return the outcome for the summary.

    outcome["ok"] is False when a check failed, or when the suite's gate mode is "fail" and
    step time or tokens/s regressed.
    """
    row = history_row(entry, suite, run, recipe_name=recipe_name, commit=commit)
    earlier = query(history_db, entry=entry.id, hardware=entry.hardware) if history_db else []
    gates = gate_run(row, earlier, suite.gate)
    row_id = append(history_db, row) if history_db else None
    regressed = [g for g in gates if g.regression]
    ok = run.verdict == "pass" and not (regressed and suite.gate.mode == "fail")
    return {
        "suite": suite.name,
        "entry": entry.id,
        "recipe": recipe_name,
        "hardware": entry.hardware,
        "ok": ok,
        "verdict": run.verdict,
        "run": run.to_json(),
        "row": {**asdict(row), "id": row_id},
        "gate_mode": suite.gate.mode,
        "gate": [{"metric": g.metric, "status": g.status, "value": g.value, "message": g.message,
                  "band": None if g.band is None else asdict(g.band)} for g in gates],
        "failed_checks": sorted(name for name, passed in row.verdicts.items() if not passed),
    }


def failure_text(outcome: dict) -> str:
    """What the JUnit failure and the terminal say about a failed entry."""
    run = outcome["run"]
    final = run["attempts"][-1]
    lines = [f"entry {outcome['entry']}: {outcome['verdict']} (harness exit {final['exit_code']}, "
             f"state {final['state']}) after {len(run['attempts'])} attempt(s)",
             f"run dir: {final['run_dir']}",
             "reproduce: " + shlex.join(["harness", *run["command"][3:-1], final["run_dir"] + "-again"])]
    if run.get("expected") is not None:
        lines.append(f"expected: {run['expected']}")
        lines += [f"wrong: {p}" for p in run["problems"]]
    elif outcome["failed_checks"]:
        lines.append("failed checks: " + ", ".join(outcome["failed_checks"]))
    for attempt in run["attempts"]:
        if attempt["infra"]:
            action = "retried" if attempt["retried"] else "no retries left"
            lines.append(f"attempt {attempt['number']}: infrastructure failure {attempt['infra']} "
                         f"({action}): {attempt['infra_line']}")
    lines += [f"performance gate ({outcome['gate_mode']}): {g['message']}" for g in outcome["gate"]
              if g["status"] == "regression"]
    tail = _tail(Path(final["run_dir"]) / "harness.log", 15)
    if tail:
        lines += ["--- harness.log (last lines) ---", tail]
    return "\n".join(lines)


def _tail(path: Path, count: int) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-count:])
    except OSError:
        return ""
