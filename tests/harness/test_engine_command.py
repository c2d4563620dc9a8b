"""The engine runs in the repository root, so the run dir it is given must not be relative to
wherever harness was started (a `--out runs/x` from another folder failed with no recipe.yaml)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.engines import engine_command


def test_rl_engine_gets_an_absolute_run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = engine_command({"engine": "rl"}, Path("runs/x"))
    assert argv[-4:] == ["rl.run", str(tmp_path / "runs/x/recipe.yaml"), "--out", str(tmp_path / "runs/x")]


def test_external_engine_placeholders_are_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = engine_command({"engine": {"command": ["run", "{recipe}", "{run_dir}"]}}, Path("r"))
    assert argv == ["run", os.path.join(tmp_path, "r", "recipe.yaml"), os.path.join(tmp_path, "r")]
