"""Read the reference system's metrics JSON: `{metric: {step: value}}`, steps written as strings.

This is what the reference's nightly scripts dump from TensorBoard and feed to its check script,
so an external engine that produces it can be checked by our thresholds unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.bounded import BoundedReadError, read_text
from harness.errors import capped_line, shown
from harness.metrics.series import Metrics, MetricsError, as_number
from harness.strict_json import DuplicateKeyError, loads

_STEP = re.compile(r"-?[0-9]{1,18}")


def _parse_step(key: str, where: str) -> int:
    text = key.strip()
    if not _STEP.fullmatch(text):
        raise MetricsError(f"{where}: step {shown(key)} is not an integer")
    return int(text)


def read_reference_json(path: str | Path, *, follow_symlinks: bool = True) -> Metrics:
    """Read a `{metric: {step: value}}` JSON file into Metrics. Raises MetricsError naming the file.
    A run dir's own file is read with follow_symlinks=False (harness.bounded); a key set twice
    (a metric, or a step of one) is an error (harness.strict_json)."""
    path = Path(path)
    try:
        data = loads(read_text(path, kind="json", follow_symlinks=follow_symlinks))
    except BoundedReadError as exc:
        raise MetricsError(f"cannot read {exc}") from None
    except DuplicateKeyError as exc:
        raise MetricsError(f"{path}:{exc.line}: duplicate key {shown(exc.key)}") from None
    except ValueError as exc:  # also an integer too long to convert, an object of too many keys
        raise MetricsError(f"{path}: not valid JSON ({capped_line(str(exc), 200)})") from None
    except RecursionError:
        raise MetricsError(f"{path}: nested too deeply") from None
    if not isinstance(data, dict):
        raise MetricsError(f"{path}: expected an object of {{metric: {{step: value}}}}, got {type(data).__name__}")
    rows: dict[str, dict[int, float]] = {}
    keys: list[str] = []
    numbers: list[int] = []
    for name, steps in data.items():
        if not isinstance(steps, dict):
            continue  # a scalar summary beside the series (e.g. a run id): not a step series
        if list(steps) != keys:  # metrics usually share one list of steps: parse it once
            keys = list(steps)
            numbers = [_parse_step(key, f"{path}: metric {shown(name)}") for key in keys]
        values = steps.values()
        if set(map(type, values)) == {float}:
            rows[name] = dict(zip(numbers, values))
        else:
            rows[name] = {s: as_number(v) for s, v in zip(numbers, values)}
    return Metrics.from_rows(rows, source=str(path))
