"""A recipe key's doc, choices and bounds, carried on its dataclass field.

torchtitan's `JobConfig` way: the field is the one description of its key. The engine checks
the value against it when the section is built (`Section.__post_init__`), and rl/recipe/schema.py
writes the harness's JSON Schema and the docs table from the same metadata, so the three cannot
drift.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldError", "Key", "Section", "check_keys", "key", "recipe_key", "section"]

META = "recipe"  # the field metadata entry that holds a `Key`


@dataclass(frozen=True, kw_only=True)
class Key:
    """What a field says about its recipe key.

    required: the recipe must state it (the schema has no default, the harness fills none); the
    engine's default then serves hand-built configs only. filled: False for an optional key the
    harness leaves absent when unset (no schema default). shown: the docs table's type column,
    where the derived one says too little. json: extra JSON Schema keywords for the text form of a
    value (pattern, length, format); only the harness checks them."""

    doc: str = ""
    choices: tuple[Any, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    required: bool = False
    filled: bool = True
    shown: str | None = None
    json: dict[str, Any] | None = None


def key(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A dataclass field for one recipe key; a list or dict default is copied per instance."""
    if isinstance(default, (list, dict)):
        value = default
        return dataclasses.field(default_factory=lambda: copy.deepcopy(value), metadata={META: Key(**meta)})
    return dataclasses.field(default=default, metadata={META: Key(**meta)})


def section(cls: type, **meta: Any) -> Any:
    """A field that holds a whole section, default-built."""
    return dataclasses.field(default_factory=cls, metadata={META: Key(**meta)})


def recipe_key(f: dataclasses.Field) -> Key:
    return f.metadata.get(META) or Key()


class FieldError(ValueError):
    """A value a section refuses, named by its field; the reader prefixes the section's path."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name, self.message = name, message


def _refusal(k: Key, value: Any) -> str | None:
    if k.choices is not None:
        return None if value in k.choices else f"{value!r} is not one of {list(k.choices)}"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None  # None, text, lists: the reader has checked their types
    for bound, word, holds in ((k.ge, ">=", operator.ge), (k.gt, ">", operator.gt),
                               (k.le, "<=", operator.le), (k.lt, "<", operator.lt)):
        if bound is not None and not holds(value, bound):
            return f"must be {word} {_number(bound)}, got {value}"
    return None


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def check_keys(obj: Any) -> None:
    """Refuse the first field of `obj` whose value its `Key` does not allow."""
    for f in dataclasses.fields(obj):
        k = recipe_key(f)
        problem = _refusal(k, getattr(obj, f.name))
        if problem:
            optional = k.choices is None and f.default is None
            raise FieldError(f.name, problem.replace(", got", " or null, got") if optional else problem)


class Section:
    """Base of a recipe section: checks every field against its `Key` when built. A section with
    rules across its fields overrides `__post_init__` and calls this one first."""

    def __post_init__(self) -> None:
        check_keys(self)
