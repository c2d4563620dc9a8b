"""`defaults:` resolution is iterative, reads each file once and stops at its caps with one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.recipe import RecipeError, defaults, load_recipe
from harness.recipe.defaults import MAX_CHAIN, MAX_ENTRIES

pytestmark = pytest.mark.timeout(30)

MINIMAL = """\
name: r
model: {family: qwen3_5, tokenizer: arith}
cluster: {devices_per_node: 2, device: cpu}
algorithm: {num_steps: 2}
task: {name: arith}
"""


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _chain(folder: Path, length: int) -> Path:
    """d0.yaml -> d1.yaml -> ... -> d{length-1}.yaml, the last holding the recipe; each sets one env var."""
    for i in range(length - 1):
        (folder / f"d{i}.yaml").write_text(f"defaults: d{i + 1}.yaml\nenv: {{V{i}: '{i}'}}\n")
    (folder / f"d{length - 1}.yaml").write_text(MINIMAL)
    return folder / "d0.yaml"


def test_a_chain_of_1200_files_stops_at_the_cap(here):
    """Was RecursionError (exit 3) in the recursive walk."""
    with pytest.raises(RecipeError) as info:
        load_recipe(_chain(here, 1200))
    message = str(info.value)
    assert message.startswith(f"d{MAX_CHAIN - 1}.yaml:1: defaults: defaults chain deeper than {MAX_CHAIN} files ")
    assert f"(d0.yaml -> d1.yaml -> ... -> d{MAX_CHAIN - 1}.yaml -> d{MAX_CHAIN}.yaml)" in message


def test_a_chain_at_the_cap_resolves_in_order(here):
    resolved = load_recipe(_chain(here, MAX_CHAIN))
    assert resolved.data["env"] == {f"V{i}": str(i) for i in range(MAX_CHAIN - 1)}
    assert resolved.provenance["env.V0"] == "d0.yaml:2"


def test_a_diamond_24_deep_reads_each_file_once(here, monkeypatch):
    """Each file naming the next twice took 20 s at depth 24 (2**24 walks); now 25 reads."""
    depth = 24
    for i in range(depth):
        (here / f"m{i}.yaml").write_text(f"defaults: [m{i + 1}.yaml, m{i + 1}.yaml]\nenv: {{V{i}: '{i}'}}\n")
    (here / f"m{depth}.yaml").write_text(MINIMAL)
    reads: list[Path] = []
    real = defaults.load_file
    monkeypatch.setattr(defaults, "load_file", lambda path: reads.append(path) or real(path))
    resolved = load_recipe(here / "m0.yaml")
    assert len(reads) == depth + 1 and len(set(reads)) == depth + 1
    assert resolved.data["env"]["V0"] == "0" and resolved.data["name"] == "r"


def test_too_many_defaults_entries(here):
    (here / "base.yaml").write_text(MINIMAL)
    names = ", ".join(["base.yaml"] * (MAX_ENTRIES + 1))
    (here / "top.yaml").write_text(f"defaults: [{names}]\n")
    with pytest.raises(RecipeError, match=f"top.yaml:1: defaults: more than {MAX_ENTRIES} defaults entries"):
        load_recipe(here / "top.yaml")


def test_a_fifo_as_a_default_is_refused_without_blocking(here):
    os.mkfifo(here / "base.yaml")
    (here / "top.yaml").write_text("defaults: base.yaml\n")
    with pytest.raises(RecipeError, match=r"base.yaml: cannot read: not a regular file \(a FIFO\)"):
        load_recipe(here / "top.yaml")
