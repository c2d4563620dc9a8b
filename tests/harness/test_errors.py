"""harness/errors.py: user errors are one type the CLI knows, defined where nothing else is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness import cli
from harness.checks.invariants import InvariantsError
from harness.errors import USER_ERRORS, UsageError, UserError
from harness.metrics import MetricsError
from harness.plan import PlanError
from harness.preflight import EngineRefusal
from harness.recipe import RecipeError
from harness.suites.load import SuiteError
from harness.thresholds import ThresholdFileError, ThresholdSyntaxError

RAISED = {
    UsageError: UsageError("bad option"),
    RecipeError: RecipeError("bad key", where="r.yaml:3", key="a.b"),
    PlanError: PlanError("r", ["tp 3 does not divide 8 devices"]),
    EngineRefusal: EngineRefusal(["refused: no GPU"]),
    ThresholdFileError: ThresholdFileError("t.yaml:1: bad"),
    ThresholdSyntaxError: ThresholdSyntaxError("unexpected ')'", column=4),
    MetricsError: MetricsError("m.jsonl:2: not valid JSON"),
    InvariantsError: InvariantsError("invariants.jsonl:1: torn"),
    SuiteError: SuiteError("bad entry", where="s.yaml:2"),
}


def test_importing_the_errors_loads_no_other_harness_module():
    """UsageError is imported by the check path: it must not drag in the recipe loader or the planner."""
    code = "import sys, harness.errors; print(sorted(m for m in sys.modules if m.startswith('harness')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['harness', 'harness.errors']"


@pytest.mark.parametrize("kind", list(RAISED), ids=lambda kind: kind.__name__)
def test_every_user_error_is_a_user_error(kind):
    assert issubclass(kind, UserError)
    with pytest.raises(USER_ERRORS):
        raise RAISED[kind]


@pytest.mark.parametrize("kind", list(RAISED), ids=lambda kind: kind.__name__)
def test_the_cli_reports_a_user_error_as_one_line_and_exit_2(kind, monkeypatch, capsys):
    from harness import commands

    def fail(args):
        raise RAISED[kind]

    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    monkeypatch.setitem(commands.COMMANDS, "compare", fail)
    assert cli.main(["compare", "a", "b"]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_an_internal_error_is_not_a_user_error(monkeypatch, capsys):
    from harness import commands

    def fail(args):
        raise KeyError("bug")

    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    monkeypatch.setitem(commands.COMMANDS, "compare", fail)
    assert cli.main(["compare", "a", "b"]) == cli.EXIT_INTERNAL
    assert capsys.readouterr().err.startswith("internal error: KeyError")
