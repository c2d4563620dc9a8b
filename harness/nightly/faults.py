"""What a fault entry did, against what it expects: the verdict, lost data, leftover processes.

A fault entry (recipes/suites/faults.yaml) plants one fault and says which verdict it must
produce (`expect`). Three things are judged besides the verdict, for every fault entry:

* data lost: the runner reads metrics.jsonl every POLL_S while the run goes on (and right
  before it sends a signal), so every step line that was ever whole on disk is known; a step
  seen then and missing afterwards is lost data. Duplicate or out-of-order steps also count.
* leftover processes: every process the run starts inherits TOKEN_ENV from `harness run`
  (Ray's daemons and workers included); one still alive LEFTOVER_WAIT_S after `harness run`
  exited was left behind. It is named in the verdict, then killed by its pid.
* the verdict: harness exit code, status.json state, engine exit code, dead worker, error text,
  and the set of failed checks, each compared when the entry gives it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bounded import read_json_object
from harness.suites.model import Expect

TOKEN_ENV = "HARNESS_NIGHTLY_TOKEN"
POLL_S = 0.2
LEFTOVER_WAIT_S = 15.0


def metric_steps(path: Path) -> list[int]:
    """The steps of the whole lines of a metrics.jsonl, in file order (a torn last line is not whole)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    steps = []
    for line in data.split(b"\n")[:-1]:  # the part after the last newline is not a whole line yet
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            steps.append(record["step"])
    return steps


@dataclass
class StepWatch:
    """Every step ever seen whole in a run's metrics.jsonl."""

    path: Path
    seen: set[int] = field(default_factory=set)

    def poll(self) -> int:
        """Read the file; returns the highest step in it now (0 when none)."""
        steps = metric_steps(self.path)
        self.seen.update(steps)
        return max(steps, default=0)


def data_problems(seen: Iterable[int], final: list[int]) -> tuple[list[int], list[str]]:
    """(steps lost, problems): seen steps missing at the end, duplicates, gaps or disorder."""
    lost = sorted(set(seen) - set(final))
    problems = []
    if lost:
        problems.append(f"data lost: steps {lost} were in metrics.jsonl during the run and are gone")
    if final != list(range(1, len(final) + 1)):
        problems.append(f"metrics.jsonl steps are not 1..{len(final)} exactly once each: {final}")
    return lost, problems


def processes_with(token: str) -> list[tuple[int, str]]:
    """(pid, command) of the processes whose environment holds TOKEN_ENV=token."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[-1].split()[0]
        except (OSError, IndexError):
            continue  # gone, or not ours to read
        if state != b"Z":
            found.append((int(entry), command[:120]))
    return found


def leftovers(token: str, *, wait_s: float | None = None) -> list[str]:
    """Processes of the run still alive `wait_s` (LEFTOVER_WAIT_S) after it ended; they are killed, and returned."""
    deadline = time.monotonic() + (LEFTOVER_WAIT_S if wait_s is None else wait_s)
    while (found := processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # noqa: BLE001 - it ended meanwhile
            pass
    return [f"{pid} {command}" for pid, command in found]


def observe(run_dir: Path, *, exit_code: int) -> dict[str, Any]:
    """The verdict of a run dir as an Expect compares it."""
    status = read_json_object(run_dir / "status.json", kind="status") or {}
    result = read_json_object(run_dir / "result.json", kind="json")
    try:
        failed = None if result is None else sorted(str(v["name"]) for v in result.get("verdicts", [])
                                                    if not v.get("ok"))
    except (KeyError, TypeError, AttributeError):
        failed = None
    return {"exit": exit_code, "state": status.get("state"), "engine_exit": status.get("exit_code"),
            "dead_worker": status.get("dead_worker"), "failed_checks": failed,
            "error": (status.get("error") or "")[:500]}


def verdict_problems(expect: Expect, seen: dict[str, Any]) -> list[str]:
    """Where the observed verdict differs from the expected one (empty: it is right)."""
    problems = []
    for key in ("exit", "state", "engine_exit", "dead_worker"):
        want = getattr(expect, key)
        if want is not None and seen[key] != want:
            problems.append(f"{key}: expected {want!r}, got {seen[key]!r}")
    if expect.failed_checks is not None and seen["failed_checks"] != sorted(expect.failed_checks):
        problems.append(f"failed_checks: expected {sorted(expect.failed_checks)}, got {seen['failed_checks']}")
    if expect.error_contains is not None and expect.error_contains not in seen["error"]:
        problems.append(f"error: expected it to contain {expect.error_contains!r}, got {seen['error']!r}")
    return problems


def expectation(expect: Expect) -> str:
    """The expected verdict in a few words, for the summary."""
    parts = [f"exit {expect.exit}"]
    parts += [f"{k} {v}" for k, v in (("state", expect.state), ("engine exit", expect.engine_exit),
                                      ("dead", expect.dead_worker)) if v is not None]
    if expect.failed_checks is not None:
        parts.append("failed " + (", ".join(expect.failed_checks) or "none"))
    if expect.error_contains:
        parts.append(f"error ~ {expect.error_contains!r}")
    return "; ".join(parts)
