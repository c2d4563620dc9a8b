"""Run one suite entry with `harness run` in a subprocess, retrying known infrastructure failures.

Each attempt gets its own run dir, `OUT/<entry>` then `OUT/<entry>.retry1`, ..., so a retried
failure keeps its evidence. The harness's own output goes to `harness.log` in the run dir.
A subprocess (not an in-process call) keeps one entry's crash, signal handlers and imports away
from the next, and is exactly what a person would type to reproduce it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.bounded import read_json_object
from harness.nightly.signatures import Match, match_log
from harness.suites.model import Entry

HARNESS = (sys.executable, "-m", "harness.cli")
EXIT_VERDICT = {0: "pass", 1: "fail"}  # anything else (2 bad input, 3 internal, 130, killed) is "error"
NO_RETRY_EXITS = (0, 130)  # passed, or stopped by a person
TERM_GRACE_S = 30.0


@dataclass(kw_only=True)
class Attempt:
    """One `harness run` of an entry."""

    number: int
    run_dir: str
    exit_code: int
    wall_s: float
    state: str | None              # status.json state of the run, None if there is none
    infra: str | None = None       # the matched infrastructure signature
    infra_line: str | None = None  # the log line it matched
    retried: bool = False


@dataclass(kw_only=True)
class EntryRun:
    """All attempts of one entry; the last one is the verdict."""

    entry: str
    command: list[str]
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def final(self) -> Attempt:
        assert self.attempts, "an entry run has at least one attempt"
        return self.attempts[-1]

    @property
    def verdict(self) -> str:
        return EXIT_VERDICT.get(self.final.exit_code, "error")

    def to_json(self) -> dict:
        return asdict(self)


def attempt_dir(out_dir: Path, entry_id: str, number: int) -> Path:
    return out_dir / (entry_id if number == 1 else f"{entry_id}.retry{number - 1}")


def read_state(run_dir: Path) -> str | None:
    state = (read_json_object(run_dir / "status.json", kind="status") or {}).get("state")
    return state if isinstance(state, str) else None


def infra_failure(attempt: Attempt, run_dir: Path) -> Match | None:
    """The infrastructure signature of a failed, unfinished attempt, or None (then no retry).

    The engine must have started (status.json exists) and not completed: a recipe refused
    before launch, or a completed run that fails a check, is never retried."""
    if attempt.exit_code in NO_RETRY_EXITS or attempt.state in (None, "completed"):
        return None
    return match_log(run_dir / "engine.log")


def run_harness(command: Sequence[str], *, log: Path, timeout_s: float) -> int:
    """Run `command` with its output in `log`; past the timeout, SIGTERM (the harness then stops
    its engine group), and SIGKILL after a grace period. Returns the exit code (negative: signal)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=TERM_GRACE_S)
            raise


def run_entry(entry: Entry, *, out_dir: Path, max_retries: int, timeout_s: float,
              harness: Sequence[str] = HARNESS) -> EntryRun:
    """Run `entry` until it passes, fails for a reason of its own, or runs out of retries."""
    assert max_retries >= 0
    base = [*harness, "run", *entry.harness_args(), "--no-progress"]
    result = EntryRun(entry=entry.id, command=base + ["--out", str(attempt_dir(out_dir, entry.id, 1))])
    for number in range(1, max_retries + 2):
        run_dir = attempt_dir(out_dir, entry.id, number)
        start = time.monotonic()
        log = out_dir / f".{run_dir.name}.harness.log"
        code = run_harness(base + ["--out", str(run_dir)], log=log, timeout_s=timeout_s)
        run_dir.mkdir(parents=True, exist_ok=True)
        log.replace(run_dir / "harness.log")
        attempt = Attempt(number=number, run_dir=str(run_dir), exit_code=code,
                          wall_s=round(time.monotonic() - start, 2), state=read_state(run_dir))
        result.attempts.append(attempt)
        match = infra_failure(attempt, run_dir)
        if match is not None:
            attempt.infra, attempt.infra_line = match.signature.name, match.line
        if match is None or number > max_retries:
            break
        attempt.retried = True
    return result
