"""`harness import reference PATH [--out DIR] [--write]`: turn a checkout of the reference
system's test suites into our recipes, thresholds and suites (docs/import.md). Dry-run by
default: prints the files it would write and the report; `--write` writes them under DIR."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UsageError
from harness.importer import import_reference


def main(args: argparse.Namespace) -> int:
    root = Path(args.path)
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder (give a checkout of the reference system)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a folder")
    result = import_reference(root)
    verb = "wrote" if args.write else "would write"
    for rel in sorted(result.files):
        if args.write:
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.files[rel], encoding="utf-8")
        print(f"{verb} {out / rel} ({len(result.files[rel].encode())} bytes)")
    print()
    print(result.markdown, end="")
    if not args.write:
        print(f"\ndry run: nothing written; add --write to write {len(result.files)} files under {out}")
    return 0
