"""Read our engine's metrics.jsonl: one JSON object per step, appended and flushed every step.

A crash can tear the last line (a prefix of it was written, without its newline): that line is
dropped with a note, since every earlier step is intact. A bad line anywhere else means the file
is corrupt, and reading it is an error rather than a guess.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.metrics.series import Metrics, MetricsError, as_number

_MAX_NOTES = 5


def _step_of(obj: object, where: str) -> int:
    if not isinstance(obj, dict):
        raise MetricsError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    step = obj.get("step")
    if type(step) is float and step.is_integer():
        step = int(step)
    if type(step) is not int:
        raise MetricsError(f"{where}: 'step' must be an integer, got {step!r}")
    return step


def read_jsonl(path: str | Path) -> Metrics:
    """Read a metrics.jsonl file into Metrics. Raises MetricsError naming file:line."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MetricsError(f"{path}: cannot read: {exc}") from None
    lines = text.split("\n")
    ends_clean = text.endswith("\n") or not text
    last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    rows: dict[str, dict[int, float]] = {}
    seen: dict[int, int] = {}
    notes: list[str] = []
    loads = json.loads
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path}:{index + 1}"
        try:
            obj = loads(line)
        except ValueError as exc:
            if index == last_index and not ends_clean:
                notes.append(f"{where}: ignored a torn last line (the run stopped mid-write)")
                break
            raise MetricsError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        step = _step_of(obj, where)
        if step in seen and len(notes) < _MAX_NOTES:
            notes.append(f"{where}: step {step} logged again (first at line {seen[step]}); the later value is used")
        seen[step] = index + 1
        for name, value in obj.items():
            if type(value) is not float:  # the common case inline: this loop runs steps x metrics times
                value = as_number(value)
                if value is None:
                    continue
            series = rows.get(name)
            if series is None:
                series = rows[name] = {}
            series[step] = value
    rows.pop("step", None)
    return Metrics.from_rows(rows, source=str(path), notes=tuple(notes))
