"""The recipe JSON Schema: strict, complete, matching docs/architecture.md and docs/recipes.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from harness.recipe import RecipeError, apply_overrides, load_recipe
from harness.recipe.scales import SCALES
from harness.recipe.schema import SCHEMA, object_branch

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = """\
name: r
model: {family: qwen3_5, tokenizer: arith}
cluster: {devices_per_node: 2, device: cpu}
algorithm: {num_steps: 2}
task: {name: arith}
"""
CONSUMED = {"defaults", *SCALES}         # read by the loader, never in a resolved recipe


def _walk(schema: dict, prefix: tuple = ()):
    """(path, schema) of every named key."""
    for key, sub in object_branch(schema).get("properties", {}).items():
        yield prefix + (key,), sub
        yield from _walk(sub, prefix + (key,))


def _objects(schema: dict):
    """Every schema that defines keys (the allOf if/then overlays only add constraints)."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for key, value in schema.items():
            if key != "allOf":
                yield from _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _objects(value)


def test_schema_is_draft_2020_12():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_fixed_mapping_refuses_unknown_keys():
    objects = list(_objects(SCHEMA))
    assert len(objects) > 15
    for obj in objects:
        assert obj.get("additionalProperties") is False, sorted(obj["properties"])


def test_the_architecture_example_is_a_valid_recipe(tmp_path):
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## The recipe (resolved form)", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    block = block.replace(", ...}", "}")
    path = tmp_path / "recipes" / "example.yaml"
    path.parent.mkdir()
    path.write_text(block)
    r = load_recipe(path)
    assert r.data["checks"]["thresholds"] == str(tmp_path / "thresholds" / "arith_grpo_cpu.yaml")
    keys = {".".join(p) for p, _ in _walk(SCHEMA)} - CONSUMED
    written = set()
    for line in block.splitlines():      # every top-level key of the example is in the schema
        m = re.match(r"^([a-z_]+):", line)
        if m:
            written.add(m.group(1))
    assert written - CONSUMED <= keys
    assert load_recipe(path, scale="tiny").data["cluster"]["device"] == "cpu"


def test_resolved_recipe_is_complete(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(MINIMAL + "checks: {parity: {variants: {a: {}, b: {algorithm.seed: 1}}}}\n"
                    "engine: {command: [x], metrics: tensorboard}\n")
    data = load_recipe(path).data
    assert "teacher" not in data  # a section without a default: only distillation recipes have it
    for keys, _ in _walk(SCHEMA):
        if keys[0] in CONSUMED or keys[0] == "teacher":
            continue
        node = data
        for key in keys:
            assert isinstance(node, dict) and key in node, ".".join(keys)
            node = node[key]


def test_docs_describe_every_key():
    doc = (ROOT / "docs" / "recipes.md").read_text()
    missing = [".".join(p) for p, _ in _walk(SCHEMA) if f"`{'.'.join(p)}`" not in doc]
    assert not missing, missing


def test_required_key_points_at_the_parent_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(MINIMAL.replace("{num_steps: 2}", "\n  seed: 3"))
    with pytest.raises(RecipeError) as info:
        load_recipe("r.yaml")
    assert str(info.value) == "r.yaml:4: algorithm.num_steps: missing required key"


def test_unknown_keys_are_reported_before_other_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(MINIMAL.replace("num_steps: 2", "num_step: 2"))
    with pytest.raises(RecipeError) as info:
        load_recipe("r.yaml")
    assert str(info.value) == "r.yaml:4: algorithm.num_step: unknown key (did you mean 'num_steps'?)"


def test_apply_overrides_for_parity_variants(tmp_path):
    (tmp_path / "r.yaml").write_text(MINIMAL)
    base = load_recipe(tmp_path / "r.yaml").data
    out = apply_overrides(base, {"data_plane.backend": "tq", "env.NEW": "1", "policy.parallel": {"tp": 2}})
    assert out["data_plane"]["backend"] == "tq" and out["env"] == {"NEW": "1"}
    assert out["policy"]["parallel"]["pp"] == 1 and out["policy"]["parallel"]["tp"] == 2
    assert base["data_plane"]["backend"] == "legacy"                  # the input is untouched
    with pytest.raises(RecipeError) as info:
        apply_overrides(base, {"data_plane.backnd": "tq"})
    assert str(info.value) == ("variant 'data_plane.backnd': data_plane.backnd: not a recipe key path "
                               "(did you mean 'backend'?)")
    with pytest.raises(RecipeError, match="data_plane.backend: must be one of"):
        apply_overrides(base, {"data_plane.backend": "redis"}, label="variant tq")
    with pytest.raises(RecipeError, match="unknown key"):
        apply_overrides(base, {"++data_plane.extra": 1})
