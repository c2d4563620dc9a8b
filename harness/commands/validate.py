"""`harness validate [PATHS...]`: resolve, validate and plan every recipe (and its tiny twin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import USER_ERRORS, UsageError
from harness.plan import make_plan
from harness.recipe import find_recipes, load_recipe
from harness.thresholds import load_thresholds


def validate_one(path: Path) -> list[str]:
    """Problems of one recipe at full scale and as its tiny twin; empty when it is sound."""
    problems = []
    for scale in (None, "tiny"):
        label = "tiny twin" if scale else "full scale"
        try:
            resolved = load_recipe(path, scale=scale)
            make_plan(resolved.data)
            thresholds = resolved.data.get("checks", {}).get("thresholds")
            if thresholds:
                load_thresholds(Path(thresholds), hardware=resolved.data["checks"].get("hardware"))
        except USER_ERRORS as error:
            problems.append(f"{label}: {error}")
    return problems


def main(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    for p in paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file or folder")
    recipes = find_recipes(paths)
    if not recipes:
        raise UsageError(f"no recipe found under {', '.join(map(str, paths))}")
    failed = 0
    for recipe in recipes:
        problems = validate_one(recipe)
        if problems:
            failed += 1
            for problem in problems:
                print(f"FAIL {recipe}: {problem}", file=sys.stderr)
        else:
            print(f"ok   {recipe}")
    print(f"{len(recipes) - failed} of {len(recipes)} recipes valid")
    return 2 if failed else 0
