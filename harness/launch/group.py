"""The engine's process group: signal it, wait until it is empty, and reap what we adopted.

The engine runs as the leader of its own session and process group, so one `killpg` reaches it
and every helper it forked (data loaders, Ray drivers, a child that ignores SIGTERM). When the
leader dies first its children are re-parented; many container init processes (PID 1) never reap
them, leaving zombies. So while the engine runs the harness makes itself a *child subreaper*
(Linux `prctl`): orphans of the engine come back to us and `reap_adopted` collects them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


@contextlib.contextmanager
def child_subreaper() -> Iterator[bool]:
    """Makes this process a child subreaper for the duration; yields whether that worked."""
    if not sys.platform.startswith("linux"):
        yield False
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        ok = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        yield False
        return
    try:
        yield ok
    finally:
        if ok and not before.value:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def group_members(pgid: int) -> list[tuple[int, int, str]]:
    """(pid, ppid, state) of every process in group `pgid`, zombies included (Linux /proc)."""
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return _members_without_proc(pgid)
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue  # exited while we looked
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid:
            members.append((int(entry), int(fields[1]), fields[0]))
    return members


def _members_without_proc(pgid: int) -> list[tuple[int, int, str]]:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    return [(pgid, -1, "?")]


def live_members(pgid: int) -> list[int]:
    """Pids in group `pgid` that are not zombies: the ones a signal can still stop."""
    return [pid for pid, _, state in group_members(pgid) if state != "Z"]


def reap_adopted(pgid: int, leader: int) -> None:
    """Collects exit statuses of the group's processes that were re-parented to us."""
    me = os.getpid()
    for pid, ppid, state in group_members(pgid):
        if ppid == me and pid != leader and state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def signal_group(pgid: int, sig: int) -> bool:
    """Sends `sig` to the group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_group_empty(proc: subprocess.Popen, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Waits until no live process is left in the leader's group; True if that happened in time."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc.poll()
        reap_adopted(proc.pid, proc.pid)
        if proc.returncode is not None and not live_members(proc.pid):
            reap_adopted(proc.pid, proc.pid)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def stop_group(proc: subprocess.Popen, sig: int, grace_s: float) -> bool:
    """Sends `sig` to the group, waits `grace_s`, then SIGKILLs what is left.

    Returns True when SIGKILL was needed. A second Ctrl-C during the grace skips the wait.
    """
    killed = False
    try:
        signal_group(proc.pid, sig)
        if wait_group_empty(proc, grace_s):
            return False
    except KeyboardInterrupt:
        pass
    killed = signal_group(proc.pid, signal.SIGKILL)
    wait_group_empty(proc, 10.0)
    proc.wait()
    return killed
