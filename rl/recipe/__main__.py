"""Write harness/schema/recipe.schema.json and the key tables of docs/recipes.md from the config
dataclasses: `python -m rl.recipe` (run from the repository root; `--check` writes nothing and
exits 1 when either file differs from what it would write)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rl.recipe.generate import generated

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.recipe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is not what it would write")
    args = parser.parse_args(argv)
    stale = []
    for rel, text in generated(ROOT).items():
        path = ROOT / rel
        if path.read_text(encoding="utf-8") != text:
            stale.append(rel)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    for rel in stale:
        print(f"{'stale' if args.check else 'wrote'}: {rel}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
