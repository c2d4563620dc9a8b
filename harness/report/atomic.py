"""Atomic file writes: a reader (or a harness killed mid-write) never sees half a file.

Every run-dir file the harness writes goes through here: the bytes land in a temporary file in
the same directory, are flushed to disk, and then replace the target with `os.replace`.

The file is made as `open()` makes one (0666 less the umask: 0644 under the usual 022), like the
engine's metrics.jsonl: reports and verdicts were 0600, unreadable to others on a shared artifact
host. Nothing written through here is meant to hold a secret (recipe.yaml is redacted; secret
values are scrubbed from status.json and engine.log after a run); the one file that does, a Ray
job's env file, is made 0600 on its own (harness/launch/ray_job.py `hand_over`).
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~2 ms on `harness check`)
if TYPE_CHECKING:
    from typing import IO, Any


def write_atomic(path: Path, write: Callable[[IO[bytes]], None], *, follow_parent: bool = True) -> Path:
    """Calls `write(file)` on a temporary file next to `path`, then renames it onto `path`.

    Both happen in the directory opened once (a dir fd), and the rename replaces a symlink at
    `path` rather than writing through it. With follow_parent=False that directory must not be
    a symlink itself: a run dir's `plots -> /elsewhere` got PNGs written (and overwritten) there.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dir_fd = _open_dir(path.parent, follow=follow_parent)
    try:
        fd, tmp = _temp_beside(path.name, dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:  # renamed already, or never made
                pass
            raise
    finally:
        os.close(dir_fd)
    return path


def _open_dir(path: Path, *, follow: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
            raise OSError(exc.errno, f"{path} is a symlink: nothing is written through it") from None
        raise


def _temp_beside(name: str, dir_fd: int) -> tuple[int, str]:
    """A new file `.NAME.<random>.tmp` in the directory `dir_fd`, opened for writing, mode 0666 less
    the umask: what tempfile.mkstemp makes (but for its 0600), without importing tempfile and random
    on every `harness check`."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, flags, 0o666, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name}")


def write_text_atomic(path: Path, text: str) -> Path:
    """Writes `text` as UTF-8, atomically."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda f: f.write(data))


def jsonable(value: Any) -> Any:
    """Turns `value` into something strict JSON can hold.

    Non-finite floats become the strings "nan", "inf", "-inf" (strict JSON has no NaN, and a
    diverged loss is exactly the value a report must not lose); tuples become lists; unknown
    objects (paths, enums) become their `str`.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


def write_json_atomic(path: Path, data: Any) -> Path:
    """Writes `data` as indented strict JSON (see `jsonable`), atomically."""
    text = json.dumps(jsonable(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
    return write_text_atomic(path, text)
