"""Thresholds files: every problem is a ThresholdFileError naming file:line."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest

from harness.thresholds import ThresholdCheck, ThresholdFileError, load_thresholds, parse

EXAMPLE = Path(__file__).parents[1] / "data" / "thresholds" / "example.yaml"

GOOD = """\
recipe: r
checks:
  - name: a
    expr: "max(x) > 0"
    why: "because"
    since: 2026-11-30
"""


def _load(tmp_path, text: str, **kwargs) -> list[ThresholdCheck]:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return load_thresholds(path, hardware=kwargs.pop("hardware", None), **kwargs)


def test_example_file_for_each_hardware_class():
    cpu = load_thresholds(EXAMPLE, hardware="cpu")
    assert [(c.name, c.line) for c in cpu] == [("reward_rises", 4), ("loss_finite", 16)]
    first = cpu[0]
    assert first.expr == "mean(train/reward, -5) > mean(train/reward, 1, 5) + 0.1"
    assert first.tree == parse(first.expr)
    assert first.since == dt.date(2026, 11, 30) and first.hardware == ("cpu",)
    assert first.path == str(EXAMPLE) and first.why.startswith("3 seeds")
    h200 = load_thresholds(EXAMPLE, hardware="h200")
    assert [c.expr[-4:] for c in h200] == [" 0.2", "< 50"]
    assert h200[0].since == dt.date(2026, 12, 1)
    assert h200[1].expr == "all_finite(train/loss) and max(train/grad_norm, trim=0.05) < 50"
    assert h200[1].hardware is None
    assert len(load_thresholds(EXAMPLE, hardware=None)) == 3
    assert load_thresholds(EXAMPLE, hardware="a100", recipe="arith_grpo_cpu")[0].name == "loss_finite"


def test_hardware_as_a_single_string(tmp_path):
    checks = _load(tmp_path, GOOD + "    hardware: cpu\n", hardware="cpu")
    assert checks[0].hardware == ("cpu",)


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('    why: "because"\n', ""), "t.yaml:3: checks[0] is missing why"),
    (GOOD.replace("    since: 2026-11-30\n", ""), "t.yaml:3: checks[0] is missing since"),
    (GOOD.replace('    why: "because"', '    why: "  "'), "t.yaml:5: check 'a'.why must be non-empty text"),
    (GOOD.replace("2026-11-30", "last week"), "t.yaml:6: check 'a'.since must be a date"),
    (GOOD.replace("2026-11-30", "2026-11-30 10:00:00"), "t.yaml:6: check 'a'.since must be a date"),
    (GOOD.replace("max(x) > 0", "max(x) >"), "t.yaml:4: check 'a': expected a number, '(' or a function call, "
                                              "got end of expression at column 9 of expr"),
    (GOOD.replace("max(x) > 0", "__import__(os)"), "t.yaml:4: check 'a': unknown function '__import__'"),
    (GOOD + "    color: red\n",
     "t.yaml:7: unknown key 'color' in checks[0] (allowed: name, expr, why, since, hardware)"),
    (GOOD + "    why: again\n", "t.yaml:7: checks[0].why: duplicate key (first set on line 5)"),
    (GOOD + "  - name: a\n    expr: 'max(y) > 0'\n    why: w\n    since: 2026-11-30\n",
     "t.yaml:7: duplicate check name 'a' (first at line 3)"),
    (GOOD + "    hardware: []\n", "t.yaml:7: check 'a'.hardware must be a non-empty list"),
    (GOOD + "    hardware: [cpu, cpu]\n", "t.yaml:7: check 'a'.hardware lists a class twice"),
    (GOOD + "    hardware: [CPU!]\n", "t.yaml:7: check 'a'.hardware must be a non-empty list"),
    (GOOD.replace("name: a", "name: a b"), "t.yaml:3: check name 'a b' must match"),
    (GOOD.replace("recipe: r\n", ""), "t.yaml:1: missing top-level key 'recipe'"),
    (GOOD + "extra: 1\n", "t.yaml:7: unknown key 'extra' in the thresholds file (allowed: recipe, checks)"),
    ("recipe: r\nchecks: []\n", "t.yaml:2: checks must be a non-empty list"),
    ("recipe: r\nchecks:\n  - just text\n", "t.yaml:3: checks[0] must be a mapping"),
    ("- a\n", "t.yaml:1: the thresholds file must be a YAML mapping, not a list"),
    ("", "t.yaml:1: empty file: the thresholds file is a YAML mapping"),
    ("recipe: [\n", "t.yaml:2: YAML syntax error"),
    ("recipe: !!python/object:os.system x\nchecks: []\n",
     "t.yaml:1: recipe: unsupported YAML type 'python/object:os.system'"),
])
def test_problems_name_file_and_line(tmp_path, text, message):
    with pytest.raises(ThresholdFileError) as info:
        _load(tmp_path, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_same_name_on_disjoint_hardware_is_allowed_but_not_with_an_all_hardware_check(tmp_path):
    two = GOOD + "    hardware: [cpu]\n  - name: a\n    expr: 'max(y) > 0'\n    why: w\n    since: 2026-11-30\n"
    with pytest.raises(ThresholdFileError, match="t.yaml:8: duplicate check name 'a'"):
        _load(tmp_path, two)
    assert len(_load(tmp_path, two + "    hardware: [h100]\n")) == 2
    with pytest.raises(ThresholdFileError, match="t.yaml:8: duplicate check name 'a'"):
        _load(tmp_path, two + "    hardware: [h100, cpu]\n")


def test_no_check_for_the_hardware_fails_closed(tmp_path):
    with pytest.raises(ThresholdFileError, match=r"no check applies to hardware 'a100' \(classes in file: cpu\)"):
        _load(tmp_path, GOOD + "    hardware: [cpu]\n", hardware="a100")


def test_recipe_mismatch(tmp_path):
    with pytest.raises(ThresholdFileError, match="t.yaml:1: thresholds are for recipe 'r', not 'other'"):
        _load(tmp_path, GOOD, recipe="other")


def test_missing_file(tmp_path):
    with pytest.raises(ThresholdFileError, match="nope.yaml:1: cannot read"):
        load_thresholds(tmp_path / "nope.yaml", hardware=None)


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('"because"', '"be\x00cause"'), "t.yaml:5: control character U+0000 is not allowed in YAML"),
    (GOOD + "x: " + "[" * 5000 + "]" * 5000 + "\n", "t.yaml:7: nested deeper than 64 levels"),
    (GOOD.replace("why: \"because\"", "why: " + "{a: " * 3000 + "1" + "}" * 3000), "nested deeper than 64 levels"),
])
def test_nul_and_deep_nesting_are_file_errors(tmp_path, text, message):
    """Both were internal errors (exit 3): a ReaderError, a RecursionError in PyYAML's composer."""
    with pytest.raises(ThresholdFileError, match=re.escape(message)):
        _load(tmp_path, text)


@pytest.mark.timeout(10)
def test_a_fifo_or_dev_zero_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ThresholdFileError, match=r"fifo.yaml:1: cannot read: not a regular file \(a FIFO\)"):
        load_thresholds(fifo, hardware=None)
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    with pytest.raises(ThresholdFileError, match=r"zero.yaml:1: cannot read: not a regular file \(a character"):
        load_thresholds(zero, hardware=None)


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(GOOD.encode().replace(b"because", b"caf\xe9"))
    with pytest.raises(ThresholdFileError, match=r"t.yaml:5: not valid UTF-8 \(byte 0xe9\)"):
        load_thresholds(path, hardware=None)


@pytest.mark.parametrize("expr", ["1 < 2", "not 0 > 1", "(1 + 1) == 2 or 3 > 4"])
def test_a_check_that_reads_no_metric_is_refused_when_loaded(tmp_path, expr):
    """`1 < 2` would pass every run (issue 12, item 7)."""
    with pytest.raises(ThresholdFileError, match=r"t.yaml:4: check 'a' reads no metric"):
        _load(tmp_path, GOOD.replace('"max(x) > 0"', f'"{expr}"'))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "dir"])
def test_a_thresholds_path_that_is_no_regular_file_is_one_line(tmp_path, special):
    """A FIFO hung forever and /dev/zero read until MemoryError (issue 12, item 9)."""
    path = tmp_path / "t.yaml"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "dir":
        path.mkdir()
    else:
        path.symlink_to(special)
    with pytest.raises(ThresholdFileError, match="t.yaml:1: cannot read: not a regular file") as info:
        load_thresholds(path, hardware=None)
    assert "\n" not in str(info.value)
