"""Write a resolved recipe as YAML: stable key order, one leaf per line, optional provenance.

Keys follow the schema's order (the order of docs/architecture.md); keys of free maps (env,
model.config, parity variants, ...) keep the order they were written in. Every leaf is one line,
so `# <source>` comments line up and a run dir's recipe.yaml diffs cleanly against another's.
The output reloads with yaml.safe_load.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import yaml

from harness.recipe import schema
from harness.recipe.errors import display_path, dotted
from harness.recipe.load import Resolved
from harness.recipe.secret_env import literal_secrets, redact_recipe, scrub
from harness.recipe.yamlsafe import reads_as_string

_INDENT = "  "
_BREAKS = "\n\r\x85\u2028\u2029"   # YAML line breaks: in a plain or quoted scalar they fold ('a\x85b' read back 'a b')
_YAML_ESCAPES = str.maketrans({"\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P"})


def dump_recipe(data: dict) -> str:
    """YAML text of a recipe, keys in schema order."""
    return "".join(text + "\n" for text, _ in _lines(data, schema.SCHEMA, (), 0))


def format_show(resolved: Resolved, *, provenance: bool) -> str:
    """The resolved recipe for `harness show`; with provenance, each leaf says who set it."""
    head = f"# {display_path(resolved.source)}" + (f" (--scale {resolved.scale})" if resolved.scale else "")
    rows = list(_lines(redact_recipe(resolved.data), schema.SCHEMA, (), 0))  # secrets read <redacted>
    if not provenance:
        return head + "\n" + "".join(text + "\n" for text, _ in rows)
    # Align the comments, but let a few long lines (a description) run past the column.
    widths = sorted(len(text) for text, path in rows if path is not None)
    width = min(widths[-1], max(widths[int(0.9 * (len(widths) - 1))], 40))
    out = [head]
    hidden = literal_secrets(resolved.data)  # an override's text names the value it set
    for text, path in rows:
        if path is None:
            out.append(text)
        else:
            where = resolved.provenance.get(dotted(path)) or resolved.provenance.get(dotted(path) + ".from_env", "?")
            out.append(f"{text.ljust(width)}  # {scrub(where, hidden)}")
    return "\n".join(out) + "\n"


def _lines(data: dict, node_schema: dict | None, prefix: tuple, depth: int) -> Iterator[tuple[str, tuple | None]]:
    """(line, leaf path or None for a mapping header) for every key of `data`."""
    for key, sub in schema.ordered_keys(node_schema, data):
        value = data[key]
        path = prefix + (key,)
        head = f"{_INDENT * depth}{_scalar(key)}:"
        if isinstance(value, dict) and value:
            yield head, None
            yield from _lines(value, sub, path, depth + 1)
        else:
            yield f"{head} {_scalar(value)}", path


def _scalar(value: object) -> str:
    """One-line YAML for a scalar, list or empty mapping."""
    if isinstance(value, str) and any(c in value for c in _BREAKS):
        text = json.dumps(value, ensure_ascii=False)   # a JSON string is a YAML double-quoted scalar
        return text.translate(_YAML_ESCAPES)           # ...once the breaks JSON leaves raw are escaped
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), allow_unicode=True)
    text = text.removesuffix("\n").removesuffix("\n...")
    assert "\n" not in text, text
    if isinstance(value, str) and not text.startswith(("'", '"')) and not reads_as_string(text):
        return json.dumps(value, ensure_ascii=False)  # PyYAML left plain what our loader reads as a number
    return text
