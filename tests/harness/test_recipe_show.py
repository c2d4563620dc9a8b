"""dump_recipe, format_show and find_recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.recipe import dump_recipe, find_recipes, format_show, load_recipe
from harness.recipe.schema import SCHEMA
from harness.recipe.show import _scalar
from harness.recipe.yamlsafe import parse_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "recipes"


def test_dump_reloads_to_the_same_data_and_loads_as_a_recipe(tmp_path):
    resolved = load_recipe(FIXTURES / "gpu_full.yaml", scale="tiny")
    text = dump_recipe(resolved.data)
    assert yaml.safe_load(text) == resolved.data                     # the engine reads it plainly
    copy = tmp_path / "recipe.yaml"
    copy.write_text(text)
    assert load_recipe(copy).data == resolved.data                  # and it stands alone


def test_dump_order_is_the_schema_order_whatever_the_input_order():
    data = load_recipe(FIXTURES / "arith_child.yaml").data
    shuffled = dict(reversed(list(data.items())))
    text = dump_recipe(shuffled)
    assert text == dump_recipe(data)
    top = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert top == [k for k in SCHEMA["properties"] if k in data]


def test_dump_keeps_strings_strings():
    data = {"name": "x", "description": "yes", "env": {"A": "1e-3", "B": "line1\nline2", "C": "null"}}
    assert yaml.safe_load(dump_recipe(data)) == data


def test_format_show_with_and_without_provenance(monkeypatch):
    monkeypatch.chdir(ROOT)
    resolved = load_recipe("tests/data/recipes/arith_child.yaml", ["algorithm.seed=3"])
    plain = format_show(resolved, provenance=False)
    assert plain.splitlines()[0] == "# tests/data/recipes/arith_child.yaml"
    assert yaml.safe_load(plain) == resolved.data
    shown = format_show(resolved, provenance=True)
    assert yaml.safe_load(shown) == resolved.data                   # comments only
    lines = shown.splitlines()
    assert any(line.startswith("  seed: 3 ") and line.endswith("# override 'algorithm.seed=3'") for line in lines)
    assert any(line.endswith("# tests/data/recipes/_shared/cpu.yaml:3") and "device: cpu" in line
               for line in lines)
    leaf_lines = [line for line in lines[1:] if "#" in line]
    assert len(leaf_lines) == len(resolved.provenance)
    column = max(line.index(" # ") for line in leaf_lines if len(line.split("  # ")[0].rstrip()) < 40)
    for line in leaf_lines:  # comments line up, except after the few lines longer than the column
        text = line[: line.rindex(" # ")].rstrip()
        assert line.index(" # ") == column or len(text) >= column - 1, line


def test_format_show_names_the_scale():
    resolved = load_recipe(FIXTURES / "gpu_full.yaml", scale="tiny")
    assert format_show(resolved, provenance=False).splitlines()[0].endswith("gpu_full.yaml (--scale tiny)")


def test_find_recipes_skips_suites_and_underscored(tmp_path):
    for rel in ["a.yaml", "sub/b.yaml", "suites/nightly.yaml", "_base/shared.yaml", "sub/_frag.yaml",
                ".hidden/c.yaml", "notes.txt", "sub/deeper/d.yaml"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("name: x\n")
    found = find_recipes([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a.yaml", "sub/b.yaml", "sub/deeper/d.yaml"]
    explicit = find_recipes([tmp_path / "_base" / "shared.yaml", tmp_path / "a.yaml", tmp_path])
    assert tmp_path / "_base" / "shared.yaml" in explicit and len(explicit) == 4


def test_find_recipes_in_the_fixtures_all_load():
    found = find_recipes([FIXTURES])
    assert {p.name for p in found} == {"arith_child.yaml", "gpu_full.yaml"}
    for path in found:
        load_recipe(path)
        load_recipe(path, scale="tiny")


@pytest.mark.parametrize("text", ["a\x85b", "a\u2028b", "a\u2029b", "a\nb\r", 'q"\\\x85caf\u00e9'])
def test_yaml_line_breaks_survive_a_dump(text):
    """NEL, LS and PS are line breaks to YAML: written raw, 'a\\x85b' read back as 'a b'."""
    line = _scalar(text)
    assert "\n" not in line and not any(c in line for c in "\x85\u2028\u2029")
    assert parse_text(line, where="x") == text and yaml.safe_load(line) == text
