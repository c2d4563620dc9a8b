"""`harness show RECIPE [overrides] [--provenance]`: the resolved recipe, as the engine will see it."""

from __future__ import annotations

import argparse

from harness.recipe import format_show, load_recipe


def main(args: argparse.Namespace) -> int:
    resolved = load_recipe(args.recipe, args.overrides, scale=args.scale)
    print(format_show(resolved, provenance=args.provenance), end="")
    return 0
