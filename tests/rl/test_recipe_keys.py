"""Every leaf of the recipe schema is read by someone, or refused: "a key nothing reads does not exist".

`READERS` maps each leaf of harness/schema/recipe.schema.json to the file that reads it and the
text by which it reads it; the test fails when a new leaf appears that nothing here names, when a
named file stops spelling the key, or when an entry names a leaf the schema no longer has. Leaves
the engine cannot honour in every value are read by the preflight (rl/preflight.py), and
`REFUSED` proves a value it cannot honour is refused before launch.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import typing
from pathlib import Path

import pytest
import yaml

from rl.config import RunConfig
from rl.preflight import static_refusals

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "harness" / "schema" / "recipe.schema.json").read_text())

# leaf -> (file that reads it, text it reads it by)
READERS: dict[str, tuple[str, str]] = {
    # consumed or read by the harness only
    "defaults": ("harness/recipe/defaults.py", 'pop_top("defaults")'),
    "tiny": ("harness/recipe/scales.py", '"tiny"'),
    "h200x1": ("harness/recipe/scales.py", '"h200x1"'),
    "h200x2": ("harness/recipe/scales.py", '"h200x2"'),
    "name": ("harness/commands/run.py", 'recipe["name"]'),
    "description": ("harness/report/markdown.py", 'recipe.get("description")'),
    "engine": ("harness/engines/__init__.py", 'recipe.get("engine", "rl")'),
    "engine.command": ("harness/engines/__init__.py", 'engine["command"]'),
    "engine.metrics": ("harness/engines/__init__.py", 'engine.get("metrics")'),
    "engine.metrics_path": ("harness/engines/__init__.py", 'engine.get("metrics_path")'),
    "policy.max_seq_len": ("harness/plan/memory.py", '"max_seq_len"'),
    "run_dir": ("harness/commands/run.py", 'recipe.get("run_dir")'),
    "checks.thresholds": ("harness/checks/judge.py", 'checks_cfg["thresholds"]'),
    "checks.hardware": ("harness/checks/judge.py", 'checks_cfg.get("hardware")'),
    "checks.invariants": ("harness/checks/judge.py", 'checks_cfg.get("invariants", True)'),
    "checks.parity": ("harness/commands/run.py", 'recipe["checks"].get("parity")'),
    "checks.parity.variants": ("harness/commands/run.py", 'parity["variants"]'),
    "checks.parity.tolerance": ("harness/commands/run.py", 'parity.get("tolerance", 0.0)'),
    "limits.timeout_s": ("harness/commands/run.py", 'recipe["limits"]["timeout_s"]'),
    "limits.worker_timeout_s": ("rl/run.py", "cfg.limits.worker_timeout_s"),
    "limits.gpu_hours": ("harness/plan/resources.py", 'recipe["limits"].get("gpu_hours")'),
    # read by the engine
    "model.family": ("rl/models/build.py", "family = model.family"),
    "model.modality": ("rl/models/build.py", "modality = model.modality"),
    "model.path": ("rl/models/qwen3_5.py", "if model.path:"),
    "model.config": ("rl/models/qwen3_5.py", "overrides = dict(model.config)"),
    "model.tokenizer": ("rl/run.py", "load_tokenizer(cfg.model.tokenizer, model_path=cfg.model.path)"),
    "cluster.nodes": ("rl/config.py", "self.cluster.nodes * self.cluster.devices_per_node"),
    "cluster.devices_per_node": ("rl/config.py", "self.cluster.nodes * self.cluster.devices_per_node"),
    "cluster.device": ("rl/run.py", "device=cfg.cluster.device"),
    "policy.backend": ("rl/workers/policy.py", "get_backend(policy.backend)"),
    "policy.parallel.tp": ("rl/backends/megatron/backend.py", "parallel.tp"),
    "policy.parallel.pp": ("rl/backends/megatron/backend.py", "parallel.pp"),
    "policy.parallel.cp": ("rl/backends/megatron/backend.py", "parallel.cp"),
    "policy.parallel.ep": ("rl/backends/megatron/backend.py", "parallel.ep"),
    "policy.parallel.etp": ("rl/backends/megatron/backend.py", "parallel.etp"),
    "policy.parallel.sp": ("rl/backends/megatron/backend.py", "parallel.sp"),
    "policy.micro_batch_size": ("rl/backends/torch.py", "policy.micro_batch_size"),
    "policy.logprob_batch_size": ("rl/backends/torch.py", "policy.logprob_batch_size"),
    "policy.precision": ("rl/run.py", "cfg.policy.precision"),
    "policy.distributed_optimizer": ("rl/backends/megatron/backend.py", "policy.distributed_optimizer"),
    "policy.compile": ("rl/backends/megatron/backend.py", "policy.compile"),
    "policy.activation_checkpointing": ("rl/backends/torch.py", "policy.activation_checkpointing"),
    "policy.sequence_packing.enabled": ("rl/backends/train_step.py", "packing.enabled"),
    "policy.sequence_packing.max_tokens_per_row": ("rl/backends/train_step.py", "packing.max_tokens_per_row"),
    "policy.optimizer.lr": ("rl/backends/torch.py", 'optimizer_cfg.lr'),
    "policy.optimizer.weight_decay": ("rl/backends/torch.py", 'optimizer_cfg.weight_decay'),
    "policy.optimizer.betas": ("rl/backends/torch.py", 'optimizer_cfg.betas'),
    "policy.optimizer.eps": ("rl/backends/torch.py", 'optimizer_cfg.eps'),
    "policy.optimizer.grad_clip": ("rl/backends/torch.py", 'optimizer_cfg.grad_clip'),
    "policy.optimizer.warmup_steps": ("rl/lr_schedule.py", "cfg.warmup_steps"),
    "policy.optimizer.warmup_init_lr": ("rl/lr_schedule.py", "cfg.warmup_init_lr"),
    "policy.optimizer.decay": ("rl/lr_schedule.py", "cfg.decay"),
    "policy.optimizer.decay_steps": ("rl/lr_schedule.py", "cfg.decay_steps"),
    "policy.optimizer.min_lr": ("rl/lr_schedule.py", "cfg.min_lr"),
    "generation.backend": ("rl/preflight.py", "GENERATION_BACKENDS[gen.backend]"),
    "generation.tp": ("rl/preflight.py", "gen.tp > backend.max_tp"),
    "generation.colocated": ("rl/run.py", "colocated=cfg.generation.colocated"),
    "generation.decode": ("rl/run.py", "resolve_decode(cfg.generation.decode"),
    "generation.max_new_tokens": ("rl/run.py", "cfg.generation.max_new_tokens"),
    "generation.ignore_eos": ("rl/run.py", "cfg.generation.ignore_eos"),
    "generation.length_buckets": ("rl/loops/grpo.py", "self.cfg.generation.length_buckets"),
    "generation.decode_slots": ("rl/workers/build.py", "decode_slots=generation.decode_slots"),
    "generation.replicas": ("rl/run.py", "replicas=cfg.generation.replicas"),
    "generation.offload_training": ("rl/loops/grpo.py", "self.cfg.generation.offload_training"),
    "generation.temperature": ("rl/run.py", "cfg.generation.temperature"),
    "algorithm.name": ("rl/config.py", 'cfg.algorithm.name == "grpo"'),
    "algorithm.seed": ("rl/run.py", "seed=alg.seed"),
    "algorithm.num_steps": ("rl/run.py", "cfg.algorithm.num_steps"),
    "algorithm.prompts_per_step": ("rl/loops/grpo.py", "self.alg.prompts_per_step"),
    "algorithm.generations_per_prompt": ("rl/loops/grpo.py", "alg.generations_per_prompt"),
    "algorithm.baseline": ("rl/loops/grpo.py", "baseline=alg.baseline"),
    "algorithm.normalize_rewards": ("rl/loops/grpo.py", "normalize=alg.normalize_rewards"),
    "algorithm.dynamic_sampling": ("rl/loops/grpo.py", "self.alg.dynamic_sampling"),
    "algorithm.overlong_filtering": ("rl/loops/grpo.py", "alg.overlong_filtering"),
    "algorithm.loss.clip_low": ("rl/algorithms/loss.py", "cfg.clip_low"),
    "algorithm.loss.clip_high": ("rl/algorithms/loss.py", "cfg.clip_high"),
    "algorithm.loss.kl_beta": ("rl/algorithms/loss.py", "cfg.kl_beta"),
    "algorithm.loss.is_correction": ("rl/algorithms/loss.py", "cfg.is_correction"),
    "algorithm.loss.truncation": ("rl/algorithms/loss.py", "cfg.truncation"),
    "algorithm.loss.tis_cap": ("rl/algorithms/loss.py", "cfg.tis_cap"),
    "algorithm.loss.icepop_low": ("rl/algorithms/loss.py", "cfg.icepop_low"),
    "algorithm.loss.icepop_high": ("rl/algorithms/loss.py", "cfg.icepop_high"),
    "algorithm.loss.prev_logprobs": ("rl/algorithms/loss.py", "loss_cfg.prev_logprobs"),
    "algorithm.warm_start.steps": ("rl/warm_start.py", "cfg.steps"),
    "algorithm.warm_start.lr": ("rl/warm_start.py", "lr=cfg.lr"),
    "algorithm.warm_start.batch_size": ("rl/warm_start.py", "cfg.batch_size"),
    "algorithm.warm_start.stop_at_loss": ("rl/warm_start.py", "cfg.stop_at_loss"),
    "algorithm.distill.kl_weight": ("rl/distill/loss.py", "cfg.kl_weight"),
    "algorithm.distill.ce_weight": ("rl/distill/loss.py", "cfg.ce_weight"),
    "algorithm.distill.temperature": ("rl/distill/loss.py", "cfg.temperature"),
    "algorithm.distill.vocab_topk": ("rl/distill/loss.py", "cfg.vocab_topk"),
    "algorithm.distill.projection_topk": ("rl/run.py", "cfg.algorithm.distill.projection_topk"),
    "algorithm.distill.responses": ("rl/distill/config.py", "choices=RESPONSES"),
    "teacher": ("rl/config.py", "if cfg.teacher is None:"),
    "teacher.family": ("rl/preflight.py", "config_registry[t.family]"),
    "teacher.path": ("rl/models/llama.py", "if model.path:"),
    "teacher.config": ("rl/models/llama.py", "overrides = dict(model.config)"),
    "teacher.tokenizer": ("rl/run.py", "load_tokenizer(t.tokenizer)"),
    "teacher.warm_start.steps": ("rl/run.py", "t.warm_start, seed="),
    "teacher.warm_start.lr": ("rl/run.py", "t.warm_start, seed="),
    "teacher.warm_start.batch_size": ("rl/run.py", "t.warm_start, seed="),
    "teacher.warm_start.stop_at_loss": ("rl/run.py", "t.warm_start, seed="),
    "task.name": ("rl/envs/registry.py", "task.name"),
    "task.params": ("rl/envs/registry.py", "task.params"),
    "data_plane.backend": ("rl/run.py", "cfg.data_plane.backend"),
    "data_plane.tq.num_storage_units": ("rl/data/plane.py", "section.tq.num_storage_units"),
    "env": ("rl/config.py", "own = {**self.env, **getattr(self, role).env}"),
    "policy.env": ("rl/run.py", "env_vars={r: cfg.worker_env(r) for r in ROLES}"),
    "generation.env": ("rl/run.py", "env_vars={r: cfg.worker_env(r) for r in ROLES}"),
    "env_unsafe_allow": ("rl/config.py", "unsafe_env.refusal(scope, names, cfg.env_unsafe_allow)"),
    "checkpoint.every_steps": ("rl/run.py", "cfg.checkpoint.every_steps"),
    "checkpoint.at_end": ("rl/run.py", "cfg.checkpoint.at_end"),
    "checkpoint.hf_format": ("rl/run.py", "cfg.checkpoint.hf_format"),
    "data.train": ("rl/envs/math.py", "data.train"),
    "data.train.path": ("rl/envs/math.py", "data.train.path"),
    "data.train.split": ("rl/envs/math.py", "data.train.split"),
    "data.validation": ("rl/envs/math.py", "data.validation"),
    "data.validation.path": ("rl/envs/math.py", "val.path"),
    "data.validation.split": ("rl/envs/math.py", "val.split"),
    "data.prompt_key": ("rl/envs/math.py", "data.prompt_key"),
    "data.answer_key": ("rl/envs/math.py", "data.answer_key"),
    "data.prompt_template": ("rl/envs/math.py", "self.data.prompt_template"),
    "data.chat_template": ("rl/envs/math.py", "self.data.chat_template"),
    "data.shuffle": ("rl/envs/math.py", "self.data.shuffle"),
    "data.val_every_steps": ("rl/run.py", "cfg.data.val_every_steps"),
    "data.val_max_samples": ("rl/envs/math.py", "self.data.val_max_samples"),
    "checkpoint.dir": ("rl/run.py", "cfg.checkpoint.dir"),
    "profile.kernel_steps": ("rl/run.py", "cfg.profile.kernel_steps"),
}

# Leaves the engine honours only in some values: (a value it cannot honour, the refusal's start).
REFUSED: dict[str, tuple[object, str]] = {
    "generation.tp": (2, "generation.tp: 2, but the torch generation backend"),
    "generation.backend": ("vllm", "generation.backend: vllm is not implemented by this engine"),
    "generation.decode": ("graphs", "generation.decode: graphs needs a GPU"),
    "generation.replicas": (0, "generation.replicas: must be >= 1 or null"),  # the rest: tests/rl/test_preflight.py
    "generation.ignore_eos": (True, "generation.ignore_eos: task 'arith' scores what a completion says"),
    "policy.compile": (True, "policy.compile: the torch backend runs eager"),
    "algorithm.name": ("ppo", "algorithm.name: 'ppo' is not one of"),
    "policy.precision": ("bf16", "policy.precision: the torch backend trains in fp32 only"),
    "policy.distributed_optimizer": (True, "policy.distributed_optimizer: the torch backend"),
    "policy.sequence_packing.max_tokens_per_row": (64, "policy.sequence_packing.max_tokens_per_row: read only with"),
    "profile.kernel_steps": ([2, 3], "profile.kernel_steps: traces CUDA kernels; cluster.device is cpu"),
}
# policy.sequence_packing.enabled: true is refused for megatron with cp > 1 or a VLM, and for
# distillation: tests/rl/test_preflight.py.


def schema_leaves(node: dict, path: str = "") -> set[str]:
    """Dotted paths where a recipe holds a value that is not a mapping of schema keys: scalars,
    lists, free maps; a key that is either (engine: rl | {command: ..}) counts as both."""
    alternatives = node.get("anyOf") or node.get("oneOf") or [node]
    leaves: set[str] = set()
    for alt in alternatives:
        props = alt.get("properties")
        if props:
            for key, sub in props.items():
                leaves |= schema_leaves(sub, f"{path}.{key}" if path else key)
        elif path:
            leaves.add(path)
    return leaves


LEAVES = schema_leaves(SCHEMA)


def test_the_walk_sees_the_whole_schema():
    assert {"engine", "engine.command", "checks.parity", "checks.parity.tolerance", "model.config", "env",
            "tiny", "policy.optimizer.betas", "data_plane.tq.num_storage_units"} <= LEAVES
    assert len(LEAVES) == len(READERS)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_every_schema_leaf_has_a_reader(leaf):
    assert leaf in READERS, f"{leaf}: a schema leaf nothing is known to read; make the engine read it, " \
                            "refuse it in rl/preflight.py, or remove it from the schema"
    path, text = READERS[leaf]
    assert text in (ROOT / path).read_text(encoding="utf-8"), f"{leaf}: {path} no longer reads it by {text!r}"


def test_no_reader_names_a_key_the_schema_lacks():
    assert sorted(set(READERS) - LEAVES) == []


def _config_leaves(cls: type, path: str = "") -> set[str]:
    hints = typing.get_type_hints(cls)
    out: set[str] = set()
    for f in dataclasses.fields(cls):
        dotted = f"{path}.{f.name}" if path else f.name
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = [a for a in args if a is not type(None)] if type(None) in args else []
        if len(optional) == 1 and dataclasses.is_dataclass(optional[0]):  # a section or null: both are leaves
            out |= {dotted} | _config_leaves(optional[0], dotted)
        else:
            out |= _config_leaves(hint, dotted) if dataclasses.is_dataclass(hint) else {dotted}
    return out


def test_the_engine_config_has_exactly_the_schema_keys_it_can_be_given():
    """rl/config.py parses what the harness sends (no defaults:, no engine mapping, no parity internals)."""
    harness_only = {"defaults", "engine.command", "engine.metrics", "engine.metrics_path",
                    "checks.parity.variants", "checks.parity.tolerance"}
    assert _config_leaves(RunConfig) == LEAVES - harness_only


@pytest.mark.parametrize("leaf", sorted(REFUSED))
def test_a_value_the_engine_cannot_honour_is_refused_before_launch(leaf):
    value, expect = REFUSED[leaf]
    data = copy.deepcopy(yaml.safe_load((ROOT / "recipes" / "arith_grpo_cpu.yaml").read_text()))
    *parents, key = leaf.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[key] = value
    refusals = static_refusals(data)
    assert refusals and refusals[0].startswith(expect), refusals
