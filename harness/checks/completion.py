"""Did the run finish? A truncated run must fail loudly, never skip its checks and pass.

status.json is believed only when it is consistent: "completed" with exit code 0, no error,
no dead worker, and its last step equal to the planned step count. The metrics must then hold
every step from 1 to the recipe's step count, and none past it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from harness.checks.failure_cause import failure_cause, strip_ansi
from harness.checks.verdict import Verdict

NAME = "run_completed"


def _fail(message: str, *, extra: dict | None = None) -> Verdict:
    return Verdict(name=NAME, kind="completion", ok=False, message=message, extra=extra or {})


def _not_completed(status: Mapping, log: Path | None) -> Verdict:
    """The run stopped: its state, step and cause in one line, and where the whole story is.

    When the cause is shortened (a worker's traceback), the whole error travels in `extra`, so
    junit.xml and result.json carry it.
    """
    error = str(status.get("error") or "no error recorded")
    cause = failure_cause(error)
    where = f" (engine output: {log})" if log is not None else ""
    whole = strip_ansi(error).strip()
    return _fail(f"run state is {status.get('state')!r} at step {status.get('last_step')!r}: {cause}{where}",
                 extra={"error": whole} if whole != cause else None)


def status_problem(status: Mapping, expected_steps: int) -> str | None:
    """Why a status.json that says "completed" cannot be believed, or None."""
    exit_code, error, dead = status.get("exit_code"), status.get("error"), status.get("dead_worker")
    if type(exit_code) is not int or exit_code != 0:
        return f"status.json says 'completed' with exit_code {exit_code!r} (must be 0)"
    if error is not None:
        return f"status.json says 'completed' but records an error: {str(error)[:200]!r}"
    if dead is not None:
        return f"status.json says 'completed' but records a dead worker: {str(dead)[:200]!r}"
    for key in ("last_step", "num_steps"):
        value = status.get(key)
        if key in status and (type(value) is not int or value < 0):
            return f"status.json's {key} is {value!r}, not a step count"
    if "last_step" in status and "num_steps" in status and status["last_step"] != status["num_steps"]:
        return f"status.json says 'completed' at last_step {status['last_step']} of num_steps {status['num_steps']}"
    if "num_steps" in status and status["num_steps"] != expected_steps:
        return f"status.json plans {status['num_steps']} steps, the recipe {expected_steps}"
    return None


def check_completion(*, status: Mapping | None, steps: Collection[int], expected_steps: int,
                     log: Path | None = None) -> Verdict:
    """Fails unless status.json is a consistent "completed" and metrics hold steps 1..expected_steps.

    `steps` holds each step once (a set, a range, or Metrics.logged_steps()); `log` is the run's
    engine.log, named in the verdict of a run that did not complete.
    """
    if status is None:
        return _fail("no status.json in the run dir")
    if status.get("state") != "completed":
        return _not_completed(status, log)
    problem = status_problem(status, expected_steps)
    if problem:
        return _fail(problem)
    if len(steps) == expected_steps and steps and min(steps) == 1 and max(steps) == expected_steps:
        return _completed(expected_steps)  # unique steps, as many as planned, all in 1..N: exactly 1..N
    missing = sorted(set(range(1, expected_steps + 1)).difference(steps))
    if missing:
        return _fail(f"metrics miss {len(missing)} of {expected_steps} steps (first: {missing[0]})")
    beyond = sorted(step for step in steps if not 1 <= step <= expected_steps)
    if beyond:
        return _fail(f"metrics hold step {beyond[0]}, outside the recipe's 1..{expected_steps}")
    return _completed(expected_steps)


def _completed(expected_steps: int) -> Verdict:
    return Verdict(name=NAME, kind="completion", ok=True, value=float(expected_steps),
                   message=f"completed {expected_steps} of {expected_steps} steps")
