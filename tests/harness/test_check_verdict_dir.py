"""Where `harness check` writes its verdict, and where it writes none (issue 35, item 4)."""

from __future__ import annotations

import json

import pytest
import yaml
from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.cli import main

VERDICT_FILES = ("result.json", "junit.xml", "report.md")


def _trial(tmp_path, expr="mean(train/reward, -2) > 0.9"):
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({"recipe": "r", "checks": [
        {"name": "reward_higher", "expr": expr, "why": "a stricter bar on trial", "since": "2026-12-02"}]}))
    return path


def _snapshot(run):
    return {name: (run / name).read_bytes() for name in VERDICT_FILES}


@pytest.mark.parametrize("report", [True, False])
def test_another_thresholds_file_writes_its_verdict_beside_the_runs_own(tmp_path, capsys, report):
    run = write_run(tmp_path / "run")
    assert main(["check", str(run)]) == 0
    own = _snapshot(run)
    argv = ["check", str(run), "--thresholds", str(_trial(tmp_path))] + ([] if report else ["--no-report"])
    assert main(argv) == 1
    assert _snapshot(run) == own  # the run's own verdict, untouched
    beside = run / "checks" / "trial"
    result = json.loads((beside / "result.json").read_text())
    assert result["ok"] is False and result["failed"] == ["reward_higher"]
    assert "reward_higher" in (beside / "junit.xml").read_text()
    assert (beside / "report.md").exists() is report
    assert f"wrote {beside / 'result.json'}" in capsys.readouterr().out


def test_the_runs_own_thresholds_named_again_rewrite_the_runs_verdict(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    assert main(["check", str(run), "--thresholds", str(tmp_path / "thresholds.yaml"), "--no-report"]) == 0
    assert (run / "result.json").exists() and not (run / "checks").exists()


def test_a_checks_folder_that_is_a_symlink_is_not_written_through(tmp_path, capsys):
    run, elsewhere = write_run(tmp_path / "run"), tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "checks").symlink_to(elsewhere)
    assert main(["check", str(run), "--thresholds", str(_trial(tmp_path)), "--no-report"]) == 2
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("layout", ["empty", "runs"])
def test_a_folder_that_is_not_a_run_dir_is_exit_2_and_gets_nothing(tmp_path, capsys, layout):
    folder = tmp_path / "runs"
    folder.mkdir()
    if layout == "runs":
        write_run(folder / "one")
    before = sorted(folder.rglob("*"))
    for extra in ([], ["--thresholds", str(_trial(tmp_path))]):
        assert main(["check", str(folder), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a run dir" in err[0], err
    assert sorted(folder.rglob("*")) == before
