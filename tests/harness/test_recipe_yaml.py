"""The safe YAML loader: lines of keys, and the inputs it refuses."""

from __future__ import annotations

import os

import pytest

from harness.recipe import RecipeError
from harness.recipe.yamlsafe import MAX_ALIASES, MAX_DEPTH, load_file, parse_text


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


@pytest.mark.parametrize("text, code", [(b"name: x\x00\n", "U+0000"), (b"a: 1\nb: \x1b[31m\n", "U+001B")])
def test_control_characters_are_a_recipe_error_with_a_line(tmp_path, monkeypatch, text, code):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError) as info:
        _load(tmp_path, text)
    line = text[: text.index(b"\x00" if b"\x00" in text else b"\x1b")].count(b"\n") + 1
    assert str(info.value) == f"r.yaml:{line}: control character {code} is not allowed in YAML; remove it"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("text", [
    "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "a: " + "{k: " * 5000 + "1" + "}" * 5000 + "\n",
    "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 1200)),
])
def test_nesting_thousands_deep_is_refused_before_composing(tmp_path, monkeypatch, text):
    """PyYAML's composer recursed here: RecursionError, exit 3."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError, match=f"nested deeper than {MAX_DEPTH} levels"):
        _load(tmp_path, text)


def test_an_override_value_thousands_deep_is_refused():
    with pytest.raises(RecipeError, match=f"x: nested deeper than {MAX_DEPTH} levels"):
        parse_text("[" * 5000 + "]" * 5000, where="x")


def test_depth_at_the_limit_is_fine(tmp_path):
    data, _ = _load(tmp_path, "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n")
    assert isinstance(data["a"], list)


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "r.yaml"
    os.mkfifo(fifo)
    with pytest.raises(RecipeError, match=r"cannot read: not a regular file \(a FIFO\)"):
        load_file(fifo)


@pytest.mark.timeout(10)
def test_dev_zero_behind_a_symlink_is_refused(tmp_path):
    link = tmp_path / "r.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(RecipeError, match=r"not a regular file \(a character device\)"):
        load_file(link)


def test_a_file_over_the_cap_is_refused(tmp_path):
    with pytest.raises(RecipeError, match="byte cap for a recipe file"):
        _load(tmp_path, b"# " + b"x" * (1 << 20) + b"\n")


@pytest.mark.parametrize("text", ["a: .nan\n", "a: .inf\n", "a: {b: [-.Inf]}\n", "a: 1e999\n"])
def test_non_finite_numbers_are_refused_anywhere(tmp_path, monkeypatch, text):
    """Free mappings (model.config) included: no schema type reaches them."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError, match="r.yaml:1: a.*: numbers must be finite"):
        _load(tmp_path, text)
    assert _load(tmp_path, "a: 'nan'\nb: 1.5\n")[0] == {"a": "nan", "b": 1.5}


def test_override_errors_carry_no_file_line():
    with pytest.raises(RecipeError) as info:
        parse_text(".nan", where="override 'x=.nan'")
    assert str(info.value) == "override 'x=.nan': numbers must be finite, not '.nan'"
