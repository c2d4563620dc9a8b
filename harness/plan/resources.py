"""The resource plan: derive and check a recipe's parallelism before any GPU is spent.

A wrong TP/CP/EP combination used to surface only after a 16-GPU job had started. The rules of
the layout itself (world, expert groups, heads, layers, batch, memory) are checked here, and each
failure names the recipe keys to change. What a training backend refuses (the torch backend's data
parallel only, megatron's untied embeddings under pp, its kv and gated-delta-net heads over tp and
cp) is the engine's to say: its preflight (harness/preflight.py), asked after the plan and before
launch, answers from the backend's own rules, which the harness prints as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from harness.errors import UserError
from harness.plan.checkpoint_config import missing_config_hint, planned_model_config
from harness.plan.checkpoint_size import CheckpointSize, estimate_checkpoints
from harness.plan.generation_memory import GenerationMemory, estimate_generation_memory
from harness.plan.memory import MemoryEstimate, device_capacity_gib, estimate_memory
from harness.plan.model_size import ModelSize, model_size

GPU_DEVICES = ("a100", "h100", "h200")


class PlanError(UserError):
    """The recipe cannot run as planned; `problems` lists every reason, one line each."""

    def __init__(self, recipe_name: str, problems: list[str]):
        self.recipe_name = recipe_name
        self.problems = problems
        super().__init__(f"{recipe_name}: " + "; ".join(problems))


@dataclass(kw_only=True)
class Plan:
    recipe: str
    device: str
    nodes: int
    devices_per_node: int
    world: int
    policy: dict[str, Any]
    generation: dict[str, Any]
    model: dict[str, Any]
    memory: MemoryEstimate | None  # the training phase's, per GPU
    generation_memory: GenerationMemory | None  # the generation phase's, per GPU of a replica
    gpu_hours_max: float
    gpu_hours_budget: float
    checkpoints: CheckpointSize | None = None  # our engine's saves; None: external engine or unknown size
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "recipe": self.recipe,
            "device": self.device,
            "nodes": self.nodes,
            "devices_per_node": self.devices_per_node,
            "world": self.world,
            "roles": {"policy": self.policy, "generation": self.generation},
            "model": self.model,
            "memory_gib": None if self.memory is None else {
                "training": self.memory.to_json(),
                "generation": self.generation_memory.to_json() if self.generation_memory else None,
            },
            "gpu_hours_max": round(self.gpu_hours_max, 3),
            "gpu_hours_budget": self.gpu_hours_budget,
            "checkpoints_gib": None if self.checkpoints is None else self.checkpoints.to_json(),
            "warnings": self.warnings,
        }


def _policy_parallel(recipe: Mapping, world: int, problems: list[str]) -> dict[str, Any]:
    par = recipe["policy"]["parallel"]
    tp, pp, cp = int(par["tp"]), int(par["pp"]), int(par["cp"])
    ep, etp, sp = int(par["ep"]), int(par.get("etp") or 1), bool(par["sp"])
    model_parallel = tp * pp * cp
    if world % model_parallel:
        problems.append(
            f"policy.parallel.tp x pp x cp = {tp} x {pp} x {cp} = {model_parallel} does not divide "
            f"the {world} devices (cluster.nodes x cluster.devices_per_node)"
        )
        dp = 0
    else:
        dp = world // model_parallel
    # megatron-core builds expert groups from the same ranks: world = ETP x EP x expert-DP x PP.
    expert_span = etp * ep * pp
    expert_dp = world // expert_span if world % expert_span == 0 else 0
    if ep > 1 or etp != tp:
        if world % expert_span:
            problems.append(
                f"policy.parallel.etp x ep x pp = {etp} x {ep} x {pp} = {expert_span} does not divide the "
                f"{world} devices: megatron-core needs ETP x EP to divide TP x CP x DP = {world // pp}"
                + (" (policy.parallel.etp: 1 spreads experts over the tensor-parallel ranks)" if etp > 1 else "")
            )
    if tp == 1 and sp:
        problems.append("policy.parallel.sp: sequence parallel needs policy.parallel.tp > 1")
    return {
        "devices": world, "tp": tp, "pp": pp, "cp": cp, "dp": dp,
        "ep": ep, "etp": etp, "expert_dp": expert_dp, "sp": sp, "backend": recipe["policy"]["backend"],
    }


def _check_model(size: ModelSize, cfg: Mapping, policy: dict, gen_tp: int, problems: list[str]) -> None:
    heads, kv = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"])
    for key, tp in (("policy.parallel.tp", policy["tp"]), ("generation.tp", gen_tp)):
        if heads % tp:
            problems.append(f"{key} = {tp} does not divide model.config.num_attention_heads = {heads}")
        if kv % tp and tp % kv:
            problems.append(
                f"{key} = {tp} and model.config.num_key_value_heads = {kv}: one must divide the other"
            )
    if policy["pp"] > 1 and size.num_layers % policy["pp"]:
        problems.append(
            f"policy.parallel.pp = {policy['pp']} does not divide model.config.num_hidden_layers = {size.num_layers}"
        )
    if size.num_experts and policy["tp"] > 1 and not policy["sp"]:
        problems.append(
            "policy.parallel.sp must be true: megatron-core's MoE layer refuses tensor parallel "
            "without sequence parallel"
        )
    ep = policy["ep"]
    if ep > 1 and size.num_experts == 0:
        problems.append(f"policy.parallel.ep = {ep} but model.family has no experts (use qwen3_5_moe)")
    elif ep > 1 and size.num_experts % ep:
        problems.append(
            f"policy.parallel.ep = {ep} does not divide model.config.num_experts = {size.num_experts}"
        )


def _check_batch(recipe: Mapping, policy: dict, problems: list[str]) -> dict[str, int]:
    algo = recipe["algorithm"]
    global_batch = int(algo["prompts_per_step"]) * int(algo["generations_per_prompt"])
    micro = int(recipe["policy"]["micro_batch_size"])
    dp = policy["dp"]
    if dp and global_batch % (dp * micro):
        problems.append(
            f"global batch algorithm.prompts_per_step x generations_per_prompt = {global_batch} is not "
            f"divisible by DP x policy.micro_batch_size = {dp} x {micro}"
        )
    accum = global_batch // (dp * micro) if dp and global_batch % (dp * micro) == 0 else 0
    return {"global_batch": global_batch, "micro_batch_size": micro, "grad_accumulation": accum}


def _memory_overflows(training: MemoryEstimate | None, generation: GenerationMemory | None, *, device: str,
                      replicas: int) -> list[tuple[str, str]]:
    """(what overflows, its terms and the recipe keys that shrink it) for each phase whose estimate
    exceeds the device's memory."""
    overflows = []
    for phase, estimate in (("training", training), ("generation", generation)):
        if estimate is not None and estimate.total > estimate.capacity:
            head = (f"{phase} phase: estimated {estimate.total:.1f} GiB per {device} exceeds its {estimate.capacity:g} "
                    f"GiB by {estimate.total - estimate.capacity:.1f}")
            overflows.append((head, _training_terms(training) if phase == "training"
                              else _generation_terms(generation, replicas)))
    return overflows


def _training_terms(m: MemoryEstimate) -> str:
    if m.logprob_pass:
        which, remedy = "the log-prob pass's activations", "or lower policy.logprob_batch_size"
    else:
        which = "activations"
        remedy = "enable policy.distributed_optimizer or policy.activation_checkpointing, or lower " \
                 "policy.micro_batch_size"
    beside = f", generation replica {m.replica:.1f}" if m.replica else ""
    if m.replica:
        remedy += ", or lower generation.decode_slots (the caches the replica beside it keeps)"
    return (f"(weights {m.weights:.1f}, reference {m.reference:.1f}, grads {m.grads:.1f}, optimizer {m.optimizer:.1f}, "
            f"{which} {m.activations:.1f}{beside}): raise policy.parallel.tp/ep/pp, {remedy}")


def _generation_terms(g: GenerationMemory, replicas: int) -> str:
    resident = f", training resident {sum(g.resident.values()):.1f}" if g.resident else ""
    offload = ", set generation.offload_training: true (training waits in host memory)" if g.resident else ""
    return (f"(replica {g.replica:.1f}, KV cache {g.kv_cache:.1f}, gated-delta-net state {g.gdn_state:.1f}, "
            f"draw {g.draw:.1f} for "
            f"{g.rows} rows x {g.seq_len} tokens{resident}): lower generation.max_new_tokens or the rows per replica "
            f"(algorithm.prompts_per_step x generations_per_prompt over {replicas} generation.replicas){offload}")


def make_plan(recipe: Mapping) -> Plan:
    """Derive the resource plan of a resolved recipe.

    Raises:
        PlanError: listing every problem found, each naming the recipe keys involved.
    """
    problems: list[str] = []
    cluster = recipe["cluster"]
    nodes, per_node, device = int(cluster["nodes"]), int(cluster["devices_per_node"]), cluster["device"]
    world = nodes * per_node
    policy = _policy_parallel(recipe, world, problems)
    gen_tp = int(recipe["generation"]["tp"])
    if world % gen_tp:
        problems.append(f"generation.tp = {gen_tp} does not divide the {world} devices")
    replicas = recipe["generation"].get("replicas")
    if replicas is None:  # the engine's rule: one per GPU when colocated on GPUs, else one
        colocated_gpus = recipe["generation"]["colocated"] and device in GPU_DEVICES
        replicas = (world // gen_tp if world % gen_tp == 0 else 0) if colocated_gpus else 1
    generation = {"devices": world, "tp": gen_tp, "replicas": replicas, "backend": recipe["generation"]["backend"]}

    cfg, config_file = planned_model_config(recipe["model"])
    warnings: list[str] = []
    try:
        size = model_size(cfg, family=recipe["model"]["family"])
    except KeyError as missing:
        size = None
        message = f"model.config.{missing.args[0]} is needed to plan"
        sharded = max(policy["tp"], policy["pp"], policy["cp"], policy["ep"], gen_tp) > 1
        if sharded or device in GPU_DEVICES:
            problems.append(f"{message} a sharded or GPU run: {missing_config_hint(recipe['model'].get('path'))}")
        else:
            warnings.append(f"{message} memory and head divisibility: not checked (a CPU run at TP 1)")
    if size is not None:
        _check_model(size, cfg, policy, gen_tp, problems)
    batch = _check_batch(recipe, policy, problems)
    policy.update(batch)
    if problems:
        raise PlanError(recipe["name"], problems)

    memory = estimate_memory(recipe, size, policy) if size is not None and device in GPU_DEVICES else None
    generation_memory = None if memory is None else estimate_generation_memory(
        recipe, cfg, size, memory, replicas=generation["replicas"])
    if generation_memory is not None and recipe["generation"]["colocated"]:
        g = generation_memory  # the replica beside each rank keeps its weights and cache while it trains
        memory = replace(memory, replica=g.replica + g.kv_cache + g.gdn_state)
    overflows = _memory_overflows(memory, generation_memory, device=device, replicas=generation["replicas"])
    if overflows and isinstance(recipe.get("engine", "rl"), Mapping):
        # The estimate models our engine's memory (megatron's activations, a reference copy, our
        # generator); an external engine keeps its own (TRL's GRPOTrainer at 32 x 384 tokens:
        # 33.8 GiB measured, 184 here).
        warnings.extend(f"{head} (our engine's memory model): not checked for an external engine"
                        for head, _ in overflows)
    elif overflows:
        raise PlanError(recipe["name"], [f"{head} {terms}" for head, terms in overflows])
    timeout_h = float(recipe["limits"]["timeout_s"]) / 3600.0
    gpu_hours = world * timeout_h if device in GPU_DEVICES else 0.0
    budget = float(recipe["limits"].get("gpu_hours") or 0.0)
    if budget and gpu_hours > budget:
        raise PlanError(recipe["name"], [
            f"limits.timeout_s = {recipe['limits']['timeout_s']} on {world} GPUs may spend "
            f"{gpu_hours:.1f} GPU-hours, over limits.gpu_hours = {budget}"
        ])
    model: dict[str, Any] = {"family": recipe["model"]["family"]}
    if config_file is not None:
        model["config_file"] = str(config_file)
    if size is not None:
        model.update(params=size.total_params, active_params=size.active_params,
                     num_experts=size.num_experts, num_layers=size.num_layers, hidden_size=size.hidden_size)
    checkpoints = (estimate_checkpoints(recipe, size)
                   if size is not None and not isinstance(recipe.get("engine", "rl"), Mapping) else None)
    return Plan(recipe=recipe["name"], device=device, nodes=nodes, devices_per_node=per_node, world=world,
                policy=policy, generation=generation, model=model, memory=memory, generation_memory=generation_memory,
                gpu_hours_max=gpu_hours, gpu_hours_budget=budget, checkpoints=checkpoints, warnings=warnings)


__all__ = ["Plan", "PlanError", "make_plan", "device_capacity_gib"]
