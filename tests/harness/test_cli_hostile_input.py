"""Hostile inputs too big or too odd to commit to tests/data/bad_recipes/, through the CLI.

Each must end as exit 2 with one line and no traceback, within the timeout: a FIFO or /dev/zero
where a recipe or thresholds file should be, YAML thousands of levels deep (in a file or an
override). Cases are generated here, in-process through `harness.cli.main` like the corpus test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "recipes" / "arith_grpo_cpu.yaml"
DEEP = "[" * 5000 + "]" * 5000


def _exit_2_one_line(argv: list[str], capsys, expect: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    if argv[0] == "validate":
        assert all(line.startswith("FAIL ") for line in err.splitlines()) and expect in err, err
    else:
        assert err.count("\n") == 1 and err.startswith("error: ") and expect in err, err


def _recipe(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "r.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "deep":
        path.write_text(f"name: deep\nmodel: {{config: {{a: {DEEP}}}}}\n")
    return path


@pytest.mark.parametrize("command", ["show", "run", "validate"])
@pytest.mark.parametrize("kind, expect", [
    ("fifo", "not a regular file (a FIFO)"),
    ("dev_zero", "not a regular file (a character device)"),
    ("deep", "r.yaml:2: nested deeper than 64 levels"),
])
def test_hostile_recipe_file(tmp_path, monkeypatch, capsys, command, kind, expect):
    monkeypatch.chdir(tmp_path)
    argv = [command, str(_recipe(tmp_path, kind))]
    if command == "run":
        argv += ["--dry-run", "--out", str(tmp_path / "run")]
    _exit_2_one_line(argv, capsys, expect)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["show", "run"])
def test_override_value_thousands_deep(tmp_path, capsys, command):
    argv = [command, str(GOOD), f"model.config={DEEP}"]
    if command == "run":
        argv += ["--dry-run", "--out", str(tmp_path / "run")]
    _exit_2_one_line(argv, capsys, "nested deeper than 64 levels")


@pytest.mark.parametrize("kind, expect", [
    ("fifo", "not a regular file (a FIFO)"),
    ("dev_zero", "not a regular file (a character device)"),
    ("deep", "t.yaml:2: nested deeper than 64 levels"),
    ("nul", "t.yaml:1: control character U+0000 is not allowed in YAML"),
])
def test_hostile_thresholds_file_in_validate(tmp_path, monkeypatch, capsys, kind, expect):
    thresholds = tmp_path / "t.yaml"
    if kind == "fifo":
        os.mkfifo(thresholds)
    elif kind == "dev_zero":
        thresholds.symlink_to("/dev/zero")
    elif kind == "deep":
        thresholds.write_text(f"recipe: r\nchecks: {DEEP}\n")
    else:
        thresholds.write_bytes(b"recipe: r\x00\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"defaults: {GOOD}\nchecks: {{thresholds: t.yaml}}\n")
    monkeypatch.chdir(tmp_path)
    _exit_2_one_line(["validate", str(recipe)], capsys, expect)


@pytest.mark.parametrize("shape, expect", [
    ("chain", "defaults chain deeper than 32 files"),
    ("diamond", "must be >= 1, not 0"),
])
def test_long_or_diamond_defaults(tmp_path, monkeypatch, capsys, shape, expect):
    """A 1,200-file chain was RecursionError; a 24-deep diamond took 20 s. Both now end quickly."""
    depth = 1200 if shape == "chain" else 24
    for i in range(depth):
        names = f"d{i + 1}.yaml" if shape == "chain" else f"[d{i + 1}.yaml, d{i + 1}.yaml]"
        (tmp_path / f"d{i}.yaml").write_text(f"defaults: {names}\n")
    (tmp_path / f"d{depth}.yaml").write_text(f"defaults: {GOOD}\nalgorithm: {{num_steps: 0}}\n")
    monkeypatch.chdir(tmp_path)
    for command in ("show", "validate"):
        _exit_2_one_line([command, "d0.yaml"], capsys, expect)
