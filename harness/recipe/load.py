"""`load_recipe`: files -> defaults chain -> tiny twin -> overrides -> defaults -> schema -> paths.

The order is the contract (docs/recipes.md): `defaults:` files merge first (deep merge, last
wins, the file itself last), then the scale's block when `--scale NAME` (`tiny:` the CPU twin,
`h200x2:` the 2 x H200 twin), then command-line overrides, then schema defaults, then
validation. Every scale block and every parity variant is built and validated whatever scale is
asked for, so a broken twin fails `harness validate`, not CI.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.dir_path import dir_problem
from harness.recipe import schema, secret_env
from harness.recipe.defaults import load_chain
from harness.recipe.errors import Origin, RecipeError, display_path, dotted, nearest
from harness.recipe.overrides import apply, parse_override, split_key
from harness.recipe.scales import SCALES
from harness.recipe.tree import Tree, leaves

_PATH_KEYS = (("checks", "thresholds"), ("model", "path"), ("model", "tokenizer"),
              ("data", "train", "path"), ("data", "validation", "path"), ("checkpoint", "dir"))
# Keys that may also name a shipped asset (no '/') or a Hugging Face id (`org/name`): a value is a
# file path, made absolute, only when it starts with '/', '.' or '~', or names an existing file or
# directory next to the recipe; anything else reaches the engine as written.
_ASSET_OR_HUB_KEYS = (("model", "path"), ("data", "train", "path"), ("data", "validation", "path"))


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A complete, validated recipe and where each of its leaves came from."""

    data: dict
    provenance: dict[str, str]
    source: Path
    scale: str | None
    scales: tuple[str, ...] = ()  # the scale blocks this recipe has


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = (), *, scale: str | None = None) -> Resolved:
    """Resolve the recipe at `path`. Raises RecipeError (one line, file:line: key: message)."""
    source = Path(os.path.normpath(Path(path).absolute()))
    if scale is not None and scale not in SCALES:
        raise RecipeError(f"unknown scale {scale!r}; the scales are {', '.join(SCALES)}",
                          where=display_path(source), suggestion=nearest(scale, SCALES))
    if not source.exists():              # a FIFO or a device exists: load_file says what it is
        raise RecipeError("recipe file not found", where=display_path(source))
    parsed = [parse_override(text, recipe=source) for text in overrides]
    tree = load_chain(source)
    tree.origins[()] = Origin.file(source, 1)
    blocks = {name: _scale_entries(name, *tree.pop_top(name)) for name in SCALES}
    if scale is not None and not blocks[scale]:
        raise RecipeError(f"this recipe has no {scale}: block, so no {scale} scale",
                          where=display_path(source), key=scale)

    def build(twin: str | None) -> Tree:
        out = tree.copy()
        for keys, value, origin, inner in blocks.get(twin) or ():
            apply(out, keys, value, origin, mode="schema", inner=inner)
        for item in parsed:
            apply(out, item.keys, item.value, Origin.override(item.text, source), mode="add" if item.add else "set")
        schema.fill_defaults(out, Origin.default(source))
        _validate(out)
        return out

    final = build(scale)
    for name, entries in blocks.items():
        if entries and name != scale:
            build(name)                  # only validated: the twin must stay runnable
    _check_variants(final)
    _check_run_dir(final)
    _resolve_paths(final)
    provenance = {dotted(p): final.origin_of(p).label for p in leaves(final.data)}
    return Resolved(data=final.data, provenance=provenance, source=source, scale=scale,
                    scales=tuple(name for name in SCALES if blocks[name]))


def _scale_entries(name: str, block: object, origins: dict) -> list[tuple[tuple[str, ...], object, Origin, dict]]:
    """A scale block (`tiny:`, `h200x1:`, `h200x2:`) as (key path, value, origin, origins inside the value);
    errors point at it."""
    if block is None:
        return []
    where = origins[(name,)]
    if not isinstance(block, dict):
        raise RecipeError("must be a mapping of dotted keys to values", where=where.where, key=name)
    out = []
    for key, value in block.items():
        entry = origins.get((name, key), where)
        keys = split_key(key, where=f"{entry.where}: {name}")
        inner = {p[2:]: Origin.twin(name, o) for p, o in origins.items() if p[:2] == (name, key) and len(p) > 2}
        out.append((keys, value, Origin.twin(name, entry), inner))
    return out


def _validate(tree: Tree) -> None:
    """The schema, then the one rule it cannot state: a secret's name has one value (secret_env.clash)."""
    schema.validate(tree)
    found = secret_env.clash(tree.data)
    if found:
        path, message = found
        origin = tree.origin_of(path)
        raise RecipeError(message, where=origin.where if origin else "",
                          key=origin.key(path) if origin else dotted(path))


def _check_run_dir(tree: Tree) -> None:
    """`run_dir: /dev/null/x` failed at mkdir, after planning, as an internal error."""
    run_dir = tree.data.get("run_dir")
    if run_dir is None:
        return
    problem = dir_problem(run_dir, child_bytes=len(tree.data["name"]) + 24, writable=False)
    if problem is not None:
        origin = tree.origin_of(("run_dir",))
        raise RecipeError(f"the folder for run dirs {problem}", where=origin.where if origin else "", key="run_dir")


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
        _validate(probe)


def _resolve_paths(tree: Tree) -> None:
    """Make file paths absolute, relative to the file (or working dir) that set them."""
    for path in _PATH_KEYS:
        value = tree.get(path)
        if not isinstance(value, str) or (path[-1] == "tokenizer" and "/" not in value):
            continue
        base = tree.origin_of(path).base_dir
        resolved = os.path.normpath(base / os.path.expanduser(value))
        if path in _ASSET_OR_HUB_KEYS and not value.startswith(("/", ".", "~")) and not os.path.exists(resolved):
            continue
        tree.get(path[:-1])[path[-1]] = resolved
