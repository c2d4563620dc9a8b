"""Run one suite entry with `harness run` in a subprocess, retrying known infrastructure failures.

Each attempt gets its own run dir, `OUT/<entry>` then `OUT/<entry>.retry1`, ..., so a retried
failure keeps its evidence. The harness's own output goes to `harness.log` in the run dir.
A fault entry (one with `expect`, harness/nightly/faults.py) is watched for lost steps, may get
a signal or a resume, and is judged against its expectation; it is retried only when its verdict
is wrong, its run did not complete, and its engine.log matches an infrastructure signature.
A subprocess (not an in-process call) keeps one entry's crash, signal handlers and imports away
from the next, and is exactly what a person would type to reproduce it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.bounded import read_json_object
from harness.nightly import faults
from harness.nightly.signatures import Match, match_log
from harness.recipe.secret_env import redact_argv
from harness.suites.model import Entry, SignalAt

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
    expected: str | None = None          # a fault entry: its expectation, in words
    fault: str | None = None             # ... and what it plants
    observed: dict | None = None         # ... what its run did (faults.observe), leftovers and steps lost
    problems: list[str] = field(default_factory=list)  # ... where the two differ; empty: the verdict is right

    @property
    def final(self) -> Attempt:
        assert self.attempts, "an entry run has at least one attempt"
        return self.attempts[-1]

    @property
    def verdict(self) -> str:
        if self.expected is not None:
            return "fail" if self.problems else "pass"
        return EXIT_VERDICT.get(self.final.exit_code, "error")

    def to_json(self) -> dict:
        """What the summary, its JUnit file and the outcome record get: secret overrides redacted."""
        return {**asdict(self), "command": redact_argv(self.command)}


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


def run_harness(command: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
                watch: faults.StepWatch | None = None, signal_at: SignalAt | None = None,
                log_mode: str = "wb") -> int:
    """Run `command` with its output in `log`; past the timeout, SIGTERM (the harness then stops
    its engine group), and SIGKILL after a grace period. Returns the exit code (negative: signal).
    With `watch`, metrics.jsonl is read as the run goes; with `signal_at`, the harness gets that
    signal once the step is logged."""
    log.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with log.open(log_mode) as out:
        proc = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})},
                                preexec_fn=_default_sigint)
        try:
            while True:
                try:
                    code = proc.wait(timeout=max(0.01, min(faults.POLL_S, deadline - time.monotonic())))
                    if watch is not None:
                        watch.poll()
                    return code
                except subprocess.TimeoutExpired:
                    pass
                step = watch.poll() if watch is not None else 0
                if signal_at is not None and step >= signal_at.at_step:
                    out.write(f"[nightly] step {step} logged: sending {signal_at.name} to harness run\n".encode())
                    proc.send_signal(getattr(signal, signal_at.name))
                    signal_at = None
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(list(command), timeout_s)
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


def _default_sigint() -> None:
    """In the child before exec: Ctrl-C acts as at a terminal (an xdist worker may ignore SIGINT,
    and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _require_expect(entry: Entry) -> None:
    if entry.expect is None:
        raise ValueError(f"suite entry {entry.id}: a fault entry needs expect:")


def fault_attempt(entry: Entry, result: EntryRun, *, number: int, out_dir: Path, base: list[str],
                  timeout_s: float) -> Attempt:
    """One attempt of a fault entry: run it (then resume it, if it says so), judge it against
    `expect`, and keep the judgement on `result` (the last attempt's stands)."""
    _require_expect(entry)
    run_dir = attempt_dir(out_dir, entry.id, number)
    command = base + ["--out", str(run_dir)]
    token = uuid.uuid4().hex
    watch = faults.StepWatch(run_dir / "metrics.jsonl")
    log = out_dir / f".{run_dir.name}.harness.log"
    start = time.monotonic()
    code = run_harness(command, log=log, timeout_s=timeout_s, env={faults.TOKEN_ENV: token},
                       watch=watch, signal_at=entry.signal)
    left = faults.leftovers(token)
    first = code
    if entry.resume:
        with log.open("ab") as out:
            out.write(f"[nightly] harness run exited {code}; resuming\n".encode())
        code = run_harness(command + ["--resume"], log=log, timeout_s=timeout_s, log_mode="ab",
                           env={faults.TOKEN_ENV: token}, watch=watch)
        left += faults.leftovers(token)
    run_dir.mkdir(parents=True, exist_ok=True)
    log.replace(run_dir / "harness.log")
    attempt = Attempt(number=number, run_dir=str(run_dir), exit_code=code,
                      wall_s=round(time.monotonic() - start, 2), state=read_state(run_dir))
    observed = faults.observe(run_dir, exit_code=code)
    lost, data = faults.data_problems(watch.seen, faults.metric_steps(run_dir / "metrics.jsonl"))
    result.observed = {**observed, "first_exit": first, "steps_seen": len(watch.seen), "steps_lost": lost,
                       "leftovers": left}
    result.problems = faults.verdict_problems(entry.expect, observed) + data
    if left:
        result.problems.append(f"{len(left)} process(es) outlived harness run: {'; '.join(left[:5])}")
    return attempt


def retried(once: Callable[[int], tuple[Attempt, Match | None]], max_retries: int) -> list[Attempt]:
    """Attempts 1, 2, ... of an entry (`once(number)`: the attempt and the infrastructure signature
    its failure matched, None when it passed or failed for a reason of its own), again only while
    the last one matched and retries are left; the one retry loop of ordinary and fault entries."""
    attempts = []
    for number in range(1, max_retries + 2):
        attempt, match = once(number)
        attempts.append(attempt)
        if match is not None:
            attempt.infra, attempt.infra_line = match.signature.name, match.line
        if match is None or number > max_retries:
            break
        attempt.retried = True
    return attempts


def run_fault_entry(entry: Entry, *, out_dir: Path, max_retries: int, timeout_s: float,
                    harness: Sequence[str] = HARNESS) -> EntryRun:
    """Run a fault entry and judge it against `expect`. A wrong verdict is retried only when the
    run did not complete and its engine.log matches an infrastructure signature (Ray did not
    come up on a crowded machine): the fault never got its chance. A right verdict stands."""
    _require_expect(entry)
    base = [*harness, "run", *entry.harness_args(), "--no-progress", "--no-history"]
    result = EntryRun(entry=entry.id, command=base + ["--out", str(attempt_dir(out_dir, entry.id, 1))],
                      expected=faults.expectation(entry.expect), fault=entry.fault)
    def once(number: int) -> tuple[Attempt, Match | None]:
        attempt = fault_attempt(entry, result, number=number, out_dir=out_dir, base=base, timeout_s=timeout_s)
        wrong = bool(result.problems) and attempt.state != "completed"
        return attempt, match_log(Path(attempt.run_dir) / "engine.log") if wrong else None

    result.attempts = retried(once, max_retries)
    return result


def run_entry(entry: Entry, *, out_dir: Path, max_retries: int, timeout_s: float,
              harness: Sequence[str] = HARNESS) -> EntryRun:
    """Run `entry` until it passes, fails for a reason of its own, or runs out of retries."""
    assert max_retries >= 0
    if entry.expect is not None:
        return run_fault_entry(entry, out_dir=out_dir, max_retries=max_retries, timeout_s=timeout_s,
                               harness=harness)
    base = [*harness, "run", *entry.harness_args(), "--no-progress", "--no-history"]
    result = EntryRun(entry=entry.id, command=base + ["--out", str(attempt_dir(out_dir, entry.id, 1))])
    def once(number: int) -> tuple[Attempt, Match | None]:
        run_dir = attempt_dir(out_dir, entry.id, number)
        start = time.monotonic()
        log = out_dir / f".{run_dir.name}.harness.log"
        code = run_harness(base + ["--out", str(run_dir)], log=log, timeout_s=timeout_s)
        run_dir.mkdir(parents=True, exist_ok=True)
        log.replace(run_dir / "harness.log")
        attempt = Attempt(number=number, run_dir=str(run_dir), exit_code=code,
                          wall_s=round(time.monotonic() - start, 2), state=read_state(run_dir))
        return attempt, infra_failure(attempt, run_dir)

    result.attempts = retried(once, max_retries)
    return result
