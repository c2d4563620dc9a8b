"""Dotted-key overrides: `a.b=c` and `++a.b=c` on the command line, `tiny:` and parity variants.

Three strictness levels, one code path:
* "set"    (`a.b=c`): the key must already be in the merged recipe or be named by the schema;
* "add"    (`++a.b=c`): any key; the schema still judges the result;
* "schema" (`tiny:` entries, parity variants): the key path must be one the schema allows,
           including new keys inside free maps such as `env` or `model.config`.
Values from the command line are parsed as YAML with the same safe loader as recipe files.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import shown
from harness.recipe import schema, secret_env
from harness.recipe.errors import Origin, RecipeError, nearest
from harness.recipe.tree import Tree
from harness.recipe.yamlsafe import parse_text

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_MISSING = object()


@dataclass(frozen=True, kw_only=True)
class Override:
    text: str       # as errors and provenance show it: a secret's value is redacted
    keys: tuple[str, ...]
    value: object
    add: bool


def split_key(key: str, *, where: str) -> tuple[str, ...]:
    """"a.b.c" -> ("a", "b", "c"); every segment must be a plain key name."""
    keys = tuple(key.split("."))
    for segment in keys:
        if not _SEGMENT.fullmatch(segment):
            raise RecipeError(f"invalid key path {shown(key)} (segments are letters, digits, '_' and '-', "
                              "joined by '.')", where=where)
    return keys


def parse_override(text: str, *, recipe: Path) -> Override:
    """Parse one command-line override; syntax errors name the override, a secret's value redacted.

    The key is checked before anything repeats the text, so that an override of a secret
    (`++env.MY_PASSWORD=*pw`, which YAML cannot read) never shows its value.
    """
    add = text.startswith("++")
    body = text[2:] if add else text
    key, sep, raw = body.partition("=")
    keys = _keys(key) if sep else None
    if keys is not None and secret_env.is_secret_key(keys):
        text = f"{text[: len(text) - len(body)]}{key}={secret_env.REDACTED}"
    where = Origin.override(text if sep else _REDACTED_TEXT, recipe).where
    if body[:1] in ("+", "~"):
        raise RecipeError("only 'a.b=c' (set) and '++a.b=c' (add) are supported", where=where)
    if not sep or not key.strip():   # no '=': the text may be a mistyped secret, so it is not shown
        raise RecipeError("expected KEY=VALUE, e.g. policy.micro_batch_size=4", where=where)
    keys = split_key(key.strip(), where=where)
    value = _secret_value(raw, where, keys) if secret_env.is_secret_key(keys) else parse_text(raw, where=where)
    return Override(text=text, keys=keys, value=value, add=add)


def _secret_value(raw: str, where: str, keys: tuple[str, ...]) -> object:
    """A secret's override value, parsed so that no error repeats any of it (docs/recipes.md).

    One entry (`++env.MY_PASSWORD=...`) is YAML when it reads whole as text or as
    `{from_env: ...}`, else the text as written (`*pw`, `1234`, `pw #tail`, `{pw: 1}`). A whole
    env mapping (`++env={...}`) must be YAML; when it is not, the YAML error is not shown.
    """
    try:
        value = parse_text(raw, where=where)
    except RecipeError:
        if keys in secret_env.SCOPES:
            raise RecipeError("not a YAML mapping (the reason is not shown: the text may hold a secret)",
                              where=where) from None
        return raw
    if keys in secret_env.SCOPES:
        return value
    return value if isinstance(value, str) or (isinstance(value, dict) and set(value) == {"from_env"}) else raw


_REDACTED_TEXT = "<not shown: no '='>"


def _keys(key: str) -> tuple[str, ...] | None:
    try:
        return split_key(key.strip(), where="")
    except RecipeError:
        return None


def apply(tree: Tree, keys: tuple[str, ...], value: object, origin: Origin, *, mode: str,
          inner: dict[tuple, Origin] | None = None) -> None:
    """Set one dotted key in `tree`, after the checks that `mode` asks for (see module doc)."""
    assert mode in ("set", "add", "schema"), mode
    if keys[0] in schema.CONSUMED:
        raise RecipeError(f"'{keys[0]}' is only read from recipe files, it cannot be overridden",
                          where=origin.where, key=origin.key(keys))
    if mode == "set" and tree.get(keys, _MISSING) is _MISSING:
        problem = schema.path_problem(keys, named_only=True)
        if problem is not None:
            i, names = problem
            here = tree.get(keys[:i])
            choices = names + (list(here) if isinstance(here, dict) else [])
            raise RecipeError(f"unknown key; '++{'.'.join(keys)}=...' adds a new key", where=origin.where,
                              key=origin.key(keys[: i + 1]), suggestion=nearest(keys[i], choices))
    if mode == "schema":
        problem = schema.path_problem(keys, named_only=False)
        if problem is not None:
            i, names = problem
            raise RecipeError("not a recipe key path", where=origin.where, key=origin.key(keys[: i + 1]),
                              suggestion=nearest(keys[i], names))
    tree.set(keys, value, origin, inner)


def apply_overrides(data: dict, overrides: Mapping[str, object], *, label: str = "variant") -> dict:
    """A copy of a resolved recipe with dotted-key overrides applied, completed and validated.

    Keys are dotted paths the schema allows ("++" first adds a key the schema does not name);
    values are already parsed. Used for parity variants. Raises RecipeError.
    """
    base = Origin(label=label, where=label, base_dir=Path(os.getcwd()))
    tree = Tree(data=copy.deepcopy(data), origins={(): base})
    for key, value in overrides.items():
        add = key.startswith("++")
        text = f"{label} '{key}'"
        keys = split_key(key[2:] if add else key, where=text)
        apply(tree, keys, value, Origin(label=text, where=text, base_dir=base.base_dir),
              mode="add" if add else "schema")
    schema.fill_defaults(tree, base)
    schema.validate(tree)
    return tree.data
