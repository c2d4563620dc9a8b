"""Suite files: what parses, and that every mistake names its file, line and key."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest

from harness.suites import SuiteError, find_suite, find_suites, load_suite

REPO = Path(__file__).resolve().parents[2]
EXTERNAL = REPO / "tests" / "data" / "external" / "external_grpo.yaml"


def write_suite(tmp_path: Path, body: str, name: str = "demo") -> Path:
    folder = tmp_path / "suites"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(body).replace("EXTERNAL", str(EXTERNAL)), encoding="utf-8")
    return path


GOOD = """\
    name: demo
    hardware: cpu
    budget_gpu_hours: 0
    gate: {mode: fail, window: 10, min_runs: 4}
    entries:
      - id: ext
        recipe: EXTERNAL
        overrides: [algorithm.num_steps=8]
        tags: [smoke]
      - id: ext-parked
        recipe: EXTERNAL
        estimated_hours: 0.5
        disabled: {reason: flaky port, owner: alice, until: "2027-01-15"}
"""


def test_good_suite_parses_into_entries(tmp_path):
    suite = load_suite(write_suite(tmp_path, GOOD))
    assert suite.name == "demo" and suite.budget_gpu_hours == 0.0
    assert suite.gate.mode == "fail" and suite.gate.window == 10 and suite.gate.k == 3.0
    first, parked = suite.entries
    assert first.recipe == EXTERNAL and first.hardware == "cpu" and first.tags == ("smoke",)
    assert first.harness_args() == [str(EXTERNAL), "algorithm.num_steps=8"]
    assert parked.disabled is not None and parked.disabled.until == dt.date(2027, 1, 15)
    assert [e.id for e in suite.enabled] == ["ext"]


def test_recipe_path_is_relative_to_the_suite_file(tmp_path):
    (tmp_path / "r.yaml").write_text("name: r\n")
    suite = load_suite(write_suite(tmp_path, """\
        name: demo
        budget_gpu_hours: 0
        entries: [{id: a, recipe: ../r.yaml, hardware: cpu, scale: tiny}]
    """))
    assert suite.entries[0].recipe == tmp_path / "r.yaml"
    assert suite.entries[0].harness_args()[-2:] == ["--scale", "tiny"]


@pytest.mark.parametrize("body, expected", [
    ("name: demo\nbudget_gpu_hours: 0\nentries: [{id: a, recipe: x.yaml, hardwre: cpu}]",
     r"entries\[0\].hardwre: unknown key.*did you mean 'hardware'"),
    ("name: demo\nbudget_gpu_hours: 0\nentries: [{id: a, recipe: x.yaml}]", r"entries\[0\]: missing 'hardware'"),
    ("name: demo\nbudget_gpu_hours: 0\nentries: [{id: a, recipe: x.yaml, hardware: tpu}]",
     r"entries\[0\].hardware: 'tpu' is not one of cpu, h100, h200, a100"),
    ("name: demo\nbudget_gpu_hours: -1\nentries: [{id: a, recipe: x.yaml, hardware: cpu}]",
     r"budget_gpu_hours: must be a number >= 0"),
    ("name: other\nbudget_gpu_hours: 0\nentries: [{id: a, recipe: x.yaml, hardware: cpu}]",
     r"name: 'other' must equal the file name 'demo'"),
    ("name: demo\nbudget_gpu_hours: 0\nentries: []", r"entries: must be a non-empty list"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries:\n  - {id: a, recipe: x.yaml}\n"
     "  - {id: a, recipe: y.yaml}",
     r":6: entries\[1\].id: duplicate entry id 'a'"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries: [{id: off, recipe: x.yaml}]",
     r"entries\[0\].id: must be a string, not the boolean False \(quote it"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries: [{id: 'A b', recipe: x.yaml}]",
     r"entries\[0\].id: 'A b' must match"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries:\n  - id: a\n    recipe: x.yaml\n"
     "    disabled: {reason: r, owner: o}", r":7: entries\[0\].disabled: missing required key 'until'"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries:\n  - id: a\n    recipe: x.yaml\n"
     "    disabled: {reason: r, owner: o, until: 2027-01-01}", r"unsupported YAML type 'timestamp'.*quote it"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\nentries:\n  - id: a\n    recipe: x.yaml\n"
     "    disabled: {reason: r, owner: o, until: 'next week'}", r"disabled.until: 'next week' is not a date"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\ngate: {mode: loud}\nentries: [{id: a, recipe: x.yaml}]",
     r"gate.mode: 'loud' is not one of fail, warn, off"),
    ("name: demo\nbudget_gpu_hours: 0\nhardware: cpu\ngate: {min_runs: 1}\nentries: [{id: a, recipe: x.yaml}]",
     r"gate.min_runs: must be an integer >= 2"),
    ("- just a list", r"must be a YAML mapping"),
])
def test_bad_suites_name_file_line_and_key(tmp_path, body, expected):
    path = write_suite(tmp_path, body)
    with pytest.raises(SuiteError, match=expected) as caught:
        load_suite(path)
    assert "demo.yaml" in str(caught.value) and "\n" not in str(caught.value)


def test_find_suite_by_name_path_and_typo(tmp_path):
    path = write_suite(tmp_path, GOOD)
    assert find_suite("demo", root=path.parent) == path
    assert find_suite(str(path)) == path
    with pytest.raises(SuiteError, match="no suite named 'dmeo'.*did you mean 'demo'"):
        find_suite("dmeo", root=path.parent)
    with pytest.raises(SuiteError, match="suite file not found"):
        find_suite(str(tmp_path / "missing.yaml"))


def test_find_suites_only_takes_files_in_a_suites_folder(tmp_path):
    path = write_suite(tmp_path, GOOD)
    (tmp_path / "recipe.yaml").write_text("name: r\n")
    (path.parent / "_shared.yaml").write_text("x: 1\n")
    assert find_suites([tmp_path]) == [path]
    assert find_suites([tmp_path / "recipe.yaml"]) == []
