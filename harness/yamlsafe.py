"""The one YAML loader for every file the harness reads: plain data plus the line of every key.

Recipes, thresholds files, suites, run dirs' recipe.yaml and the reference's recipes (the
importer) all come through here. PyYAML's safe_load forgets where things came from, expands
aliases without a bound (the "billion laughs": 458 bytes of thresholds took 2.4 GB) and lets a
duplicate key silently win. So we compose nodes with PyYAML and build the data ourselves,
counting every node we expand. The file is read through harness.bounded (no FIFO, no /dev/zero,
a byte cap per kind) and its nesting is counted before composing (harness.yamlguard), because
PyYAML's composer recurses per level. Errors never format an expanded value: each value they
name goes through harness.errors.shown.

A `Dialect` says what a kind of file may hold: the resolver (which plain scalars are numbers),
the scalar types it accepts, and whether .inf and .nan are allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.bounded import BoundedReadError, read_bytes
from harness.errors import UserError, capped_line, dotted, shown
from harness.yamlguard import MAX_DEPTH, first_problem

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_NODES", "PLAIN_TAGS", "RECIPE", "THRESHOLDS", "Dialect", "Lines",
           "YamlError", "load_path", "load_text", "reads_as_string"]

MAX_NODES = 10_000       # nodes built, aliases expanded (a large recipe has a few hundred)
MAX_ALIASES = 100        # alias uses per document

Lines = dict[tuple, int]

_TAG = "tag:yaml.org,2002:"
_COLLECTION_TAGS = {_TAG + "map", _TAG + "seq"}
PLAIN_TAGS = frozenset(_TAG + t for t in ("null", "bool", "int", "float", "str"))


class YamlError(UserError):
    """A YAML file or value that cannot be used: message, where ("file:line" or a name), key path."""

    def __init__(self, message: str, *, where: str, key: str = "") -> None:
        self.message, self.where, self.key = message, where, key
        super().__init__(": ".join(part for part in (where, key, message) if part))


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader with its own resolver table, so `1e-4` is a float (YAML 1.1 wants `1.0e-4`).

    Its parser is libyaml's when PyYAML has it (a resolved recipe composes in ~1 ms instead of
    ~10, on every `harness check`); the nodes, their line marks and the resolver are the same.
    """


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    _TAG + "float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


@dataclass(frozen=True)
class Dialect:
    """What one kind of YAML file may hold."""

    loader: type                  # a SafeLoader subclass: its resolver table decides what a plain scalar is
    scalar_tags: frozenset[str]   # scalar types accepted; anything else is refused with its line
    finite_only: bool = True      # refuse .nan, .inf and 1e999


RECIPE = Dialect(_Loader, PLAIN_TAGS)
THRESHOLDS = Dialect(_Loader, PLAIN_TAGS | {_TAG + "timestamp"})   # `since: 2026-11-30` is a date


def reads_as_string(text: str) -> bool:
    """Whether `text`, written unquoted, reads back as a string under these rules (`1e5` and
    `0E0` do not: they are floats here, though YAML 1.1 and PyYAML's dumper call them strings)."""
    # the resolver reads only class attributes (its table), so the class stands in for an instance
    return yaml.resolver.BaseResolver.resolve(_Loader, yaml.ScalarNode, text, (True, False)) == _TAG + "str"


def load_text(text: str, *, name: str, dialect: Dialect, line_prefix: bool = True,
              whole_value: bool = False) -> tuple[object, Lines]:
    """The value in `text` and the 1-based line of each key path (() is the document).

    name: what errors say the text is (a file name, or an override's description);
    line_prefix: whether errors add `:line` to it (not for a one-line override value);
    whole_value: refuse text that YAML reads only in part (`pw #tail` is `pw`: a comment).
    Raises YamlError, one line.
    """
    loader = None
    where = name
    try:
        problem = first_problem(text)
        if problem is not None:
            line, message = problem
            raise YamlError(message, where=f"{name}:{line}" if line_prefix else name)
        loader = dialect.loader(text)
        node = loader.get_single_node()
        if whole_value:
            _whole(node, text, name)
        if node is None:
            return None, {(): 1}
        return _Builder(loader, dialect, name, line_prefix=line_prefix).build(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if (mark and line_prefix) else name
        detail = exc.problem or "invalid YAML"
        if exc.context:
            detail = f"{exc.context}, {detail}"
        raise YamlError(f"YAML syntax error: {capped_line(detail, 300)}", where=where) from None  # it may quote us
    except yaml.YAMLError as exc:   # none other is known; kept one line all the same
        raise YamlError(f"YAML error: {type(exc).__name__}", where=where) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_path(path: Path, *, name: str, dialect: Dialect, kind: str, what: str) -> tuple[dict, Lines]:
    """The mapping in file `path` (read bounded, as `kind`) and its key lines; `what` names the
    kind of file in errors ("a recipe"). Raises YamlError, one line, starting with `name`."""
    try:
        raw = read_bytes(path, kind=kind)
    except BoundedReadError as exc:
        raise YamlError(f"cannot read: {exc.reason}", where=name) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise YamlError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", where=f"{name}:{line}") from None
    data, lines = load_text(text, name=name, dialect=dialect)
    if data is None:
        raise YamlError(f"empty file: {what} is a YAML mapping", where=f"{name}:1")
    if not isinstance(data, dict):
        kind_of = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise YamlError(f"{what} must be a YAML mapping, not {kind_of}", where=f"{name}:1")
    return data, lines


def _whole(node: Node | None, text: str, name: str) -> None:
    """Refuse a value YAML reads only in part: what follows it can only be a comment."""
    end = node.end_mark.index if node is not None else 0
    if text[end:].strip():
        raise YamlError("YAML would read this value only up to a comment (' #' or a leading '#'); "
                        "quote the whole value to keep it", where=name)


class _Builder:
    """Turns a composed node tree into dicts, lists and scalars, recording key lines."""

    def __init__(self, loader: yaml.SafeLoader, dialect: Dialect, name: str, *, line_prefix: bool):
        self.loader = loader
        self.dialect = dialect
        self.name = name
        self.line_prefix = line_prefix   # False for an override: its one line is not a file line
        self.lines: Lines = {}
        self.seen: set[int] = set()
        self.num_nodes = 0
        self.num_aliases = 0

    def build(self, node: Node) -> tuple[object, Lines]:
        self.lines[()] = node.start_mark.line + 1
        return self._node(node, (), ()), self.lines

    def _fail(self, message: str, node: Node, path: tuple) -> YamlError:
        where = f"{self.name}:{node.start_mark.line + 1}" if self.line_prefix else self.name
        return YamlError(message, where=where, key=dotted(path))

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
            raise self._fail(f"unsupported YAML type {shown(node.tag.removeprefix(_TAG))}", node, path)
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
                what = shown(key_node.value) if isinstance(key_node, ScalarNode) else "a collection"
                raise self._fail(f"keys must be strings, got {what}; quote it", key_node, path)
            key = key_node.value
            if key in out:
                first = self.lines[path + (key,)]
                raise self._fail(f"duplicate key (first set on line {first})", key_node, path + (key,))
            self.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = self._node(value_node, path + (key,), stack)
        return out

    def _scalar(self, node: ScalarNode, path: tuple) -> object:
        if node.tag not in self.dialect.scalar_tags:
            kind = shown(node.tag.removeprefix(_TAG))
            raise self._fail(f"unsupported YAML type {kind} for {shown(node.value)}; quote it to make it a string",
                             node, path)
        try:
            value = self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError):  # `2026-13-45` resolves as a date; an integer past Python's digit limit
            kind = shown(node.tag.removeprefix(_TAG))
            raise self._fail(f"{shown(node.value)} is not a valid {kind}; quote it to make it a string",
                             node, path) from None
        if self.dialect.finite_only and isinstance(value, float) and not math.isfinite(value):   # .nan, 1e999
            raise self._fail(f"numbers must be finite, not {shown(node.value)}", node, path)
        return value

