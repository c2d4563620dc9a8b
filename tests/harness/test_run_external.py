"""`harness run` drives an external engine through the run-dir contract (no torch, no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.history import query
from harness.history.hand_run import SUITE

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "tests" / "data" / "external" / "external_grpo.yaml"


def test_external_engine_run_is_judged_from_its_own_metrics(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(RECIPE), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "PASS: 3 of 3 checks passed" in printed
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "completed" and status["last_step"] == 8
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["step"] == 1
    assert "wrote 8 steps" in (out / "engine.log").read_text()


def test_external_engine_that_stops_early_fails(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", str(RECIPE), "engine.command=['{python}', 'tests/data/external/fake_reference_engine.py', "
                 "'{run_dir}', '5']", "--out", str(out), "--no-progress"])
    assert code == 1
    printed = capsys.readouterr().out
    # status.json says completed at step 5 of 8: no longer believed on its state alone (issue 12)
    assert "at last_step 5 of num_steps 8" in printed and "run stopped at step 5 of 8" in printed


def test_run_dir_must_be_new(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text("{}\n")
    assert main(["run", str(RECIPE), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "metrics.jsonl").read_text() == "{}\n"  # nothing already written is lost


def test_a_run_is_recorded_in_the_history_and_listed_by_recipe(tmp_path, capsys):
    db = tmp_path / "history.sqlite"
    assert main(["run", str(RECIPE), "--out", str(tmp_path / "a"), "--no-progress", "--history", str(db)]) == 0
    assert main(["run", str(RECIPE), "engine.command=['{python}', 'tests/data/external/fake_reference_engine.py', "
                 "'{run_dir}', '5']", "--out", str(tmp_path / "b"), "--no-progress", "--history", str(db)]) == 1
    assert main(["run", str(RECIPE), "--out", str(tmp_path / "c"), "--no-progress", "--no-history"]) == 0
    assert f"history {db} (row 2;" in capsys.readouterr().out
    rows = query(db)
    assert [(r.suite, r.verdict, Path(r.run_dir).name) for r in rows] == [(SUITE, "pass", "a"), (SUITE, "fail", "b")]
    name = rows[0].recipe
    assert rows[0].entry == f"run:{name}" and rows[0].verdicts and all(rows[0].verdicts.values())
    assert rows[0].wall_s is not None and rows[1].verdicts and not all(rows[1].verdicts.values())
    assert main(["history", name, "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    assert "2 of 2 runs shown" in listed and "run:" in listed
