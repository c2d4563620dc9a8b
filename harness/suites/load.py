"""Read a suite file strictly: unknown keys, wrong types and bad dates are errors naming the key.

Suite files live in a folder named `suites` (recipes/suites/cpu.yaml); `find_suite("cpu")`
finds one by name. Recipe paths in a suite are relative to the suite file, like a recipe's
thresholds path is relative to the recipe.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.recipe.errors import RecipeError, display_path, dotted, nearest
from harness.recipe.scales import SCALES
from harness.recipe.yamlsafe import load_file
from harness.suites.model import GATE_MODES, HARDWARE, SIGNALS, STATES, Disabled, Entry, Expect, Gate, SignalAt, Suite

SUITES_DIR = Path(__file__).resolve().parents[2] / "recipes" / "suites"
TOP_KEYS = ("name", "description", "budget_gpu_hours", "hardware", "gate", "entries")
ENTRY_KEYS = ("id", "recipe", "overrides", "scale", "hardware", "tags", "estimated_hours", "disabled",
              "expect", "signal", "resume")
EXPECT_KEYS = ("exit", "state", "engine_exit", "dead_worker", "failed_checks", "error_contains")
SIGNAL_KEYS = ("name", "at_step")
DISABLED_KEYS = ("reason", "owner", "until")
GATE_KEYS = ("mode", "window", "min_runs", "k", "rel_floor")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class SuiteError(UsageError):
    """A user error in a suite file: one line, `file:line: key: message`."""

    def __init__(self, message: str, *, where: str = "", key: str = "", suggestion: str | None = None):
        text = ": ".join([p for p in (where, key) if p] + [message])
        if suggestion:
            text += f" (did you mean '{suggestion}'?)"
        super().__init__(text)


class _Reader:
    """Typed access to the parsed file, raising SuiteError with the key's line."""

    def __init__(self, path: Path, lines: Mapping[tuple, int]):
        self.path, self.lines = path, lines

    def fail(self, keys: tuple, message: str, suggestion: str | None = None) -> SuiteError:
        line = next((self.lines[keys[:n]] for n in range(len(keys), -1, -1) if keys[:n] in self.lines), 1)
        return SuiteError(message, where=f"{display_path(self.path)}:{line}", key=dotted(keys), suggestion=suggestion)

    def mapping(self, value: Any, keys: tuple, allowed: Iterable[str], required: Iterable[str] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(keys, f"must be a mapping, not {type(value).__name__}")
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                raise self.fail(keys + (key,), f"unknown key; allowed: {', '.join(allowed)}", nearest(key, allowed))
        for key in required:
            if key not in value:
                raise self.fail(keys, f"missing required key {key!r}")
        return value

    def text(self, value: Any, keys: tuple, *, pattern: re.Pattern | None = None) -> str:
        if isinstance(value, bool):
            raise self.fail(keys, f"must be a string, not the boolean {value} (quote it: YAML reads yes/no/on/off "
                                  "as booleans)")
        if not isinstance(value, str) or not value.strip():
            raise self.fail(keys, "must be a non-empty string")
        if pattern is not None and not pattern.match(value):
            raise self.fail(keys, f"{value!r} must match {pattern.pattern}")
        return value

    def integer(self, value: Any, keys: tuple) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(keys, f"must be an integer, not {value!r}")
        return value

    def flag(self, value: Any, keys: tuple) -> bool:
        if not isinstance(value, bool):
            raise self.fail(keys, f"must be true or false, not {value!r}")
        return value

    def number(self, value: Any, keys: tuple, *, integer: bool = False, minimum: float = 0.0) -> float:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
            kind = "an integer" if integer else "a number"
            raise self.fail(keys, f"must be {kind} >= {minimum:g}, not {value!r}")
        return value

    def choice(self, value: Any, keys: tuple, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(keys, f"{value!r} is not one of {', '.join(choices)}", nearest(value, choices))
        return value

    def strings(self, value: Any, keys: tuple) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(keys, "must be a list of strings")
        return tuple(self.text(item, keys + (i,)) for i, item in enumerate(value))

    def date(self, value: Any, keys: tuple) -> dt.date:
        try:
            return dt.date.fromisoformat(self.text(value, keys))
        except ValueError:
            raise self.fail(keys, f"{value!r} is not a date YYYY-MM-DD") from None


def _disabled(r: _Reader, value: Any, keys: tuple) -> Disabled:
    data = r.mapping(value, keys, DISABLED_KEYS, required=DISABLED_KEYS)
    return Disabled(reason=r.text(data["reason"], keys + ("reason",)),
                    owner=r.text(data["owner"], keys + ("owner",)),
                    until=r.date(data["until"], keys + ("until",)))


def _expect(r: _Reader, value: Any, keys: tuple) -> Expect:
    data = r.mapping(value, keys, EXPECT_KEYS, required=("exit",))

    def opt(key: str, read: Any) -> Any:
        return None if data.get(key) is None else read(data[key], keys + (key,))

    return Expect(exit=r.integer(data["exit"], keys + ("exit",)),
                  state=opt("state", lambda v, k: r.choice(v, k, STATES)),
                  engine_exit=opt("engine_exit", r.integer), dead_worker=opt("dead_worker", r.text),
                  failed_checks=opt("failed_checks", r.strings), error_contains=opt("error_contains", r.text))


def _signal(r: _Reader, value: Any, keys: tuple) -> SignalAt:
    data = r.mapping(value, keys, SIGNAL_KEYS, required=SIGNAL_KEYS)
    return SignalAt(name=r.choice(data["name"], keys + ("name",), SIGNALS),
                    at_step=int(r.number(data["at_step"], keys + ("at_step",), integer=True, minimum=1)))


def _entry(r: _Reader, value: Any, keys: tuple, default_hardware: str | None) -> Entry:
    data = r.mapping(value, keys, ENTRY_KEYS, required=("id", "recipe"))
    hardware = data.get("hardware", default_hardware)
    if hardware is None:
        raise r.fail(keys, "missing 'hardware' (set it on the entry or at the top of the suite)")
    recipe = Path(os.path.normpath(r.path.parent / r.text(data["recipe"], keys + ("recipe",))))
    hours = data.get("estimated_hours")
    if (data.get("signal") is not None or data.get("resume")) and data.get("expect") is None:
        raise r.fail(keys, "'signal' and 'resume' plant a fault: the entry must say what it expects ('expect')")
    return Entry(
        id=r.text(data["id"], keys + ("id",), pattern=ID_RE),
        recipe=recipe,
        overrides=r.strings(data.get("overrides", []), keys + ("overrides",)),
        scale=None if data.get("scale") is None else r.choice(data["scale"], keys + ("scale",), SCALES),
        hardware=r.choice(hardware, keys + ("hardware",), HARDWARE),
        tags=r.strings(data.get("tags", []), keys + ("tags",)),
        estimated_hours=None if hours is None else float(r.number(hours, keys + ("estimated_hours",))),
        disabled=None if data.get("disabled") is None else _disabled(r, data["disabled"], keys + ("disabled",)),
        expect=None if data.get("expect") is None else _expect(r, data["expect"], keys + ("expect",)),
        signal=None if data.get("signal") is None else _signal(r, data["signal"], keys + ("signal",)),
        resume=r.flag(data.get("resume", False), keys + ("resume",)),
        line=r.lines.get(keys, 0),
    )


def _gate(r: _Reader, value: Any) -> Gate:
    keys = ("gate",)
    data = r.mapping(value, keys, GATE_KEYS)
    gate = Gate()
    return Gate(
        mode=r.choice(data.get("mode", gate.mode), keys + ("mode",), GATE_MODES),
        window=int(r.number(data.get("window", gate.window), keys + ("window",), integer=True, minimum=2)),
        min_runs=int(r.number(data.get("min_runs", gate.min_runs), keys + ("min_runs",), integer=True, minimum=2)),
        k=float(r.number(data.get("k", gate.k), keys + ("k",))),
        rel_floor=float(r.number(data.get("rel_floor", gate.rel_floor), keys + ("rel_floor",))),
    )


def load_suite(path: str | os.PathLike) -> Suite:
    """Parse the suite file at `path`. Raises SuiteError; does not resolve recipes (see validate)."""
    path = Path(os.path.normpath(Path(path).absolute()))
    try:
        raw, lines = load_file(path)
    except RecipeError as error:
        raise SuiteError(str(error).replace("a recipe", "a suite")) from None
    r = _Reader(path, lines)
    data = r.mapping(raw, (), TOP_KEYS, required=("name", "budget_gpu_hours", "entries"))
    name = r.text(data["name"], ("name",), pattern=ID_RE)
    if name != path.stem:
        raise r.fail(("name",), f"{name!r} must equal the file name {path.stem!r} (suites are found by name)")
    default_hardware = None if "hardware" not in data else r.choice(data["hardware"], ("hardware",), HARDWARE)
    if not isinstance(data["entries"], list) or not data["entries"]:
        raise r.fail(("entries",), "must be a non-empty list of entries")
    entries = tuple(_entry(r, item, ("entries", i), default_hardware) for i, item in enumerate(data["entries"]))
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if entry.id in seen:
            raise r.fail(("entries", i, "id"), f"duplicate entry id {entry.id!r}")
        seen.add(entry.id)
    return Suite(
        name=name, path=path,
        description=str(data.get("description", "")),
        budget_gpu_hours=float(r.number(data["budget_gpu_hours"], ("budget_gpu_hours",))),
        gate=_gate(r, data.get("gate", {})),
        entries=entries,
    )


def find_suite(name_or_path: str, *, root: Path = SUITES_DIR) -> Path:
    """A suite file from a path, or from a bare name looked up in recipes/suites/."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not candidate.is_file():
            raise SuiteError("suite file not found", where=str(candidate))
        return candidate
    path = root / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in root.glob("*.yaml"))
        raise SuiteError(f"no suite named {name_or_path!r} in {display_path(root)} (suites: {', '.join(known)})",
                         suggestion=nearest(name_or_path, known))
    return path


def is_suite_path(path: Path) -> bool:
    """Suite files are the YAML files directly inside a folder named `suites`."""
    return path.suffix in (".yaml", ".yml") and path.parent.name == "suites"


def find_suites(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Suite files named in, or found below, `paths` (what `harness validate` checks)."""
    found: set[Path] = set()
    for item in map(Path, paths):
        if item.is_file() and is_suite_path(item):
            found.add(item)
        elif item.is_dir():
            found.update(p for p in item.rglob("*.y*ml") if is_suite_path(p) and not p.name.startswith((".", "_")))
    return sorted(found)
