"""The reference's recipes: `defaults:` chains, deep merge, `${a.b}` interpolation, flattening.

Its recipes are OmegaConf YAML: `defaults: ../../grpo_math_1B.yaml` (a path relative to the
file, or a list of them), mappings merged key by key with lists and scalars replaced (as ours),
and `${a.b}` naming another key. Each file is read by harness.yamlsafe, the loader of every YAML
file (bounded read, alias and node budgets, duplicate keys refused, as OmegaConf does too); a
value that is exactly `${a.b}` takes that key's value, a string that holds `${...}` among other
text is interpolated as text, and one naming a key that does not exist (or a
resolver, `${oc.env:X}`) is left as written and so is reported wherever it lands.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness.errors import UserError, shown
from harness.recipe.defaults import MAX_CHAIN, MAX_ENTRIES
from harness.yamlsafe import PLAIN_TAGS, Dialect, YamlError, load_path, load_text

__all__ = ["ReferenceError_", "flatten", "load_reference_recipe", "parse_value", "set_dotted"]

_REF = re.compile(r"\$\{(\.*[A-Za-z_][\w.]*)\}")


class ReferenceError_(UserError):
    """A reference file that cannot be read: one line, exit 2."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A SafeLoader reading numbers as the reference's loader (OmegaConf) does: `1e-8` and
    `5.0e-6` are floats (PyYAML's YAML 1.1 resolver reads an exponent without a dot as a string)."""


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))
# OmegaConf reads no dates: `2026-11-30` is text to it.
_Loader.yaml_implicit_resolvers = {k: [(tag, regexp) for tag, regexp in v if not tag.endswith(":timestamp")]
                                   for k, v in _Loader.yaml_implicit_resolvers.items()}
REFERENCE = Dialect(_Loader, PLAIN_TAGS, finite_only=False)   # OmegaConf takes .inf and .nan


def _read(path: Path) -> dict:
    try:
        data, _ = load_path(path, name=str(path), dialect=REFERENCE, kind="recipe", what="a recipe")
    except YamlError as error:
        raise ReferenceError_(str(error)) from None
    return data


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class _Chain:
    """Resolves `defaults:` chains, each file read and merged once per load: a diamond of 24
    files, each naming the next twice, re-read every file on every path (2**24 reads, > 60 s).
    The budgets are the recipe loader's (harness.recipe.defaults)."""

    def __init__(self) -> None:
        self.done: dict[Path, tuple[dict, list[Path]]] = {}
        self.num_entries = 0

    def load(self, path: Path, seen: tuple[Path, ...]) -> tuple[dict, list[Path]]:
        """The merged recipe at `path` and the files of its chain, root first."""
        path = _resolved(path)
        if path in seen:
            raise ReferenceError_(f"{shown(str(path), 200)}: defaults cycle")
        if path in self.done:
            return self.done[path]
        if len(seen) >= MAX_CHAIN:
            raise ReferenceError_(f"{shown(str(path), 200)}: defaults chain deeper than {MAX_CHAIN}")
        data = _read(path)
        parents = data.pop("defaults", None)
        parents = [] if parents is None else [parents] if isinstance(parents, str) else parents
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            raise ReferenceError_(f"{shown(str(path), 200)}: defaults must be a path or a list of paths")
        self.num_entries += len(parents)
        if self.num_entries > MAX_ENTRIES:
            raise ReferenceError_(f"{shown(str(path), 200)}: more than {MAX_ENTRIES} defaults entries in all")
        merged: dict = {}
        files: list[Path] = []
        for parent in parents:
            sub, sub_files = self.load(path.parent / parent, (*seen, path))
            merged = _merge(merged, sub)
            files.extend(f for f in sub_files if f not in files)
        self.done[path] = _merge(merged, data), [*files, path]
        return self.done[path]


def _resolved(path: Path) -> Path:
    """`path` with its symlinks resolved; a symlink loop is one line (RuntimeError on Python 3.11/12)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        raise ReferenceError_(f"{shown(str(path), 200)}: cannot resolve the path (a symlink loop?)") from None


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaves: scalars, lists and empty mappings."""
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def set_dotted(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = data.get(part)
        if not isinstance(nxt, dict):
            nxt = data[part] = {}
        data = nxt
    data[parts[-1]] = value


def _interpolate(flat: dict[str, Any]) -> dict[str, Any]:
    out = dict(flat)
    for _ in range(8):  # chains of references resolve in a few rounds
        changed = False
        for key, value in out.items():
            if not isinstance(value, str) or "${" not in value:
                continue
            whole = _REF.fullmatch(value)
            target = _absolute(key, whole.group(1)) if whole else None
            if target is not None and target in out and target != key:
                new = out[target]
            else:
                def text(m: re.Match, key: str = key) -> str:
                    name = _absolute(key, m.group(1))
                    if name in out and not isinstance(out[name], (dict, list)):
                        return str(out[name])
                    return m.group(0)

                new = _REF.sub(text, value)
            if new != value:
                out[key], changed = new, True
        if not changed:
            break
    return out


def _absolute(key: str, ref: str) -> str:
    """OmegaConf's relative references: in `a.b.c`, `${.x}` is `a.b.x` and `${..x}` is `a.x`."""
    dots = len(ref) - len(ref.lstrip("."))
    if not dots:
        return ref
    parent = key.split(".")[:-1]
    parent = parent[: len(parent) - (dots - 1)] if dots - 1 <= len(parent) else []
    return ".".join([*parent, ref[dots:]])


def parse_value(text: str) -> Any:
    """A command-line override's value (`a.b=VALUE`) as the reference reads it: YAML scalars, lists
    and mappings, `1e-8` a float; text that is not YAML stays text."""
    try:
        return load_text(text, name="override", dialect=REFERENCE, line_prefix=False)[0] if text else None
    except YamlError:
        return text


def load_reference_recipe(path: Path, overrides: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """(flat, interpolated leaves of the merged recipe with `overrides` (dotted key -> value)
    applied before interpolation, as the reference applies its command line; the files of its
    chain, root first)."""
    merged, files = _Chain().load(path, ())
    flat = flatten(merged)
    for key, value in (overrides or {}).items():
        for old in [k for k in flat if k == key or k.startswith(key + ".")]:
            del flat[old]
        flat.update(flatten(value, key) if isinstance(value, dict) else {key: value})
    return _interpolate(flat), files
