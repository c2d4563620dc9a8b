"""A run dir's files are read as they are and written in place, never through a symlink (issue 32, item 7).

metrics.jsonl or invariants.jsonl linked to another run's files passed (exit 0) as this run's,
and `plots -> /elsewhere` got PNGs written (and overwritten) outside the run dir.
"""

from __future__ import annotations

import json

import pytest
from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.cli import main
from harness.report.atomic import write_atomic


def _reasons(run) -> str:
    return "\n".join(v["message"] for v in json.loads((run / "result.json").read_text())["verdicts"])


@pytest.mark.parametrize("name", ["metrics.jsonl", "invariants.jsonl", "status.json"])
def test_a_run_file_linked_to_another_runs_fails(tmp_path, capsys, name):
    other = write_run(tmp_path / "other")
    run = write_run(tmp_path / "run")
    assert main(["check", str(run)]) == 0
    (run / name).unlink()
    (run / name).symlink_to(other / name)
    assert main(["check", str(run)]) == 1
    assert f"{name}: a symlink" in _reasons(run)


def test_a_linked_recipe_yaml_is_exit_2(tmp_path, capsys):
    other = write_run(tmp_path / "other")
    run = write_run(tmp_path / "run")
    (run / "recipe.yaml").unlink()
    (run / "recipe.yaml").symlink_to(other / "recipe.yaml")
    assert main(["check", str(run)]) == 2
    assert "a symlink" in capsys.readouterr().err


def test_a_metrics_file_named_on_the_command_line_may_be_a_link(tmp_path, capsys):
    """Only a run dir's own files are not followed: a file the user names is theirs to link."""
    run = write_run(tmp_path / "run")
    (tmp_path / "link.jsonl").symlink_to(run / "metrics.jsonl")
    assert main(["check", str(tmp_path / "link.jsonl"), "--thresholds", str(tmp_path / "thresholds.yaml")]) == 0


def test_plots_are_not_written_through_a_symlink(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = write_run(tmp_path / "run")
    (run / "plots").symlink_to(elsewhere)
    assert main(["check", str(run)]) == 0
    assert list(elsewhere.iterdir()) == []
    assert "is a symlink, and nothing is written through one" in (run / "report.md").read_text()


def test_a_report_file_that_is_a_symlink_is_replaced_not_followed(tmp_path, capsys):
    target = tmp_path / "target.md"
    target.write_text("keep me\n")
    run = write_run(tmp_path / "run")
    (run / "report.md").symlink_to(target)
    assert main(["check", str(run)]) == 0
    assert target.read_text() == "keep me\n" and not (run / "report.md").is_symlink()


def test_write_atomic_refuses_a_linked_directory_when_asked(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError, match="is a symlink"):
        write_atomic(tmp_path / "link" / "x.png", lambda f: f.write(b"x"), follow_parent=False)
    assert list((tmp_path / "real").iterdir()) == []
    write_atomic(tmp_path / "link" / "x.txt", lambda f: f.write(b"x"))  # a user's folder may be a link
    assert (tmp_path / "real" / "x.txt").read_bytes() == b"x"
