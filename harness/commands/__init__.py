"""One file per `harness` sub-command; each exposes `main(args) -> exit code`."""

from __future__ import annotations

from typing import Callable

from harness.commands import check, compare, plan, run, show, validate

COMMANDS: dict[str, Callable] = {
    "check": check.main,
    "compare": compare.main,
    "plan": plan.main,
    "run": run.main,
    "show": show.main,
    "validate": validate.main,
}
