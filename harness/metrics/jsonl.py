"""Read our engine's metrics.jsonl: one JSON object per step, appended and flushed every step.

A crash can tear the last line (a prefix of it was written, without its newline): that line is
dropped with a note, since every earlier step is intact (`harness check` still fails such a run).
A bad line anywhere else, or a step that does not strictly increase, means the file is corrupt,
and reading it is an error rather than a guess; so is a line that sets a key twice
(harness.strict_json) or is longer than a metrics line can be. The engine cuts the file back to its checkpoint
when it resumes, so a resumed run never repeats a step.

Speed matters (`harness check` answers in well under a second on 10,000 steps x 30 metrics), so
lines with the same keys are turned into columns with C-level zip/map rather than a Python loop
over every value.
"""

from __future__ import annotations

import json
import operator
from pathlib import Path

from harness.bounded import BoundedReadError, decode_text, read_bytes
from harness.errors import capped_line, shown
from harness.metrics.series import Columns, Metrics, MetricsError, as_number
from harness.strict_json import MAX_LINE_BYTES, DuplicateKeyError, TooManyKeysError, loads, long_line


def _step_of(obj: object, path: Path, line: int) -> int:
    if not isinstance(obj, dict):
        raise MetricsError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
    step = obj.get("step")
    if type(step) is float and step.is_integer():
        step = int(step)
    if type(step) is not int:
        raise MetricsError(f"{path}:{line}: 'step' must be an integer, got {shown(step)}")
    return step


def _loads(path: Path, line: int, text: str, *, last_torn: bool) -> object:
    """One line's value. A line that is not JSON is a MetricsError; when `last_torn` (the file's
    last line, without its newline) it may be a torn write instead: _Torn. A duplicate key or
    too many keys is never a tear: the line is whole."""
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        if last_torn:
            raise _Torn from None
        raise MetricsError(f"{path}:{line}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except DuplicateKeyError as exc:
        raise MetricsError(f"{path}:{line}: duplicate key {shown(exc.key)}: a metrics line sets each metric "
                           "once") from None
    except TooManyKeysError as exc:
        raise MetricsError(f"{path}:{line}: {exc}: not a metrics line") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise MetricsError(f"{path}:{line}: not readable as numbers ({capped_line(str(exc), 200)})") from None
    except RecursionError:
        raise MetricsError(f"{path}:{line}: nested too deeply") from None


class _Torn(Exception):  # noqa: N818 - the last line is a torn write, not an error
    pass


def _parse_lines(path: Path, lines: list[str], numbered: list[int], text: str, notes: list[str]) -> list:
    """All lines in one C-level parse; on any error, line by line to find (or forgive) the bad one."""
    try:
        objs = loads("[" + ",".join(lines[i - 1] for i in numbered) + "]")
        if len(objs) == len(numbered):  # else a line held more than one value: find it below
            return objs
    except (ValueError, RecursionError):
        pass
    ends_clean = text.endswith("\n") or not text
    objs = []
    for line in numbered:
        try:
            objs.append(_loads(path, line, lines[line - 1], last_torn=line == numbered[-1] and not ends_clean))
        except _Torn:
            notes.append(f"{path}:{line}: ignored a torn last line (the run stopped mid-write)")
            del numbered[-1]
            break
    return objs


_STEP = operator.itemgetter("step")


def _clean_records(raw: bytes) -> tuple[list[dict], list[int]] | None:
    """The objects and steps of a clean file (what the engine writes) in C-level passes, or None.

    Clean: newline-terminated UTF-8, no blank line, one JSON object per line, each with an
    integer step, steps strictly increasing. The lines become one JSON array with as few copies
    of the file as can be (this is most of `harness check`'s time on a long run). Anything else
    returns None and `_records` reads the file line by line, to forgive a torn last line or to
    name the bad line.
    """
    if not raw.endswith(b"\n"):
        return None
    try:
        array = b"".join((b"[", memoryview(raw.replace(b"\n", b","))[:-1], b"]"))  # 2 copies of the file, not 3
        objs = loads(array.decode("utf-8"))  # strict, as decode_text: no lone surrogates
        steps = list(map(_STEP, objs))
    except (ValueError, RecursionError, TypeError, KeyError):  # bad JSON or UTF-8, a blank line; a non-object; no step
        return None
    if len(objs) != raw.count(b"\n") or (steps and set(map(type, steps)) != {int}):
        return None  # a line held more than one value; a step that is not an int (1.0, true, "1")
    if not all(map(operator.lt, steps, steps[1:])):
        return None
    return objs, steps


def _records(path: Path, raw: bytes, notes: list[str]) -> tuple[list[dict], list[int]]:
    """The parsed objects and their steps, which must strictly increase (the file is append-only)."""
    clean = _clean_records(raw)
    if clean is not None:
        return clean
    try:
        text = decode_text(raw, path)
    except BoundedReadError as exc:
        raise MetricsError(f"cannot read {exc}") from None
    lines = text.split("\n")
    numbered = [index + 1 for index, line in enumerate(lines) if line.strip()]
    objs = _parse_lines(path, lines, numbered, text, notes)
    steps = [_step_of(obj, path, line) for obj, line in zip(objs, numbered)]
    for before, after, line in zip(steps, steps[1:], numbered[1:]):
        if after <= before:
            raise MetricsError(f"{path}:{line}: step {after} after step {before}: "
                               "steps must strictly increase (metrics.jsonl is append-only)")
    return objs, steps


def _uniform_names(objs: list[dict]) -> list[str] | None:
    """The metric names when every line holds the same keys in the same order (what the engine
    writes), else None. The decoder shares one string per key across the file, so comparing
    each line's key list to the first is mostly identity checks."""
    keys = list(objs[0]) if objs else []
    if len(keys) < 2 or not all(map(keys.__eq__, map(list, objs))):
        return None
    return [name for name in keys if name != "step"]


def _by_column(objs: list[dict], steps: list[int], rows: dict[str, dict[int, float]]) -> None:
    """Group lines by their keys and move whole columns at once (steps are unique)."""
    groups: dict[tuple[str, ...], tuple[list[int], list]] = {}
    for obj, step in zip(objs, steps):
        keys = tuple(obj)
        group = groups.get(keys)
        if group is None:
            group = groups[keys] = ([], [])
        group[0].append(step)
        group[1].append(obj.values())
    for keys, (group_steps, values) in groups.items():
        for name, column in zip(keys, zip(*values)):
            if name == "step":
                continue
            if set(map(type, column)) == {float}:
                pairs = zip(group_steps, column)
            else:
                pairs = zip(group_steps, map(as_number, column))
            rows.setdefault(name, {}).update(pairs)


def read_jsonl(path: str | Path, *, follow_symlinks: bool = True) -> Metrics:
    """Read a metrics.jsonl file into Metrics. Raises MetricsError naming file:line.
    A run dir's own file is read with follow_symlinks=False (harness.bounded)."""
    path = Path(path)
    try:
        raw = read_bytes(path, kind="metrics", follow_symlinks=follow_symlinks)
    except BoundedReadError as exc:
        raise MetricsError(f"cannot read {exc}") from None
    long = long_line(raw)
    if long is not None:  # before parsing: the decoder builds a line's object before anything can count its keys
        raise MetricsError(f"{path}:{long}: a line of more than {MAX_LINE_BYTES} bytes (a metrics line is "
                           "a few KiB); not read")
    notes: list[str] = []
    objs, steps = _records(path, raw, notes)
    names = None if notes else _uniform_names(objs)
    if names is not None:
        return Metrics(series=Columns(steps, objs, names), source=str(path))
    rows: dict[str, dict[int, float]] = {}
    _by_column(objs, steps, rows)
    rows.pop("step", None)
    return Metrics.from_rows(rows, source=str(path), notes=tuple(notes))
