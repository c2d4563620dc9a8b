"""docs/architecture.md describes the shape with one row per Python file of the folders it names
(its "Layout" section): a file without a row, or a row naming a file that is gone, fails here, so
the table cannot drift from the tree. `__init__.py` files are left out: the doc gives a row only to
the few that do more than re-export."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
FOLDERS = ("harness", "rl", "peers", "bench")  # the folders the Layout section says it covers


def _source_files() -> set[str]:
    """The tracked .py files (git's list: staged wheels and scratch files under bench/.work are not source)."""
    listed = subprocess.run(["git", "ls-files", "--", *FOLDERS], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return {p for p in listed if p.endswith(".py") and not p.endswith("__init__.py")}


def rows(text: str) -> set[str]:
    """Every path in backticks in the first cell of a table row (a row may name several files)."""
    out = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            out.update(re.findall(r"`([^`]+)`", line.split(" | ", 1)[0]))
    return out


def test_every_source_file_has_a_row() -> None:
    files = _source_files()
    assert len(files) > 200  # the walk found the source
    missing = sorted(files - rows(DOC.read_text(encoding="utf-8")))
    assert missing == [], "files without a row `| `path` |` in docs/architecture.md:\n  " + "\n  ".join(missing)


def test_every_row_names_a_file_that_exists() -> None:
    under = tuple(f"{folder}/" for folder in FOLDERS)
    named = {r for r in rows(DOC.read_text(encoding="utf-8")) if r.endswith(".py") and r.startswith(under)}
    gone = sorted(r for r in named if not (ROOT / r).is_file())
    assert gone == [], "rows in docs/architecture.md naming no file:\n  " + "\n  ".join(gone)


def test_rows_reads_first_cells_only() -> None:
    """The check itself: a path in a later cell, or outside a table, is not a row."""
    text = ("| `rl/a.py`, `rl/b.py` | reads `rl/c.py` |\n"
            "see `rl/d.py`\n"
            "| file | one job |\n")
    assert rows(text) == {"rl/a.py", "rl/b.py"}
