"""A thresholds file as text, in the shipped files' layout: expr double-quoted, why folded.

What is written is read back by load_thresholds before calibrate proves it, so a check that
would not load the same is caught there, not in CI.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence

import yaml

from harness.thresholds import ThresholdCheck
from harness.yamlsafe import reads_as_string

WIDTH = 100


def scalar(text: str) -> str:
    """text as a YAML scalar: plain when the project's loader reads it back as that string (`1e3`
    is a float there, though PyYAML calls it a string), else double-quoted."""
    try:
        plain = (reads_as_string(text) and yaml.safe_load(text) == text and text == text.strip()
                 and "#" not in text and ": " not in text)
    except yaml.YAMLError:
        plain = False
    return text if plain else json.dumps(text)


def _check(check: ThresholdCheck) -> list[str]:
    why = textwrap.wrap(" ".join(check.why.split()), width=WIDTH - 6, break_long_words=False,
                        break_on_hyphens=False)
    lines = [f"  - name: {scalar(check.name)}", f"    expr: {json.dumps(check.expr)}", "    why: >-"]
    lines += [f"      {line}" for line in why]
    lines.append(f"    since: {check.since.isoformat()}")
    if check.hardware is not None:
        lines.append(f"    hardware: [{', '.join(scalar(h) for h in check.hardware)}]")
    return lines


def render(recipe: str, checks: Sequence[ThresholdCheck], *, header: Sequence[str] = ()) -> str:
    lines = [f"# {' '.join(line.split())}".rstrip() for line in header]
    lines += [f"recipe: {scalar(recipe)}", "checks:"]
    for check in checks:
        lines += _check(check)
    return "\n".join(lines) + "\n"
