"""`harness --version`: the installed package's version, else the checkout's pyproject.toml (issue 35, item 6)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from harness import version
from harness.cli import main

REPO = Path(__file__).resolve().parents[2]
PYPROJECT_VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_version_prints_the_package_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"harness {version.harness_version()}\n"


def not_installed(name: str) -> str:
    raise metadata.PackageNotFoundError(name)


def test_version_without_installed_metadata_is_pyprojects(monkeypatch):
    monkeypatch.setattr(metadata, "version", not_installed)
    assert version.harness_version() == PYPROJECT_VERSION


def test_version_with_neither_says_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.setattr(version, "PYPROJECT", tmp_path / "absent.toml")
    assert version.harness_version() == "unknown"


def test_version_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "harness.cli", "--version"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"harness {version.harness_version()}"


def test_python_m_harness_is_the_harness_command():
    out = subprocess.run([sys.executable, "-m", "harness", "--version"], capture_output=True, text=True, cwd=REPO)
    assert (out.returncode, out.stdout) == (0, f"harness {version.harness_version()}\n")
