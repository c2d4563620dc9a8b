"""The recipe's JSON Schema, written from the config dataclasses (rl/config.py) and the few forms
only the harness reads (harness_keys.json). The harness reads the checked-in file and never
imports rl; tests/rl/test_recipe_generated.py fails when that file is not what this writes."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from importlib import resources
from typing import Any, Union

from rl.recipe.key import Key, recipe_key

__all__ = ["FREE_KEY", "harness_forms", "recipe_schema"]

FREE_KEY = "^[A-Za-z0-9_][A-Za-z0-9_-]*$"  # a key of a free map (model.config, task.params)
_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
_BOUNDS = (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"), ("lt", "exclusiveMaximum"))


def harness_forms() -> dict[str, Any]:
    return json.loads(resources.files("rl.recipe").joinpath("harness_keys.json").read_text("utf-8"))


def _optional(hint: Any) -> tuple[Any, bool]:
    """(the type inside `X | None`, whether None is allowed)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return inner[0], True
    return hint, False


def _value_form(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a value of Python type `hint` (None not counted)."""
    if hint in _TYPES:
        return {"type": _TYPES[hint]}
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        return {"type": "array", "items": _value_form(item)}
    if origin is dict:
        return {"type": "object", "propertyNames": {"pattern": FREE_KEY}}
    return {}


def _leaf(hint: Any, k: Key) -> dict[str, Any]:
    inner, nullable = _optional(hint)
    if k.choices is not None:
        node: dict[str, Any] = {"enum": list(k.choices)}
    else:
        node = _value_form(inner)
        if nullable and "type" in node:
            node["type"] = [node["type"], "null"]
    node.update({js: getattr(k, kw) for kw, js in _BOUNDS if getattr(k, kw) is not None})
    return node


def _field(f: dataclasses.Field, hint: Any, dotted: str, forms: dict[str, Any]) -> dict[str, Any]:
    k = recipe_key(f)
    inner, nullable = _optional(hint)
    if dotted in forms:
        node = dict(forms[dotted])
    elif dataclasses.is_dataclass(inner):
        node = section_schema(inner, dotted, forms)
        node = {"oneOf": [{"type": "null"}, node]} if nullable else node
    elif k.json and "$ref" in k.json:
        node = {}  # a shared form ($defs) says it all
    else:
        node = _leaf(hint, k)
    node.update(k.json or {})
    if k.filled and not k.required:
        node["default"] = _default(f)
    if k.doc:
        node["description"] = k.doc
    return node


def _default(f: dataclasses.Field) -> Any:
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return {} if dataclasses.is_dataclass(value) else value


def section_schema(cls: type, path: str = "", forms: dict[str, Any] | None = None) -> dict[str, Any]:
    """The object schema of one section: its fields in order, unknown keys refused."""
    forms = forms or {}
    hints = typing.get_type_hints(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        dotted = f"{path}.{f.name}" if path else f.name
        props[f.name] = _field(f, hints[f.name], dotted, forms)
        if recipe_key(f).required:
            required.append(f.name)
    node: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        node["required"] = required
    node["properties"] = props
    return node


def recipe_schema(run_config: type) -> dict[str, Any]:
    """The whole recipe schema: `run_config`'s sections with the harness's own forms merged in."""
    extra = harness_forms()
    body = section_schema(run_config, "", extra["forms"])
    return {**extra["head"], "type": "object", "additionalProperties": False, "required": body["required"],
            "properties": {**extra["before"], **body["properties"]}, "allOf": extra["allOf"],
            "$defs": extra["$defs"]}
