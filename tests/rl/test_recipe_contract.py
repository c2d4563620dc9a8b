"""The recipe is described three times; these tests hold the three descriptions to one another.

* harness/schema/recipe.schema.json (what the harness accepts and fills in),
* the dataclasses of rl/config.py and the sections they embed (`LossConfig`, `DistillConfig`,
  `WarmStartConfig`, ...): what the engine parses, with its own defaults and `_CHOICES`,
* docs/recipes.md, one table row per key.

`config_disagreements` walks the schema and the dataclasses side by side and names every field
that exists on one side only, every default both state differently, and every `_CHOICES` entry
whose values differ from the schema's enum. `docs_disagreements` does the same for the key
tables of docs/recipes.md: every schema leaf has a row, no row names a key the schema lacks,
and a row's default is the schema's. Each check is shown to fail on a patched copy of one side.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Union

import pytest
import yaml

from rl import config as rl_config
from rl.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "harness" / "schema" / "recipe.schema.json").read_text(encoding="utf-8"))
DOCS = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8")

# Keys only one side has, each with the reason. Everything else must exist on both sides.
SCHEMA_ONLY = {
    "defaults": "consumed by the harness loader; rl.config refuses it (an unresolved recipe)",
}
CONFIG_ONLY: dict[str, str] = {}

NO_DEFAULT = object()


# --- the schema side ------------------------------------------------------------------------


def _object_alternative(node: dict) -> dict | None:
    """The node itself when it is a mapping of schema keys, or its one such anyOf/oneOf branch."""
    if "properties" in node:
        return node
    branches = [b for b in node.get("anyOf") or node.get("oneOf") or [] if "properties" in b]
    return branches[0] if len(branches) == 1 else None


def _schema_default(node: dict) -> Any:
    return node.get("default", NO_DEFAULT)


# --- the dataclass side ---------------------------------------------------------------------


def _section_class(hint: Any) -> type | None:
    """The dataclass a field holds (also `Section | None`), else None (a scalar, list or free map)."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1 and dataclasses.is_dataclass(inner[0]):
            return inner[0]
    return None


def _free_map(hint: Any) -> bool:
    """`Any`, `dict[...]` or `dict[...] | None`: the engine carries the value without reading its keys."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return all(_free_map(a) for a in typing.get_args(hint) if a is not type(None))
    return hint is Any or typing.get_origin(hint) is dict


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return NO_DEFAULT


def _same_default(schema_value: Any, config_value: Any) -> bool:
    """A schema default `{}` means "every key at its own default": the section's default instance."""
    if dataclasses.is_dataclass(config_value):
        return schema_value == {} and config_value == type(config_value)()
    if isinstance(schema_value, bool) or isinstance(config_value, bool):
        return type(schema_value) is type(config_value) and schema_value == config_value
    return schema_value == config_value  # 3600 == 3600.0: JSON has one number type


def config_disagreements(schema: dict, cls: type, path: str = "") -> list[str]:
    """Every place where `schema` (an object node) and dataclass `cls` describe the recipe differently."""
    props = schema.get("properties", {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    problems = []
    for key in props.keys() - fields.keys():
        dotted = f"{path}.{key}" if path else key
        if dotted not in SCHEMA_ONLY:
            problems.append(f"{dotted}: in the schema, not in rl.config.{cls.__name__}")
    for key in fields.keys() - props.keys():
        dotted = f"{path}.{key}" if path else key
        if dotted not in CONFIG_ONLY:
            problems.append(f"{dotted}: in rl.config.{cls.__name__}, not in the schema")
    for key in sorted(props.keys() & fields.keys()):
        dotted = f"{path}.{key}" if path else key
        node, f = props[key], fields[key]
        theirs, ours = _schema_default(node), _field_default(f)
        if theirs is not NO_DEFAULT and ours is not NO_DEFAULT and not _same_default(theirs, ours):
            problems.append(f"{dotted}: default {theirs!r} in the schema, {ours!r} in rl.config.{cls.__name__}")
        section, obj = _section_class(hints[key]), _object_alternative(node)
        if section is not None and obj is not None:
            problems += config_disagreements(obj, section, dotted)
        elif section is not None:
            problems.append(f"{dotted}: a section ({section.__name__}) in rl.config, "
                            "not a mapping of keys in the schema")
        elif obj is not None and not _free_map(hints[key]):
            problems.append(f"{dotted}: a mapping of keys in the schema, {hints[key]} in rl.config")
    return problems


def _schema_node(schema: dict, dotted: str) -> dict:
    node = schema
    for part in dotted.split("."):
        node = _object_alternative(node)["properties"][part]
    return node


def choice_disagreements(schema: dict, choices: dict[str, tuple]) -> list[str]:
    """`_CHOICES` of rl/config.py against the schema's enums, value set by value set."""
    problems = []
    for dotted, allowed in choices.items():
        try:
            enum = _schema_node(schema, dotted).get("enum")
        except (KeyError, TypeError):
            problems.append(f"{dotted}: rl.config._CHOICES names a key the schema lacks")
            continue
        if enum is None:
            problems.append(f"{dotted}: rl.config._CHOICES restricts it, the schema has no enum")
        elif set(enum) != set(allowed):
            problems.append(f"{dotted}: schema enum {sorted(map(str, enum))}, "
                            f"rl.config._CHOICES {sorted(map(str, allowed))}")
    return problems


# A patched engine config: one new field, two sections deep (for the test below).
@dataclasses.dataclass(kw_only=True)
class PatchedWarmStart(rl_config.WarmStartConfig):
    warmup_ratio: float = 0.0


@dataclasses.dataclass(kw_only=True)
class PatchedTeacher(rl_config.TeacherConfig):
    warm_start: PatchedWarmStart = dataclasses.field(default_factory=PatchedWarmStart)


@dataclasses.dataclass(kw_only=True)
class PatchedRun(RunConfig):
    teacher: PatchedTeacher | None = None


def test_schema_and_engine_config_agree() -> None:
    assert config_disagreements(SCHEMA, RunConfig) == []


def test_schema_enums_and_engine_choices_agree() -> None:
    choices = {**rl_config._CHOICES, "teacher.family": rl_config.TEACHER_FAMILIES}
    assert choice_disagreements(SCHEMA, choices) == []


def test_a_field_on_one_side_only_is_reported() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["algorithm"]["properties"]["loss"]["properties"]["clip_mid"] = {
        "type": "number", "default": 0.1}
    assert config_disagreements(schema, RunConfig) == [
        "algorithm.loss.clip_mid: in the schema, not in rl.config.LossConfig"]

    assert config_disagreements(SCHEMA, PatchedRun) == [
        "teacher.warm_start.warmup_ratio: in rl.config.PatchedWarmStart, not in the schema"]


def test_a_default_that_differs_is_reported() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["generation"]["properties"]["max_new_tokens"]["default"] = 16
    assert config_disagreements(schema, RunConfig) == [
        "generation.max_new_tokens: default 16 in the schema, 8 in rl.config.GenerationConfig"]
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["policy"]["properties"]["distributed_optimizer"]["default"] = 0
    assert config_disagreements(schema, RunConfig) == [
        "policy.distributed_optimizer: default 0 in the schema, False in rl.config.PolicyConfig"]


def test_a_choice_that_differs_is_reported() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["data_plane"]["properties"]["backend"]["enum"].append("redis")
    assert choice_disagreements(schema, rl_config._CHOICES) == [
        "data_plane.backend: schema enum ['legacy', 'redis', 'tq'], rl.config._CHOICES ['legacy', 'tq']"]


# --- docs/recipes.md ------------------------------------------------------------------------


def schema_keys(node: dict, path: str = "") -> dict[str, dict]:
    """Every dotted key the schema names (sections and leaves), mapped to its node."""
    out: dict[str, dict] = {}
    obj = _object_alternative(node)
    for key, sub in (obj or {}).get("properties", {}).items():
        dotted = f"{path}.{key}" if path else key
        out[dotted] = sub
        out.update(schema_keys(sub, dotted))
    return out


def schema_leaves(node: dict) -> set[str]:
    keys = schema_keys(node)
    return {k for k, sub in keys.items() if _object_alternative(sub) is None or k == "engine"}


CELL = re.compile(r"(?<!\\)\|")  # a cell border; `\|` inside a cell is a literal bar


def doc_rows(text: str) -> dict[str, str]:
    """Key -> default cell of every key-table row under "## Keys" (a row may name several keys)."""
    rows: dict[str, str] = {}
    keys_part = text.split("\n## Keys\n", 1)[1]
    for line in keys_part.splitlines():
        cells = [c.strip() for c in CELL.split(line)]
        if len(cells) < 5 or cells[0] or not cells[1].startswith("`"):
            continue  # not a key row (a header, a rule, prose)
        names = re.findall(r"`([^`]+)`", cells[1])
        defaults = [d.strip() for d in cells[3].split(",")] if len(names) > 1 else [cells[3]]
        if len(defaults) != len(names):
            defaults = [cells[3]] * len(names)
        for name, default in zip(names, defaults, strict=True):
            rows[name] = default
    return rows


def _doc_default(cell: str) -> Any:
    """A default cell as a value: `x` (YAML), `required` or `none` (no default), else not comparable."""
    cell = cell.strip()
    if cell in ("required", "none") or cell.startswith("required "):
        return NO_DEFAULT
    match = re.fullmatch(r"`([^`]*)`", cell)
    if not match:
        return None  # prose ("`{}` (then filled)", "`cluster.device`"): not compared
    value = yaml.safe_load(match.group(1))
    if isinstance(value, dict) and value and match.group(1).startswith("{"):
        return match.group(1)  # `{prompt}`: a template, not a YAML mapping
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _parent_requires(schema: dict, dotted: str) -> bool:
    parent, _, key = dotted.rpartition(".")
    node = _object_alternative(_schema_node(schema, parent)) if parent else schema
    return key in node.get("required", [])


def docs_disagreements(schema: dict, text: str) -> list[str]:
    keys, rows = schema_keys(schema), doc_rows(text)
    problems = [f"{leaf}: a schema leaf with no row in docs/recipes.md"
                for leaf in sorted(schema_leaves(schema) - set(rows))]
    problems += [f"{name}: a docs/recipes.md row for a key the schema lacks" for name in sorted(set(rows) - set(keys))]
    for name in sorted(set(rows) & set(keys)):
        documented = _doc_default(rows[name])
        if documented is None or (isinstance(documented, str) and documented in keys):
            continue  # prose, or "the value of that key" (checks.hardware: `cluster.device`)
        stated = _schema_default(keys[name])
        if documented is NO_DEFAULT:
            if stated is not NO_DEFAULT:
                problems.append(f"{name}: docs say no default ({rows[name]}), the schema's is {stated!r}")
            elif rows[name].startswith("required") and not _parent_requires(schema, name):
                problems.append(f"{name}: docs say required, the schema does not require it")
        elif stated is NO_DEFAULT or not _same_default(stated, documented):
            shown = "none" if stated is NO_DEFAULT else repr(stated)
            problems.append(f"{name}: docs default {rows[name]}, schema default {shown}")
    return problems


def test_docs_recipes_md_agrees_with_the_schema() -> None:
    assert docs_disagreements(SCHEMA, DOCS) == []


def test_a_missing_or_extra_docs_row_is_reported() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["checkpoint"]["properties"]["keep_last"] = {"type": "integer", "default": 3}
    assert docs_disagreements(schema, DOCS) == ["checkpoint.keep_last: a schema leaf with no row in docs/recipes.md"]
    row = "| `checkpoint.every_steps` | int >= 0 | `0` | 0: only at the end |"
    assert row in DOCS
    extra = DOCS.replace(row, row + "\n| `checkpoint.keep_last` | int >= 1 | `3` | |")
    assert docs_disagreements(SCHEMA, extra) == [
        "checkpoint.keep_last: a docs/recipes.md row for a key the schema lacks"]


@pytest.mark.parametrize(("row", "wrong", "expect"), [
    ("| `generation.max_new_tokens` | int >= 1 | `8` |", "| `generation.max_new_tokens` | int >= 1 | `16` |",
     "generation.max_new_tokens: docs default `16`, schema default 8"),
    ("| `cluster.nodes` | int >= 1 | `1` |", "| `cluster.nodes` | int >= 1 | required |",
     "cluster.nodes: docs say no default (required), the schema's is 1"),
    ("| `cluster.device` | `cpu` \\| `h100` \\| `h200` \\| `a100` | required |",
     "| `cluster.device` | `cpu` \\| `h100` \\| `h200` \\| `a100` | `cpu` |",
     "cluster.device: docs default `cpu`, schema default none"),
])
def test_a_docs_default_that_differs_is_reported(row: str, wrong: str, expect: str) -> None:
    assert row in DOCS
    assert docs_disagreements(SCHEMA, DOCS.replace(row, wrong)) == [expect]
