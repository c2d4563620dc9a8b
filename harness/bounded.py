"""Bounded reading: every file the harness reads goes through here.

A run dir, a recipe or a thresholds file is input we do not control. A FIFO in its place would
block forever, /dev/zero would fill memory, a symlink to a device would do either. So we open
only regular files, without blocking, and read at most a cap's worth; anything else is a
`BoundedReadError` with one line that names the file and why. A run dir's own files are read
with `follow_symlinks=False` (O_NOFOLLOW): a metrics.jsonl linked to another run's passed as
this run's.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from harness.strict_json import loads

__all__ = ["BoundedReadError", "CAPS", "decode_text", "read_bytes", "read_json_object", "read_text"]

MiB = 1 << 20
# Caps per kind of file, generous for the largest honest file of each kind.
CAPS = {
    "recipe": 1 * MiB,          # a recipe is a few KiB
    "thresholds": 1 * MiB,
    "status": 1 * MiB,          # status.json: a few hundred bytes
    "json": 16 * MiB,           # result.json, plan.json, env.json, a reference metrics.json
    "invariants": 256 * MiB,    # one record per dispatch per step
    "metrics": 512 * MiB,       # metrics.jsonl of a long run with many series
    "events": 512 * MiB,        # TensorBoard event files
    "log": 64 * MiB,            # engine.log / harness.log tails
}


class BoundedReadError(OSError):
    """A file that is not a regular file, is too large, or cannot be read."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_bytes(path: str | os.PathLike, *, kind: str, follow_symlinks: bool = True) -> bytes:
    """The whole content of regular file `path`, at most CAPS[kind] bytes, or BoundedReadError.

    With follow_symlinks=False a symlink in `path`'s last part is refused (a run dir's files).
    """
    cap = CAPS[kind]
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and exc.errno == errno.ELOOP:
            raise BoundedReadError(path, "a symlink: a run dir's files are read as they are, never "
                                         "followed elsewhere") from None
        raise BoundedReadError(path, exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BoundedReadError(path, f"not a regular file ({_kind_of(info.st_mode)})")
        if info.st_size > cap:
            raise BoundedReadError(path, f"larger than the {cap} byte cap for a {kind} file ({info.st_size} bytes)")
        chunks, total = [], 0
        size = info.st_size + 1  # the whole file in one read (then b"".join copies nothing), 1 MiB at a time after
        while True:
            chunk = os.read(fd, min(max(size, 1 * MiB) if not chunks else 1 * MiB, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:  # grew while we read it
                raise BoundedReadError(path, f"larger than the {cap} byte cap for a {kind} file")
        return b"".join(chunks)
    except OSError as exc:
        if isinstance(exc, BoundedReadError):
            raise
        raise BoundedReadError(path, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, *, kind: str, errors: str = "strict", follow_symlinks: bool = True) -> str:
    """`read_bytes` decoded as UTF-8; undecodable bytes are a BoundedReadError unless `errors`."""
    return decode_text(read_bytes(path, kind=kind, follow_symlinks=follow_symlinks), path, errors=errors)


def decode_text(raw: bytes, path: str | os.PathLike, *, errors: str = "strict") -> str:
    """`raw` (read from `path`) decoded as UTF-8, as `read_text` does."""
    try:
        return raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BoundedReadError(f"{Path(path)}:{line}", f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None


def read_json_object(path: str | os.PathLike, *, kind: str) -> dict | None:
    """The JSON object in run-dir file `path`, or None when it is missing, unreadable, a symlink,
    not JSON (a duplicate key included: harness.strict_json) or not an object.

    For readers that report on a run (history, nightly, the launcher's status merge) and must
    not crash on a damaged file; the checker reads status.json itself, to fail with the reason.
    """
    try:
        data = loads(read_text(path, kind=kind, follow_symlinks=False))
    except (OSError, ValueError, RecursionError):  # BoundedReadError is an OSError
        return None
    return data if isinstance(data, dict) else None


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"
