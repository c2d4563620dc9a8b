"""The key tables of docs/recipes.md, written from the recipe schema (rl/recipe/schema.py) between
`<!-- keys: PREFIX ... -->` and `<!-- /keys -->` markers; the prose around them stays hand-written."""

from __future__ import annotations

import dataclasses
import json
import re
import typing

from rl.recipe.key import recipe_key
from rl.recipe.schema import _optional

__all__ = ["fill_tables", "key_rows", "shown_types"]

BLOCK = re.compile(r"(<!-- keys: ([^>]*?) -->\n).*?(<!-- /keys -->)", re.S)
HEADER = "| key | type | default | meaning |\n|---|---|---|---|\n"
ENV_FORM = "mapping NAME -> string or `{from_env: true}`"


def shown_types(cls: type, path: str = "") -> dict[str, str]:
    """Dotted key -> the type column a field's `Key.shown` sets, below `cls`."""
    out: dict[str, str] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        dotted = f"{path}.{f.name}" if path else f.name
        if recipe_key(f).shown:
            out[dotted] = recipe_key(f).shown
        inner, _ = _optional(hints[f.name])
        if dataclasses.is_dataclass(inner):
            out.update(shown_types(inner, dotted))
    return out


def _bounds(node: dict) -> str:
    low = (f"{node['minimum']}", "[") if "minimum" in node else (f"{node.get('exclusiveMinimum')}", "(")
    high = (f"{node['maximum']}", "]") if "maximum" in node else (f"{node.get('exclusiveMaximum')}", ")")
    has_low = "minimum" in node or "exclusiveMinimum" in node
    has_high = "maximum" in node or "exclusiveMaximum" in node
    if has_low and has_high:
        return f" in {low[1]}{low[0]}, {high[0]}{high[1]}"
    if has_low:
        return f" {'>=' if low[1] == '[' else '>'} {low[0]}"
    return f" {'<=' if high[1] == ']' else '<'} {high[0]}" if has_high else ""


def type_text(node: dict) -> str:
    """The docs table's type column of a schema node."""
    if "$ref" in node:
        return ENV_FORM
    if "enum" in node:
        return " \\| ".join("null" if v is None else f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        return " or ".join(type_text(b) for b in branches)
    kinds = node.get("type", "object")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if kinds == ["null"]:
        return "null"
    words = {"integer": "int", "number": "number", "boolean": "bool", "string": "string", "object": "mapping",
             "array": "list", "null": "null"}
    text = " or ".join(words[k] for k in kinds if k != "null")
    if kinds[0] in ("integer", "number"):
        text += _bounds(node)
    if kinds[0] == "string" and "pattern" in node:
        text += f" matching `{node['pattern']}`"
    if kinds[0] == "array" and "items" in node:
        text += " of " + type_text(node["items"]) + "s"
    return text + (" or null" if "null" in kinds else "")


def default_text(node: dict, required: bool) -> str:
    if required:
        return "required"
    if "default" not in node:
        return "none"
    value = node["default"]
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{json.dumps(value)}`"


def _is_section(node: dict) -> dict | None:
    """The object branch of a node whose keys the schema names, else None."""
    for branch in [node, *(node.get("anyOf") or node.get("oneOf") or [])]:
        if "properties" in branch:
            return branch
    return None


def key_rows(node: dict, shown: dict[str, str], path: str = "") -> list[tuple[str, str]]:
    """(dotted key, table row) for every key below `node`, in schema order; a plain section has
    no row of its own, a key that is a section or something else (null, `rl`) has one."""
    rows = []
    required = node.get("required", [])
    for name, sub in node.get("properties", {}).items():
        dotted = f"{path}.{name}" if path else name
        obj = _is_section(sub)
        if obj is not sub:
            doc = sub.get("description", "").replace("|", "\\|").replace("\n", " ")
            cells = [f"`{dotted}`", shown.get(dotted) or type_text(sub), default_text(sub, name in required), doc]
            rows.append((dotted, ("| " + " | ".join(cells) + " |").replace("|  |", "| |")))
        if obj is not None:
            rows += key_rows(obj, shown, dotted)
    return rows


def fill_tables(text: str, schema: dict, shown: dict[str, str]) -> str:
    """`text` with each marked block replaced by the table of the keys under its prefixes."""
    rows = key_rows(schema, shown)

    def table(match: re.Match) -> str:
        prefixes = match.group(2).split()
        mine = [row for dotted, row in rows if dotted.split(".")[0] in prefixes]
        return match.group(1) + HEADER + "\n".join(mine) + "\n" + match.group(3)

    return BLOCK.sub(table, text)
