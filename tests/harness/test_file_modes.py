"""Reports and verdicts are readable by others, like metrics; a secret's file is not (issue 35, item 6)."""

from __future__ import annotations

import os
import stat

import pytest
from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.cli import main
from harness.launch.ray_job import hand_over


@pytest.fixture
def umask():
    """Sets the process umask for one test and puts the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _modes(run) -> dict[str, int]:
    files = [run / name for name in ("result.json", "junit.xml", "report.md")] + sorted((run / "plots").glob("*.png"))
    return {str(path.relative_to(run)): stat.S_IMODE(path.stat().st_mode) for path in files}


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_verdict_files_and_plots_are_made_as_open_makes_a_file(tmp_path, capsys, umask, mask, mode):
    umask(mask)
    run = write_run(tmp_path / "run")
    assert main(["check", str(run)]) == 0
    modes = _modes(run)
    assert len(modes) > 3 and set(modes.values()) == {mode}, modes
    (run / "metrics.jsonl").unlink()
    with open(run / "metrics.jsonl", "w"):  # what the engine does
        pass
    assert stat.S_IMODE((run / "metrics.jsonl").stat().st_mode) == mode


def test_the_ray_jobs_env_file_stays_private_whatever_the_umask(tmp_path, umask):
    umask(0o000)
    hand_over({"HF_TOKEN": "hf_secret"}, str(tmp_path / ".job-env.json"))
    assert stat.S_IMODE((tmp_path / ".job-env.json").stat().st_mode) == 0o600
