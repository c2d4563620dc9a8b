"""Read our engine's metrics.jsonl: one JSON object per step, appended and flushed every step.

A crash can tear the last line (a prefix of it was written, without its newline): that line is
dropped with a note, since every earlier step is intact. A bad line anywhere else means the file
is corrupt, and reading it is an error rather than a guess.

Speed matters (`harness check` answers in well under a second on 10,000 steps x 30 metrics), so
lines with the same keys are turned into columns with C-level zip/map rather than a Python loop
over every value.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.metrics.series import Metrics, MetricsError, as_number

_MAX_NOTES = 5


def _step_of(obj: object, path: Path, line: int) -> int:
    if not isinstance(obj, dict):
        raise MetricsError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
    step = obj.get("step")
    if type(step) is float and step.is_integer():
        step = int(step)
    if type(step) is not int:
        raise MetricsError(f"{path}:{line}: 'step' must be an integer, got {step!r}")
    return step


def _parse_lines(path: Path, lines: list[str], numbered: list[int], text: str, notes: list[str]) -> list:
    """All lines in one C-level parse; on any error, line by line to find (or forgive) the bad one."""
    try:
        objs = json.loads("[" + ",".join(lines[i - 1] for i in numbered) + "]")
        if len(objs) == len(numbered):  # else a line held more than one value: find it below
            return objs
    except ValueError:
        pass
    ends_clean = text.endswith("\n") or not text
    objs = []
    for line in numbered:
        try:
            objs.append(json.loads(lines[line - 1]))
        except ValueError as exc:
            if line == numbered[-1] and not ends_clean:
                notes.append(f"{path}:{line}: ignored a torn last line (the run stopped mid-write)")
                del numbered[-1]
                break
            raise MetricsError(f"{path}:{line}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    return objs


def _records(path: Path, text: str, notes: list[str]) -> tuple[list[dict], list[int], list[int]]:
    """The parsed objects, their steps and their 1-based line numbers."""
    lines = text.split("\n")
    numbered = [index + 1 for index, line in enumerate(lines) if line.strip()]
    objs = _parse_lines(path, lines, numbered, text, notes)
    steps = [_step_of(obj, path, line) for obj, line in zip(objs, numbered)]
    return objs, steps, numbered


def _repeated_steps(path: Path, steps: list[int], line_numbers: list[int], notes: list[str]) -> bool:
    if len(set(steps)) == len(steps):
        return False
    first_line: dict[int, int] = {}
    for step, line in zip(steps, line_numbers):
        if step in first_line and len(notes) < _MAX_NOTES:
            notes.append(f"{path}:{line}: step {step} logged again (first at line {first_line[step]}); the later value is used")
        first_line.setdefault(step, line)
    return True


def _by_line(objs: list[dict], steps: list[int], rows: dict[str, dict[int, float]]) -> None:
    """The plain loop, in file order, so a step logged twice keeps its later value."""
    for obj, step in zip(objs, steps):
        for name, value in obj.items():
            number = as_number(value)
            if number is not None:
                rows.setdefault(name, {})[step] = number


def _by_column(objs: list[dict], steps: list[int], rows: dict[str, dict[int, float]]) -> None:
    """Group lines by their keys and move whole columns at once (steps are unique here)."""
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
                pairs = ((s, n) for s, v in zip(group_steps, column) if (n := as_number(v)) is not None)
            rows.setdefault(name, {}).update(pairs)


def read_jsonl(path: str | Path) -> Metrics:
    """Read a metrics.jsonl file into Metrics. Raises MetricsError naming file:line."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MetricsError(f"{path}: cannot read: {exc}") from None
    notes: list[str] = []
    objs, steps, line_numbers = _records(path, text, notes)
    rows: dict[str, dict[int, float]] = {}
    if _repeated_steps(path, steps, line_numbers, notes):
        _by_line(objs, steps, rows)
    else:
        _by_column(objs, steps, rows)
    rows.pop("step", None)
    return Metrics.from_rows(rows, source=str(path), notes=tuple(notes))
