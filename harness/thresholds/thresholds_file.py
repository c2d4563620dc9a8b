"""Thresholds files: per recipe, the checks a run must pass, each with why it holds and since when.

    recipe: arith_grpo_cpu
    checks:
      - name: reward_rises
        expr: "mean(train/reward, -5) > mean(train/reward, 1, 5) + 0.1"
        why: "derived from 3 runs: ..."     # required: a threshold nobody can justify is a flake
        since: 2026-11-30                   # required: when this threshold was last set
        hardware: [cpu]                     # optional: the classes it applies to; absent = all

Every problem is a ThresholdFileError that starts with file:line, found when the file is loaded,
not when a run that took hours is checked. The file is read through harness.bounded and its
nesting counted before PyYAML composes it (harness.yamlguard), like a recipe.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.bounded import BoundedReadError, read_bytes
from harness.thresholds.errors import ThresholdFileError, ThresholdSyntaxError
from harness.thresholds.parser import parse
from harness.thresholds.tree import Expr, metric_names
from harness.yamlguard import first_problem

# libyaml's parser when PyYAML has it (composing in C: ~1 ms where the Python one takes ~10 ms on
# every `harness check`); its nodes carry the same line marks and resolve the same tags.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TOP_KEYS = ("recipe", "checks")
CHECK_KEYS = ("name", "expr", "why", "since", "hardware")
_REQUIRED = ("name", "expr", "why", "since")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_HARDWARE = re.compile(r"[a-z0-9_]{1,32}")


@dataclass(frozen=True, kw_only=True)
class ThresholdCheck:
    """One parsed check. hardware None means it applies to every hardware class."""

    name: str
    expr: str
    tree: Expr
    why: str
    since: dt.date
    hardware: tuple[str, ...] | None
    path: str
    line: int


class _File:
    """Walks the composed YAML nodes so that each error can name its line."""

    def __init__(self, path: Path, loader: yaml.SafeLoader) -> None:
        self.path = path
        self.loader = loader

    def error(self, node: yaml.Node | None, message: str) -> ThresholdFileError:
        line = node.start_mark.line + 1 if node is not None else 1
        return ThresholdFileError(f"{self.path}:{line}: {message}")

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping")
        entries: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in allowed:
                raise self.error(key, f"unknown key {name!r} in {what} (allowed: {', '.join(allowed)})")
            if name in entries:
                raise self.error(key, f"duplicate key {name!r} in {what}")
            entries[name] = (key, value)
        return entries

    def value(self, node: yaml.Node) -> object:
        return self.loader.construct_object(node, deep=True)


def _text(file: _File, node: yaml.Node, what: str) -> str:
    value = file.value(node)
    if not isinstance(value, str) or not value.strip():
        raise file.error(node, f"{what} must be non-empty text")
    return value.strip()


def _since(file: _File, node: yaml.Node, what: str) -> dt.date:
    value = file.value(node)
    if type(value) is str:
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    if type(value) is not dt.date:
        raise file.error(node, f"{what}.since must be a date like 2026-11-30, got {value!r}")
    return value


def _hardware(file: _File, node: yaml.Node, what: str) -> tuple[str, ...]:
    value = file.value(node)
    classes = [value] if isinstance(value, str) else value
    if (not isinstance(classes, list) or not classes
            or not all(isinstance(c, str) and _HARDWARE.fullmatch(c) for c in classes)):
        raise file.error(node, f"{what}.hardware must be a non-empty list of hardware classes like [cpu, h100]")
    if len(set(classes)) != len(classes):
        raise file.error(node, f"{what}.hardware lists a class twice")
    return tuple(classes)


def _check(file: _File, node: yaml.Node, index: int) -> ThresholdCheck:
    entries = file.mapping(node, f"checks[{index}]", CHECK_KEYS)
    missing = [key for key in _REQUIRED if key not in entries]
    if missing:
        raise file.error(node, f"checks[{index}] is missing {', '.join(missing)}")
    name_node = entries["name"][1]
    name = _text(file, name_node, f"checks[{index}].name")
    if not _NAME.fullmatch(name):
        raise file.error(name_node, f"check name {name!r} must match {_NAME.pattern}")
    what = f"check {name!r}"
    expr_node = entries["expr"][1]
    expr = _text(file, expr_node, f"{what}.expr")
    try:
        tree = parse(expr)
    except ThresholdSyntaxError as exc:
        where = f" at column {exc.column} of expr" if exc.column else ""
        raise file.error(expr_node, f"{what}: {exc.reason}{where}") from None
    if not metric_names(tree):  # `1 < 2` would pass every run: a check with no evidence
        raise file.error(expr_node, f"{what} reads no metric, so no run could fail it: {expr}")
    hardware = _hardware(file, entries["hardware"][1], what) if "hardware" in entries else None
    return ThresholdCheck(
        name=name,
        expr=expr,
        tree=tree,
        why=_text(file, entries["why"][1], f"{what}.why"),
        since=_since(file, entries["since"][1], what),
        hardware=hardware,
        path=str(file.path),
        line=node.start_mark.line + 1,
    )


def _no_clash(file: _File, checks: list[tuple[ThresholdCheck, yaml.Node]]) -> None:
    """A name may repeat only across explicit, disjoint hardware lists (one threshold per class)."""
    by_name: dict[str, ThresholdCheck] = {}
    for check, node in checks:
        other = by_name.get(check.name)
        if other is not None:
            overlap = other.hardware is None or check.hardware is None or set(other.hardware) & set(check.hardware)
            if overlap:
                raise file.error(node, f"duplicate check name {check.name!r} (first at line {other.line}); "
                                       "a name may repeat only with disjoint hardware lists")
        by_name[check.name] = check


def _compose(path: Path) -> tuple[yaml.Node, yaml.SafeLoader]:
    """The file's root node: read bounded (no FIFO, no /dev/zero), depth checked before composing."""
    text = _read(path)
    loader = None
    try:
        problem = first_problem(text)
        if problem is not None:
            raise ThresholdFileError(f"{path}:{problem[0]}: {problem[1]}")
        loader = _LOADER(text)
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        if loader is not None:
            loader.dispose()
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise ThresholdFileError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    if node is None:
        raise ThresholdFileError(f"{path}:1: empty thresholds file")
    return node, loader


def _read(path: Path) -> str:
    try:
        raw = read_bytes(path, kind="thresholds")
    except BoundedReadError as exc:
        raise ThresholdFileError(f"{path}:1: cannot read: {exc.reason}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ThresholdFileError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None


def load_thresholds(path: str | Path, *, hardware: str | None, recipe: str | None = None) -> list[ThresholdCheck]:
    """Load and validate a thresholds file; return the checks that apply to `hardware`.

    Args:
        hardware: a hardware class (the recipe's checks.hardware); None returns every check.
        recipe: when given, the file's `recipe:` must name it.

    Raises:
        ThresholdFileError: `file:line: ...` for any problem, including no check applying.
    """
    path = Path(path)
    root, loader = _compose(path)
    file = _File(path, loader)
    try:
        entries = file.mapping(root, "the thresholds file", TOP_KEYS)
        for key in TOP_KEYS:
            if key not in entries:
                raise file.error(root, f"missing top-level key {key!r}")
        recipe_node = entries["recipe"][1]
        named = _text(file, recipe_node, "recipe")
        if recipe is not None and named != recipe:
            raise file.error(recipe_node, f"thresholds are for recipe {named!r}, not {recipe!r}")
        checks_node = entries["checks"][1]
        if not isinstance(checks_node, yaml.SequenceNode) or not checks_node.value:
            raise file.error(checks_node, "checks must be a non-empty list")
        parsed = [(_check(file, node, index), node) for index, node in enumerate(checks_node.value)]
    except yaml.constructor.ConstructorError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise ThresholdFileError(f"{path}:{line}: {exc.problem}") from None
    finally:
        loader.dispose()
    _no_clash(file, parsed)
    if hardware is None:
        return [check for check, _ in parsed]
    applying = [check for check, _ in parsed if check.hardware is None or hardware in check.hardware]
    if not applying:
        classes = sorted({c for check, _ in parsed for c in check.hardware or ()})
        raise file.error(checks_node,
                         f"no check applies to hardware {hardware!r} (classes in file: {', '.join(classes)})")
    return applying
