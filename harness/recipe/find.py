"""Which YAML files under a folder are recipes (for `harness validate` and CI).

The rule, also in docs/recipes.md: every `*.yaml` below the given folders, except
* anything under a folder named `suites` (suite files list recipes, they are not recipes), and
* any file or folder whose name starts with `_` or `.` (shared `defaults:` fragments such as
  `recipes/_base/cpu.yaml`, which are not complete recipes on their own).
A file named explicitly is always taken, whatever its name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from harness.recipe.errors import RecipeError

SKIP_DIRS = frozenset({"suites"})


def is_recipe_path(path: Path, root: Path) -> bool:
    """True if `path` (a .yaml file below `root`) passes the rule above."""
    parts = path.relative_to(root).parts
    if any(part.startswith(("_", ".")) for part in parts):
        return False
    return not any(part in SKIP_DIRS for part in parts[:-1])


def find_recipes(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Recipe files under `paths` (files or folders), sorted, without duplicates."""
    found: set[Path] = set()
    for item in paths:
        root = Path(item)
        if root.is_dir():
            found.update(p for p in root.rglob("*.yaml") if p.is_file() and is_recipe_path(p, root))
        elif root.exists():   # a file, or a FIFO/device named by hand: the loader says which
            found.add(root)
        else:
            raise RecipeError("no such file or folder", where=str(root))
    return sorted(found)
