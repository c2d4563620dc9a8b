"""Whether a path can become a run dir, asked before anything is resolved, planned or launched.

`--out /dev/null`, `--out` an existing file, `run_dir: /dev/null/x` and a 300-character run name
("File name too long") failed at mkdir, after the recipe was planned, as internal errors (exit
3); `--out` holding a newline made a directory whose name breaks every log line that shows it.
`dir_problem` answers each with one line, and never repeats more of the path than `shown` does.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from harness.errors import shown

__all__ = ["MAX_PART_BYTES", "MAX_PATH_BYTES", "dir_problem"]

MAX_PART_BYTES = 255     # NAME_MAX on Linux and macOS
MAX_PATH_BYTES = 4096    # PATH_MAX on Linux


def dir_problem(text: str, *, child_bytes: int = 0, writable: bool = True) -> str | None:
    """Why `text` cannot be (or be made) a directory to write a run into, or None.

    child_bytes: the length of a name that will be made inside it (runs/<name>-<time>-<id>);
    writable: also ask that this user can write there (not for a recipe's `run_dir`, which may
    name a cluster's shared folder that the machine validating it does not have).
    """
    if not text:
        return "is empty"
    if any(unicodedata.category(c) == "Cc" for c in text):
        return f"{shown(text)} holds a control character (a newline, a tab...)"
    raw = os.fsencode(text)
    if len(raw) + child_bytes > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if any(len(part) > MAX_PART_BYTES for part in raw.split(b"/")):
        return f"{shown(text)} has a part longer than {MAX_PART_BYTES} bytes"
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # `~name` of no known user: pathlib cannot find that home
        return f"{shown(text)} names the home of no user known here"
    ancestor = path
    while not os.path.lexists(ancestor):
        ancestor = ancestor.parent
    if ancestor != path and not ancestor.is_dir():
        return f"{shown(text)} cannot be made: {shown(str(ancestor))} is not a directory"
    if ancestor == path and not path.is_dir():
        return f"{shown(text)} exists and is not a directory"
    if writable and not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{shown(text)} cannot be written: {shown(str(ancestor))} is not writable by this user"
    return None
