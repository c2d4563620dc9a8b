"""Bad paths and out-of-range integers are exit 2, one capped line, before anything runs (issue 32, item 10).

Each was exit 3 after planning ("File name too long", "Not a directory"), created a directory
with a newline in its name, or passed validate and failed later.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.dir_path import dir_problem
from harness.errors import MAX_LINE

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "arith_grpo_cpu.yaml")


def _exit_2_one_line(argv: list[str], capsys, expect: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and expect in err, err
    assert len(err) <= MAX_LINE + 10
    return err


@pytest.mark.parametrize("out, expect", [
    ("/dev/null", "exists and is not a directory"),
    ("FILE", "exists and is not a directory"),
    ("FILE/run", "is not a directory"),
    ("/dev/null/x", "'/dev/null' is not a directory"),
    ("TMP/a\nb", "holds a control character"),
    ("TMP/" + "r" * 300, "a part longer than 255 bytes"),
])
def test_a_bad_out_is_refused_before_the_recipe_is_read(tmp_path, capsys, out, expect):
    (tmp_path / "file").write_text("x")
    out = out.replace("FILE", str(tmp_path / "file")).replace("TMP", str(tmp_path))
    err = _exit_2_one_line(["run", RECIPE, "--dry-run", "--out", out], capsys, expect)
    assert err.startswith("error: --out ") and not (tmp_path / "a\nb").exists()


@pytest.mark.parametrize("override, expect", [
    ("algorithm.seed=1180591620717411303424", "algorithm.seed: must be <= 4294967295"),   # 2**70
    ("algorithm.num_steps=1000000000000000000", "algorithm.num_steps: must be <= 1000000000"),  # 10**18
    ("name=" + "a" * 300, "name: must be at most 100 characters, not 300"),
    ("run_dir=/dev/null/x", "run_dir: the folder for run dirs '/dev/null/x' cannot be made"),
    ('run_dir="/tmp/a\\nb"', "run_dir: must not hold control characters"),
])
def test_a_bad_recipe_value_is_refused_when_validated(tmp_path, capsys, override, expect):
    _exit_2_one_line(["run", RECIPE, override, "--dry-run", "--out", str(tmp_path / "o")], capsys, expect)
    assert not (tmp_path / "o").exists()


def test_a_1_mb_override_is_echoed_capped(tmp_path, capsys):
    _exit_2_one_line(["show", RECIPE, "name=" + "a" * 1_000_000], capsys, "must be at most 100 characters")


def test_a_path_too_long_for_the_file_system_is_exit_2(capsys):
    _exit_2_one_line(["validate", "v" * 300], capsys, "too long for this file system")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_dir_problem_is_one_capped_line_or_none(text):
    problem = dir_problem(text, writable=False)
    assert problem is None or ("\n" not in problem and len(problem) < 300)
