"""The errors a user can cause: the CLI reports each as one line with exit code 2.

Every such error type subclasses `UserError`, defined here, so this module imports nothing and
no list of types has to be kept in step with the packages that raise them. (It used to import
each package's error type to gather them, which made importing `UsageError` load the recipe
loader, the planner and the preflight, and made harness.preflight import harness.engines late
to break the cycle.)
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice


class UserError(Exception):
    """Something the user gave cannot be used: a recipe, an option, a thresholds file, a metrics file."""


class UsageError(UserError):
    """A command was given something it cannot use (a missing run dir, a bad option value)."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError,)


SHOWN_CHARS = 80   # how much of a value an error message repeats
MAX_LINE = 1000    # the longest error line the CLI prints (the value, its file:line and why)


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)`, cut to about `limit` characters without building the whole repr first.

    An error names the value at fault, but the value is input we do not control: a 1 MB check
    name, an alias-expanded list or a 10**5000 integer must not become a 1 MB error line (or a
    MemoryError while formatting it).
    """
    if isinstance(value, str):
        text = repr(value[:limit])
        return text if len(value) <= limit else f"{text[:-1]}...{text[-1]} ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * limit:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if limit < 8:
        return "..."
    if isinstance(value, dict):
        parts = [f"{shown(k, limit // 2)}: {shown(v, limit // 2)}" for k, v in islice(value.items(), 4)]
        return _cut("{" + ", ".join(parts) + (", ..." if len(value) > 4 else "") + "}", limit)
    if isinstance(value, (list, tuple)):
        parts = [shown(item, limit // 2) for item in value[:4]]
        return _cut("[" + ", ".join(parts) + (", ..." if len(value) > 4 else "") + "]", limit)
    return _cut(repr(value), limit)


def capped_line(text: str, limit: int = MAX_LINE) -> str:
    """`text` as one line of at most `limit` characters: the CLI's last bound on what it echoes."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 20] + f"... ({len(line)} characters)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dotted(keys: Iterable[object]) -> str:
    """("policy", "parallel", "tp") -> "policy.parallel.tp"; list indices as "[1]"; a long key capped."""
    text = ""
    for key in keys:
        if isinstance(key, int):
            text += f"[{key}]"
        else:
            part = str(key)
            text += ("." if text else "") + (part if len(part) <= SHOWN_CHARS else shown(part))
    return text
