"""JSON as the run dir's readers must take it: a duplicate key is an error, not "the last one wins".

Python's json module keeps the last of two equal keys, so `{"state": "failed", ...,
"state": "completed"}` in status.json, `{"train/loss": NaN, ..., "train/loss": 0.25}` in
metrics.jsonl or `{"ok": false, ..., "ok": true}` in invariants.jsonl read as a clean run.
Our engine never writes one; an external engine, two writers or a hand edit can. Every reader
of a run dir parses through `loads`, which refuses them and says on which line, and bounds the
keys of one object (a line of 30 M distinct keys took 64 s and 5.2 GB; its readers also bound
the line's length before parsing, since the decoder builds an object before we see it).
"""

from __future__ import annotations

import json
import re

from harness.errors import shown

__all__ = ["MAX_KEYS", "MAX_LINE_BYTES", "DuplicateKeyError", "TooManyKeysError", "long_line", "loads"]

MAX_KEYS = 10_000   # keys in one JSON object; a metrics line of our engine has about 30
MAX_LINE_BYTES = 1 << 20   # a line of a .jsonl file may be 1-2 MiB (`long_line`); ours are < 4 KiB


class DuplicateKeyError(ValueError):
    """An object that sets one key twice. `line` is 1-based within the parsed text."""

    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line
        super().__init__(f"duplicate key {shown(key)}")


class TooManyKeysError(ValueError):
    """An object with more than MAX_KEYS keys."""

    def __init__(self, count: int) -> None:
        super().__init__(f"an object with {count} keys (at most {MAX_KEYS})")


class _Duplicate(Exception):  # noqa: N818 - internal signal, turned into DuplicateKeyError with its line
    def __init__(self, key: str) -> None:
        self.key = key


def _object(pairs: list[tuple[str, object]]) -> dict:
    if len(pairs) > MAX_KEYS:
        raise TooManyKeysError(len(pairs))
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def loads(text: str) -> object:
    """`json.loads(text)`, refusing a duplicate key (DuplicateKeyError) and an object of more than
    MAX_KEYS keys (TooManyKeysError); both are ValueErrors, as a JSONDecodeError is."""
    try:
        return _DECODER.decode(text)
    except _Duplicate as exc:
        raise DuplicateKeyError(exc.key, _line_of_duplicate(text, exc.key)) from None


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?|[{}\[\]]')


def _line_of_duplicate(text: str, key: str) -> int:
    """The line of the second `key` in one object (only on the error path: a Python-level scan)."""
    stack: list[set[str] | None] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token == "{":
            stack.append(set())
        elif token == "[":
            stack.append(None)
        elif token in ("]", "}"):
            if stack:
                stack.pop()
        elif match.group(1) and stack and stack[-1] is not None:
            name = json.loads(token[: token.rindex('"') + 1])
            if name in stack[-1] and name == key:
                return text.count("\n", 0, match.start()) + 1
            stack[-1].add(name)
    return 1


def long_line(data: bytes | str, limit: int = MAX_LINE_BYTES) -> int | None:
    """The 1-based line of a line of at least `limit` bytes, if `data` may hold one, else None.

    Looks for a newline in each aligned window of `limit` bytes (len(data) / limit C-level
    finds, no copy): a window without one lies inside a line of at least `limit` bytes, and
    every line of 2 * `limit` bytes or more contains such a window. So lines under `limit` pass,
    lines from 2 * `limit` are found, and the reader parses no line past that.
    """
    newline = b"\n" if isinstance(data, bytes) else "\n"
    for start in range(0, len(data) - limit + 1, limit):
        if data.find(newline, start, start + limit) == -1:
            return data.count(newline, 0, start) + 1
    return None
