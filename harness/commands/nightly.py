"""`harness nightly SUITE [-n N] [--out DIR] [--entry ID] [--hardware H] [--tag T] [--shard I/N]`.

Validates the suite, then runs pytest in this process with the nightly plugin
(`-p harness.nightly.plugin`): one test item per entry, pytest-xdist for `-n N` workers, one
JUnit case per entry in OUT/junit.xml, and OUT/summary.md. Exit 0 when every selected enabled
entry passed, 1 when one failed, 2 for a bad suite or bad options.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from harness.errors import UsageError
from harness.suites import find_suite, load_suite, validate_suite

# pytest's exit codes -> ours: tests failed is a failed check; no test selected is a usage error.
_EXIT = {0: 0, 1: 1, 2: 130, 3: 3, 4: 2, 5: 2}


def pytest_args(args: argparse.Namespace, suite_path: Path, out: Path) -> list[str]:
    """The pytest command line; its own ini file keeps the project's pytest settings out."""
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    argv = [str(suite_path), "-p", "harness.nightly.plugin", "-c", str(ini), "--rootdir", str(suite_path.parent),
            "-p", "no:cacheprovider", "--noconftest", "-o", f"junit_suite_name=nightly-{suite_path.stem}",
            "--junitxml", str(out / "junit.xml"), "-rfEs",
            "--nightly-out", str(out), "--nightly-retries", str(args.retries),
            "--nightly-history", "" if args.no_history else str(args.history),
            "--nightly-engine-checked"]  # main() validated the suite with the engine: no second start per worker
    for flag, values in (("--nightly-entry", args.entry), ("--nightly-hardware", args.hardware),
                         ("--nightly-tag", args.tag)):
        for value in values or ():
            argv += [flag, value]
    if args.shard:
        argv += ["--nightly-shard", args.shard]
    argv += ["-n", str(args.workers)] if args.workers > 1 else ["-p", "no:xdist"]
    return argv


def main(args: argparse.Namespace) -> int:
    import pytest  # noqa: PLC0415 - only this command needs pytest

    suite_path = find_suite(args.suite)
    suite = load_suite(suite_path)
    check = validate_suite(suite)
    if not check.ok:
        raise UsageError(f"suite {suite.name} is invalid ({len(check.problems)} problems):\n  "
                         + "\n  ".join(check.problems))
    if args.workers < 1:
        raise UsageError(f"-n {args.workers}: need at least 1 worker")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or Path("runs") / f"nightly-{suite.name}-{stamp}")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out}: exists and is not empty (choose another --out)")
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    code = pytest.main(pytest_args(args, suite_path, out))
    print(f"nightly {suite.name}: {time.monotonic() - start:.1f} s wall; "
          f"summary {out / 'summary.md'}; junit {out / 'junit.xml'}")
    return _EXIT.get(int(code), 3)
