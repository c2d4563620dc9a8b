"""Read the reference system's metrics JSON: `{metric: {step: value}}`, steps written as strings.

This is what the reference's nightly scripts dump from TensorBoard and feed to its check script,
so an external engine that produces it can be checked by our thresholds unchanged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.bounded import BoundedReadError, read_text
from harness.metrics.series import Metrics, MetricsError, as_number

_STEP = re.compile(r"-?[0-9]{1,18}")


def _parse_step(key: str, where: str) -> int:
    text = key.strip()
    if not _STEP.fullmatch(text):
        raise MetricsError(f"{where}: step {key!r} is not an integer")
    return int(text)


def read_reference_json(path: str | Path) -> Metrics:
    """Read a `{metric: {step: value}}` JSON file into Metrics. Raises MetricsError naming the file."""
    path = Path(path)
    try:
        data = json.loads(read_text(path, kind="json"))
    except BoundedReadError as exc:
        raise MetricsError(f"cannot read {exc}") from None
    except ValueError as exc:  # also an integer too long to convert
        raise MetricsError(f"{path}: not valid JSON ({exc})") from None
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
            numbers = [_parse_step(key, f"{path}: metric {name!r}") for key in keys]
        values = steps.values()
        if set(map(type, values)) == {float}:
            rows[name] = dict(zip(numbers, values))
        else:
            rows[name] = {s: as_number(v) for s, v in zip(numbers, values)}
    return Metrics.from_rows(rows, source=str(path))
