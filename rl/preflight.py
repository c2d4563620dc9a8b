"""What the engine can run, answered before launch (docs/architecture.md, "Preflight").

    python -m rl.preflight RECIPE.yaml [RECIPE.yaml ...] [--machine] [--json]

Nothing silently ignored: a recipe key the engine cannot honour is refused here, before any
engine process spends time, with one line naming the key and the reason. The harness asks
through this command (with the interpreter it launches `python -m rl.run` with), never by
importing `rl`: `harness validate` asks for the static answer, `harness run` and `harness plan`
for the machine's too.

* static (any machine): the recipe parses as a `RunConfig`; its `model.config` builds as the
  family's Hugging Face config, through the same `make_config` the engine builds the model with
  (the config only, never the weights: the 35B config takes a few milliseconds); the training
  backend takes the policy keys; the generation backend is one the engine implements (torch:
  `generation.backend: vllm` is refused here, on every machine), can shard as `generation.tp` asks
  and can place and refit as many replicas as `generation.replicas` asks;
  `generation.offload_training` only beside colocated replicas.
* machine (`--machine`): enough GPUs for a GPU recipe and enough nodes for `cluster.nodes`
  (this machine's, one node, or the Ray cluster's at RAY_ADDRESS, which the engine joins); the
  modules the training backend, data plane and kernels import (megatron-core, transferqueue, fla where installed);
  `model.path` on disk (a Hub id in the local cache, with the files `rl/model_source.py` names),
  a tokenizer path present, local data files present and the `datasets` package for a Hugging Face dataset.
* needs (informational, never a refusal): the checkpoint and datasets a run reads, so
  `harness validate` and `plan` say what a machine must hold without touching the network.

Output: one line per refusal, `KEY: reason` (with several recipes each line starts with the
recipe's path); `--json` prints `{path: {"static": [...], "machine": [...], "needs": [...]}}` instead.
Exit code 0 when nothing is refused, 2 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from rl.backends.rules import backend_rules
from rl.cluster.placement import is_gpu, plan_placement
from rl.config import RunConfig, parse_config
from rl.generation.decode_mode import fp32_experts, resolve_decode

__all__ = ["GENERATION_BACKENDS", "GenerationBackend", "check_config", "check_file", "import_refusals", "importable",
           "machine_refusals", "main",
           "static_refusals", "visible_capacity"]

EXIT_OK, EXIT_REFUSED = 0, 2


@dataclass(frozen=True, kw_only=True)
class GenerationBackend:
    """What a `generation.backend` can do, or why this engine does not implement it."""

    max_tp: int | None = None  # the largest generation.tp it shards over; None: any
    not_implemented: str | None = None  # why the engine refuses it on every machine


# The engine generates with rl/generation/sampler.py (unsharded data-parallel replicas). vLLM is a
# choice the schema knows (the reference's recipes name it) and the engine refuses statically:
# it is not an install away (vLLM 0.33.0 pins another torch; older ones pull ~1 GB of wheels).
GENERATION_BACKENDS: dict[str, GenerationBackend] = {
    "torch": GenerationBackend(max_tp=1),
    "vllm": GenerationBackend(not_implemented="vLLM cannot run on our GPU machines; the torch generator is "
                              "the engine's"),
}


def visible_capacity() -> tuple[int, int, str]:
    """GPUs and alive nodes the engine would get, and where: the Ray cluster at RAY_ADDRESS,
    which the engine joins when it is set (rl/cluster/ray_cluster.py), else this machine (one node: a
    private local Ray) and the CUDA devices it sees."""
    address = os.environ.get("RAY_ADDRESS")
    if address:
        import ray

        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        try:
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
            return int(ray.cluster_resources().get("GPU", 0)), nodes, f"the Ray cluster at {address}"
        finally:
            ray.shutdown()
    import torch

    return torch.cuda.device_count(), 1, "this machine"


def importable(name: str) -> bool:
    """Whether `import name` would find a module, without importing it (megatron-core takes seconds)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def _vocab_size(tokenizer: str) -> int:
    """The vocabulary the engine sizes the model by (`len(tokenizer)`, as rl/run.py does)."""
    from rl.tokenizer import load_tokenizer

    return len(load_tokenizer(tokenizer))


def _model_refusals(cfg: RunConfig, *, machine: bool) -> list[str]:
    """Build the HF config the engine would build (never the weights). A tokenizer given as a
    path is read on the machine only; statically its vocabulary is left to the config."""
    from rl.models.hf_configs import check_config_fields, make_config, make_vl_config, vision_token_ids

    model, overrides = cfg.model, dict(cfg.model.config)
    try:
        if model.path:
            if model.modality == "vision" and overrides:
                return [f"model.config: {len(overrides)} field(s) ({', '.join(sorted(overrides)[:3])}, ...) would be "
                        "ignored: a vision model loads its config from model.path as it is (drop model.config)"]
            check_config_fields(model.family, overrides)
            return []
        vocab_size, token_ids = 1, {}
        if machine or "/" not in model.tokenizer:
            vocab_size = _vocab_size(model.tokenizer)
            if model.modality == "vision":
                token_ids = vision_token_ids(model.tokenizer)
        if model.modality == "vision":
            built = make_vl_config(model.family, overrides, vocab_size=vocab_size, token_ids=token_ids).text_config
        else:
            built = make_config(model.family, overrides, vocab_size=vocab_size)
    # HF configs raise ValueError, TypeError and their own validation errors: each is a refusal.
    except Exception as error:  # noqa: BLE001
        return [_one_line(error, prefix="model.config")]
    return _shape_refusals(cfg, built.to_dict())


def _shape_refusals(cfg: RunConfig, shape: dict[str, Any]) -> list[str]:
    """The training backend's rules on the model's shape (an unknown backend is refused by
    `_policy_refusals`, which names the known ones)."""
    try:
        rules = backend_rules(cfg.policy.backend)
    except ValueError:
        return []
    return rules.shape_refusals(cfg, shape)


def _checkpoint_shape_refusals(cfg: RunConfig) -> list[str]:
    """The shape rules on `model.path`'s own config (with `model.config` over it), read on the
    machine that holds the checkpoint (its config only, never the weights)."""
    from rl.models.hf_configs import text_config, vl_config

    model = cfg.model
    try:
        built = vl_config(model, 1).text_config if model.modality == "vision" else text_config(model, 1)
    except Exception as error:  # noqa: BLE001 - HF raises many kinds on a config it cannot read; each a refusal
        return [_one_line(error, prefix="model.path")]
    return _shape_refusals(cfg, built.to_dict())


def _teacher_refusals(cfg: RunConfig, *, machine: bool) -> list[str]:
    """Distillation: the teacher's config builds (never its weights; a path is read on the
    machine only) and the distillation step is not asked to pack rows."""
    if cfg.algorithm.name != "distill" or cfg.teacher is None:
        return []
    from rl.models.build import load_families
    from rl.models.registry import config_registry

    load_families()  # each family registers its config maker

    out = []  # a backend without a distillation step refuses it itself (`BackendRules.distills`)
    if cfg.policy.sequence_packing.enabled:
        out.append("policy.sequence_packing.enabled: the distillation step (rl/distill/step.py) does not pack "
                   "rows yet; set it false")
    t = cfg.teacher
    if t.path is not None or ("/" in t.tokenizer and not machine):
        return out
    try:
        config_registry[t.family](dict(t.config), vocab_size=_vocab_size(t.tokenizer))
    except Exception as error:  # noqa: BLE001 - HF configs raise many kinds; each is a refusal
        out.append(_one_line(error, prefix="teacher.config"))
    return out


def _policy_refusals(cfg: RunConfig) -> list[str]:
    """The training backend's own rules (rl/backends/rules.py), asked by name: its imports stay
    unloaded, so a CPU machine answers for megatron without megatron-core."""
    try:
        return backend_rules(cfg.policy.backend).refusals(cfg)
    except ValueError as error:  # an unknown backend: the known ones are named
        return [_one_line(error)]


def _loss_refusals(cfg: RunConfig) -> list[str]:
    from rl.algorithms.loss import prev_logprobs_refusal

    refusal = prev_logprobs_refusal(cfg.algorithm.loss, algorithm=cfg.algorithm.name, pp=cfg.policy.parallel.pp)
    return [refusal] if refusal else []


def _generation_refusals(cfg: RunConfig) -> list[str]:
    gen = cfg.generation
    backend = GENERATION_BACKENDS[gen.backend]
    if backend.not_implemented:
        return [f"generation.backend: {gen.backend} is not implemented by this engine ({backend.not_implemented}); "
                "use generation.backend: torch"]
    if backend.max_tp is not None and gen.tp > backend.max_tp:
        return [f"generation.tp: {gen.tp}, but the {gen.backend} generation backend runs each replica "
                f"unsharded (tp {backend.max_tp}); use generation.tp: {backend.max_tp}"]
    try:
        resolve_decode(gen.decode, gpu=cfg.cluster.device != "cpu",
                       fp32_experts=fp32_experts(cfg.model.family, cfg.policy.precision))
    except ValueError as error:
        return [_one_line(error)]
    replicas = _replicas_refusal(cfg)
    if replicas:
        return [replicas]
    if gen.offload_training and not gen.colocated:
        return ["generation.offload_training: the generator has a GPU of its own (generation.colocated: false), "
                "so the training state has no one to make room for; set it false, or colocate"]
    from rl.envs import EOS_FREE_TASKS

    if gen.ignore_eos and cfg.task.name not in EOS_FREE_TASKS:
        return [f"generation.ignore_eos: task {cfg.task.name!r} scores what a completion says before its end of "
                f"sequence, so every row run to max_new_tokens would change its reward; tasks that do not read "
                f"it: {sorted(EOS_FREE_TASKS)}"]
    return []


def _replicas_refusal(cfg: RunConfig) -> str | None:
    """`generation.replicas` the engine cannot place or refit: more colocated replicas than GPUs
    (replica i shares policy rank i's GPU), or several with `generation.colocated: false`, whose
    refit channel (rl/refit/channel.py) is a group of two: policy rank 0 and one generator."""
    asked, gen = cfg.generation.replicas, cfg.generation
    if asked is None or asked == 1:
        return None
    if not gen.colocated:
        return (f"generation.replicas: {asked} with generation.colocated: false, but the refit channel "
                "(rl/refit/channel.py) serves one generator; use generation.replicas: 1, or colocate")
    if is_gpu(cfg.cluster.device) and asked > cfg.world_size:
        return (f"generation.replicas: {asked}, but colocated replica i shares policy rank i's GPU and the run has "
                f"{cfg.world_size} GPUs; use at most {cfg.world_size} (null: one per GPU)")
    return None


def _data_sources(cfg: RunConfig) -> list[tuple[str, Any]]:
    return [(f"data.{name}", src) for name, src in (("train", cfg.data.train), ("validation", cfg.data.validation))
            if src is not None]


def _data_refusals(cfg: RunConfig, *, machine: bool) -> list[str]:
    """Shipped datasets are checked on any machine; local files and Hub datasets on this one."""
    from rl.prompt_data import SourceKind, source_file, source_kind

    out = []
    for key, src in _data_sources(cfg):
        kind = source_kind(src.path)
        if kind == SourceKind.HUB:
            if machine and not importable("datasets"):
                out.append(f"{key}.path: {src.path} is a Hugging Face dataset and the `datasets` package is not "
                           "installed here (pip install 'recipe-harness[datasets]')")
            continue
        if (kind == SourceKind.SHIPPED) != machine:
            try:
                source_file(src.path, src.split, key=key)
            except ValueError as error:
                out.append(_one_line(error))
    return out


def needs(cfg: RunConfig) -> list[str]:
    """What a run of the recipe reads besides the engine: the checkpoint (and the files it must
    hold) and the datasets, one line each, whether or not this machine has them."""
    from rl.model_source import NEEDED, is_hub_id
    from rl.prompt_data import SourceKind, source_kind

    out = []
    if cfg.model.path:
        where = "Hugging Face Hub id, read from the local cache" if is_hub_id(cfg.model.path) else "checkpoint"
        out.append(f"model.path: {cfg.model.path} ({where}): {', '.join(NEEDED)}")
    for key, src in _data_sources(cfg):
        kind = source_kind(src.path)
        what = {SourceKind.HUB: "Hugging Face dataset, through the datasets package and its local cache",
                SourceKind.SHIPPED: "shipped with the engine", SourceKind.LOCAL: "local file"}[kind]
        split = f" split {src.split}" if src.split else ""
        out.append(f"{key}: {src.path}{split} ({what})")
    return out


def _cluster_refusals(cfg: RunConfig) -> list[str]:
    """Several nodes: ranks are placed node-major (rl/cluster/placement.py), so a TP x CP group (a
    collective in every layer) stays inside a node only when it divides a node's devices. EP may
    span nodes (the 35B recipe's EP 16 over 2 x 8: one all-to-all per MoE layer, as the reference)."""
    c, p = cfg.cluster, cfg.policy.parallel
    if c.nodes == 1 or c.devices_per_node % (p.tp * p.cp) == 0:
        return []
    return [f"cluster.devices_per_node: {c.devices_per_node} per node, but policy.parallel tp x cp = "
            f"{p.tp * p.cp} would span nodes; tp x cp must divide cluster.devices_per_node"]


def static_refusals(data: dict[str, Any]) -> list[str]:
    """Refusals that hold on any machine, one line each; empty when the engine can run it."""
    try:
        cfg = parse_config(data)
    except ValueError as error:
        return [_one_line(error)]
    return config_static_refusals(cfg)


def config_static_refusals(cfg: RunConfig) -> list[str]:
    """`static_refusals` of a parsed recipe (parsing is the first static check)."""
    return [*_model_refusals(cfg, machine=False), *_teacher_refusals(cfg, machine=False), *_policy_refusals(cfg),
            *_loss_refusals(cfg), *_generation_refusals(cfg), *_data_refusals(cfg, machine=False),
            *_cluster_refusals(cfg)]


def machine_refusals(data: dict[str, Any]) -> list[str]:
    """Refusals on this machine only (a recipe with static refusals gets no machine answer)."""
    return config_machine_refusals(parse_config(data))


def config_machine_refusals(cfg: RunConfig) -> list[str]:
    """`machine_refusals` of a parsed recipe."""
    out = []
    placement = plan_placement(device=cfg.cluster.device, world_size=cfg.world_size,
                               colocated=cfg.generation.colocated, nodes=cfg.cluster.nodes,
                               replicas=cfg.generation.replicas)
    if placement.gpu or placement.nodes > 1:
        try:
            have, nodes, where = visible_capacity()
        except Exception as error:  # noqa: BLE001 - any failure to reach Ray is a refusal, never a pass
            have = nodes = -1
            out.append(f"cluster: cannot count the GPUs of the Ray cluster at RAY_ADDRESS: {_one_line(error)}")
        if placement.gpu and 0 <= have < placement.num_gpus:  # a generator not colocated has a GPU of its own
            out.append(f"cluster: recipe needs {placement.num_gpus} GPUs ({cfg.cluster.device}), {where} has {have}; "
                       "run its tiny twin with --scale tiny")
        if 0 <= nodes < placement.nodes:
            join = "" if os.environ.get("RAY_ADDRESS") else " (a private local Ray is one node: join a cluster " \
                "with RAY_ADDRESS or harness run --ray-address)"
            out.append(f"cluster.nodes: recipe needs {placement.nodes} nodes, {where} has {nodes}{join}")
    out.extend(import_refusals(cfg))
    if cfg.model.path:
        from rl.model_source import ModelSourceError, resolve_model_dir

        try:
            resolve_model_dir(cfg.model.path)
        except ModelSourceError as error:
            out.append(_one_line(error))
        else:
            out.extend(_checkpoint_shape_refusals(cfg))
    out.extend(_data_refusals(cfg, machine=True))
    out.extend(_teacher_machine_refusals(cfg))
    if cfg.model.tokenizer is not None and "/" in cfg.model.tokenizer:  # a shipped one was read statically
        from rl.tokenizer import resolve_tokenizer_dir

        try:
            resolve_tokenizer_dir(cfg.model.tokenizer)
        except ValueError as error:
            return [*out, _one_line(error)]
        out.extend(_model_refusals(cfg, machine=True))
    return out


# What a run imports beyond the engine's own dependencies: (recipe key, value, module, how to get it);
# a training backend names its own (`BackendRules.requires`).
SETUP = "bash .ci/install (the README's set-up)"
OPTIONAL_MODULES: tuple[tuple[str, str, str, str], ...] = (
    ("data_plane.backend", "tq", "transfer_queue", f"transferqueue: {SETUP}"),
)


def import_refusals(cfg: RunConfig) -> list[str]:
    """The modules this run's backend, data plane and kernels import, found here; fla's kernels,
    where installed on a GPU machine, also import (HF and megatron bind them at model import, so a
    broken fla fails every worker at step 0)."""
    rules = backend_rules(cfg.policy.backend)
    optional = [*([("policy.backend", rules.name, rules.requires, f"{rules.requires_package}: {SETUP}")]
                  if rules.requires else []), *OPTIONAL_MODULES]
    chosen = {"policy.backend": cfg.policy.backend, "data_plane.backend": cfg.data_plane.backend}
    out = [f"{key}: {value} needs {module}, which is not importable here; install {how}"
           for key, value, module, how in optional if chosen.get(key) == value and not importable(module)]
    if cfg.cluster.device != "cpu" and importable("fla"):
        try:
            importlib.import_module("fla.ops.gated_delta_rule")
        except Exception as error:  # noqa: BLE001 - any failure to import fla is this run's failure too
            out.append(f"kernels: fla (fla-core) is installed but does not import: {_one_line(error)}; "
                       "fix or uninstall it")
    return out


def _teacher_machine_refusals(cfg: RunConfig) -> list[str]:
    """The teacher's checkpoint and tokenizer paths exist here, and a path tokenizer's config builds."""
    t = cfg.teacher
    if cfg.algorithm.name != "distill" or t is None:
        return []
    out = []
    if t.path:
        from rl.model_source import ModelSourceError, resolve_model_dir

        try:
            resolve_model_dir(t.path, key="teacher.path")
        except ModelSourceError as error:
            out.append(_one_line(error))
    if "/" in t.tokenizer:
        from rl.tokenizer import resolve_tokenizer_dir

        try:
            resolve_tokenizer_dir(t.tokenizer)
        except ValueError as error:
            return [*out, "teacher." + _one_line(error)]
        out.extend(r for r in _teacher_refusals(cfg, machine=True) if r.startswith("teacher."))
    return out


def _one_line(error: BaseException, *, prefix: str = "") -> str:
    """The error as one line, led by the recipe key it names (`prefix` when it names none)."""
    text = " ".join(str(error).split()) or type(error).__name__
    head = text.split(":", 1)[0]
    keyed = "." in head and " " not in head
    return text if keyed or not prefix else f"{prefix}: {text}"


def check_file(path: str, *, machine: bool) -> dict[str, list[str]]:
    """The static and (with `machine`) machine refusals of one resolved recipe file, read and
    parsed once."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as error:
        return {"static": [f"recipe: cannot read {path}: {_one_line(error)}"], "machine": [], "needs": []}
    try:
        cfg = parse_config(data)
    except ValueError as error:
        return {"static": [_one_line(error)], "machine": [], "needs": []}
    return check_config(cfg, machine=machine)


def check_config(cfg: RunConfig, *, machine: bool) -> dict[str, list[str]]:
    """`check_file` of a parsed recipe: what the engine asks of the `RunConfig` it will run."""
    static = config_static_refusals(cfg)
    return {"static": static, "machine": config_machine_refusals(cfg) if machine and not static else [],
            "needs": needs(cfg) if not static else []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.preflight", description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="+", help="resolved recipe YAML files")
    parser.add_argument("--machine", action="store_true", help="also check this machine (GPUs, packages, paths)")
    parser.add_argument("--json", action="store_true", help="print {path: {static: [..], machine: [..]}}")
    args = parser.parse_args(argv)
    answers = {path: check_file(path, machine=args.machine) for path in args.recipes}
    if args.json:
        print(json.dumps(answers))
    else:
        for path, answer in answers.items():
            for line in answer["static"] + answer["machine"]:
                print(f"{path}: {line}" if len(answers) > 1 else line)
    refused = any(answer["static"] or answer["machine"] for answer in answers.values())
    return EXIT_REFUSED if refused else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
