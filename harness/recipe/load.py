"""`load_recipe`: files -> defaults chain -> tiny twin -> overrides -> defaults -> schema -> paths.

The order is the contract (docs/recipes.md): `defaults:` files merge first (deep merge, last
wins, the file itself last), then the `tiny:` block when `--scale tiny`, then command-line
overrides, then schema defaults, then validation. Without a scale the tiny twin and every parity
variant are still built and validated, so a broken twin fails `harness validate`, not CI.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.recipe import schema
from harness.recipe.defaults import load_chain
from harness.recipe.errors import Origin, RecipeError, display_path, dotted, nearest
from harness.recipe.overrides import apply, parse_override, split_key
from harness.recipe.tree import Tree, leaves

SCALES = ("tiny",)
_PATH_KEYS = (("checks", "thresholds"), ("model", "path"), ("model", "tokenizer"))


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A complete, validated recipe and where each of its leaves came from."""

    data: dict
    provenance: dict[str, str]
    source: Path
    scale: str | None


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = (), *, scale: str | None = None) -> Resolved:
    """Resolve the recipe at `path`. Raises RecipeError (one line, file:line: key: message)."""
    source = Path(os.path.normpath(Path(path).absolute()))
    if scale is not None and scale not in SCALES:
        raise RecipeError(f"unknown scale {scale!r}; the only scale is 'tiny'", where=display_path(source),
                          suggestion=nearest(scale, SCALES))
    if not source.exists():              # a FIFO or a device exists: load_file says what it is
        raise RecipeError("recipe file not found", where=display_path(source))
    parsed = [parse_override(text, recipe=source) for text in overrides]
    tree = load_chain(source)
    tree.origins[()] = Origin.file(source, 1)
    tiny, tiny_origins = tree.pop_top("tiny")
    tiny_entries = _tiny_entries(tiny, tiny_origins)

    def build(with_tiny: bool) -> Tree:
        out = tree.copy()
        if with_tiny:
            for keys, value, origin, inner in tiny_entries:
                apply(out, keys, value, origin, mode="schema", inner=inner)
        for item in parsed:
            apply(out, item.keys, item.value, Origin.override(item.text, source), mode="add" if item.add else "set")
        schema.fill_defaults(out, Origin.default(source))
        schema.validate(out)
        return out

    final = build(scale == "tiny")
    if scale is None and tiny_entries:
        build(True)                      # only validated: the twin must stay runnable
    _check_variants(final)
    _resolve_paths(final)
    provenance = {dotted(p): final.origin_of(p).label for p in leaves(final.data)}
    return Resolved(data=final.data, provenance=provenance, source=source, scale=scale)


def _tiny_entries(tiny: object, origins: dict) -> list[tuple[tuple[str, ...], object, Origin, dict]]:
    """The `tiny:` block as (key path, value, origin, origins inside the value); errors point at it."""
    if tiny is None:
        return []
    block = origins[("tiny",)]
    if not isinstance(tiny, dict):
        raise RecipeError("must be a mapping of dotted keys to values", where=block.where, key="tiny")
    out = []
    for key, value in tiny.items():
        entry = origins.get(("tiny", key), block)
        keys = split_key(key, where=f"{entry.where}: tiny")
        inner = {p[2:]: Origin.tiny(o) for p, o in origins.items() if p[:2] == ("tiny", key) and len(p) > 2}
        out.append((keys, value, Origin.tiny(entry), inner))
    return out


def _check_variants(tree: Tree) -> None:
    """Every parity variant must name real key paths and give a valid recipe."""
    variants = tree.get(("checks", "parity", "variants")) or {}
    for name, entries in variants.items():
        probe = tree.copy()
        for key, value in entries.items():
            path = ("checks", "parity", "variants", name, key)
            origin = replace(tree.origin_of(path), key_prefix=dotted(path[:-1]))
            keys = split_key(key, where=f"{origin.where}: {dotted(path)}")
            apply(probe, keys, value, origin, mode="schema")
        schema.fill_defaults(probe, tree.origins[()])
        schema.validate(probe)


def _resolve_paths(tree: Tree) -> None:
    """Make file paths absolute, relative to the file (or working dir) that set them."""
    for path in _PATH_KEYS:
        value = tree.get(path)
        if not isinstance(value, str) or (path[-1] == "tokenizer" and "/" not in value):
            continue
        base = tree.origin_of(path).base_dir
        resolved = os.path.normpath(base / os.path.expanduser(value))
        tree.get(path[:-1])[path[-1]] = resolved
