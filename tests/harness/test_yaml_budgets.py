"""One YAML loader for every file the harness reads, and its budgets (issue 32, items 2 and 5).

A 458-byte thresholds file with an alias bomb in `since:` ran to 2.4 GB and exit 3; a 1 KB
reference recipe to 3.4 GB; a `defaults:` diamond of 24 files ran past 60 s; a self-symlinked
reference recipe was exit 3; a 1 MB check name, `recipe:` or `since:` came back as a 1 MB line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.errors import MAX_LINE, SHOWN_CHARS, shown
from harness.importer import reference_yaml
from harness.importer.reference_yaml import ReferenceError_, load_reference_recipe
from harness.thresholds import ThresholdFileError, load_thresholds
from harness.yamlsafe import RECIPE, THRESHOLDS, YamlError, load_text

pytestmark = pytest.mark.timeout(60)

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference_checkout"


def _bomb(levels: int = 9) -> str:
    """Each level names the one below 10 times: 10**levels nodes once expanded, ~50 bytes a level."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _thresholds(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return path


def _one_capped_line(error: str) -> None:
    assert error.count("\n") <= 1 and len(error) <= MAX_LINE + 20, len(error)


def test_an_alias_bomb_in_since_is_exit_2_in_one_line(tmp_path, capsys):
    """9**9 nodes from about 460 bytes: refused by the node and alias budgets while building."""
    text = "recipe: r\nx: &x [a,a,a,a,a,a,a,a,a]\n"
    for i in range(1, 9):
        text += f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}" if i > 1 else "*x"] * 9) + "]\n"
    text += "checks:\n  - {name: a, expr: 'max(x) > 0', why: w, since: *x8}\n"
    path = _thresholds(tmp_path, text)
    assert len(text) < 600
    (tmp_path / "m.jsonl").write_text('{"step": 1, "x": 1.0}\n')
    assert main(["check", str(tmp_path / "m.jsonl"), "--thresholds", str(path)]) == 2
    err = capsys.readouterr().err
    assert "alias" in err and "Traceback" not in err
    _one_capped_line(err)


@pytest.mark.parametrize("field, check", [
    ("name", lambda text: text.replace("name: a", "name: " + "n" * 1_000_000)),
    ("recipe", lambda text: text.replace("recipe: r", "recipe: " + "r" * 1_000_000)),
    ("since", lambda text: text.replace("since: 2026-11-30", "since: " + "s" * 1_000_000)),
])
def test_a_1_mb_value_is_echoed_capped(tmp_path, capsys, field, check):
    good = "recipe: r\nchecks:\n  - name: a\n    expr: 'max(x) > 0'\n    why: w\n    since: 2026-11-30\n"
    path = _thresholds(tmp_path, check(good))
    with pytest.raises(ThresholdFileError) as info:
        load_thresholds(path, hardware=None, recipe="r")
    assert len(str(info.value)) < 400 and "characters" in str(info.value)


def test_a_1_mb_alias_name_in_a_syntax_error_is_capped():
    with pytest.raises(YamlError, match="YAML syntax error") as info:
        load_text("a: *" + "z" * 1_000_000 + "\n", name="t.yaml", dialect=THRESHOLDS)
    assert len(str(info.value)) < 400


def test_a_recipe_alias_bomb_is_still_refused(tmp_path):
    with pytest.raises(YamlError, match="alias bomb"):
        load_text(_bomb(), name="r.yaml", dialect=RECIPE)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_loads_or_is_one_yaml_error(text):
    """Nothing but a YamlError, whatever the text (PyYAML's own errors, RecursionError...)."""
    for dialect in (RECIPE, THRESHOLDS):
        try:
            load_text(text, name="f.yaml", dialect=dialect)
        except YamlError as error:
            assert "\n" not in str(error)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=50))
def test_shown_is_capped_whatever_the_value(value):
    assert len(shown(value)) <= SHOWN_CHARS + 30


@pytest.mark.parametrize("text", ["since: 2026-13-45", "since: 2026-02-30"])
def test_an_impossible_date_is_one_yaml_error(text):
    """It resolves as a timestamp and its constructor raised ValueError: exit 3 before."""
    with pytest.raises(YamlError, match="is not a valid 'timestamp'"):
        load_text(text, name="t.yaml", dialect=THRESHOLDS)


def test_shown_never_formats_a_huge_integer():
    assert shown(10**100_000) == "an integer of about 100001 digits"


# ---------------------------------------------------------------- the importer (item 5)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "ref"
    shutil.copytree(REFERENCE, root)
    return root


def test_an_alias_bomb_in_a_reference_recipe_is_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(_bomb())
    assert path.stat().st_size < 1100
    with pytest.raises(ReferenceError_, match="alias"):
        load_reference_recipe(path)


def test_a_defaults_diamond_reads_each_file_once(tmp_path, monkeypatch):
    """File i names file i+1 twice: 2**24 reads before, one read each now."""
    for i in range(24):
        (tmp_path / f"f{i}.yaml").write_text(f"defaults: [f{i + 1}.yaml, f{i + 1}.yaml]\nk{i}: {i}\n")
    (tmp_path / "f24.yaml").write_text("last: 1\n")
    reads: list[Path] = []
    real = reference_yaml._read
    monkeypatch.setattr(reference_yaml, "_read", lambda path: reads.append(path) or real(path))
    flat, files = load_reference_recipe(tmp_path / "f0.yaml")
    assert len(reads) == 25 and len(files) == 25 and flat["last"] == 1 and flat["k0"] == 0


def test_defaults_entries_have_the_recipe_loaders_budget(tmp_path):
    names = [f"p{i}.yaml" for i in range(300)]
    for name in names:
        (tmp_path / name).write_text("a: 1\n")
    (tmp_path / "r.yaml").write_text("defaults: [" + ", ".join(names) + "]\n")
    with pytest.raises(ReferenceError_, match="more than 256 defaults entries"):
        load_reference_recipe(tmp_path / "r.yaml")


def test_a_self_symlinked_reference_recipe_is_one_line(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    with pytest.raises(ReferenceError_) as info:
        load_reference_recipe(loop)
    _one_capped_line(str(info.value))


def test_a_symlink_loop_in_a_checkout_is_exit_2(checkout, tmp_path, capsys):
    base = checkout / "examples/configs/grpo_base.yaml"
    base.unlink()
    base.symlink_to(base)
    assert main(["import", "reference", str(checkout), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    _one_capped_line(err)


def test_a_duplicate_key_in_a_reference_recipe_is_refused(tmp_path):
    """OmegaConf refuses one too; safe_load let the last win."""
    (tmp_path / "r.yaml").write_text("a: 1\na: 2\n")
    with pytest.raises(ReferenceError_, match="duplicate key"):
        load_reference_recipe(tmp_path / "r.yaml")
