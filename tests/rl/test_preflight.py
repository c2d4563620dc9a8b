"""The engine's preflight (rl/preflight.py): each refusal, one line naming the key, on a CPU.

GPUs and installed modules are faked by monkeypatching `torch.cuda.device_count` and `rl.preflight.importable`;
nothing here builds weights or starts Ray.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import types
from pathlib import Path

import pytest
import torch
import yaml

from rl import preflight
from rl.config import parse_config
from rl.preflight import machine_refusals, static_refusals

ROOT = Path(__file__).resolve().parents[2]
CPU_RECIPE = yaml.safe_load((ROOT / "recipes" / "arith_grpo_cpu.yaml").read_text())  # complete: no defaults
BASE_35B = yaml.safe_load((ROOT / "recipes" / "_base" / "qwen3_5_35b.yaml").read_text())


def recipe(**sections) -> dict:
    """The CPU recipe with whole sections or dotted keys replaced."""
    data = copy.deepcopy(CPU_RECIPE)
    for dotted, value in sections.items():
        *parents, leaf = dotted.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return data


def gpu_recipe(*, nodes: int = 2, per_node: int = 8) -> dict:
    return recipe(cluster={"nodes": nodes, "devices_per_node": per_node, "device": "h200"})


@pytest.fixture
def gpus(monkeypatch):
    """Set how many CUDA devices this 'machine' has (and join no Ray cluster)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def set_count(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    set_count(0)
    return set_count


@pytest.fixture
def installed(monkeypatch):
    """Set which modules are importable (others: as they really are)."""
    real = preflight.importable
    fake: dict[str, bool] = {}
    monkeypatch.setattr(preflight, "importable", lambda name: fake.get(name, real(name)))
    return fake


def test_the_cpu_recipe_is_accepted_here(gpus):
    assert static_refusals(recipe()) == []
    assert machine_refusals(recipe()) == []


@pytest.mark.parametrize("have", [0, 8])
def test_a_gpu_recipe_on_too_few_gpus_is_refused_with_the_tiny_twin_suggested(gpus, have):
    gpus(have)
    assert machine_refusals(gpu_recipe(nodes=1, per_node=16)) == [
        f"cluster: recipe needs 16 GPUs (h200), this machine has {have}; run its tiny twin with --scale tiny"]


def test_a_gpu_recipe_with_enough_gpus_passes_the_gpu_check(gpus):
    gpus(16)
    assert machine_refusals(gpu_recipe(nodes=1, per_node=16)) == []


def test_several_nodes_without_a_ray_cluster_are_refused(gpus):
    gpus(16)
    assert machine_refusals(gpu_recipe()) == [
        "cluster.nodes: recipe needs 2 nodes, this machine has 1 (a private local Ray is one node: join a "
        "cluster with RAY_ADDRESS or harness run --ray-address)"]


def test_a_tp_cp_group_wider_than_a_node_is_refused_but_ep_may_span_nodes():
    two_by_two = {"nodes": 2, "devices_per_node": 2, "device": "cpu"}
    heads = {**CPU_RECIPE["model"]["config"], "num_key_value_heads": 4, "linear_num_key_heads": 4,
             "linear_num_value_heads": 4}  # tp 4 shards them: only the nodes are wrong
    wide = recipe(cluster=two_by_two, policy__backend="megatron", policy__parallel={"tp": 4}, model__config=heads)
    assert static_refusals(wide) == ["cluster.devices_per_node: 2 per node, but policy.parallel tp x cp = 4 "
                                     "would span nodes; tp x cp must divide cluster.devices_per_node"]
    assert static_refusals(recipe(cluster=two_by_two, policy__backend="megatron",
                                  policy__parallel={"tp": 2, "ep": 4})) == []


def test_with_ray_address_the_ray_clusters_gpus_count(gpus, monkeypatch):
    calls = []
    fake = types.SimpleNamespace(init=lambda **kw: calls.append(kw["address"]), shutdown=lambda: calls.append("bye"),
                                 cluster_resources=lambda: {"CPU": 64.0, "GPU": 8.0},
                                 nodes=lambda: [{"Alive": True}, {"Alive": False}])
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert machine_refusals(gpu_recipe()) == ["cluster: recipe needs 16 GPUs (h200), the Ray cluster at "
                                              "ray://head:10001 has 8; run its tiny twin with --scale tiny",
                                              "cluster.nodes: recipe needs 2 nodes, the Ray cluster at "
                                              "ray://head:10001 has 1"]
    assert calls == ["ray://head:10001", "bye"]
    assert machine_refusals(gpu_recipe(nodes=1)) == []

    def unreachable(**kw):
        raise ConnectionError("no head")

    monkeypatch.setattr(fake, "init", unreachable)
    (line,) = machine_refusals(gpu_recipe())
    assert line.startswith("cluster: cannot count the GPUs of the Ray cluster at RAY_ADDRESS: no head")


VLLM_REFUSAL = ("generation.backend: vllm is not implemented by this engine (vLLM cannot run on our GPU "
                "machines; the torch generator is the engine's); use generation.backend: torch")


@pytest.mark.parametrize("vllm_installed", [False, True])
def test_vllm_is_refused_on_every_machine_installed_or_not(gpus, installed, vllm_installed):
    installed.update({"vllm": vllm_installed, "rl.generation.vllm": vllm_installed})
    data = recipe(generation__backend="vllm")
    assert static_refusals(data) == [VLLM_REFUSAL]
    assert static_refusals(recipe(generation__backend="vllm", generation__tp=4)) == [VLLM_REFUSAL]
    assert machine_refusals(data) == []  # not a machine's business: no install makes it run


def test_generation_tp_over_1_is_refused_for_the_torch_backend():
    assert static_refusals(recipe(generation__tp=2)) == [
        "generation.tp: 2, but the torch generation backend runs each replica unsharded (tp 1); "
        "use generation.tp: 1"]


def test_generation_replicas_the_engine_cannot_place_or_refit_are_refused():
    gpu = {"nodes": 1, "devices_per_node": 2, "device": "h200"}
    assert static_refusals(recipe(cluster=gpu, generation__replicas=3)) == [
        "generation.replicas: 3, but colocated replica i shares policy rank i's GPU and the run has 2 GPUs; "
        "use at most 2 (null: one per GPU)"]
    apart = ["generation.replicas: 2 with generation.colocated: false, but the refit channel "
             "(rl/refit/channel.py) serves one generator; use generation.replicas: 1, or colocate"]
    assert static_refusals(recipe(generation__replicas=2, generation__colocated=False)) == apart
    assert static_refusals(recipe(cluster=gpu, generation__replicas=2, generation__colocated=False)) == apart
    assert static_refusals(recipe(generation__replicas=0)) == ["generation.replicas: must be >= 1 or null, got 0"]
    for fine in ({"cluster": gpu, "generation__replicas": 2}, {"cluster": gpu, "generation__replicas": None},
                 {"generation__replicas": 3}, {"generation__replicas": 1, "generation__colocated": False},
                 {"cluster": gpu, "generation__colocated": False}):  # null apart from training: one replica
        assert static_refusals(recipe(**fine)) == [], fine


def test_graph_decoding_of_fp32_experts_on_a_gpu_is_refused_and_auto_decodes_static():
    gpu = {"nodes": 1, "devices_per_node": 1, "device": "h200"}
    moe = {"cluster": gpu, "model__family": "qwen3_5_moe", "policy__precision": "fp32", "policy__backend": "megatron",
           "model__config": {"hidden_size": 64, "num_hidden_layers": 4, "moe_intermediate_size": 32}}
    assert static_refusals(recipe(**moe, generation__decode="graphs")) == [
        "generation.decode: graphs cannot capture the model's fp32 experts (Hugging Face's fp32 grouped-GEMM "
        "fallback reads expert offsets on the host); use policy.precision: bf16, or generation.decode: static or auto"]
    for fine in ({**moe, "generation__decode": "auto"}, {**moe, "generation__decode": "static"},
                 {**moe, "policy__precision": "bf16", "generation__decode": "graphs"},
                 {"cluster": gpu, "policy__precision": "fp32", "generation__decode": "graphs"}):
        assert static_refusals(recipe(**fine)) == [], fine


def test_distillation_refuses_generation_replicas_it_would_not_read():
    data = yaml.safe_load((ROOT / "recipes" / "xtoken_distill_cpu.yaml").read_text())
    data["generation"]["replicas"] = 2
    assert static_refusals(data)[0].startswith("generation.replicas: algorithm.name: distill does not read it")


def test_offloading_the_training_state_is_refused_where_no_replica_shares_its_gpus():
    gpu = {"nodes": 1, "devices_per_node": 2, "device": "h200"}
    apart = ["generation.offload_training: the generator has a GPU of its own (generation.colocated: false), "
             "so the training state has no one to make room for; set it false, or colocate"]
    assert static_refusals(recipe(cluster=gpu, generation__offload_training=True, generation__colocated=False)) == apart
    assert static_refusals(recipe(generation__offload_training=True, generation__colocated=False)) == apart
    for fine in ({"cluster": gpu, "generation__offload_training": True}, {"generation__offload_training": True}):
        assert static_refusals(recipe(**fine)) == [], fine
    data = yaml.safe_load((ROOT / "recipes" / "xtoken_distill_cpu.yaml").read_text())
    data["generation"]["offload_training"] = True
    assert static_refusals(data)[0].startswith("generation.offload_training: algorithm.name: distill does not read it")


def test_an_unknown_model_config_field_is_refused_with_its_key():
    data = recipe(model__config={"hidden_size": 64, "full_attention_interval": 4})
    (line,) = static_refusals(data)
    assert line.startswith("model.config.full_attention_interval: not a Qwen3_5TextConfig field")


def test_a_bad_model_config_value_is_refused_as_hf_would():
    (line,) = static_refusals(recipe(model__config={"layer_types": ["full_attention"]}))
    assert line.startswith("model.config.layer_types: 1 entries for num_hidden_layers=4")
    (line,) = static_refusals(recipe(model__config={"hidden_size": "wide"}))
    assert line.startswith("model.config: ") and "hidden_size" in line


def test_the_35b_config_is_checked_without_weights_in_well_under_a_second():
    data = recipe(model=BASE_35B["model"])
    static_refusals(data)  # imports and the tokenizer, once
    start = time.perf_counter()
    assert static_refusals(data) == []
    assert time.perf_counter() - start < 1.0


def test_the_35b_base_as_it_was_is_refused():
    model = copy.deepcopy(BASE_35B["model"])
    model["config"].pop("layer_types")
    model["config"]["full_attention_interval"] = 4
    (line,) = static_refusals(recipe(model=model))
    assert line.startswith("model.config.full_attention_interval: not a Qwen3_5MoeTextConfig field")


@pytest.mark.parametrize("key, value, expect", [
    ("policy__precision", "bf16", "policy.precision: the torch backend trains in fp32 only"),
    ("policy__distributed_optimizer", True, "policy.distributed_optimizer: the torch backend has no"),
    ("policy__parallel", {"tp": 2}, "policy.parallel: the torch backend is data parallel only"),
])
def test_the_torch_training_backend_limits_are_refused_before_launch(key, value, expect):
    (line,) = static_refusals(recipe(**{key: value}))
    assert line.startswith(expect)


def test_sequence_packing_is_refused_where_the_engine_cannot_pack():
    packing = {"enabled": True}
    assert static_refusals(recipe(policy__sequence_packing=packing)) == []
    assert static_refusals(recipe(policy__sequence_packing=packing, policy__backend="megatron")) == []
    assert static_refusals(recipe(policy__sequence_packing=packing, policy__backend="megatron",
                                  policy__parallel={"cp": 2})) == []
    (line,) = static_refusals(recipe(policy__sequence_packing=packing, policy__backend="megatron",
                                     policy__parallel={"cp": 2, "pp": 2}, cluster__nodes=2))
    assert line.startswith("policy.sequence_packing.enabled with policy.parallel.cp = 2 and pp = 2: under context")
    vision = static_refusals(recipe(policy__sequence_packing=packing, policy__backend="megatron",
                                    model__modality="vision"))  # a text recipe's VLM: other lines too
    assert any(line.startswith("policy.sequence_packing.enabled with model.modality: vision: the megatron backend")
               for line in vision), vision
    distill = yaml.safe_load((ROOT / "recipes" / "xtoken_distill_cpu.yaml").read_text())
    assert static_refusals(distill) == []
    distill["policy"]["sequence_packing"] = packing
    (line,) = static_refusals(distill)
    assert line.startswith("policy.sequence_packing.enabled: the distillation step")


def test_an_unknown_recipe_key_is_one_refusal():
    assert static_refusals(recipe(policy__bogus=1))[0].startswith("unknown recipe key 'policy.bogus'")


def test_a_vision_model_from_a_path_refuses_config_it_would_ignore(tmp_path):
    data = recipe(model__modality="vision", model__tokenizer="arith_vl", model__path=str(tmp_path),
                  model__config={"hidden_size": 64})
    (line,) = static_refusals(data)
    assert line.startswith("model.config: 1 field(s) (hidden_size, ...) would be ignored")


def test_missing_paths_are_refused_on_the_machine_only(tmp_path):
    data = recipe(model__path=str(tmp_path / "nowhere"))
    assert static_refusals(data) == []
    assert machine_refusals(data) == [f"model.path: no such directory {str(tmp_path / 'nowhere')!r}"]
    data = recipe(model__tokenizer=str(tmp_path / "tok"))
    assert static_refusals(data) == []
    assert machine_refusals(data)[0].startswith("model.tokenizer: no such directory")


def test_the_command_prints_one_line_per_refusal_and_exits_2(tmp_path, capsys, gpus, installed):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(recipe()))
    bad.write_text(yaml.safe_dump({**gpu_recipe(nodes=1, per_node=16), "generation": {"backend": "torch"},
                                   "data_plane": {"backend": "tq"}}))
    installed["transfer_queue"] = False
    assert preflight.main([str(good)]) == 0
    assert preflight.main([str(bad)]) == 0  # static only: the 16 GPUs and transferqueue are the machine's business
    assert preflight.main([str(bad), "--machine"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == ["cluster: recipe needs 16 GPUs (h200), this machine has 0; run its tiny twin with --scale tiny",
                   "data_plane.backend: tq needs transfer_queue, which is not importable here; install "
                   "transferqueue: bash .ci/install (the README's set-up)"]
    assert preflight.main([str(good), str(bad), "--machine", "--json"]) == 2
    answer = json.loads(capsys.readouterr().out)
    assert answer[str(good)] == {"static": [], "machine": [], "needs": []}
    assert len(answer[str(bad)]["machine"]) == 2 and answer[str(bad)]["static"] == []


def test_the_engine_run_by_hand_refuses_before_ray_starts(tmp_path, gpus):
    from rl.run import main as run_main

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(gpu_recipe()))
    assert run_main([str(path), "--out", str(tmp_path / "run")]) == 2
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed" and "recipe needs 16 GPUs (h200), this machine has 0" in status["error"]


def test_a_hub_checkpoint_not_in_the_cache_is_refused_here_naming_its_files(tmp_path, monkeypatch, installed):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    installed["datasets"] = False
    data = recipe(model__path="Qwen/Qwen3.5-35B-A3B-Base", model__tokenizer=None, model__config={},
                  task={"name": "math", "params": {}},
                  data={"train": {"path": "nvidia/OpenMathInstruct-2", "split": "train_1M"}})
    assert static_refusals(data) == []  # resolved without network
    model, dataset = machine_refusals(data)
    assert model.startswith("model.path: Qwen/Qwen3.5-35B-A3B-Base is not in this machine's Hugging Face cache; "
                            "it needs config.json, tokenizer.json")
    assert dataset.startswith("data.train.path: nvidia/OpenMathInstruct-2 is a Hugging Face dataset and the "
                              "`datasets` package is not installed here")
    assert preflight.needs(parse_config(data)) == [
        "model.path: Qwen/Qwen3.5-35B-A3B-Base (Hugging Face Hub id, read from the local cache): config.json, "
        "tokenizer.json, tokenizer_config.json, model.safetensors or model.safetensors.index.json and its shards",
        "data.train: nvidia/OpenMathInstruct-2 split train_1M (Hugging Face dataset, through the datasets package "
        "and its local cache)"]


def test_data_files_are_checked_shipped_anywhere_local_on_the_machine(tmp_path):
    math = {"task": {"name": "math", "params": {}}, "model__path": "tiny_qwen3_5_moe", "model__tokenizer": None,
            "model__family": "qwen3_5_moe", "model__config": {}}
    shipped = recipe(**math, data={"train": {"path": "tiny_math", "split": "nope"}})
    assert static_refusals(shipped) == ["data.train: no shipped dataset 'tiny_math' with split 'nope'; "
                                        "shipped: ['tiny_math', 'word_math']"]
    local = recipe(**math, data={"train": {"path": str(tmp_path / "rows.jsonl")}})
    assert static_refusals(local) == []
    assert machine_refusals(local) == [f"data.train.path: no such file {str(tmp_path / 'rows.jsonl')!r}"]
    good = recipe(**math, data={"train": {"path": "tiny_math", "split": "train"}})
    assert static_refusals(good) == [] and machine_refusals(good) == []


@pytest.mark.parametrize("key,value,module,package", [
    ("policy", {"backend": "megatron"}, "megatron.core", "megatron-core"),
    ("data_plane", {"backend": "tq"}, "transfer_queue", "transferqueue")])
def test_a_backend_whose_module_is_missing_is_refused_with_the_set_up_named(gpus, installed, key, value, module,
                                                                             package):
    data = recipe(**{key: {**CPU_RECIPE[key], **value}})
    installed[module] = True
    assert machine_refusals(data) == []
    installed[module] = False
    assert machine_refusals(data) == [f"{key}.backend: {value['backend']} needs {module}, which is not importable "
                                      f"here; install {package}: {preflight.SETUP}"]


def test_fla_that_does_not_import_refuses_a_gpu_run(gpus, installed, monkeypatch):
    gpus(8)
    installed["fla"] = True
    real = preflight.importlib.import_module

    def broken(name, *args):
        if name.startswith("fla"):
            raise ImportError("libcuda.so.1: cannot open shared object file")
        return real(name, *args)

    monkeypatch.setattr(preflight.importlib, "import_module", broken)
    assert machine_refusals(gpu_recipe(nodes=1)) == [
        "kernels: fla (fla-core) is installed but does not import: libcuda.so.1: cannot open shared object file; "
        "fix or uninstall it"]
    assert machine_refusals(recipe()) == []  # a CPU run never reaches fla


def test_a_qwen3_5_config_without_a_full_attention_layer_is_refused_statically():
    data = recipe(model__config={"num_hidden_layers": 2})
    assert static_refusals(data) == [
        "model.config.layer_types: no full_attention layer among the 2 (by default every 4th layer is one): "
        "Qwen3.5 needs at least one; use num_hidden_layers >= 4 or list layer_types"]
    assert static_refusals(recipe(model__config={"num_hidden_layers": 2,
                                                 "layer_types": ["linear_attention", "full_attention"]})) == []
