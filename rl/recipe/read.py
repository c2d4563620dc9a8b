"""Read a recipe mapping into its typed sections, refusing unknown keys and wrong types by their
dotted path; each section then checks its own values (rl/recipe/key.py)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Union

from rl.recipe.key import FieldError

__all__ = ["build"]


def build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys by their dotted path."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path or 'recipe'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        dotted = f"{path}.{key}" if path else str(key)
        if key not in names:
            raise ValueError(f"unknown recipe key {dotted!r}; valid keys here: {', '.join(names)}")
        kwargs[key] = _coerce(hints[key], value, dotted)
    try:
        return cls(**kwargs)
    except FieldError as exc:  # a value the section refuses: name it by its whole path
        raise ValueError(f"{path}.{exc.name}: {exc.message}" if path else str(exc)) from None
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{path or 'recipe'}: {exc}") from None


def _coerce(hint: Any, value: Any, path: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return build(hint, value, path)
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(inner[0], value, path) if len(inner) == 1 else value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise ValueError(f"{path}: expected {hint.__name__}, got {value!r}")
        if hint is float and not math.isfinite(value):   # .nan/.inf: the harness refuses them too
            raise ValueError(f"{path}: expected a finite float, got {value!r}")
    if origin is dict and not isinstance(value, dict):
        raise ValueError(f"{path}: expected a mapping, got {value!r}")
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint) or (Any,)
        return [_coerce(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value
