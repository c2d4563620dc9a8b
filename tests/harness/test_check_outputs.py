"""`harness check`: the verdict, result.json and junit.xml first, from a light import path;
report.md and its plots after them, or not at all with --no-report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_cli import REPO, write_run

from harness.cli import main
from harness.commands import check as check_command

REPORT_FILES = ("report.md", "plots")


@pytest.mark.parametrize("reward, code", [(None, 0), (lambda s: -1.0, 1)], ids=["pass", "fail"])
def test_no_report_writes_the_verdict_files_only_with_the_same_exit_code(tmp_path, capsys, reward, code):
    quick = write_run(tmp_path / "quick", reward=reward)
    full = write_run(tmp_path / "full", reward=reward)
    assert main(["check", str(quick), "--no-report"]) == code
    out = capsys.readouterr().out
    assert main(["check", str(full)]) == code
    assert ("PASS: " if code == 0 else "FAIL: ") in out and "report.md" not in out
    for name in ("result.json", "junit.xml"):
        assert (quick / name).read_text() == (full / name).read_text()
    assert not any((quick / name).exists() for name in REPORT_FILES)
    assert all((full / name).exists() for name in REPORT_FILES)


def test_no_report_keeps_and_names_an_earlier_report(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    assert main(["check", str(run)]) == 0
    before = (run / "report.md").read_text()
    capsys.readouterr()
    assert main(["check", str(run), "--no-report"]) == 0
    assert (run / "report.md").read_text() == before
    assert "report.md is left from an earlier check (--no-report)" in capsys.readouterr().out


def test_the_report_comes_after_the_verdict_files(tmp_path, capsys, monkeypatch):
    """When report.md starts, result.json and junit.xml are on disk and the verdict is printed."""
    run = write_run(tmp_path / "run")
    seen = {}
    real = check_command.write_report

    def write_report(run_dir, judgement, **kwargs):
        seen["files"] = sorted(p.name for p in run_dir.iterdir() if p.name in ("result.json", "junit.xml"))
        seen["printed"] = capsys.readouterr().out
        return real(run_dir, judgement, **kwargs)

    monkeypatch.setattr(check_command, "write_report", write_report)
    assert main(["check", str(run)]) == 0
    assert seen["files"] == ["junit.xml", "result.json"]
    assert "PASS: 4 of 4 checks passed" in seen["printed"] and "result.json, junit.xml" in seen["printed"]
    assert "report.md" in capsys.readouterr().out


def test_the_verdict_path_imports_no_plotting_schema_or_launcher(tmp_path):
    """What `harness check --no-report` must not load: it is most of the time to a verdict."""
    run = write_run(tmp_path / "run")
    heavy = ("matplotlib", "numpy", "jsonschema", "harness.report.markdown", "harness.report.plots",
             "harness.recipe.load", "harness.launch", "harness.selftest", "harness.plan")
    code = (f"import sys; from harness.cli import main; rc = main(['check', {str(run)!r}, '--no-report']); "
            f"print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r} or m in {heavy!r} "
            f"or any(m.startswith(h + '.') for h in {heavy!r}))); sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout


def test_self_test_results_reach_result_json_without_a_report(tmp_path):
    run = write_run(tmp_path / "run")
    code = main(["check", str(run), "--no-report", "--self-test", "--history", str(tmp_path / "none.sqlite")])
    data = json.loads((run / "result.json").read_text())
    assert {t["name"] for t in data["self_test"]} == {v["name"] for v in data["verdicts"]}
    assert code == 0 and not (run / "report.md").exists()
