"""Runs one engine command to its end: log, progress, time limit, Ctrl-C, final status.json.

The engine writes straight into engine.log through the file descriptor it inherits (not through a
pipe we read), so its output survives the harness being killed. It runs in its own session, so a
terminal's Ctrl-C reaches only the harness, which forwards it to the engine, and then stops what is
left of the engine's group (group.stop_leader_first). A SIGTERM to the harness (a cancelled CI job,
`kill`) is forwarded the same way, so a cancelled harness does not leave an engine running.
A harness that cannot forward anything (SIGKILLed, OOM-killed, reaped by a CI runner) still takes
its engine along: the engine starts with a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG)`,
SIGTERM, so it records `interrupted` and stops its Ray the way a forwarded SIGTERM does).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.launch.group import (
    child_subreaper,
    live_members,
    signal_group,
    stop_group,
    stop_leader_first,
    wait_group_empty,
)
from harness.launch.phase_tail import PhaseTail
from harness.launch.progress import ProgressBar
from harness.launch.status import HARNESS_PREFIX, log_tail, merge_status, read_status, write_status
from harness.launch.tail import MetricsTail

STATES = ("completed", "failed", "timeout", "interrupted")
_PR_SET_PDEATHSIG = 1
EXIT_ORPHANED = 143  # what a SIGTERM would have made of it


@dataclass(frozen=True, kw_only=True)
class LaunchResult:
    """How the engine process ended, as also written to status.json."""

    state: str  # one of STATES
    exit_code: int | None
    wall_s: float
    last_step: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.state == "completed"


def launch(
    command: Sequence[str],
    *,
    run_dir: Path,
    env: Mapping[str, str],
    timeout_s: float,
    total_steps: int,
    progress: bool = True,
    cwd: Path | None = None,
    grace_s: float = 20.0,
    poll_s: float = 0.2,
    keep_fds: Sequence[int] = (),
    label: str | None = None,
) -> LaunchResult:
    """Runs `command` with os.environ + `env`; returns once it and all its helpers are gone.

    Args:
        command: argv of the engine, e.g. ["python", "-m", "rl.run", "recipe.yaml", "--out", run_dir].
        run_dir: where engine.log and status.json go and metrics.jsonl is watched; created if missing.
        env: variables added to (or replacing) the harness's environment.
        timeout_s: wall-clock limit; on expiry the group gets SIGTERM, then SIGKILL after grace_s.
        total_steps: the step count the progress bar and status.json's num_steps assume.
        progress: show the progress line on stderr.
        cwd: working directory of the engine (default: the harness's).
        grace_s: how long SIGTERM / SIGINT may take before SIGKILL (20 s: rl.run gives its own
            shutdown 15 s after recording the outcome, SHUTDOWN_GRACE_S).
        poll_s: how often the process and metrics.jsonl are looked at.
        keep_fds: file descriptors the engine inherits (the run dir's lock, harness/run_lock.py).
        label: what the progress line starts with (a parity run's variant name).
    Raises:
        ValueError: naming the argument, when one is out of range.
    """
    _validate(command, timeout_s=timeout_s, total_steps=total_steps, grace_s=grace_s, poll_s=poll_s)
    argv = [os.fspath(arg) for arg in command]
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tail = MetricsTail(run_dir / "metrics.jsonl")
    bar = ProgressBar(total_steps=total_steps, stream=sys.stderr, label=label) if progress else None
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    start = time.monotonic()
    with child_subreaper(), open(run_dir / "engine.log", "ab", buffering=0) as log:
        _note(log, f"launching: {shlex.join(argv)} (time limit {timeout_s:g} s)")
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=full_env, cwd=cwd, start_new_session=True, pass_fds=tuple(keep_fds),
                preexec_fn=_die_with(os.getpid()),
            )  # fmt: skip
        except OSError as exc:
            _note(log, f"could not start the engine: {exc}")
            return _finish(run_dir, outcome="not_started", exit_code=None, start=start, tail=tail,
                           total_steps=total_steps, error=f"could not start {command[0]!r}: {exc}")  # fmt: skip
        try:
            with _sigterm_interrupts():
                outcome = _watch(proc, tail=tail, bar=bar, deadline=start + timeout_s, poll_s=poll_s,
                                 phases=PhaseTail(run_dir / "engine.log"))
                error = _stop(proc, outcome, log=log, grace_s=grace_s, timeout_s=timeout_s)
        finally:
            if proc.returncode is None or live_members(proc.pid):  # an error in the harness: leave nothing behind
                signal_group(proc.pid, signal.SIGKILL)
                wait_group_empty(proc, 10.0)
            tail.poll(final=True)
            if bar is not None:
                bar.update(step=tail.last_step, metric=tail.headline)
                bar.close()
        _note(log, f"engine ended: {outcome}, exit code {proc.returncode}, last step {tail.last_step}/{total_steps}")
    error = error and f"{error} (at step {tail.last_step}/{total_steps})"
    outcome = "interrupted" if outcome == "terminated" else outcome
    return _finish(run_dir, outcome=outcome, exit_code=proc.returncode, start=start, tail=tail,
                   total_steps=total_steps, error=error)  # fmt: skip


def _watch(
    proc: subprocess.Popen, *, tail: MetricsTail, bar: ProgressBar | None, deadline: float, poll_s: float,
    phases: PhaseTail,
) -> str:
    """Waits for the leader to exit; returns "exited", "timeout", "interrupted" or "terminated"."""
    try:
        while True:
            try:
                proc.wait(timeout=max(min(poll_s, deadline - time.monotonic()), 0.001))
                return "exited"
            except subprocess.TimeoutExpired:
                pass
            tail.poll()
            if bar is not None:
                phase = phases.poll() if tail.last_step == 0 else None
                bar.update(step=tail.last_step, metric=tail.headline, phase=phase, phase_since=phases.since)
            if time.monotonic() >= deadline:
                return "timeout"
    except HarnessTerminated:
        return "terminated"
    except KeyboardInterrupt:
        return "interrupted"


def _die_with(harness_pid: int) -> Callable[[], None] | None:
    """A preexec_fn (run in the engine child before exec) that asks Linux for SIGTERM when the
    harness dies; None where there is no prctl. A harness already gone by then: the child exits."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # kept across exec
        if os.getppid() != harness_pid:  # the harness died before the prctl: no signal will come
            os._exit(EXIT_ORPHANED)

    return arm


class HarnessTerminated(KeyboardInterrupt):
    """SIGTERM reached the harness: handled like Ctrl-C, but forwarded to the engine as SIGTERM."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Turns SIGTERM into HarnessTerminated while the engine runs (main thread only: Python's rule)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise HarnessTerminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(proc: subprocess.Popen, outcome: str, *, log: IO[bytes], grace_s: float, timeout_s: float) -> str | None:
    """Ends the whole group for `outcome`; returns the harness's error message, if any."""
    if outcome == "exited":
        leftovers = live_members(proc.pid)
        if leftovers:
            _note(log, f"the engine exited but left {len(leftovers)} process(es) in its group: SIGTERM")
            stop_group(proc, signal.SIGTERM, grace_s)
        return None
    sig = signal.SIGINT if outcome == "interrupted" else signal.SIGTERM
    _note(log, f"{outcome}: sending {sig.name} to the engine (then SIGTERM to what is left of its process group)")
    killed = stop_leader_first(proc, sig, grace_s)
    if killed:
        _note(log, f"still running {grace_s:g} s after {sig.name}: sent SIGKILL")
    how = f"stopped with {sig.name}" + (f", then SIGKILL after {grace_s:g} s" if killed else "")
    if outcome == "timeout":
        return f"time limit of {timeout_s:g} s reached; the engine was {how}"
    if outcome == "terminated":
        return f"the harness received SIGTERM; the engine was {how}"
    return f"interrupted by the user (Ctrl-C); the engine was {how}"


def _finish(
    run_dir: Path, *, outcome: str, exit_code: int | None, start: float, tail: MetricsTail,
    total_steps: int, error: str | None,
) -> LaunchResult:  # fmt: skip
    status = merge_status(
        read_status(run_dir / "status.json"),
        outcome=outcome,
        exit_code=exit_code,
        wall_s=time.monotonic() - start,
        last_step=tail.last_step,
        total_steps=total_steps,
        error=error,
        tail=log_tail(run_dir / "engine.log"),
    )
    write_status(run_dir / "status.json", status)
    return LaunchResult(
        state=status["state"],
        exit_code=exit_code,
        wall_s=status["wall_s"],
        last_step=status["last_step"],
        error=status["error"],
    )


def _note(log: IO[bytes], message: str) -> None:
    """Appends a harness line to engine.log (tagged, so error tails can skip it)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    log.write(f"{HARNESS_PREFIX}{stamp} {message}\n".encode())


def _validate(command: Sequence[str], *, timeout_s: float, total_steps: int, grace_s: float, poll_s: float) -> None:
    if isinstance(command, (str, bytes)) or not command or not all(isinstance(a, (str, os.PathLike)) for a in command):
        raise ValueError(f"command: expected a non-empty list of strings, got {command!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
    if total_steps < 0:
        raise ValueError(f"total_steps: must be >= 0, got {total_steps!r}")
    if grace_s < 0:
        raise ValueError(f"grace_s: must be >= 0, got {grace_s!r}")
    if not poll_s > 0:
        raise ValueError(f"poll_s: must be > 0, got {poll_s!r}")
