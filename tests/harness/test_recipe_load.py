"""load_recipe: defaults chain, merge rules, overrides, --scale tiny, provenance, paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "recipes"

MINIMAL = """\
name: r
model: {family: qwen3_5, tokenizer: arith}
cluster: {devices_per_node: 2, device: cpu}
algorithm: {num_steps: 2}
task: {name: arith}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_two_level_chain_merges_and_records_provenance(monkeypatch):
    monkeypatch.chdir(ROOT)
    r = load_recipe(FIXTURES / "arith_child.yaml")
    d, prov = r.data, r.provenance
    assert d["name"] == "arith_child" and "defaults" not in d and "tiny" not in d
    assert d["algorithm"]["num_steps"] == 20                          # child beats level 2
    assert d["algorithm"]["loss"]["clip_high"] == 0.28                # level 2 kept by deep merge
    assert d["algorithm"]["loss"]["kl_beta"] == 0.01                  # child adds beside it
    assert d["env"] == {"SHARED_VAR": "1", "CHILD_VAR": "2"}
    assert prov["algorithm.num_steps"] == "tests/data/recipes/arith_child.yaml:5"
    assert prov["algorithm.loss.clip_high"] == "tests/data/recipes/_shared/model_tiny.yaml:8"
    assert prov["cluster.device"] == "tests/data/recipes/_shared/cpu.yaml:3"
    assert prov["policy.micro_batch_size"] == "schema default"
    assert prov["checks.hardware"] == "default (= cluster.device)"
    assert r.scale is None and r.source == FIXTURES / "arith_child.yaml"


def test_provenance_covers_every_leaf_and_nothing_else(monkeypatch):
    monkeypatch.chdir(ROOT)
    r = load_recipe(FIXTURES / "arith_child.yaml")

    def leaves(node, prefix=""):
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                yield from leaves(v, key + ".")
            else:
                yield key
    assert set(leaves(r.data)) == set(r.provenance)


def test_relative_paths_follow_the_file_that_set_them(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)                                       # cwd must not matter
    r = load_recipe(FIXTURES / "arith_child.yaml")
    assert r.data["checks"]["thresholds"] == str(FIXTURES / "thresholds" / "arith.yaml")
    tiny = load_recipe(FIXTURES / "arith_child.yaml", scale="tiny")
    assert tiny.data["checks"]["thresholds"] == str(FIXTURES / "thresholds" / "tiny.yaml")
    gpu = load_recipe(FIXTURES / "gpu_full.yaml")
    assert gpu.data["model"]["path"] == str(FIXTURES.parent / "checkpoints" / "qwen")
    assert gpu.data["model"]["tokenizer"] == str(FIXTURES / "tokenizers" / "qwen")
    assert r.data["model"]["tokenizer"] == "arith"                   # a name, not a path


def test_hub_ids_and_shipped_names_reach_the_engine_as_written(here):
    recipe = _write(here, "r.yaml", MINIMAL)
    r = load_recipe(recipe, ["model.path=Qwen/Qwen3.5-35B-A3B-Base",
                             "++data.train={path: nvidia/OpenMathInstruct-2, split: train}"])
    assert r.data["model"]["path"] == "Qwen/Qwen3.5-35B-A3B-Base"
    assert r.data["data"]["train"]["path"] == "nvidia/OpenMathInstruct-2"
    assert load_recipe(recipe, ["model.path=tiny_qwen3_5_moe"]).data["model"]["path"] == "tiny_qwen3_5_moe"
    (here / "ckpt").mkdir()  # an existing directory next to the recipe is a path
    assert load_recipe(recipe, ["model.path=./ckpt"]).data["model"]["path"] == str(here / "ckpt")


def test_override_path_is_relative_to_the_working_dir(here):
    recipe = _write(here, "sub/r.yaml", MINIMAL)
    r = load_recipe(recipe, ["checks.thresholds=t/x.yaml"])
    assert r.data["checks"]["thresholds"] == str(here / "t" / "x.yaml")
    assert r.provenance["checks.thresholds"] == "override 'checks.thresholds=t/x.yaml'"


def test_lists_and_scalars_replace_mappings_merge(here):
    _write(here, "base.yaml", MINIMAL + "policy: {optimizer: {betas: [0.8, 0.9], lr: 0.5}}\nenv: {A: a}\n")
    _write(here, "mid.yaml", "defaults: base.yaml\npolicy: {optimizer: {betas: [0.7, 0.95]}}\n")
    top = _write(here, "top.yaml", "defaults: [mid.yaml]\nenv: {B: b}\n")
    d = load_recipe(top).data
    assert d["policy"]["optimizer"]["betas"] == [0.7, 0.95]
    assert d["policy"]["optimizer"]["lr"] == 0.5
    assert d["env"] == {"A": "a", "B": "b"}


def test_defaults_list_last_wins_file_itself_last(here):
    _write(here, "a.yaml", MINIMAL.replace("{num_steps: 2}", "{num_steps: 3, seed: 1}"))
    _write(here, "b.yaml", "algorithm: {num_steps: 4}\n")
    top = _write(here, "top.yaml", "defaults: [a.yaml, b.yaml]\nalgorithm: {seed: 9}\n")
    r = load_recipe(top)
    assert r.data["algorithm"]["num_steps"] == 4 and r.data["algorithm"]["seed"] == 9
    assert r.provenance["algorithm.num_steps"] == "b.yaml:1"
    assert r.provenance["algorithm.seed"] == "top.yaml:2"


def test_a_mapping_replacing_a_scalar_drops_old_provenance(here):
    _write(here, "a.yaml", MINIMAL + "engine: rl\n")
    top = _write(here, "top.yaml", "defaults: a.yaml\nengine: {command: [run.sh], metrics: jsonl}\n")
    r = load_recipe(top)
    assert r.data["engine"] == {"command": ["run.sh"], "metrics": "jsonl", "metrics_path": None}
    assert r.provenance["engine.command"] == "top.yaml:2"


def test_cycle_and_missing_errors_name_the_chain(here):
    _write(here, "a.yaml", "defaults: b.yaml\n" + MINIMAL)
    _write(here, "b.yaml", "defaults: c.yaml\n")
    _write(here, "c.yaml", "defaults: a.yaml\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(here / "a.yaml")
    assert str(info.value) == "c.yaml:1: defaults: defaults cycle: a.yaml -> b.yaml -> c.yaml -> a.yaml"
    _write(here, "c.yaml", "defaults: [gone.yaml]\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(here / "a.yaml")
    assert "defaults file not found: gone.yaml (chain: a.yaml -> b.yaml -> c.yaml)" in str(info.value)


def test_diamond_is_not_a_cycle(here):
    _write(here, "base.yaml", MINIMAL)
    _write(here, "x.yaml", "defaults: base.yaml\n")
    _write(here, "y.yaml", "defaults: base.yaml\n")
    assert load_recipe(_write(here, "top.yaml", "defaults: [x.yaml, y.yaml]\n")).data["name"] == "r"


def test_overrides_set_add_and_parse_yaml(here):
    recipe = _write(here, "r.yaml", MINIMAL)
    r = load_recipe(recipe, ["algorithm.num_steps=7", "policy.parallel={tp: 2}", "++env.X=abc",
                             "checkpoint.every_steps=5", "model.path="])
    assert r.data["algorithm"]["num_steps"] == 7
    assert r.data["policy"]["parallel"] == {"tp": 2, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": False}
    assert r.data["checkpoint"]["every_steps"] == 5
    assert r.data["model"]["path"] is None
    assert r.data["env"] == {"X": "abc"}
    assert r.provenance["algorithm.num_steps"] == "override 'algorithm.num_steps=7'"
    with pytest.raises(RecipeError, match=r"env\.X: must be a string"):
        load_recipe(recipe, ["++env.X=1e-3"])
    assert load_recipe(recipe, ["++env.X='1e-3'"]).data["env"] == {"X": "1e-3"}


def test_override_errors_are_one_line_with_did_you_mean(here):
    recipe = _write(here, "r.yaml", MINIMAL)
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe, ["polcy.micro_batch_size=2"])
    assert str(info.value) == ("r.yaml: override 'polcy.micro_batch_size=2': polcy: unknown key; "
                               "'++polcy.micro_batch_size=...' adds a new key (did you mean 'policy'?)")
    with pytest.raises(RecipeError, match=r"^r\.yaml: override '\+\+polcy=1': polcy: unknown key \(did you"):
        load_recipe(recipe, ["++polcy=1"])


def test_scale_tiny_applies_after_files_before_overrides(monkeypatch):
    monkeypatch.chdir(ROOT)
    gpu = FIXTURES / "gpu_full.yaml"
    full = load_recipe(gpu)
    assert full.data["cluster"]["device"] == "h200" and full.data["policy"]["backend"] == "megatron"
    tiny = load_recipe(gpu, ["cluster.devices_per_node=4"], scale="tiny")
    assert tiny.scale == "tiny"
    assert tiny.data["cluster"] == {"nodes": 1, "devices_per_node": 4, "device": "cpu"}
    assert tiny.data["model"]["path"] is None
    assert tiny.data["model"]["config"] == {"hidden_size": 32, "num_hidden_layers": 2, "num_experts": 4}
    assert tiny.provenance["cluster.device"] == "tiny twin (tests/data/recipes/gpu_full.yaml:42)"
    assert tiny.provenance["cluster.devices_per_node"] == "override 'cluster.devices_per_node=4'"
    assert tiny.data["policy"]["parallel"]["pp"] == 1                 # refilled from the schema


def test_tiny_merges_through_defaults(monkeypatch):
    monkeypatch.chdir(ROOT)
    tiny = load_recipe(FIXTURES / "arith_child.yaml", scale="tiny").data
    assert tiny["model"]["config"]["hidden_size"] == 16               # from level 2's tiny block
    assert tiny["algorithm"]["num_steps"] == 2                         # from the child's


def test_tiny_is_validated_without_scale(here):
    recipe = _write(here, "r.yaml", MINIMAL + "tiny:\n  algorithm.num_steps: 0\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    assert str(info.value) == "r.yaml:7: tiny.algorithm.num_steps: must be >= 1, not 0"


def test_only_scale_tiny_exists(here):
    with pytest.raises(RecipeError, match="unknown scale 'small'"):
        load_recipe(_write(here, "r.yaml", MINIMAL), scale="small")


def test_missing_recipe_file(here):
    with pytest.raises(RecipeError, match="^nope.yaml: recipe file not found$"):
        load_recipe(here / "nope.yaml")
