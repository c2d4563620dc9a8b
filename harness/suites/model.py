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
STATES = ("completed", "failed", "interrupted", "timeout")
SIGNALS = ("SIGTERM", "SIGINT")


@dataclass(frozen=True, kw_only=True)
class Expect:
    """The verdict a fault entry must produce; an entry whose run differs in any given key FAILS.

    exit is `harness run`'s exit code (after the resume, when the entry resumes); the others are
    optional and compared only when given: state, engine_exit, dead_worker and error_contains
    against the run's status.json (`state`, `exit_code`, `dead_worker`, a substring of `error`),
    failed_checks against the set of checks that failed in result.json (exactly). Whatever the
    expectation, a fault entry also fails when a process of its run outlives `harness run`, or
    when a metrics step seen during the run is missing afterwards, duplicated or out of order.
    """

    exit: int
    state: str | None = None
    engine_exit: int | None = None
    dead_worker: str | None = None
    failed_checks: tuple[str, ...] | None = None
    error_contains: str | None = None


@dataclass(frozen=True, kw_only=True)
class SignalAt:
    """Send `name` to the `harness run` process once metrics.jsonl holds step `at_step`."""

    name: str
    at_step: int


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
    expect: Expect | None = None   # a fault entry: the verdict it must produce (recipes/suites/faults.yaml)
    signal: SignalAt | None = None
    resume: bool = False           # after the first run, `harness run ... --resume` in the same run dir
    line: int = 0

    @property
    def enabled(self) -> bool:
        return self.disabled is None

    def harness_args(self) -> list[str]:
        """The arguments of `harness run` for this entry (without --out)."""
        args = [str(self.recipe), *self.overrides]
        return args + (["--scale", self.scale] if self.scale else [])

    @property
    def fault(self) -> str:
        """What the entry plants, for the reliability table: RL_FAULTS, a signal, a resume."""
        planted = [o.split("=", 1)[1] for o in self.overrides if o.lstrip("+").startswith("env.RL_FAULTS=")]
        if self.signal is not None:
            planted.append(f"{self.signal.name} at step {self.signal.at_step}")
        if self.resume:
            planted.append("then --resume")
        return ", ".join(planted) or "-"


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
