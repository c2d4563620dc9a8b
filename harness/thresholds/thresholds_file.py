"""Thresholds files: per recipe, the checks a run must pass, each with why it holds and since when.

    recipe: arith_grpo_cpu
    checks:
      - name: reward_rises
        expr: "mean(train/reward, -5) > mean(train/reward, 1, 5) + 0.1"
        why: "derived from 3 runs: ..."     # required: a threshold nobody can justify is a flake
        since: 2026-11-30                   # required: when this threshold was last set
        hardware: [cpu]                     # optional: the classes it applies to; absent = all

Every problem is a ThresholdFileError that starts with file:line, found when the file is loaded,
not when a run that took hours is checked. The file is read by harness.yamlsafe, the loader of
every YAML file (bounded read, alias and node budgets, duplicate keys refused), like a recipe.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import shown
from harness.thresholds.errors import ThresholdFileError, ThresholdSyntaxError
from harness.thresholds.parser import parse
from harness.thresholds.tree import Expr, metric_names
from harness.yamlsafe import THRESHOLDS, Lines, YamlError, load_path

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
    """The loaded file's data and key lines, so that each error can name its line."""

    def __init__(self, path: Path, lines: Lines) -> None:
        self.path = path
        self.lines = lines

    def error(self, at: tuple, message: str) -> ThresholdFileError:
        return ThresholdFileError(f"{self.path}:{self.lines.get(at, self.lines.get((), 1))}: {message}")

    def mapping(self, value: object, at: tuple, what: str, allowed: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise self.error(at, f"{what} must be a mapping")
        for name in value:   # the loader refused duplicate and non-text keys
            if name not in allowed:
                raise self.error((*at, name), f"unknown key {shown(name)} in {what} (allowed: {', '.join(allowed)})")
        return value


def _text(file: _File, value: object, at: tuple, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise file.error(at, f"{what} must be non-empty text")
    return value.strip()


def _since(file: _File, value: object, at: tuple, what: str) -> dt.date:
    if type(value) is str:
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    if type(value) is not dt.date:
        raise file.error(at, f"{what}.since must be a date like 2026-11-30, got {shown(value)}")
    return value


def _hardware(file: _File, value: object, at: tuple, what: str) -> tuple[str, ...]:
    classes = [value] if isinstance(value, str) else value
    if (not isinstance(classes, list) or not classes
            or not all(isinstance(c, str) and _HARDWARE.fullmatch(c) for c in classes)):
        raise file.error(at, f"{what}.hardware must be a non-empty list of hardware classes like [cpu, h100]")
    if len(set(classes)) != len(classes):
        raise file.error(at, f"{what}.hardware lists a class twice")
    return tuple(classes)


def _check(file: _File, value: object, index: int) -> ThresholdCheck:
    at = ("checks", index)
    entries = file.mapping(value, at, f"checks[{index}]", CHECK_KEYS)
    missing = [key for key in _REQUIRED if key not in entries]
    if missing:
        raise file.error(at, f"checks[{index}] is missing {', '.join(missing)}")
    name = _text(file, entries["name"], (*at, "name"), f"checks[{index}].name")
    if not _NAME.fullmatch(name):
        raise file.error((*at, "name"), f"check name {shown(name)} must match {_NAME.pattern}")
    what = f"check {name!r}"
    expr = _text(file, entries["expr"], (*at, "expr"), f"{what}.expr")
    try:
        tree = parse(expr)
    except ThresholdSyntaxError as exc:
        where = f" at column {exc.column} of expr" if exc.column else ""
        raise file.error((*at, "expr"), f"{what}: {exc.reason}{where}") from None
    if not metric_names(tree):  # `1 < 2` would pass every run: a check with no evidence
        raise file.error((*at, "expr"), f"{what} reads no metric, so no run could fail it: {shown(expr, 200)}")
    hardware = _hardware(file, entries["hardware"], (*at, "hardware"), what) if "hardware" in entries else None
    return ThresholdCheck(
        name=name,
        expr=expr,
        tree=tree,
        why=_text(file, entries["why"], (*at, "why"), f"{what}.why"),
        since=_since(file, entries["since"], (*at, "since"), what),
        hardware=hardware,
        path=str(file.path),
        line=file.lines[at],
    )


def _no_clash(file: _File, checks: list[ThresholdCheck]) -> None:
    """A name may repeat only across explicit, disjoint hardware lists (one threshold per class)."""
    by_name: dict[str, ThresholdCheck] = {}
    for index, check in enumerate(checks):
        other = by_name.get(check.name)
        if other is not None:
            overlap = other.hardware is None or check.hardware is None or set(other.hardware) & set(check.hardware)
            if overlap:
                raise file.error(("checks", index), f"duplicate check name {check.name!r} (first at line "
                                 f"{other.line}); a name may repeat only with disjoint hardware lists")
        by_name[check.name] = check


def _load(path: Path) -> tuple[dict, Lines]:
    """The file's mapping and key lines, through the one YAML loader (bounded, budgeted)."""
    try:
        return load_path(path, name=str(path), dialect=THRESHOLDS, kind="thresholds", what="the thresholds file")
    except YamlError as exc:
        where = exc.where if ":" in exc.where.removeprefix(str(path)) else f"{exc.where}:1"
        raise ThresholdFileError(": ".join(part for part in (where, exc.key, exc.message) if part)) from None


def load_thresholds(path: str | Path, *, hardware: str | None, recipe: str | None = None) -> list[ThresholdCheck]:
    """Load and validate a thresholds file; return the checks that apply to `hardware`.

    Args:
        hardware: a hardware class (the recipe's checks.hardware); None returns every check.
        recipe: when given, the file's `recipe:` must name it.

    Raises:
        ThresholdFileError: `file:line: ...` for any problem, including no check applying.
    """
    path = Path(path)
    data, lines = _load(path)
    file = _File(path, lines)
    entries = file.mapping(data, (), "the thresholds file", TOP_KEYS)
    for key in TOP_KEYS:
        if key not in entries:
            raise file.error((), f"missing top-level key {key!r}")
    named = _text(file, entries["recipe"], ("recipe",), "recipe")
    if recipe is not None and named != recipe:
        raise file.error(("recipe",), f"thresholds are for recipe {shown(named)}, not {shown(recipe)}")
    checks = entries["checks"]
    if not isinstance(checks, list) or not checks:
        raise file.error(("checks",), "checks must be a non-empty list")
    parsed = [_check(file, value, index) for index, value in enumerate(checks)]
    _no_clash(file, parsed)
    if hardware is None:
        return parsed
    applying = [check for check in parsed if check.hardware is None or hardware in check.hardware]
    if not applying:
        classes = sorted({c for check in parsed for c in check.hardware or ()})
        raise file.error(("checks",),
                         f"no check applies to hardware {hardware!r} (classes in file: {', '.join(classes)})")
    return applying
