"""Check a suite before it runs: every entry resolves and plans, the engine does not refuse an
enabled entry on every machine (its static preflight: `generation.backend: vllm`, a model config
HF rejects), nothing is disabled past its date, and the enabled entries fit the suite's GPU-hour
budget.

The GPU-hour estimate of an entry is world x hours, where world is the plan's device count
(0 on CPU) and hours is the entry's `estimated_hours` (expected wall time of one run) or, when
absent, the recipe's `limits.timeout_s` (the most a run may take). Sharding balances the same
hours. See docs/nightly.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import USER_ERRORS
from harness.plan import make_plan
from harness.preflight import ask_engine, engine_recipes, refusals
from harness.recipe import load_recipe
from harness.suites.load import load_suite
from harness.suites.model import Entry, Suite

StaticAsk = Callable[[Mapping], dict]  # recipes by key -> the engine's static Answer by key (harness.preflight)

MAX_DISABLED_DAYS = 183  # a disable longer than ~6 months is a deletion in disguise


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """What one run of an entry is expected to cost."""

    recipe: str           # the resolved recipe's name
    hours: float          # wall-clock hours of one run
    gpu_hours: float      # world x hours on GPU hardware, 0 on CPU
    world: int
    timeout_s: float      # limits.timeout_s x engine launches (2 for a parity recipe)
    source: str           # "estimated_hours" or "limits.timeout_s"


@dataclass(kw_only=True)
class SuiteCheck:
    """The outcome of validating one suite: estimates of the entries that resolved, and problems."""

    suite: Suite
    estimates: dict[str, Estimate] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def gpu_hours(self) -> float:
        return sum(self.estimates[e.id].gpu_hours for e in self.suite.enabled if e.id in self.estimates)


def estimate_entry(entry: Entry) -> Estimate:
    """Resolve and plan the entry's recipe; raises the recipe's or the plan's user error, or
    ValueError when the entry's hardware is not the recipe's device."""
    recipe = load_recipe(entry.recipe, entry.overrides, scale=entry.scale).data
    plan = make_plan(recipe)
    if plan.device != entry.hardware:
        raise ValueError(f"hardware: the entry says {entry.hardware!r} but the recipe runs on "
                         f"cluster.device = {plan.device!r}")
    launches = len((recipe["checks"].get("parity") or {}).get("variants") or {}) or 1
    timeout_s = float(recipe["limits"]["timeout_s"]) * launches
    given = entry.estimated_hours is not None
    hours = entry.estimated_hours if given else timeout_s / 3600.0
    gpu_world = plan.world if plan.device != "cpu" else 0
    return Estimate(recipe=str(recipe["name"]), hours=hours, gpu_hours=gpu_world * hours, world=plan.world,
                    timeout_s=timeout_s, source="estimated_hours" if given else "limits.timeout_s")


def disabled_problem(entry: Entry, today: dt.date) -> str | None:
    """Why an entry's `disabled` block is no longer acceptable, or None."""
    off = entry.disabled
    if off is None:
        return None
    if off.expired(today):
        return (f"entry {entry.id}: disabled.until = {off.until} has expired (today is {today}; "
                f"owner {off.owner}, reason: {off.reason}): fix and re-enable it, or renew the date")
    if (off.until - today).days > MAX_DISABLED_DAYS:
        return (f"entry {entry.id}: disabled.until = {off.until} is more than {MAX_DISABLED_DAYS} days away; "
                f"choose a nearer date")
    return None


def entry_asks(entries: list[Entry]) -> dict[tuple[str, str], Mapping]:
    """What the engine will be given for each entry, keyed (entry id, parity variant)."""
    asks = {}
    for entry in entries:
        recipe = load_recipe(entry.recipe, entry.overrides, scale=entry.scale).data
        for variant, engine_recipe in engine_recipes(recipe).items():
            asks[(entry.id, variant)] = engine_recipe
    return asks


def refused_entries(entries: list[Entry], ask: StaticAsk | None = None) -> list[str]:
    """The engine's static refusals of these (resolvable) entries, one line each: an entry the
    engine cannot run on any machine cannot be enabled. One engine process answers them all
    (`ask`: a `StaticAnswers` that already holds them, or ask the engine now)."""
    asks = entry_asks(entries)
    ask = ask or (lambda recipes: ask_engine(recipes, machine=False))
    out = []
    for (entry_id, variant), answer in (ask(asks) if asks else {}).items():
        out.extend(f"entry {entry_id}: the engine refuses it on every machine: {line}; fix the recipe or "
                   "disable the entry" for line in refusals({variant: answer}, "static"))
    return out


def validate_suite(suite: Suite, *, today: dt.date | None = None, engine: bool = True,
                   ask: StaticAsk | None = None) -> SuiteCheck:
    """Every problem of the suite, one line each, naming the entry and the key to change.
    `engine`: also ask the engine's static preflight about the enabled entries (one process)."""
    today = today or dt.date.today()
    check = SuiteCheck(suite=suite)
    for entry in suite.entries:
        problem = disabled_problem(entry, today)
        if problem:
            check.problems.append(problem)
        try:
            check.estimates[entry.id] = estimate_entry(entry)
        except (*USER_ERRORS, ValueError) as error:
            check.problems.append(f"entry {entry.id}: {error}")
    if engine:
        check.problems.extend(refused_entries([e for e in suite.enabled if e.id in check.estimates], ask))
    total = check.gpu_hours
    if total > suite.budget_gpu_hours + 1e-9:
        parts = ", ".join(f"{e.id} {check.estimates[e.id].gpu_hours:.1f}"
                          for e in suite.enabled if e.id in check.estimates)
        check.problems.append(
            f"budget_gpu_hours: the enabled entries may spend {total:.1f} GPU-hours ({parts}), over the "
            f"suite's budget of {suite.budget_gpu_hours:g}; raise the budget, set estimated_hours, or disable entries")
    return check


def suite_problems(path: Path, *, today: dt.date | None = None,
                   ask: StaticAsk | None = None) -> tuple[SuiteCheck | None, list[str]]:
    """Load and validate the suite file at `path`: (the check, or None if it did not load; problems)."""
    try:
        suite = load_suite(path)
    except USER_ERRORS as error:
        return None, [str(error)]
    check = validate_suite(suite, today=today, ask=ask)
    return check, check.problems
