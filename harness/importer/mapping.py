"""The one table from the reference system's recipe keys to ours (docs/import.md).

A reference recipe (NeMo-RL's OmegaConf YAML, `defaults:` resolved and `${...}` filled in) is
flattened to dotted leaves. Each leaf is then exactly one of:

* **mapped** by `KEYS` to one of our keys, through a converter that may refuse a value it
  cannot hold (then the leaf is reported with the converter's reason);
* **superseded** by `SUPERSEDED`: a key whose job the harness does itself (logging, the run
  dir, checkpoint paths), reported as such, never copied;
* **not supported** by `UNSUPPORTED`: a setting ours has no key for, reported with the reason
  (what ours does instead); the recipe is still written, since the reference's driver runs it;
* **unknown**: reported, never invented.

Keys that only exist in one backend's section are mapped only when that backend is the one the
recipe enables (`policy.megatron_cfg.*` when `policy.megatron_cfg.enabled`, `policy.dtensor_cfg.*`
unless it is). A mapping may also check the rest of the recipe (`Key.check`): sequence packing
with megatron, megatron fp8 training and a recompute other than whole layers are refused, since
ours cannot hold them. The one leaf that maps onto several of ours, the DTensor path's
`policy.scheduler` list, is `torch_schedule`'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["KEYS", "SUPERSEDED", "TORCH_SCHEDULER", "UNSUPPORTED", "Refused", "family_of", "lookup",
           "superseded_reason", "torch_schedule", "unsupported_reason"]


class Refused(ValueError):
    """A converter cannot hold this value in our schema; the message says why."""


def _same(value: Any) -> Any:
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{value!r} is not an integer")
    return value


def _number(value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"{value!r} is not a finite number")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"{value!r} is not a boolean")
    return value


def _precision(value: Any) -> str:
    table = {"bfloat16": "bf16", "bf16": "bf16", "float32": "fp32", "fp32": "fp32"}
    if value not in table:
        raise Refused(f"precision {value!r}: ours are fp32 and bf16")
    return table[value]


def _baseline(value: Any) -> str:
    return "leave_one_out" if _bool(value) else "mean"


def _generation_backend(value: Any) -> str:
    if value != "vllm":
        raise Refused(f"generation backend {value!r}: ours are torch and vllm")
    return "vllm"


def _betas(value: Any) -> list:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)):
        raise Refused(f"{value!r} is not a pair of numbers")
    return list(value)


def _grad_clip(value: Any) -> float | int | None:
    return None if value is None else _number(value)


def _int_or_null(value: Any) -> int | None:
    return None if value is None else _int(value)


def _decay(value: Any) -> str:
    if value not in ("constant", "linear", "cosine"):
        raise Refused(f"lr_decay_style {value!r}: ours are constant, linear and cosine")
    return value


_DATA_PARALLEL = "our torch backend is data parallel only (policy.parallel shards the megatron backend's model)"


def _unsharded(value: Any) -> int:
    """A DTensor-path parallel size: 1, the only one ours holds for that path."""
    if _int(value) != 1:
        raise Refused(f"{value!r}: {_DATA_PARALLEL}")
    return 1


def _no_sequence_parallel(value: Any) -> bool:
    if _bool(value):
        raise Refused(f"sequence parallel: {_DATA_PARALLEL}")
    return False


def _no_balancing(value: Any) -> float:
    """megatron's load-balancing loss: ours is aux_loss at model.config.router_aux_loss_coef, so
    the reference's "none" is a coefficient of 0; its other types take a coefficient its model
    bridge sets, which the recipe does not hold."""
    if value != "none":
        raise Refused(f"moe_router_load_balancing_type {value!r}: ours maps 'none' only (onto "
                      "model.config.router_aux_loss_coef 0.0); another type's coefficient is not in the recipe")
    return 0.0


@dataclass(frozen=True)
class Key:
    ours: str
    convert: Callable[[Any], Any] = _same
    when: str | None = None  # a reference leaf that must be true for this mapping to apply
    unless: str | None = None  # a reference leaf that must not be true for it to apply
    check: Callable[[Any, Mapping[str, Any]], None] | None = None  # the converted value against the whole recipe
    read_if: Callable[[Mapping[str, Any]], bool] | None = None  # the whole recipe makes this leaf matter


MEGATRON = "policy.megatron_cfg.enabled"
DECAY_STYLE = "policy.megatron_cfg.scheduler.lr_decay_style"


def _decays(flat: Mapping[str, Any]) -> bool:
    """A megatron lr schedule that decays, so reads min_lr and lr_decay_iters. A recipe naming no
    style gets our default decay, constant, so those two are not mapped either."""
    return flat.get(DECAY_STYLE, "constant") != "constant"


DTENSOR_LR = "policy.optimizer.kwargs.lr"
FP8 = "policy.megatron_cfg.fp8_cfg.enabled"
RECOMPUTE = "policy.megatron_cfg.recompute_granularity"


def _not_fp8(precision: str, flat: Mapping[str, Any]) -> None:
    if flat.get(MEGATRON) is True and flat.get(FP8) is True:
        raise Refused(f"with {FP8}: megatron fp8 training; ours are fp32 and bf16")


def _full_recompute(enabled: bool, flat: Mapping[str, Any]) -> None:
    granularity = flat.get(RECOMPUTE, "full")
    if enabled and granularity != "full":
        raise Refused(f"{RECOMPUTE} {granularity!r}: ours recomputes whole layers, one at a time (megatron's 'full')")


# reference leaf -> our key. Patterns are exact dotted paths.
KEYS: dict[str, Key] = {
    "grpo.max_num_steps": Key("algorithm.num_steps", _int),
    "grpo.num_prompts_per_step": Key("algorithm.prompts_per_step", _int),
    "grpo.num_generations_per_prompt": Key("algorithm.generations_per_prompt", _int),
    "grpo.seed": Key("algorithm.seed", _int),
    "grpo.normalize_rewards": Key("algorithm.normalize_rewards", _bool),
    "grpo.use_leave_one_out_baseline": Key("algorithm.baseline", _baseline),
    "grpo.use_dynamic_sampling": Key("algorithm.dynamic_sampling", _bool),
    "grpo.overlong_filtering": Key("algorithm.overlong_filtering", _bool),
    "loss_fn.ratio_clip_min": Key("algorithm.loss.clip_low", _number),
    "loss_fn.ratio_clip_max": Key("algorithm.loss.clip_high", _number),
    "loss_fn.reference_policy_kl_penalty": Key("algorithm.loss.kl_beta", _number),
    "loss_fn.use_importance_sampling_correction": Key("algorithm.loss.is_correction", _bool),
    "policy.model_name": Key("model.path"),
    "policy.train_micro_batch_size": Key("policy.micro_batch_size", _int),
    "policy.logprob_batch_size": Key("policy.logprob_batch_size", _int),
    "policy.max_total_sequence_length": Key("policy.max_seq_len", _int_or_null),
    "policy.precision": Key("policy.precision", _precision, check=_not_fp8),
    "policy.max_grad_norm": Key("policy.optimizer.grad_clip", _grad_clip),
    DTENSOR_LR: Key("policy.optimizer.lr", _number),
    "policy.optimizer.kwargs.weight_decay": Key("policy.optimizer.weight_decay", _number),
    "policy.optimizer.kwargs.betas": Key("policy.optimizer.betas", _betas),
    "policy.optimizer.kwargs.eps": Key("policy.optimizer.eps", _number),
    "policy.megatron_cfg.enabled": Key("policy.backend", lambda v: "megatron" if _bool(v) else "torch"),
    "policy.megatron_cfg.tensor_model_parallel_size": Key("policy.parallel.tp", _int, when=MEGATRON),
    "policy.megatron_cfg.pipeline_model_parallel_size": Key("policy.parallel.pp", _int, when=MEGATRON),
    "policy.megatron_cfg.context_parallel_size": Key("policy.parallel.cp", _int, when=MEGATRON),
    "policy.megatron_cfg.expert_model_parallel_size": Key("policy.parallel.ep", _int, when=MEGATRON),
    "policy.megatron_cfg.expert_tensor_parallel_size": Key("policy.parallel.etp", _int, when=MEGATRON),
    "policy.megatron_cfg.sequence_parallel": Key("policy.parallel.sp", _bool, when=MEGATRON),
    "policy.dtensor_cfg.tensor_parallel_size": Key("policy.parallel.tp", _unsharded, unless=MEGATRON),
    "policy.dtensor_cfg.context_parallel_size": Key("policy.parallel.cp", _unsharded, unless=MEGATRON),
    "policy.dtensor_cfg.expert_parallel_size": Key("policy.parallel.ep", _unsharded, unless=MEGATRON),
    "policy.dtensor_cfg.sequence_parallel": Key("policy.parallel.sp", _no_sequence_parallel, unless=MEGATRON),
    "policy.megatron_cfg.activation_checkpointing": Key("policy.activation_checkpointing", _bool, when=MEGATRON,
                                                        check=_full_recompute),
    "policy.dtensor_cfg.activation_checkpointing": Key("policy.activation_checkpointing", _bool, unless=MEGATRON),
    "policy.sequence_packing.enabled": Key("policy.sequence_packing.enabled", _bool),
    "policy.megatron_cfg.moe_router_load_balancing_type": Key("model.config.router_aux_loss_coef", _no_balancing,
                                                              when=MEGATRON),
    "policy.hf_config_overrides.text_config.router_aux_loss_coef": Key("model.config.router_aux_loss_coef", _number),
    "policy.megatron_cfg.optimizer.use_distributed_optimizer": Key("policy.distributed_optimizer", _bool,
                                                                    when=MEGATRON),
    "policy.megatron_cfg.optimizer.lr": Key("policy.optimizer.lr", _number, when=MEGATRON),
    "policy.megatron_cfg.optimizer.weight_decay": Key("policy.optimizer.weight_decay", _number, when=MEGATRON),
    "policy.megatron_cfg.optimizer.adam_eps": Key("policy.optimizer.eps", _number, when=MEGATRON),
    "policy.megatron_cfg.optimizer.clip_grad": Key("policy.optimizer.grad_clip", _grad_clip, when=MEGATRON),
    "policy.megatron_cfg.optimizer.min_lr": Key("policy.optimizer.min_lr", _number, when=MEGATRON,
                                                read_if=_decays),
    "policy.megatron_cfg.scheduler.lr_warmup_iters": Key("policy.optimizer.warmup_steps", _int, when=MEGATRON),
    "policy.megatron_cfg.scheduler.lr_warmup_init": Key("policy.optimizer.warmup_init_lr", _number, when=MEGATRON),
    "policy.megatron_cfg.scheduler.lr_decay_style": Key("policy.optimizer.decay", _decay, when=MEGATRON),
    "policy.megatron_cfg.scheduler.lr_decay_iters": Key("policy.optimizer.decay_steps", _int_or_null, when=MEGATRON,
                                                        read_if=_decays),
    "policy.generation.backend": Key("generation.backend", _generation_backend),
    "policy.generation.max_new_tokens": Key("generation.max_new_tokens", _int),
    "policy.generation.temperature": Key("generation.temperature", _number),
    "policy.generation.colocated.enabled": Key("generation.colocated", _bool),
    "policy.generation.vllm_cfg.tensor_parallel_size": Key("generation.tp", _int),
    "cluster.gpus_per_node": Key("cluster.devices_per_node", _int),
    "cluster.num_nodes": Key("cluster.nodes", _int),
    "checkpointing.save_period": Key("checkpoint.every_steps", _int, when="checkpointing.enabled"),
    "data.shuffle": Key("data.shuffle", _bool),
}

# reference leaf pattern (fnmatch) -> why the harness owns that job, or why it has no effect
SUPERSEDED: tuple[tuple[str, str], ...] = (
    ("policy.megatron_cfg.optimizer.min_lr", "read only by a linear or cosine lr_decay_style; under the "
     "reference's constant one it has no effect (ours refuses it there)"),
    ("policy.megatron_cfg.scheduler.lr_decay_iters", "read only by a linear or cosine lr_decay_style; under the "
     "reference's constant one it has no effect (ours refuses it there)"),
    ("logger.*", "the harness owns logging: the run dir's metrics.jsonl, report.md and history"),
    ("checkpointing.checkpoint_dir", "the harness places checkpoints in the run dir"),
    ("checkpointing.enabled", "read only as the condition of checkpointing.save_period"),
    (RECOMPUTE, "read only as the condition of policy.megatron_cfg.activation_checkpointing (ours is 'full')"),
    (FP8, "read only as the condition of policy.precision (megatron fp8 training is refused)"),
)

_NO_VLLM = "the engine does not implement a vllm generation backend (vLLM cannot run on our GPU machines)"

# reference leaf pattern (fnmatch) -> why ours has no key for it, and what ours does instead
UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("policy.sequence_packing.*", "the reference's packer (after `enabled`, which maps): token budgets per packed "
     "micro-batch (train_mb_tokens, logprob_mb_tokens), its algorithm, rounding, order and fused loss; ours packs "
     "first fit decreasing into policy.micro_batch_size rows of max_tokens_per_row tokens each, a budget per row, "
     "not per micro-batch"),
    ("policy.dynamic_batching.*", "micro-batches cut to a token budget; ours cuts policy.micro_batch_size rows"),
    ("policy.megatron_cfg.moe_token_dispatcher_type", "ours: megatron-core's alltoall dispatcher, fixed "
     "(rl/backends/megatron/config.py); a dispatcher moves tokens to their experts, not what they compute"),
    ("policy.megatron_cfg.moe_enable_deepep", "ours: megatron-core's alltoall dispatcher, without DeepEP"),
    ("policy.megatron_cfg.moe_router_dtype", "ours computes the router in fp32, fixed "
     "(rl/backends/megatron/config.py)"),
    ("policy.megatron_cfg.moe_router_bias_update_rate", "ours has no router expert bias (aux-loss-free "
     "balancing); the reference's default rate 0.0 leaves it off too"),
    ("policy.megatron_cfg.freeze_moe_router", "ours trains the router with the rest of the model"),
    ("policy.megatron_cfg.cuda_graph_*", "training CUDA graphs: ours captures none (policy.compile is torch.compile, "
     "not a graph capture); the reference's default 'none' is ours"),
    ("policy.generation.vllm_cfg.gpu_memory_utilization", f"vLLM's share of GPU memory: {_NO_VLLM}"),
    ("policy.generation.vllm_cfg.enforce_eager", "vLLM without CUDA graphs: generation.decode is the torch "
     f"generation backend's; {_NO_VLLM}"),
)


# The DTensor path's lr schedulers (torch.optim.lr_scheduler classes, stepped after each
# optimizer step, as ours is): a list of {name, kwargs} and, for more than one, {milestones}.
TORCH_SCHEDULER = "policy.scheduler"
_LINEAR, _CONSTANT = "torch.optim.lr_scheduler.LinearLR", "torch.optim.lr_scheduler.ConstantLR"
_SHAPE = (f"{TORCH_SCHEDULER}: ours holds a LinearLR warm-up to end_factor 1.0, alone or followed by "
          "ConstantLR(factor 1.0) from a milestone at or after the warm-up's end")


def torch_schedule(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """Our `policy.optimizer` schedule keys for the reference's `policy.scheduler` list (the
    DTensor path's; megatron's has its own keys). A LinearLR from start_factor s (torch's defaults:
    1/3 over 5 steps) is a warm-up from s x lr; anything our schedule cannot follow is refused."""
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise Refused(f"{value!r} is not a list of schedulers")
    schedulers = [e for e in value if "milestones" not in e]
    milestones = [e["milestones"] for e in value if "milestones" in e]
    names = [e.get("name") for e in schedulers]
    if names not in ([_LINEAR], [_LINEAR, _CONSTANT]) or len(milestones) != len(names) - 1:
        raise Refused(f"schedulers {names}: {_SHAPE}")
    linear = dict(schedulers[0].get("kwargs") or {})
    start, end, iters = linear.get("start_factor", 1 / 3), linear.get("end_factor", 1.0), linear.get("total_iters", 5)
    if end != 1.0:
        raise Refused(f"LinearLR end_factor {end!r}: {_SHAPE}")
    if milestones:
        factor, at = (schedulers[1].get("kwargs") or {}).get("factor", 1 / 3), milestones[0]
        if factor != 1.0 or not (isinstance(at, list) and len(at) == 1) or _int(at[0]) < _int(iters):
            raise Refused(f"ConstantLR factor {factor!r} from milestones {at!r}: {_SHAPE}")
    return {"policy.optimizer.warmup_steps": _int(iters),
            "policy.optimizer.warmup_init_lr": _number(start) * _number(flat.get(DTENSOR_LR)),
            "policy.optimizer.decay": "constant"}


def superseded_reason(key: str) -> str | None:
    return next((why for pattern, why in SUPERSEDED if fnmatchcase(key, pattern)), None)


def unsupported_reason(key: str) -> str | None:
    return next((why for pattern, why in UNSUPPORTED if fnmatchcase(key, pattern)), None)


def lookup(key: str, flat: Mapping[str, Any]) -> Key | None:
    """The mapping of reference leaf `key` given the whole flat recipe, or None."""
    entry = KEYS.get(key)
    if entry is None or (entry.when is not None and flat.get(entry.when) is not True) or (
            entry.unless is not None and flat.get(entry.unless) is True) or (
            entry.read_if is not None and not entry.read_if(flat)):
        return None
    return entry


# A model name (a Hub id or a local path) -> our model.family. Qwen3.5 only: the families our
# schema holds. "-A<n>B" names the active parameters of a mixture of experts.
_QWEN3_5 = re.compile(r"qwen3[._]5", re.IGNORECASE)
_MOE = re.compile(r"-a\d+(\.\d+)?b\b", re.IGNORECASE)


def family_of(model_name: str) -> str | None:
    base = model_name.rstrip("/").rsplit("/", 1)[-1]
    if not _QWEN3_5.search(base):
        return None
    return "qwen3_5_moe" if _MOE.search(base) else "qwen3_5"


# The reference's environment (the `env:` section's one key) -> our task.name
TASKS: dict[str, str] = {"math": "math"}

# The reference's driver (examples/run_<x>.py) -> our algorithm.name
ALGORITHMS: dict[str, str] = {"run_grpo": "grpo", "run_grpo_math": "grpo", "run_vlm_grpo": "grpo"}

# Suite list (tests/test_suites/<name>.txt) -> our hardware class: the reference's README says
# the plain lists are H100 (8 GPUs a node) and the *_gb200 lists GB200, which we have no class for.
def hardware_of_list(stem: str) -> str | None:
    return None if "gb200" in stem else "h100"
