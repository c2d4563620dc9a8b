"""status.json after the engine ends: the engine's own account merged with what the harness saw.

The engine writes status.json while it runs (docs/architecture.md). It cannot report its own
death, time limit or Ctrl-C, so once the process is gone the harness merges its view in:

* the engine says "completed" and exited 0: kept as is;
* the harness stopped it (time limit, Ctrl-C): that state wins;
* the engine wrote another terminal state ("failed", ...): kept, with the real exit code;
* the engine exited without a terminal state, or said "completed" but exited non-zero: "failed",
  the error taken from the last lines of engine.log;
* no status.json at all and exit code 0 (an external engine that does not write one): "completed";
  the completion check still compares last_step with num_steps.

Fields the engine wrote are never dropped: a value the harness replaces is kept under
`harness.engine_wrote`, next to what the harness observed (`harness.outcome`, exit code, wall time).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from harness.bounded import read_json_object
from harness.report.atomic import write_json_atomic

TERMINAL_STATES = ("completed", "failed", "interrupted", "timeout")
HARNESS_PREFIX = "[harness] "


def read_status(path: Path) -> dict[str, Any] | None:
    """The engine's status.json, or None when it is missing or not a JSON object."""
    return read_json_object(path, kind="status")


def log_tail(path: Path, *, num_lines: int = 20, max_bytes: int = 16384) -> str:
    """The last engine lines of engine.log (the harness's own notes left out)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - max_bytes, 0))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(HARNESS_PREFIX)]
    return "\n".join(lines[-num_lines:])


def describe_exit(exit_code: int | None) -> str:
    """`code 1`, `signal SIGKILL`, `no exit code`."""
    if exit_code is None:
        return "no exit code"
    if exit_code < 0:
        try:
            return f"signal {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"signal {-exit_code}"
    return f"code {exit_code}"


def merge_status(
    engine: dict[str, Any] | None,
    *,
    outcome: str,
    exit_code: int | None,
    wall_s: float,
    last_step: int,
    total_steps: int,
    error: str | None,
    tail: str,
) -> dict[str, Any]:
    """The final status dict. outcome is "exited", "timeout", "interrupted" or "not_started"."""
    assert outcome in ("exited", "timeout", "interrupted", "not_started"), outcome
    engine = dict(engine or {})
    state, err = _decide(engine, outcome=outcome, exit_code=exit_code, error=error, tail=tail)
    merged = dict(engine)
    merged.update(
        state=state,
        exit_code=exit_code,
        error=err,
        last_step=max(_as_int(engine.get("last_step")), last_step),
        wall_s=round(wall_s, 3),
    )
    merged.setdefault("num_steps", total_steps)
    merged.setdefault("dead_worker", None)
    keys = ("state", "exit_code", "error", "wall_s")
    replaced = {k: engine[k] for k in keys if k in engine and engine[k] != merged[k]}
    merged["harness"] = {
        "outcome": outcome,
        "exit_code": exit_code,
        "wall_s": round(wall_s, 3),
        "last_step_seen": last_step,
        "engine_wrote": replaced,
    }
    return merged


def _decide(
    engine: dict[str, Any], *, outcome: str, exit_code: int | None, error: str | None, tail: str
) -> tuple[str, str | None]:
    if outcome in ("timeout", "interrupted", "not_started"):
        return ("failed" if outcome == "not_started" else outcome), error
    said = engine.get("state")
    how = describe_exit(exit_code)
    if said == "completed" and exit_code == 0:
        return "completed", engine.get("error")
    if said in TERMINAL_STATES and said != "completed":
        return said, engine.get("error") or _with_tail(f"the engine reported {said!r} and exited with {how}", tail)
    if said == "completed":
        return "failed", _with_tail(f"status.json says 'completed' but the engine exited with {how}", tail)
    if not engine and exit_code == 0:
        return "completed", None
    what = "no status.json" if not engine else f"status.json still says {said!r}"
    return "failed", _with_tail(f"the engine exited with {how} without writing a terminal state ({what})", tail)


def _with_tail(message: str, tail: str) -> str:
    return f"{message}; last lines of engine.log:\n{tail}" if tail else f"{message}; engine.log is empty"


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def write_status(path: Path, status: dict[str, Any]) -> Path:
    """Writes status.json atomically."""
    return write_json_atomic(path, status)
