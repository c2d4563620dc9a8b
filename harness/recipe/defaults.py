"""`defaults:` inheritance: each file merged over the files it names, iteratively and once each.

A recursive walk raised RecursionError on a 1,200-file chain and, re-resolving every file each
time it was named, took exponential time on a diamond (each file naming the next twice: 20 s
at depth 24). Here an explicit stack walks the files, each file is read and resolved once (a
diamond costs one merge per `defaults:` entry), and two caps bound the work: the chain depth
and the number of `defaults:` entries in all, each refused with one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.recipe.errors import Origin, RecipeError, display_path, nearest
from harness.recipe.tree import Tree
from harness.recipe.yamlsafe import load_file

MAX_CHAIN = 32       # files from the recipe down to its deepest default (ours: 2)
MAX_ENTRIES = 256    # `defaults:` entries in all, each one merge (ours: 1 or 2)


@dataclass(kw_only=True)
class _Frame:
    path: Path
    own: Tree
    entries: list[tuple[Path, Origin]]
    next: int = 0
    bases: list[Path] = field(default_factory=list)


def load_chain(path: Path) -> Tree:
    """`path` merged over its `defaults:` (deep merge, in order, the file itself last); `defaults` removed."""
    done: dict[Path, Tree] = {}
    stack = [_open(path, ())]
    num_entries = len(stack[0].entries)
    while stack:
        frame = stack[-1]
        if frame.next == len(frame.entries):
            done[frame.path] = _merged(frame, done)
            stack.pop()
            continue
        target, origin = frame.entries[frame.next]
        chain = tuple(f.path for f in stack)
        if target in chain:
            names = " -> ".join(display_path(p) for p in chain + (target,))
            raise RecipeError(f"defaults cycle: {names}", where=origin.where, key="defaults")
        if target in done:
            frame.next += 1
            continue
        if len(chain) >= MAX_CHAIN:
            raise RecipeError(f"defaults chain deeper than {MAX_CHAIN} files ({_short(chain + (target,))})",
                              where=origin.where, key="defaults")
        stack.append(_open(target, chain))
        num_entries += len(stack[-1].entries)
        if num_entries > MAX_ENTRIES:
            raise RecipeError(f"more than {MAX_ENTRIES} defaults entries in all (a recipe needs a few)",
                              where=origin.where, key="defaults")
    return done[path]


def _open(path: Path, chain: tuple[Path, ...]) -> _Frame:
    """Read one file once; split off its `defaults:` entries."""
    data, lines = load_file(path)
    own = Tree(data=data, origins=_origins(path, lines))
    raw, _ = own.pop_top("defaults")
    return _Frame(path=path, own=own, entries=_entries(path, raw, lines, chain))


def _origins(path: Path, lines: dict[tuple, int]) -> dict[tuple, Origin]:
    """Origin.file for each key, its path resolved once, not once per key (a stat per path part)."""
    first = Origin.file(path, 1)
    shown = first.label.rsplit(":", 1)[0]
    return {p: replace(first, label=f"{shown}:{n}", where=f"{shown}:{n}")
            for p, n in lines.items() if p and isinstance(p[-1], str)}


def _merged(frame: _Frame, done: dict[Path, Tree]) -> Tree:
    merged = Tree()
    for target, _ in frame.entries:
        merged.merge(done[target])
    merged.merge(frame.own)
    return merged


def _entries(path: Path, raw: object, lines: dict, chain: tuple[Path, ...]) -> list[tuple[Path, Origin]]:
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise RecipeError("must be a path or a list of paths", where=Origin.file(path, lines[("defaults",)]).where,
                          key="defaults")
    out = []
    for i, item in enumerate(items):
        line = lines.get(("defaults", i), lines[("defaults",)])
        origin = Origin.file(path, line)
        target = (path.parent / os.path.expanduser(item)).absolute()
        if not target.exists():          # a FIFO or a device exists: load_file says what it is
            siblings = [p.name for p in target.parent.glob("*.yaml")] if target.parent.is_dir() else []
            names = " -> ".join(display_path(p) for p in chain + (path,))
            raise RecipeError(f"defaults file not found: {item} (chain: {names})", where=origin.where,
                              key="defaults", suggestion=nearest(target.name, siblings, cutoff=0.8))
        out.append((Path(os.path.normpath(target)), origin))
    return out


def _short(chain: tuple[Path, ...]) -> str:
    names = [display_path(p) for p in chain]
    return " -> ".join(names if len(names) <= 5 else names[:2] + ["..."] + names[-2:])
