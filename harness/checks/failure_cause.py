"""The cause of a failed run in one line, from status.json's `error`.

A worker crash reaches status.json as `RuntimeError: worker policy-1 failed: ` followed by Ray's
rendering of the worker's exception: a coloured `ray::PolicyWorker.step() (pid=...)` header, the
traceback's frames, and only then `ValueError: ...`, the line a person needs. Cut at a width, the
message showed the escapes and the header and lost the cause (2026-12-01). Here the escapes go,
and a Ray task error is told by its first exception line; the whole text stays in engine.log.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_HEADER = re.compile(r"(?:^|: )(ray::\S+)")  # where rl.cluster puts Ray's rendering
_MAX_CHARS = 4000  # an external engine's error is its own text; a verdict stays a readable size


def strip_ansi(text: str) -> str:
    """`text` without terminal colour codes (`ESC[36m` ... `ESC[39m`)."""
    return _ANSI.sub("", text)


def failure_cause(error: str) -> str:
    """The error without colour codes; a Ray task error cut to the first line of its exception."""
    text = strip_ansi(error).strip()
    header = _RAY_HEADER.search(text)
    if header is not None:
        exception = _first_exception_line(text[header.end():].splitlines()[1:])
        if exception is not None:
            return f"{text[:header.start(1)]}{exception}"
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 1] + "…"


def _first_exception_line(lines: list[str]) -> str | None:
    """After a traceback's frames (indented), the first line that is not a frame: `Type: message`.

    With chained exceptions that is the first raised, the root of the chain.
    """
    for line in lines:
        if line.strip() and not line[0].isspace() and not line.startswith("Traceback ("):
            return line.strip()
    return None
