"""No `assert` guards the data path: it vanishes under `python -O` (STYLE.md, issue 12)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RL = Path(__file__).resolve().parents[2] / "rl"
GUARDED = ["data", "workers", "algorithms", "models", "backends"]


@pytest.mark.parametrize("folder", GUARDED)
def test_no_assert_statements(folder: str) -> None:
    found = [f"{path.relative_to(RL.parent)}:{node.lineno}"
             for path in sorted((RL / folder).rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Assert)]
    assert not found, f"raise a named error instead (rl.data.DataIntegrityError for rows): {found}"
