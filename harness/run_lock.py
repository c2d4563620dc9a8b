"""A run dir belongs to one live run: `run.lock`, an fcntl lock held while any process of the run lives.

`harness run` and `harness run --resume` take the lock (`hold`) before they write anything and
pass its file descriptor on to the engine (harness/launch/runner.py, `keep_fds`), so the lock is
held by the harness and by the engine, and is free only once both are gone: a harness that was
SIGKILLed leaves its engine holding the run dir, and a second `run`, `--resume` or a second
`harness run --out` of that dir is refused while it lives. (flock belongs to the open file, which
the engine inherits; Ray's processes, started with close_fds, do not hold it.)

An engine that died without a terminal state left status.json saying `running`; whoever next
finds the lock free settles it (`settle_orphan`): the state becomes `failed`, naming why.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from harness.errors import UserError

LOCK_FILE = "run.lock"
ORPHANED = ("the run's processes are gone (nothing holds run.lock) but status.json still said 'running': "
            "the engine and its harness died without recording an outcome (a SIGKILL, the OOM killer)")

__all__ = ["LOCK_FILE", "RunDirLocked", "hold", "is_locked", "settle_orphan"]


class RunDirLocked(UserError):
    """Another live run holds the run dir."""


def _open(run_dir: Path) -> int:
    return os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(fd: int) -> str:
    """`started by pid N` (the harness that took it), or `held by a live process`."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"started by pid {text}" if text.isdigit() else "held by a live process"


@contextlib.contextmanager
def hold(run_dir: Path) -> Iterator[int]:
    """Holds the run dir's lock for the duration; yields its file descriptor (to pass to the engine).

    Raises:
        RunDirLocked: a live run holds it (exit 2, naming the holder's pid).
    """
    fd = _open(run_dir)
    try:
        if not _try_lock(fd):
            raise RunDirLocked(f"{run_dir}: in use by a live run ({LOCK_FILE} {_holder(fd)}); "
                               "wait for it to end")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)  # the lock goes with the last descriptor of this open file: ours or the engine's


def is_locked(run_dir: Path) -> bool:
    """Whether a live process holds the run dir's lock (a run dir without run.lock: no)."""
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return not _try_lock(fd)  # our lock, if taken, goes with the close below
    finally:
        os.close(fd)


def settle_orphan(run_dir: Path) -> bool:
    """status.json says `running` but nothing holds the lock: rewrite it as `failed` (ORPHANED).
    Returns True when it did. Reads without the launcher (`harness check`'s path must not load it)."""
    from harness.bounded import read_json_object  # noqa: PLC0415

    status = read_json_object(run_dir / "status.json", kind="status")
    if not status or status.get("state") != "running" or is_locked(run_dir):
        return False
    from harness.launch.status import write_status  # noqa: PLC0415 - an orphan only, never on a sound run's path

    write_status(run_dir / "status.json", {**status, "state": "failed", "error": ORPHANED,
                                           "harness": {"outcome": "orphaned", "engine_wrote": {"state": "running"}}})
    return True
