"""Safe, precise YAML: plain data plus the line of every key.

PyYAML's safe_load forgets where things came from, expands aliases without a bound (the
"billion laughs") and lets a duplicate key silently win. Recipes need the opposite, so we
compose nodes with PyYAML and build the data ourselves, counting every node we expand.
The file is read through harness.bounded (no FIFO, no /dev/zero) and its nesting is counted
before composing (harness.yamlguard), because PyYAML's composer recurses per level.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.bounded import CAPS, BoundedReadError, read_bytes
from harness.recipe.errors import RecipeError, display_path, dotted
from harness.yamlguard import MAX_DEPTH, first_problem

MAX_BYTES = CAPS["recipe"]  # a recipe is a few KiB; anything near a MiB is a mistake or an attack
MAX_NODES = 10_000       # nodes built, aliases expanded (a large recipe has a few hundred)
MAX_ALIASES = 100        # alias uses per document

Lines = dict[tuple, int]

_TAG = "tag:yaml.org,2002:"
_COLLECTION_TAGS = {_TAG + "map", _TAG + "seq"}
_PLAIN_TAGS = {_TAG + t for t in ("null", "bool", "int", "float", "str")}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader with its own resolver table, so `1e-4` is a float (YAML 1.1 wants `1.0e-4`).

    Its parser is libyaml's when PyYAML has it (a resolved recipe composes in ~1 ms instead of
    ~10, on every `harness check`); the nodes, their line marks and the resolver are the same.
    """


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    _TAG + "float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def reads_as_string(text: str) -> bool:
    """Whether `text`, written unquoted, reads back as a string under these rules (`1e5` and
    `0E0` do not: they are floats here, though YAML 1.1 and PyYAML's dumper call them strings)."""
    # the resolver reads only class attributes (its table), so the class stands in for an instance
    return yaml.resolver.BaseResolver.resolve(_Loader, yaml.ScalarNode, text, (True, False)) == _TAG + "str"


def parse_text(text: str, *, where: str) -> object:
    """A YAML value from a short text (an override's right-hand side), with the same rules."""
    data, _ = _build(text, name=where, line_prefix=False)
    return data


def load_file(path: Path) -> tuple[dict, Lines]:
    """The mapping in `path` and the 1-based line of each key path (() is the file itself)."""
    name = display_path(path)
    try:
        raw = read_bytes(path, kind="recipe")
    except BoundedReadError as exc:
        raise RecipeError(f"cannot read: {exc.reason}", where=name) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecipeError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", where=f"{name}:{line}") from None
    data, lines = _build(text, name=name, line_prefix=True)
    if data is None:
        raise RecipeError("empty file: a recipe is a YAML mapping", where=f"{name}:1")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise RecipeError(f"a recipe must be a YAML mapping, not {kind}", where=f"{name}:1")
    return data, lines


def _build(text: str, *, name: str, line_prefix: bool) -> tuple[object, Lines]:
    loader = None
    try:
        problem = first_problem(text)
        if problem is not None:
            line, message = problem
            raise RecipeError(message, where=f"{name}:{line}" if line_prefix else name)
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {(): 1}
        return _Builder(loader, name, line_prefix=line_prefix).build(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if (mark and line_prefix) else name
        detail = exc.problem or "invalid YAML"
        if exc.context:
            detail = f"{exc.context}, {detail}"
        raise RecipeError(f"YAML syntax error: {detail}", where=where) from None
    except yaml.YAMLError as exc:   # none other is known; kept one line all the same
        raise RecipeError(f"YAML error: {exc}", where=name) from None
    finally:
        if loader is not None:
            loader.dispose()


class _Builder:
    """Turns a composed node tree into dicts, lists and scalars, recording key lines."""

    def __init__(self, loader: _Loader, name: str, *, line_prefix: bool):
        self.loader = loader
        self.name = name
        self.line_prefix = line_prefix   # False for an override: its one line is not a file line
        self.lines: Lines = {}
        self.seen: set[int] = set()
        self.num_nodes = 0
        self.num_aliases = 0

    def build(self, node: Node) -> tuple[object, Lines]:
        self.lines[()] = node.start_mark.line + 1
        return self._node(node, (), ()), self.lines

    def _fail(self, message: str, node: Node, path: tuple) -> RecipeError:
        where = f"{self.name}:{node.start_mark.line + 1}" if self.line_prefix else self.name
        return RecipeError(message, where=where, key=dotted(path))

    def _node(self, node: Node, path: tuple, stack: tuple[int, ...]) -> object:
        self.num_nodes += 1
        if self.num_nodes > MAX_NODES:
            raise self._fail(f"more than {MAX_NODES} YAML nodes after alias expansion (an alias bomb?)",
                             node, path)
        if id(node) in stack:
            raise self._fail("recursive YAML alias", node, path)
        if len(stack) > MAX_DEPTH:
            raise self._fail(f"nested deeper than {MAX_DEPTH} levels", node, path)
        if id(node) in self.seen and not isinstance(node, ScalarNode):
            self.num_aliases += 1
            if self.num_aliases > MAX_ALIASES:
                raise self._fail(f"more than {MAX_ALIASES} YAML alias uses (an alias bomb?)", node, path)
        self.seen.add(id(node))
        stack = stack + (id(node),)
        if isinstance(node, (MappingNode, SequenceNode)) and node.tag not in _COLLECTION_TAGS:
            raise self._fail(f"unsupported YAML type {node.tag.removeprefix(_TAG)!r}", node, path)
        if isinstance(node, MappingNode):
            return self._mapping(node, path, stack)
        if isinstance(node, SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.lines.setdefault(path + (i,), item.start_mark.line + 1)
                items.append(self._node(item, path + (i,), stack))
            return items
        return self._scalar(node, path)

    def _mapping(self, node: MappingNode, path: tuple, stack: tuple[int, ...]) -> dict:
        out: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _TAG + "merge":
                raise self._fail("YAML merge keys ('<<') are not supported; use defaults:", key_node, path)
            if not isinstance(key_node, ScalarNode) or key_node.tag != _TAG + "str":
                shown = key_node.value if isinstance(key_node, ScalarNode) else "a collection"
                raise self._fail(f"keys must be strings, got {shown!r}; quote it", key_node, path)
            key = key_node.value
            if key in out:
                first = self.lines[path + (key,)]
                raise self._fail(f"duplicate key (first set on line {first})", key_node, path + (key,))
            self.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = self._node(value_node, path + (key,), stack)
        return out

    def _scalar(self, node: ScalarNode, path: tuple) -> object:
        if node.tag not in _PLAIN_TAGS:
            kind = node.tag.removeprefix(_TAG)
            raise self._fail(f"unsupported YAML type {kind!r} for {node.value!r}; quote it to make it a string",
                             node, path)
        value = self.loader.construct_object(node, deep=True)
        if isinstance(value, float) and not math.isfinite(value):   # .nan, .inf, 1e999
            raise self._fail(f"numbers must be finite, not {node.value!r}", node, path)
        return value
