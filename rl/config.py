"""Typed view of a resolved recipe (docs/architecture.md, "The recipe").

The harness validates recipes against its JSON Schema, but the engine can also be run by hand,
so it checks again here: every section is a keyword-only dataclass, unknown keys are a
`ValueError` that names the key and lists the valid ones, and cross-field rules name the field
to change.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from rl import secret_env, unsafe_env
from rl.algorithms.loss import LossConfig  # the loss section is the loss's own config
from rl.distill.loss import DistillConfig  # so is the distillation section

__all__ = [
    "AlgorithmConfig",
    "CheckpointConfig",
    "ClusterConfig",
    "DataConfig",
    "DataSourceConfig",
    "DataPlaneConfig",
    "GenerationConfig",
    "ModelConfig",
    "OptimizerConfig",
    "ParallelConfig",
    "PolicyConfig",
    "RunConfig",
    "SequencePackingConfig",
    "TaskConfig",
    "TeacherConfig",
    "WarmStartConfig",
    "load_config",
    "parse_config",
]


@dataclass(kw_only=True)
class ModelConfig:
    family: str = "qwen3_5"
    modality: str = "text"
    path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tokenizer: str | None = "arith"  # None: the tokenizer (and chat template) of `path`


@dataclass(kw_only=True)
class ClusterConfig:
    nodes: int = 1
    devices_per_node: int = 1
    device: str = "cpu"


@dataclass(kw_only=True)
class ParallelConfig:
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    sp: bool = False


DECAYS = ("constant", "linear", "cosine")  # `policy.optimizer.decay`: the shapes rl/lr_schedule.py computes


@dataclass(kw_only=True)
class OptimizerConfig:
    """`policy.optimizer`: AdamW, and the lr schedule rl/lr_schedule.py computes from it.

    `lr` is the peak; `decay_steps` and `min_lr` are read by the linear and cosine decays only (a
    constant decay never leaves `lr`), so they are refused with it: megatron-core's recipes set
    them anyway, and there they do nothing."""

    lr: float = 1.0e-4
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1.0e-8
    grad_clip: float | None = None  # None: no clipping
    warmup_steps: int = 0
    warmup_init_lr: float = 0.0
    decay: str = "constant"
    decay_steps: int | None = None
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        path = "policy.optimizer"
        if self.warmup_steps < 0:
            raise ValueError(f"{path}.warmup_steps: must be >= 0, got {self.warmup_steps}")
        if not 0.0 <= self.warmup_init_lr <= self.lr:
            raise ValueError(f"{path}.warmup_init_lr: must be in [0, lr={self.lr}] (the warm-up rises "
                             f"to lr), got {self.warmup_init_lr}")
        if self.decay not in DECAYS:
            raise ValueError(f"{path}.decay: {self.decay!r} is not one of {list(DECAYS)}")
        if not 0.0 <= self.min_lr <= self.lr:
            raise ValueError(f"{path}.min_lr: must be in [0, lr={self.lr}] (the decay falls from lr), "
                             f"got {self.min_lr}")
        if self.decay_steps is not None and self.decay_steps < 1:
            raise ValueError(f"{path}.decay_steps: must be >= 1 or null, got {self.decay_steps}")
        if self.decay == "constant" and (self.decay_steps is not None or self.min_lr != 0.0):
            unread = "decay_steps" if self.decay_steps is not None else "min_lr"
            raise ValueError(f"{path}.{unread}: a constant decay does not read it (only linear and cosine do); "
                             "remove it or set decay")
        if self.decay != "constant" and self.decay_steps is None:
            raise ValueError(f"{path}.decay_steps: decay {self.decay!r} needs it (the step it reaches min_lr at)")
        if self.decay != "constant" and self.decay_steps <= self.warmup_steps:
            raise ValueError(f"{path}.decay_steps: must be > warmup_steps={self.warmup_steps} (the decay "
                             f"starts where the warm-up ends), got {self.decay_steps}")


@dataclass(kw_only=True)
class SequencePackingConfig:
    """The torch backend's training and log-prob passes lay whole rows end to end in packed rows
    of `max_tokens_per_row` tokens instead of padding each row (rl/models/packing.py)."""

    enabled: bool = False
    max_tokens_per_row: int | None = None  # None: as long as an unpacked row (prompt + max_new_tokens)


@dataclass(kw_only=True)
class PolicyConfig:
    backend: str = "torch"
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    micro_batch_size: int = 8
    logprob_batch_size: int | None = None  # rows per log-prob forward; None: micro_batch_size
    max_seq_len: int | None = None  # sizes the harness plan; the engine pads to prompt + max_new_tokens
    precision: str = "fp32"
    distributed_optimizer: bool = False
    compile: bool = False  # megatron on a GPU: each layer and the log-prob under torch.compile
    activation_checkpointing: bool = False  # recompute each layer's activations in its backward
    sequence_packing: SequencePackingConfig = field(default_factory=SequencePackingConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    env: dict[str, str] = field(default_factory=dict)  # the training workers' only (RunConfig.worker_env)


@dataclass(kw_only=True)
class GenerationConfig:
    backend: str = "torch"
    tp: int = 1
    colocated: bool = True  # GPU runs: share rank 0's GPU (rl.placement)
    decode: str = "auto"  # rl.generation.static_decode: "graphs" on a GPU, else "eager"
    max_new_tokens: int = 8
    ignore_eos: bool = False  # every completion runs to max_new_tokens (tasks in rl.envs EOS_FREE_TASKS only)
    length_buckets: int = 1  # rows decoded in this many groups of similar prompt length (rl.generation.length_buckets)
    decode_slots: int = 4  # call shapes a static decoder keeps, each with its cache (rl.generation.static_decode)
    replicas: int | None = None  # data-parallel generation workers; None: rl.placement.generation_replicas derives it
    offload_training: bool = False  # colocated: the training state waits in host memory while replicas decode
    temperature: float = 1.0
    env: dict[str, str] = field(default_factory=dict)  # the generation workers' only (RunConfig.worker_env)


@dataclass(kw_only=True)
class WarmStartConfig:
    """A short supervised run before the algorithm (rl/warm_start.py); steps 0 disables it.

    stop_at_loss: end early once the mean loss of the last LOSS_WINDOW steps is at or below it
    (`steps` stays the cap). A tiny model's loss sits on a plateau for a seed-dependent number of
    steps and then falls fast, so a fixed step count leaves one seed at chance and the next near
    perfect; stopping at a loss leaves every seed partly trained, with room for the algorithm."""

    steps: int = 0
    lr: float = 3.0e-3
    batch_size: int = 32
    stop_at_loss: float | None = None

    LOSS_WINDOW: typing.ClassVar[int] = 20

    @classmethod
    def from_dict(cls, data: dict, path: str = "algorithm.warm_start") -> "WarmStartConfig":
        out = _build(cls, data, path)
        for name, low in (("steps", 0), ("batch_size", 1)):
            if getattr(out, name) < low:
                raise ValueError(f"{path}.{name}: must be >= {low}, got {getattr(out, name)}")
        if out.lr <= 0:
            raise ValueError(f"{path}.lr: must be > 0, got {out.lr}")
        if out.stop_at_loss is not None and out.stop_at_loss <= 0:
            raise ValueError(f"{path}.stop_at_loss: must be > 0 or null, got {out.stop_at_loss}")
        return out


@dataclass(kw_only=True)
class AlgorithmConfig:
    name: str = "grpo"
    seed: int = 42
    num_steps: int = 20
    prompts_per_step: int = 16
    generations_per_prompt: int = 4
    baseline: str = "leave_one_out"
    normalize_rewards: bool = True
    dynamic_sampling: bool = False
    overlong_filtering: bool = False
    loss: LossConfig = field(default_factory=LossConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)


@dataclass(kw_only=True)
class TeacherConfig:
    """The distillation teacher: a frozen model of any registered family with its own tokenizer.

    `warm_start` trains it on the task before the run (cached, as the policy's is), so a tiny
    teacher built from a config has something to teach.
    """

    family: str = "llama"
    path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = "arith"
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)


@dataclass(kw_only=True)
class TaskConfig:
    name: str = "arith"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class DataSourceConfig:
    """One split of a dataset (rl/prompt_data.py): a shipped name, a local file or a Hub id."""

    path: str
    split: str | None = None


@dataclass(kw_only=True)
class DataConfig:
    """Prompts and answers from a dataset, for a dataset task (`task.name: math`)."""

    train: DataSourceConfig | None = None  # None: the task generates its problems
    validation: DataSourceConfig | None = None
    prompt_key: str = "problem"
    answer_key: str = "answer"
    prompt_template: str = "{prompt}"  # "{prompt}" is replaced by the row's prompt
    chat_template: bool = False  # wrap the prompt as one user turn with the tokenizer's chat template
    shuffle: bool = True  # seeded by algorithm.seed, reshuffled every epoch
    val_every_steps: int = 0  # 0: no validation pass
    val_max_samples: int = 0  # 0: the whole validation split


@dataclass(kw_only=True)
class TQConfig:
    num_storage_units: int = 1


@dataclass(kw_only=True)
class DataPlaneConfig:
    backend: str = "legacy"
    tq: TQConfig = field(default_factory=TQConfig)


@dataclass(kw_only=True)
class CheckpointConfig:
    every_steps: int = 0
    at_end: bool = True  # also after the last step; false: a throughput run writes none (a 1.2 B policy's is 23 GB)
    hf_format: bool = False  # also write step_N/hf/: save_pretrained weights and tokenizer
    dir: str | None = None  # None: RUN_DIR/checkpoints; else a path every node and a restarted job see


@dataclass(kw_only=True)
class ChecksConfig:
    """Read by the harness; the engine only carries it so a resolved recipe parses."""

    thresholds: str | None = None
    hardware: str | None = None
    invariants: bool = True
    parity: dict[str, Any] | None = None


@dataclass(kw_only=True)
class LimitsConfig:
    timeout_s: float = 3600.0
    gpu_hours: float = 0.0
    worker_timeout_s: float = 600.0  # one remote call (a step's generation, log-probs, train) at most


@dataclass(kw_only=True)
class RunConfig:
    name: str
    description: str = ""
    engine: Any = "rl"
    model: ModelConfig = field(default_factory=ModelConfig)
    teacher: TeacherConfig | None = None  # algorithm.name: distill only
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    data: DataConfig = field(default_factory=DataConfig)
    data_plane: DataPlaneConfig = field(default_factory=DataPlaneConfig)
    env: dict[str, str] = field(default_factory=dict)
    # Names of rl/unsafe_env.py's guarded families (RAY_*, RL_FAULTS, LD_*, PYTHON*) that the env
    # mappings may set anyway.
    env_unsafe_allow: list[str] = field(default_factory=list)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run_dir: str | None = None  # the harness's: where run dirs go without --out
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    # `--scale tiny` / `h200x1` / `h200x2` overrides: applied by the harness before the engine reads
    # the recipe, so a resolved recipe never holds them; accepted here for hand-written files.
    tiny: dict[str, Any] = field(default_factory=dict)
    h200x1: dict[str, Any] = field(default_factory=dict)
    h200x2: dict[str, Any] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """Policy ranks: nodes x devices per node (CPU ranks when device is cpu)."""
        return self.cluster.nodes * self.cluster.devices_per_node

    @property
    def dp_size(self) -> int:
        p = self.policy.parallel
        return self.world_size // (p.tp * p.pp * p.cp)

    @property
    def batch_rows(self) -> int:
        return self.algorithm.prompts_per_step * self.algorithm.generations_per_prompt

    def worker_env(self, role: str) -> dict[str, str | None]:
        """What each recipe variable must read in a worker of `role` ("policy" or "generation"):
        the top-level `env` overlaid by the role's own (`policy.env`, `generation.env`; the role
        wins a clash), and None (unset) for one that only the other role's env sets. The driver
        gets the top-level `env` alone."""
        own = {**self.env, **getattr(self, role).env}
        others = {name for r in ROLES if r != role for name in getattr(self, r).env}
        return {**own, **dict.fromkeys(sorted(others - own.keys()))}


ROLES = ("policy", "generation")  # the worker roles; each has its own `env` over the top-level one


_CHOICES: dict[str, tuple[Any, ...]] = {
    "model.family": ("qwen3_5", "qwen3_5_moe"),
    "model.modality": ("text", "vision"),
    "cluster.device": ("cpu", "h100", "h200", "a100"),
    "policy.precision": ("fp32", "bf16"),
    "generation.backend": ("torch", "vllm"),
    "generation.decode": ("auto", "graphs", "static", "eager"),
    "algorithm.name": ("grpo", "distill"),
    "algorithm.baseline": ("leave_one_out", "mean"),
    "algorithm.loss.truncation": (None, "tis", "icepop"),
    "data_plane.backend": ("legacy", "tq"),
}


def _build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys by their dotted path."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path or 'recipe'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        dotted = f"{path}.{key}" if path else str(key)
        if key not in names:
            raise ValueError(f"unknown recipe key {dotted!r}; valid keys here: {', '.join(names)}")
        kwargs[key] = _coerce(hints[key], value, dotted)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{path or 'recipe'}: {exc}") from None


def _coerce(hint: Any, value: Any, path: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, path)
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(inner[0], value, path) if len(inner) == 1 else value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise ValueError(f"{path}: expected {hint.__name__}, got {value!r}")
        if hint is float and not math.isfinite(value):   # .nan/.inf: the harness refuses them too
            raise ValueError(f"{path}: expected a finite float, got {value!r}")
    if origin is dict and not isinstance(value, dict):
        raise ValueError(f"{path}: expected a mapping, got {value!r}")
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint) or (Any,)
        return [_coerce(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _lookup(cfg: RunConfig, dotted: str) -> Any:
    obj: Any = cfg
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _validate(cfg: RunConfig) -> None:
    for dotted, choices in _CHOICES.items():
        value = _lookup(cfg, dotted)
        if value not in choices:
            raise ValueError(f"{dotted}: {value!r} is not one of {list(choices)}")
    positive = ["cluster.nodes", "cluster.devices_per_node", "policy.micro_batch_size",
                "generation.max_new_tokens", "generation.length_buckets", "generation.decode_slots",
                "algorithm.num_steps",
                "algorithm.prompts_per_step", "algorithm.generations_per_prompt"]
    for dotted in positive:
        if _lookup(cfg, dotted) < 1:
            raise ValueError(f"{dotted}: must be >= 1, got {_lookup(cfg, dotted)}")
    if cfg.generation.replicas is not None and cfg.generation.replicas < 1:
        raise ValueError(f"generation.replicas: must be >= 1 or null, got {cfg.generation.replicas}")
    if cfg.policy.logprob_batch_size is not None and cfg.policy.logprob_batch_size < 1:
        raise ValueError(f"policy.logprob_batch_size: must be >= 1 or null, got {cfg.policy.logprob_batch_size}")
    if cfg.algorithm.name == "grpo" and cfg.algorithm.generations_per_prompt < 2:
        raise ValueError("algorithm.generations_per_prompt: GRPO needs >= 2 samples per prompt")
    _validate_algorithm_sections(cfg)
    p = cfg.policy.parallel
    model_parallel = p.tp * p.pp * p.cp
    if cfg.world_size % model_parallel:
        raise ValueError(f"policy.parallel: tp*pp*cp={model_parallel} does not divide the "
                         f"world size {cfg.world_size} (cluster.nodes * cluster.devices_per_node)")
    if cfg.batch_rows % cfg.dp_size:
        raise ValueError(f"algorithm.prompts_per_step: prompts_per_step*generations_per_prompt="
                         f"{cfg.batch_rows} must be divisible by the data-parallel size {cfg.dp_size}")
    if cfg.checkpoint.every_steps < 0:
        raise ValueError("checkpoint.every_steps: must be >= 0 (0 = only at the end)")
    if cfg.generation.temperature <= 0:
        raise ValueError("generation.temperature: must be > 0 (GRPO samples)")
    _validate_packing(cfg.policy.sequence_packing)
    _validate_data(cfg)
    for scope in secret_env.SCOPES:
        for key, value in _lookup(cfg, scope).items():
            if not isinstance(value, str):
                raise ValueError(f"{scope}.{key}: environment values must be strings, got {value!r}")
    _validate_unsafe_env(cfg)


def _validate_unsafe_env(cfg: RunConfig) -> None:
    """Guarded env names (rl/unsafe_env.py) only where env_unsafe_allow lists them; the list holds
    guarded names only (a permission, so a base recipe may grant one its derived runs use)."""
    for scope in secret_env.SCOPES:
        names = list(_lookup(cfg, scope))
        refused = unsafe_env.refusal(scope, names, cfg.env_unsafe_allow)
        if refused:
            raise ValueError(refused)
    for i, name in enumerate(cfg.env_unsafe_allow):
        if not unsafe_env.guarded(name):
            raise ValueError(f"env_unsafe_allow[{i}]: {name!r} is not a guarded name (RAY_*, RL_FAULTS, LD_*, "
                             "PYTHON*): an env mapping sets it without asking")


def _validate_packing(packing: SequencePackingConfig) -> None:
    budget = packing.max_tokens_per_row
    if budget is None:
        return
    if budget < 1:
        raise ValueError(f"policy.sequence_packing.max_tokens_per_row: must be >= 1 or null, got {budget}")
    if not packing.enabled:
        raise ValueError("policy.sequence_packing.max_tokens_per_row: read only with policy.sequence_packing."
                         "enabled: true; enable packing or drop the budget")


DATASET_TASKS = ("math",)  # tasks whose problems come from `data:` rather than a generator


def _validate_data(cfg: RunConfig) -> None:
    if cfg.model.tokenizer is None and not cfg.model.path:
        raise ValueError("model.tokenizer: null takes the tokenizer of model.path, but model.path is null too")
    d = cfg.data
    if cfg.task.name in DATASET_TASKS and d.train is None:
        raise ValueError(f"data.train: task {cfg.task.name!r} reads its problems from a dataset; name one")
    if d.train is not None and cfg.task.name not in DATASET_TASKS:
        raise ValueError(f"data.train: task {cfg.task.name!r} generates its problems and would ignore the "
                         f"dataset; use a dataset task ({', '.join(DATASET_TASKS)}) or drop data.train")
    if d.train is None and d.validation is not None:
        raise ValueError("data.validation: a validation split without data.train")
    if "{prompt}" not in d.prompt_template:
        raise ValueError(f"data.prompt_template: must contain {{prompt}}, got {d.prompt_template!r}")
    if d.val_every_steps < 0 or d.val_max_samples < 0:
        raise ValueError("data.val_every_steps, data.val_max_samples: must be >= 0")
    if d.val_every_steps and d.validation is None:
        raise ValueError("data.val_every_steps: a validation pass needs data.validation")
    if d.validation is not None and not d.val_every_steps:
        raise ValueError("data.validation: set data.val_every_steps (> 0), or the split is never read")


TEACHER_FAMILIES = ("qwen3_5", "qwen3_5_moe", "llama")
# What distillation does not read: it must stay at its default, or the recipe is refused.
GRPO_ONLY = ("algorithm.baseline", "algorithm.normalize_rewards", "algorithm.dynamic_sampling",
             "algorithm.loss", "generation.backend", "generation.tp", "generation.colocated",
             "generation.temperature", "generation.decode", "generation.env", "generation.ignore_eos",
             "generation.length_buckets", "generation.decode_slots", "generation.replicas",
             "generation.offload_training",
             "data.val_every_steps")


def _validate_algorithm_sections(cfg: RunConfig) -> None:
    """`teacher` and `algorithm.distill` belong to distillation; GRPO's own keys to GRPO."""
    if cfg.algorithm.name == "grpo":
        if cfg.teacher is not None:
            raise ValueError("teacher: only algorithm.name: distill reads it; drop it or use distill")
        if cfg.algorithm.distill != DistillConfig():
            raise ValueError("algorithm.distill: only algorithm.name: distill reads it; drop it or use distill")
        return
    if cfg.teacher is None:
        raise ValueError("teacher: algorithm.name: distill needs a teacher (family, tokenizer, path or config)")
    if cfg.teacher.family not in TEACHER_FAMILIES:
        raise ValueError(f"teacher.family: {cfg.teacher.family!r} is not one of {list(TEACHER_FAMILIES)}")
    if cfg.algorithm.generations_per_prompt != 1:
        raise ValueError("algorithm.generations_per_prompt: distillation reads each datum once; set it to 1")
    defaults = RunConfig(name="defaults")
    for dotted in GRPO_ONLY:
        if _lookup(cfg, dotted) != _lookup(defaults, dotted):
            raise ValueError(f"{dotted}: algorithm.name: distill does not read it (off-policy, from the "
                             "task's answers); leave it at its default")


def parse_config(data: dict[str, Any]) -> RunConfig:
    """Build and validate a `RunConfig` from a resolved recipe mapping."""
    if isinstance(data, dict) and "defaults" in data:
        raise ValueError("recipe key 'defaults': resolve the recipe with the harness first "
                         "(`harness show`), the engine reads resolved recipes only")
    cfg = _build(RunConfig, data, "")
    _validate(cfg)
    return cfg


def load_config(path: str | Path) -> RunConfig:
    """Read a resolved recipe YAML file."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if isinstance(data, dict):
        data = secret_env.resolve_recipe(data, os.environ)
    return parse_config(data)
