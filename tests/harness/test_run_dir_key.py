"""The `run_dir` recipe key: where `harness run` makes a run's dir when it gets no --out."""

from __future__ import annotations

from pathlib import Path

from harness.cli import main
from harness.commands.run import make_run_dir

REPO = Path(__file__).resolve().parents[2]


def test_without_out_a_run_dir_is_made_under_the_recipe_run_dir(tmp_path):
    made = make_run_dir(None, "arith", str(tmp_path / "shared" / "runs"))
    assert made.parent == tmp_path / "shared" / "runs" and made.name.startswith("arith-") and made.is_dir()
    assert make_run_dir(str(tmp_path / "mine"), "arith", str(tmp_path / "ignored")) == tmp_path / "mine"
    assert not (tmp_path / "ignored").exists()


def test_dry_run_names_a_run_dir_under_run_dir_and_makes_none(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a default ./runs would land here, not in the repository
    assert main(["run", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), f"run_dir={tmp_path / 'shared'}",
                 "--dry-run"]) == 0
    assert f"run dir {tmp_path / 'shared' / 'arith_grpo_cpu-'}" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
