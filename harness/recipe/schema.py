"""The recipe JSON Schema: defaults, key-path checks, and errors mapped back to file:line.

harness/schema/recipe.schema.json is the single source of truth: its `properties` say which
keys exist (and in which order `dump_recipe` writes them), its `default`s complete a recipe, and
jsonschema (Draft 2020-12, with the engine's types: harness/recipe/validator.py) judges it.
This module turns jsonschema's errors into one-line `RecipeError`s that name the file, line
and key path of the offending value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources

from jsonschema.exceptions import ValidationError

from harness.errors import shown
from harness.recipe import secret_env
from harness.recipe.errors import Origin, RecipeError, dotted, nearest
from harness.recipe.scales import SCALES
from harness.recipe.tree import Tree
from harness.recipe.validator import FORMATS, RecipeValidator

SCHEMA: dict = json.loads(resources.files("harness").joinpath("schema/recipe.schema.json").read_text("utf-8"))
_VALIDATOR = RecipeValidator(SCHEMA, format_checker=FORMATS)
CONSUMED = ("defaults", *SCALES)    # read by the loader from files; never in a resolved recipe
_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
               "object": "a mapping", "array": "a list", "null": "null"}


def object_branch(schema: dict) -> dict:
    """The mapping form of a schema that allows a scalar or a mapping (`engine`, `parity`)."""
    for branch in schema.get("anyOf", ()):
        if branch.get("type") == "object":
            return branch
    return schema


def is_open(schema: dict) -> bool:
    """True for maps whose keys are free (model.config, env, task.params, ...) and anything below."""
    return ("properties" not in schema and schema.get("additionalProperties", True) is not False
            and schema.get("type", "object") == "object" and "enum" not in schema and "const" not in schema)


def child(schema: dict, key: str, *, named_only: bool) -> dict | None:
    """The schema of `key` inside a mapping schema, or None when the key cannot exist there."""
    schema = object_branch(schema)
    props = schema.get("properties", {})
    if key in props:
        return props[key]
    if not named_only and is_open(schema):
        extra = schema.get("additionalProperties", {})
        return extra if isinstance(extra, dict) else {}
    return None


def path_problem(keys: Sequence[str], *, named_only: bool) -> tuple[int, list[str]] | None:
    """None if `keys` is a key path the schema allows; else (index of the bad key, valid keys there)."""
    schema = SCHEMA
    for i, key in enumerate(keys):
        sub = child(schema, key, named_only=named_only)
        if sub is None:
            return i, list(object_branch(schema).get("properties", {}))
        schema = sub
    return None


def ordered_keys(schema: dict | None, data: dict) -> list[tuple[str, dict | None]]:
    """Keys of `data` in schema order, then free keys in their own order; each with its schema."""
    schema = object_branch(schema) if schema is not None else None
    props = schema.get("properties", {}) if schema else {}
    named = [(k, props[k]) for k in props if k in data]
    extra = schema.get("additionalProperties") if schema else None
    free_schema = extra if isinstance(extra, dict) else ({} if schema and is_open(schema) else None)
    return named + [(k, free_schema) for k in data if k not in props]


def fill_defaults(tree: Tree, origin: Origin) -> None:
    """Insert the schema's `default` for every absent optional key, so the recipe is complete."""
    _fill(SCHEMA, tree.data, (), tree, origin)
    device = tree.get(("cluster", "device"))
    checks = tree.get(("checks",))
    if isinstance(checks, dict) and "hardware" not in checks and isinstance(device, str):
        tree.set(("checks", "hardware"), device, replace(origin, label="default (= cluster.device)"))


def _fill(schema: dict, node: object, path: tuple, tree: Tree, origin: Origin) -> None:
    props = object_branch(schema).get("properties")
    if not props or not isinstance(node, dict):
        return
    for key, sub in props.items():
        if key not in node and "default" in sub:
            tree.set(path + (key,), sub["default"], origin)
        if key in node:
            _fill(sub, node[key], path + (key,), tree, origin)


def validate(tree: Tree) -> None:
    """Raise the most useful schema violation in `tree.data` as a RecipeError; unknown keys first."""
    errors = sorted(_VALIDATOR.iter_errors(tree.data), key=lambda e: e.validator != "additionalProperties")
    if errors:
        raise to_recipe_error(errors[0], tree)


def to_recipe_error(error: ValidationError, tree: Tree) -> RecipeError:
    path = tuple(error.absolute_path)
    kind, value, instance = error.validator, error.validator_value, error.instance
    if kind in ("anyOf", "oneOf"):
        fits = [i for i, branch in enumerate(value) if _fits(instance, branch)]
        inner = [e for e in error.context if fits and e.relative_schema_path[0] == fits[0]]
        if len(fits) == 1 and inner:
            return to_recipe_error(sorted(inner, key=lambda e: e.validator != "additionalProperties")[0], tree)
        words = " or ".join(_describe(branch) for branch in value)
        return _error(tree, path, f"must be {words}, not {_show(instance, path)}")
    if kind == "additionalProperties":
        props = error.schema.get("properties", {})
        extra = next(k for k in instance if k not in props)
        return _error(tree, path + (extra,), "unknown key", suggestion=nearest(extra, props))
    if kind == "required":
        missing = next(k for k in value if k not in instance)
        return _error(tree, path + (missing,), "missing required key", at=path)
    if "propertyNames" in error.relative_schema_path:
        return _error(tree, path + (instance,), f"invalid key name (must match {error.schema.get('pattern')})")
    suggestion = None
    if kind == "enum" and isinstance(instance, str):
        suggestion = nearest(instance, [v for v in value if isinstance(v, str)])
    return _error(tree, path, _message(error), suggestion=suggestion)


def _message(error: ValidationError) -> str:
    kind, value, instance = error.validator, error.validator_value, error.instance
    path = tuple(error.absolute_path)
    why = f" ({error.schema['description']})" if "then" in error.schema_path else ""
    if kind == "type":
        types = value if isinstance(value, list) else [value]
        return f"must be {' or '.join(_TYPE_WORDS[t] for t in types)}, not {_show(instance, path)}"
    if kind == "enum":
        return f"must be one of {', '.join(_show(v) for v in value)}, not {_show(instance, path)}"
    if kind == "const":
        return f"must be {_show(value)}, not {_show(instance, path)}"
    bounds = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"must be {bounds[kind]} {value}, not {_show(instance, path)}{why}"
    if kind == "pattern":
        return f"must match {value}, not {_show(instance, path)}"
    if kind == "format":
        return f"must not hold control characters (newline, tab, escape...), not {_show(instance, path)}"
    if kind == "minLength":
        return "must not be empty"
    if kind == "maxLength":
        return f"must be at most {value} characters, not {len(instance)}"
    if kind in ("minItems", "maxItems"):
        return f"must have {'at least' if kind == 'minItems' else 'at most'} {value} items, not {len(instance)}"
    if kind == "minProperties":
        return f"must have at least {value} entries, not {len(instance)}"
    return error.message


def _error(tree: Tree, path: tuple, message: str, *, suggestion: str | None = None,
           at: tuple | None = None) -> RecipeError:
    origin = tree.origin_of(path if at is None else at)
    key = origin.key(path) if origin else dotted(path)
    return RecipeError(message, where=origin.where if origin else "", key=key, suggestion=suggestion)


def _fits(instance: object, branch: dict) -> bool:
    if "const" in branch:
        return instance == branch["const"]
    if "type" in branch:
        return _VALIDATOR.is_type(instance, branch["type"])
    return True


def _describe(branch: dict) -> str:
    if "const" in branch:
        return _show(branch["const"])
    return _TYPE_WORDS.get(branch.get("type", ""), "a value")


def _show(value: object, path: tuple = ()) -> str:
    """How an error names a value: capped, and never a secret's (harness.recipe.secret_env)."""
    if path and all(isinstance(p, str) for p in path) and secret_env.is_secret_key(path):
        return f"{secret_env.REDACTED} (a secret's value is not shown)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return shown(value)
