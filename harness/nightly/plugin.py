"""The pytest plugin of `harness nightly`: each suite entry is one test item.

    python -m pytest -p harness.nightly.plugin recipes/suites/cpu.yaml --nightly-out DIR -n 2

pytest gives us what a nightly matrix needs without new machinery: pytest-xdist runs entries in
parallel, `--junitxml` writes one JUnit case per entry, `-k` and markers select, and a skipped
item shows a disabled entry with its reason. Suite files are collected when they sit in a folder
named `suites`. Each worker writes its entries' outcomes to DIR/outcomes/<entry>.json; the
controller (the only process without `workerinput`) writes DIR/summary.md from them at the end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from harness.history import DEFAULT_DB, current_commit
from harness.nightly.record import failure_text, record
from harness.nightly.runner import run_entry
from harness.nightly.summary import collect_rows, write_summary
from harness.suites import (
    Entry,
    Estimate,
    Shard,
    Suite,
    SuiteError,
    is_suite_path,
    load_suite,
    select,
    shard_of,
    validate_suite,
)

TIMEOUT_MARGIN_S = 300.0  # Ray start-up, imports, judging: on top of the recipe's own limit
_START = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-nightly", "harness nightly: suite entries as tests")
    group.addoption("--nightly-out", help="folder for the run dirs, outcomes and summary.md (required)")
    group.addoption("--nightly-entry", action="append", default=[], help="run only this entry id (repeatable)")
    group.addoption("--nightly-hardware", action="append", default=[], help="only entries of this hardware class")
    group.addoption("--nightly-tag", action="append", default=[], help="only entries with one of these tags")
    group.addoption("--nightly-shard", help="only shard I/N of the selected entries (balanced by estimated time)")
    group.addoption("--nightly-retries", type=int, default=1,
                    help="retries for a failure matching an infrastructure signature (default 1)")
    group.addoption("--nightly-history", default=str(DEFAULT_DB),
                    help=f"SQLite history to gate against and append to; '' for none (default {DEFAULT_DB})")
    group.addoption("--nightly-engine-checked", action="store_true",
                    help="the suite's entries were already put to the engine's static preflight (harness nightly "
                         "does it before pytest starts): collection skips that engine start")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nightly_entry(id): a harness suite entry")
    if config.getoption("nightly_out") is None:
        return
    out = Path(config.getoption("nightly_out"))
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        outcomes = out / "outcomes"
        if outcomes.is_dir() and any(outcomes.iterdir()):
            raise pytest.UsageError(f"--nightly-out {out}: holds a previous nightly run; choose a new folder")
        outcomes.mkdir(parents=True, exist_ok=True)
        config.stash[_START] = time.time()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if is_suite_path(file_path) and parent.config.getoption("nightly_out") is not None:
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def selected(config: pytest.Config, suite: Suite, estimates: dict[str, Estimate]) -> list[Entry]:
    """The entries the options select, longest first (so xdist starts the long ones early)."""
    entries = select(suite, hardware=config.getoption("nightly_hardware"), tags=config.getoption("nightly_tag"),
                     ids=config.getoption("nightly_entry"))
    shard = config.getoption("nightly_shard")
    entries = shard_of(entries, estimates, Shard.parse(shard) if shard else None)
    return sorted(entries, key=lambda e: -estimates[e.id].hours if e.id in estimates else 0.0)


class SuiteFile(pytest.File):
    """A suite file: validated whole (an expired disable or a broken entry stops the suite)."""

    def collect(self):  # type: ignore[override]
        suite = load_suite(self.path)
        check = validate_suite(suite, engine=not self.config.getoption("nightly_engine_checked"))
        if not check.ok:
            raise SuiteError(f"suite {suite.name} is invalid:\n  " + "\n  ".join(check.problems))
        for entry in selected(self.config, suite, check.estimates):
            item = EntryItem.from_parent(self, name=entry.id, entry=entry, suite=suite,
                                         estimate=check.estimates[entry.id])
            item.add_marker(pytest.mark.nightly_entry(entry.id))
            for tag in entry.tags:
                item.extra_keyword_matches.add(tag)
            if entry.disabled is not None:
                off = entry.disabled
                reason = f"disabled until {off.until} (owner {off.owner}): {off.reason}"
                item.add_marker(pytest.mark.skip(reason=reason))
            yield item


class EntryFailed(Exception):
    """An entry's checks failed (or its performance gate did, in mode fail)."""

    def __init__(self, outcome: dict):
        super().__init__(outcome["entry"])
        self.outcome = outcome


class EntryItem(pytest.Item):
    def __init__(self, *, entry: Entry, suite: Suite, estimate: Estimate, **kwargs: Any):
        super().__init__(**kwargs)
        self.entry, self.suite, self.estimate = entry, suite, estimate

    def runtest(self) -> None:
        config = self.config
        out = Path(config.getoption("nightly_out"))
        history = config.getoption("nightly_history")
        run = run_entry(self.entry, out_dir=out, max_retries=config.getoption("nightly_retries"),
                        timeout_s=self.estimate.timeout_s + TIMEOUT_MARGIN_S)
        outcome = record(self.entry, self.suite, run, recipe_name=self.estimate.recipe, commit=current_commit(),
                         history_db=Path(history) if history else None)
        path = out / "outcomes" / f"{self.entry.id}.json"
        path.write_text(json.dumps(outcome, indent=2, default=str) + "\n", encoding="utf-8")
        self.user_properties += [("run_dir", run.final.run_dir), ("attempts", len(run.attempts)),
                                 ("verdict", run.verdict)]
        retried = [a.infra for a in run.attempts if a.retried]
        if retried:
            self.user_properties.append(("retried_for", ",".join(str(r) for r in retried)))
        if not outcome["ok"]:
            raise EntryFailed(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, EntryFailed):
            return failure_text(excinfo.value.outcome)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.entry.line, f"{self.suite.name}::{self.entry.id}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput") or config.getoption("nightly_out") is None:
        return
    out = Path(config.getoption("nightly_out"))
    suites = []
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if is_suite_path(path) and path.is_file():
            try:
                suite = load_suite(path)
            except SuiteError:
                continue  # collection reported it already
            suites.append((suite, selected(config, suite, validate_suite(suite, engine=False).estimates)))
    if suites:
        rows = collect_rows(out, suites)
        write_summary(out, rows, wall_s=time.time() - config.stash.get(_START, time.time()))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.getoption("nightly_out") is None:
        return
    summary = Path(config.getoption("nightly_out")) / "summary.md"
    if summary.exists():
        terminalreporter.write_sep("-", "harness nightly")
        terminalreporter.write_line(f"summary: {summary}")
