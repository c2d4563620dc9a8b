"""The training phase's per-GPU memory estimate: weights (the policy and its frozen reference),
gradients, optimizer state and activations (the generation phase: generation_memory.py).

Its job is to reject plans that cannot fit before a job is queued; where it errs it should err
high. The terms:

* weights: dense params / (TP x PP), expert params / (EP x ETP x PP), embeddings / TP,
  at 2 bytes (bf16) or 4 (fp32);
* reference: the same again: the engine keeps a frozen copy of the initial policy for the KL
  term (rl/backends: `reference`), sharded like the policy;
* gradients: 4 bytes per local parameter (megatron keeps fp32 main grads);
* optimizer (Adam): fp32 master copy + two moments = 12 bytes per local parameter, divided by
  the data-parallel group (DP x CP for dense, expert-DP for experts) with a distributed optimizer;
* activations: ACTIVATION_BYTES x s x b x h per layer over TP x CP (every layer's activations
  live until its backward), plus LOGIT_COPIES fp32 copies of the logits s x b x V x 4 / (TP x CP).
  With `policy.activation_checkpointing` a layer keeps only its input (s x b x h in the
  parameters' precision) and one layer's activations exist at a time, in its recompute.
  s is `policy.max_seq_len` (null: `generation.max_new_tokens` + PROMPT_ALLOWANCE), or with
  `policy.sequence_packing` its `max_tokens_per_row` when set: a forward is then b packed rows
  of that many tokens. The log-prob passes run `policy.logprob_batch_size` rows a forward
  without a backward: one layer's activations at a time plus the same logit copies; the
  activation term is the larger of the two passes (`logprob_pass` says when that one is). A GRPO
  step that takes its pre-update log-probs from the training forward
  (`algorithm.loss.prev_logprobs: training`) with no KL term runs no such pass: training alone.

Calibration (one H200, 2026-12-01 at e960d1d, `bash bench/gpu.sh full-width-memory`, rows in
bench/results/full_width_memory.jsonl): Qwen3.5-35B-A3B at full width (hidden 2048, 256 experts, vocab
248,320) with 2 and 4 of its hybrid layers, bf16, micro-batch 1: training peaks 64.1 GiB (2
layers, 4096 tokens), 101.6 (4, 4096) and 94.7 (4, 2048). With the reference copy counted, those
fit ~380 bytes per token and hidden unit per layer (gated-delta-net layers on megatron's torch
kernels) and two fp32 logit copies (the log-softmax and its gradient beside the logits); the
estimate is then within 4% of each peak. The textbook 34 bytes (selective recompute, sequence
parallel) left the 4-layer estimate 23% under its peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from harness.plan.model_size import ModelSize

GIB = 1024**3
# Usable memory per device, GiB, as torch reports it on our machines (H200: measured).
DEVICE_MEMORY_GIB = {"h200": 139.8, "h100": 79.1, "a100": 79.1}
PRECISION_BYTES = {"bf16": 2, "fp32": 4}  # bytes per parameter of `policy.precision`
PROMPT_ALLOWANCE = 256  # tokens of prompt assumed when the recipe gives no policy.max_seq_len
ACTIVATION_BYTES = 380  # per token and hidden unit, per layer (measured: see above)
LOGIT_COPIES = 2  # fp32 [s, b, V] tensors alive at once in the loss's backward (measured)


def device_capacity_gib(device: str) -> float | None:
    return DEVICE_MEMORY_GIB.get(device)


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    weights: float
    reference: float
    grads: float
    optimizer: float
    activations: float
    capacity: float
    seq_len: int
    logprob_pass: bool = False  # the log-prob pass, not training, sets the activation term
    # A colocated generation replica beside training: its weights and decode cache stay on the GPU
    # while the rank trains (the replica is not offloaded); set by the plan from the generation phase.
    replica: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.reference + self.grads + self.optimizer + self.activations + self.replica

    def to_json(self) -> dict:
        return {
            "weights": round(self.weights, 2),
            "reference": round(self.reference, 2),
            "grads": round(self.grads, 2),
            "optimizer": round(self.optimizer, 2),
            "activations": round(self.activations, 2),
            "generation_replica": round(self.replica, 2),
            "total": round(self.total, 2),
            "capacity": self.capacity,
            "seq_len": self.seq_len,
            "activations_from": "logprob_pass" if self.logprob_pass else "training",
        }


def estimate_memory(recipe: Mapping, size: ModelSize, policy: Mapping) -> MemoryEstimate:
    tp, pp, cp, dp = policy["tp"], policy["pp"], policy["cp"], max(policy["dp"], 1)
    ep, etp, expert_dp = policy["ep"], policy["etp"], max(policy["expert_dp"], 1)
    dense_local = size.dense_params / (tp * pp)
    expert_local = size.expert_params / (ep * etp * pp)
    embed_local = size.embedding_params / tp
    local = dense_local + expert_local + embed_local
    weight_bytes = PRECISION_BYTES[recipe["policy"]["precision"]]
    weights = local * weight_bytes / GIB
    grads = local * 4 / GIB
    if recipe["policy"].get("distributed_optimizer"):
        optimizer = 12 * ((dense_local + embed_local) / (dp * cp) + expert_local / expert_dp) / GIB
    else:
        optimizer = 12 * local / GIB
    seq = int(recipe["policy"].get("max_seq_len") or recipe["generation"]["max_new_tokens"] + PROMPT_ALLOWANCE)
    packing = recipe["policy"].get("sequence_packing") or {}
    if packing.get("enabled") and packing.get("max_tokens_per_row"):
        seq = int(packing["max_tokens_per_row"])
    micro = int(recipe["policy"]["micro_batch_size"])
    tokens_hidden = seq * micro * size.hidden_size / (tp * cp)
    if recipe["policy"].get("activation_checkpointing"):
        layers = size.num_layers * weight_bytes * tokens_hidden + ACTIVATION_BYTES * tokens_hidden
    else:
        layers = size.num_layers * ACTIVATION_BYTES * tokens_hidden
    logits = LOGIT_COPIES * seq * micro * size.vocab_size * 4 / (tp * cp)
    training = (layers + logits) / GIB
    rows = int(recipe["policy"].get("logprob_batch_size") or micro)
    logprob = rows / micro * (ACTIVATION_BYTES * tokens_hidden + logits) / GIB if runs_logprob_pass(recipe) else 0.0
    capacity = DEVICE_MEMORY_GIB[recipe["cluster"]["device"]]
    return MemoryEstimate(weights=weights, reference=weights, grads=grads, optimizer=optimizer,
                          activations=max(training, logprob), capacity=capacity, seq_len=seq,
                          logprob_pass=logprob > training)


def runs_logprob_pass(recipe: Mapping) -> bool:
    """Whether the engine's step runs a log-prob pass of its own: every step but a GRPO one whose
    pre-update log-probs come from the training forward and whose loss has no KL term (the
    engine's `prev_from_training` and `needs_reference`, rl/algorithms/loss.py)."""
    algorithm = recipe.get("algorithm") or {}
    loss = algorithm.get("loss") or {}
    return not (algorithm.get("name", "grpo") == "grpo" and loss.get("prev_logprobs") == "training"
                and not loss.get("kl_beta", 0.0))
