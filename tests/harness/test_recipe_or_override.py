"""Issue 35: an override whose value holds a `/` or ends in `.yaml` was taken for the recipe path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import harness.commands.run as run_command
from harness.cli import main
from harness.recipe_or_override import is_override

REPO = Path(__file__).resolve().parents[2]
THRESHOLDS = REPO / "thresholds" / "arith_grpo_cpu.yaml"


@pytest.mark.parametrize("arg", ["a.b=c", "++a.b=c", "data.train.path=some/dir/file.jsonl", "a.b=c/d",
                                 "checks.thresholds=my/checks.yaml", "name=x.yml", "policy.env.X-Y=a=b", "a="])
def test_key_equals_anything_is_an_override(arg):
    assert is_override(arg)


@pytest.mark.parametrize("arg", ["recipes/x.yaml", "x.yaml", "runs/a=b/recipe.yaml", "/tmp/a=b/r.yaml",
                                 "./a=b", "=x", "++=x", "a..b=c", "a b=c", "+a=b"])
def test_anything_else_is_a_path(arg):
    assert not is_override(arg)


def test_an_existing_file_is_a_path_even_when_it_reads_as_an_override(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a=b").mkdir()
    (tmp_path / "a=b" / "r.yaml").write_text("x")
    assert not is_override("a=b/r.yaml") and is_override("a=b/other.yaml")


def _seen_run(monkeypatch) -> dict:
    seen: dict = {}
    monkeypatch.setattr(run_command, "_run_locked", lambda args, recipe, recipe_path, *rest, **kw: seen.update(
        path=recipe_path, thresholds=recipe["checks"]["thresholds"]) or 0)
    return seen


def test_run_without_a_recipe_takes_an_override_with_a_slash_and_yaml(tmp_path, monkeypatch):
    mine = tmp_path / "sub" / "checks.yaml"
    mine.parent.mkdir()
    shutil.copy(THRESHOLDS, mine)
    seen = _seen_run(monkeypatch)
    assert main(["run", f"checks.thresholds={mine}", "--out", str(tmp_path / "run")]) == 0
    assert seen == {"path": run_command.DEFAULT_RECIPE, "thresholds": str(mine)}


def test_run_with_a_recipe_in_a_folder_named_with_equals(tmp_path, monkeypatch):
    folder = tmp_path / "a=b"
    folder.mkdir()
    recipe = folder / "r.yaml"
    recipe.write_text(f"defaults: {REPO / 'recipes' / 'arith_grpo_cpu.yaml'}\nname: r\n")
    shutil.copy(THRESHOLDS, folder / "checks.yaml")
    seen = _seen_run(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "a=b/r.yaml", "checks.thresholds=a=b/checks.yaml", "--out", str(tmp_path / "run")]) == 0
    assert seen["path"] == Path("a=b/r.yaml") and seen["thresholds"].endswith("a=b/checks.yaml")


@pytest.mark.parametrize("command", ["show", "plan"])
def test_a_command_that_needs_a_recipe_says_an_override_is_not_one(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "checks.thresholds=my/checks.yaml"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{command} needs a RECIPE" in err and "checks.thresholds=... is an override" in err
