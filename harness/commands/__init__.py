"""One file per `harness` sub-command; each exposes `main(args) -> exit code`."""

from __future__ import annotations

from typing import Callable

from harness.commands import check, compare, history, matrix, nightly, plan, run, sbatch, show, validate

COMMANDS: dict[str, Callable] = {
    "check": check.main,
    "compare": compare.main,
    "history": history.main,
    "matrix": matrix.main,
    "nightly": nightly.main,
    "plan": plan.main,
    "run": run.main,
    "sbatch": sbatch.main,
    "show": show.main,
    "validate": validate.main,
}
