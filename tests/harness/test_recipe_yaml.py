"""The safe YAML loader: lines of keys, and the inputs it refuses."""

from __future__ import annotations

import pytest

from harness.recipe import RecipeError
from harness.recipe.yamlsafe import MAX_ALIASES, load_file, parse_text


def _load(tmp_path, text: str | bytes):
    path = tmp_path / "r.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return load_file(path)


def test_lines_of_nested_keys(tmp_path):
    data, lines = _load(tmp_path, "# c\na: 1\nb:\n  c: {d: 2}\n  e: [1, 2]\n")
    assert data == {"a": 1, "b": {"c": {"d": 2}, "e": [1, 2]}}
    assert lines[("a",)] == 2 and lines[("b",)] == 3
    assert lines[("b", "c")] == 4 and lines[("b", "c", "d")] == 4 and lines[("b", "e")] == 5


def test_scientific_floats_without_a_dot(tmp_path):
    data, _ = _load(tmp_path, "lr: 1e-4\nbig: 3E5\nint: 10\nv: '1e-4'\n")
    assert data == {"lr": 1e-4, "big": 3e5, "int": 10, "v": "1e-4"}
    assert isinstance(data["lr"], float) and isinstance(data["int"], int)


def test_small_aliases_are_fine(tmp_path):
    data, _ = _load(tmp_path, "a: &x {k: [1, 2]}\nb: *x\n")
    assert data["b"] == data["a"] == {"k": [1, 2]}
    data["b"]["k"].append(3)                      # expanded copies, not shared objects
    assert data["a"] == {"k": [1, 2]}


def test_alias_bomb_is_refused_quickly(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(RecipeError, match="alias bomb"):
        _load(tmp_path, "\n".join(levels) + "\n")


def test_alias_use_cap(tmp_path):
    text = "a: &a [1]\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(RecipeError, match="alias uses"):
        _load(tmp_path, text)


@pytest.mark.parametrize("text, message, line", [
    ("a: 1\na: 2\n", "a: duplicate key (first set on line 1)", 2),
    ("a: 1\n2: x\n", "keys must be strings", 2),
    ("null: 1\n", "keys must be strings", 1),
    ("? [1, 2]\n: x\n", "keys must be strings", 1),
    ("a: [1\n", "YAML syntax error", 2),
    ("a: !!binary aGVsbG8=\n", "unsupported YAML type 'binary'", 1),
    ("a: !!set {x}\n", "unsupported YAML type 'set'", 1),
    ("b: &b {k: 1}\na:\n  <<: *b\n", "merge keys", 3),
    ("a: &a [*a]\n", "recursive YAML alias", 1),
    ("- 1\n", "not a list", 1),
    ("", "empty file", 1),
    ("# only a comment\n", "empty file", 1),
])
def test_refused(tmp_path, monkeypatch, text, message, line):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError) as info:
        _load(tmp_path, text)
    assert message in str(info.value)
    assert str(info.value).startswith(f"r.yaml:{line}: ")


def test_non_utf8_names_the_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError) as info:
        _load(tmp_path, b"a: 1\nb: caf\xe9\n")
    assert str(info.value) == "r.yaml:2: not valid UTF-8 (byte 0xe9)"


def test_bom_is_accepted(tmp_path):
    data, _ = _load(tmp_path, "\ufeffa: 1\n".encode("utf-8"))
    assert data == {"a": 1}


def test_parse_text_values():
    assert parse_text("[1, 2]", where="x") == [1, 2]
    assert parse_text("", where="x") is None
    assert parse_text("{tp: 2}", where="x") == {"tp": 2}
    assert parse_text("1e-3", where="x") == 1e-3
    with pytest.raises(RecipeError, match="unsupported YAML type 'timestamp'"):
        parse_text("2024-01-01", where="x")
