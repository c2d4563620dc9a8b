"""What a suite is: named entries (recipe + overrides + scale + hardware + tags), a budget, a gate.

A suite is data, not a shell script: each entry names one recipe run, the hardware class it
needs and the tags that select it; a disabled entry carries who disabled it, why and until
when, so nothing stays switched off by accident. See docs/nightly.md.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

HARDWARE = ("cpu", "h100", "h200", "a100")
GATE_MODES = ("fail", "warn", "off")


@dataclass(frozen=True, kw_only=True)
class Disabled:
    """Why an entry does not run, who owns turning it back on, and the date it must be back by."""

    reason: str
    owner: str
    until: dt.date

    def expired(self, today: dt.date) -> bool:
        """An entry disabled past its date is an error: it has been forgotten."""
        return today > self.until


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One recipe run of a suite.

    recipe is absolute (the suite file names it relative to itself); estimated_hours is the
    expected wall-clock hours of one run, or None to use the recipe's limits.timeout_s.
    """

    id: str
    recipe: Path
    overrides: tuple[str, ...] = ()
    scale: str | None = None
    hardware: str
    tags: tuple[str, ...] = ()
    estimated_hours: float | None = None
    disabled: Disabled | None = None
    line: int = 0

    @property
    def enabled(self) -> bool:
        return self.disabled is None

    def harness_args(self) -> list[str]:
        """The arguments of `harness run` for this entry (without --out)."""
        args = [str(self.recipe), *self.overrides]
        return args + (["--scale", self.scale] if self.scale else [])


@dataclass(frozen=True, kw_only=True)
class Gate:
    """The performance gate of a suite: how a run's step time and tokens/s are held to history.

    The noise band is median +/- k * max(1.4826 * MAD, rel_floor * |median|) over the last
    `window` passing runs of the same entry and hardware; fewer than `min_runs` means no verdict.
    mode "fail" fails the entry on a regression, "warn" only reports it, "off" skips the gate.
    """

    mode: str = "warn"
    window: int = 20
    min_runs: int = 5
    k: float = 3.0
    rel_floor: float = 0.02


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A named list of entries with a GPU-hour budget (0 for CPU-only suites)."""

    name: str
    path: Path
    description: str = ""
    budget_gpu_hours: float
    gate: Gate = field(default_factory=Gate)
    entries: tuple[Entry, ...] = ()

    def entry(self, entry_id: str) -> Entry:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        known = ", ".join(e.id for e in self.entries)
        raise KeyError(f"suite {self.name!r} has no entry {entry_id!r} (entries: {known})")

    @property
    def enabled(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.enabled)
