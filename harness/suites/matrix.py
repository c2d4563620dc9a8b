"""Select, shard and print a suite's entries: the CI matrix.

Shards are balanced by estimated hours with the longest-first greedy rule (each entry, longest
first, goes to the shard with the least work so far; ties go to the lower shard), which keeps
the longest shard within one entry of the best split and is the same on every machine.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.errors import UsageError
from harness.recipe.errors import display_path
from harness.suites.model import Entry, Suite
from harness.suites.validate import Estimate

FORMATS = ("text", "json", "github")


@dataclass(frozen=True, kw_only=True)
class Shard:
    """Shard `index` of `count`, 1-based as people count: `--shard 2/4`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise UsageError(f"--shard {text!r}: expected I/N, e.g. 1/4") from None
        if not 1 <= index <= count:
            raise UsageError(f"--shard {text!r}: I must be between 1 and N")
        return cls(index=index, count=count)


def select(suite: Suite, *, hardware: Sequence[str] = (), tags: Sequence[str] = (),
           ids: Sequence[str] = ()) -> list[Entry]:
    """Entries matching every given filter (hardware class, any of the tags, exact ids)."""
    for entry_id in ids:
        try:
            suite.entry(entry_id)
        except KeyError as error:
            raise UsageError(error.args[0]) from None
    return [e for e in suite.entries
            if (not hardware or e.hardware in hardware)
            and (not tags or set(tags) & set(e.tags))
            and (not ids or e.id in ids)]


def split_shards(entries: Sequence[Entry], estimates: Mapping[str, Estimate], count: int) -> list[list[Entry]]:
    """`count` lists of entries with balanced estimated hours; disabled entries cost nothing."""
    assert count >= 1
    shards: list[list[Entry]] = [[] for _ in range(count)]
    load = [0.0] * count

    def cost(entry: Entry) -> float:
        return estimates[entry.id].hours if entry.enabled and entry.id in estimates else 0.0

    for entry in sorted(entries, key=lambda e: (-cost(e), e.id)):
        target = min(range(count), key=lambda i: (load[i], i))
        shards[target].append(entry)
        load[target] += cost(entry)
    return shards


def shard_of(entries: Sequence[Entry], estimates: Mapping[str, Estimate], shard: Shard | None) -> list[Entry]:
    """The entries of one shard, in suite order (all of them when shard is None)."""
    if shard is None:
        return list(entries)
    chosen = {e.id for e in split_shards(entries, estimates, shard.count)[shard.index - 1]}
    return [e for e in entries if e.id in chosen]


def matrix_rows(suite: Suite, entries: Iterable[Entry], estimates: Mapping[str, Estimate]) -> list[dict]:
    """One flat row per entry: what a CI job needs to run it and label it."""
    rows = []
    for e in entries:
        est = estimates.get(e.id)
        rows.append({
            "suite": suite.name,
            "id": e.id,
            "recipe": display_path(e.recipe),
            "overrides": " ".join(shlex.quote(o) for o in e.overrides),
            "scale": e.scale or "",
            "hardware": e.hardware,
            "tags": ",".join(e.tags),
            "enabled": e.enabled,
            "estimated_hours": None if est is None else round(est.hours, 3),
            "gpu_hours": None if est is None else round(est.gpu_hours, 2),
        })
    return rows


def format_matrix(rows: list[dict], fmt: str) -> str:
    """text: a table; json: the rows; github: `{"include": [...]}` for strategy.matrix (enabled only)."""
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "github":
        return json.dumps({"include": [r for r in rows if r["enabled"]]}, separators=(",", ":")) + "\n"
    if fmt != "text":
        raise UsageError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    header = ("id", "hardware", "scale", "hours", "gpu-h", "tags", "recipe")
    table = [header] + [(r["id"] + ("" if r["enabled"] else " (disabled)"), r["hardware"], r["scale"] or "-",
                         "?" if r["estimated_hours"] is None else f"{r['estimated_hours']:.2f}",
                         "?" if r["gpu_hours"] is None else f"{r['gpu_hours']:.1f}", r["tags"] or "-",
                         " ".join(filter(None, [r["recipe"], r["overrides"]]))) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    lines = ["  ".join([str(c).ljust(w) for c, w in zip(row, widths)] + [str(row[-1])]).rstrip() for row in table]
    return "\n".join(lines) + "\n"
