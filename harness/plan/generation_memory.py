"""The generation phase's per-GPU memory: a replica of the policy, its cache, and what training
leaves on the GPU while the replica decodes.

Why: a colocated replica shares its GPU with a policy rank, and a bf16 replica of a 35B model is
~65 GiB before its cache; planning training alone said a recipe fits when its rollouts could not.
The terms (GiB on the GPU of the busiest replica):

* replica: every parameter of the policy (all experts: a replica is not sharded like training),
  over `generation.tp`, in the generation dtype (the engine samples in `policy.precision`);
* KV cache: `kv_bytes_per_token` for each full-attention layer, per row and cache position, for
  each of the `decode_slots` call shapes the replica's static decoder keeps (one for eager);
* gated-delta-net state: `gdn_state_bytes_per_row` for each linear-attention layer, per row and
  kept shape;
* the rows a replica decodes at once: its share of the step, whole GRPO groups to a replica
  (`rows_per_replica`); the cache positions: the prompt allowance plus `generation.max_new_tokens`
  (a call's cache spans its longest prompt plus the new tokens);
* training's resident set: `resident_during_generation` (none with `generation.offload_training`).

* the draw's working set: `DRAW_BYTES_PER_LOGIT` for each of the rows' vocabulary logits, once (a
  call's draw is transient, not kept per shape).

Not counted: the prompt forward's activations (its logits are the last position's only). Each kept
shape is counted at the largest call's size (an upper bound: a shape of shorter prompts or fewer
rows holds less).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from harness.plan.memory import GIB, PRECISION_BYTES, PROMPT_ALLOWANCE, MemoryEstimate
from harness.plan.model_size import ModelSize, head_dim, layer_types, linear_attention_shape

RECURRENT_STATE_BYTES = 4  # fp32: HF's torch delta rule and fla's kernels both keep the state in fp32
# The training terms a colocated GPU still holds while its replica decodes. Without
# `generation.offload_training` nothing leaves and nothing empties the policy process's caching
# allocator, so the blocks its activations freed stay reserved to it: all of training stays.
RESIDENT_DURING_GENERATION = ("weights", "reference", "grads", "optimizer", "activations")
# With it, the engine sends the weights, the reference copy, the grads and the optimizer state to
# host memory and then empties the caching allocator (rl/backends/offload.py), so the activations'
# reserved blocks go too: no training term stays. (The CUDA context and NCCL's buffers stay, as
# they do in the training phase, where the plan does not count them either.)
RESIDENT_WHEN_OFFLOADED: tuple[str, ...] = ()
# A decode step's [rows, vocab] tensors at the draw's peak (rl/generation/sampler.py): the model's
# bf16 logits (2 bytes), the fp32 copy the loop keeps for the log-probs (4), the drawable copy with
# the banned ids masked (4), and the shifted-and-scaled logits with their exponentials (4 + 4). At
# 256 rows of a 248,320-word vocabulary that is 1.1 GiB; one H200 measured the full-width cut's
# generation phase 1.08 GiB above a plan without it (2026-12-04, 8963103).
DRAW_BYTES_PER_LOGIT = 18


def kv_bytes_per_token(cfg: Mapping, dtype_bytes: int) -> int:
    """One full-attention layer's cache per row and position: a key and a value per KV head."""
    return 2 * int(cfg["num_key_value_heads"]) * head_dim(cfg) * dtype_bytes


def gdn_state_bytes_per_row(cfg: Mapping, dtype_bytes: int) -> int:
    """One gated-delta-net layer's cache per row: the recurrent state (value heads x key dim x
    value dim, fp32) and the causal conv's state (conv channels x kernel, in the model's dtype:
    Hugging Face's cache keeps the whole kernel's window)."""
    la = linear_attention_shape(cfg)
    recurrent = la.value_heads * la.key_head_dim * la.value_head_dim * RECURRENT_STATE_BYTES
    return recurrent + la.conv_dim * la.conv_kernel * dtype_bytes


def decode_slots(gen: Mapping) -> int:
    """The caches a replica keeps: `generation.decode_slots` call shapes for the static decoder
    (`decode` graphs, static, or auto, which is graphs on a GPU), one for the eager loop, whose
    cache lives for one call."""
    return 1 if gen["decode"] == "eager" else int(gen["decode_slots"])


def rows_per_replica(recipe: Mapping, replicas: int) -> int:
    """The busiest replica's rows: whole groups of `generations_per_prompt` rows go to a replica."""
    algo = recipe["algorithm"]
    groups = -(-int(algo["prompts_per_step"]) // replicas)
    return groups * int(algo["generations_per_prompt"])


def resident_during_generation(training: MemoryEstimate, *, colocated: bool, offloaded: bool = False
                               ) -> dict[str, float]:
    """GiB of each training term on a replica's GPU while it decodes; none when the replica has a
    GPU of its own (`generation.colocated: false`) or training waits in host memory
    (`generation.offload_training`)."""
    if not colocated:
        return {}
    terms = RESIDENT_WHEN_OFFLOADED if offloaded else RESIDENT_DURING_GENERATION
    return {term: getattr(training, term) for term in terms}


@dataclass(frozen=True, kw_only=True)
class GenerationMemory:
    replica: float
    kv_cache: float
    gdn_state: float
    draw: float  # the draw's [rows, vocab] working set
    resident: dict[str, float]  # training term -> GiB still on the GPU
    offloaded: bool  # generation.offload_training: the training state waits in host memory
    capacity: float
    rows: int
    seq_len: int
    slots: int = 1  # decode shapes whose caches the replica keeps (`decode_slots`)

    @property
    def total(self) -> float:
        return self.replica + self.kv_cache + self.gdn_state + self.draw + sum(self.resident.values())

    def to_json(self) -> dict:
        return {
            "replica": round(self.replica, 2),
            "kv_cache": round(self.kv_cache, 2),
            "gdn_state": round(self.gdn_state, 2),
            "draw": round(self.draw, 2),
            "resident_from_training": {term: round(gib, 2) for term, gib in self.resident.items()},
            "training_offloaded": self.offloaded,
            "total": round(self.total, 2),
            "capacity": self.capacity,
            "rows": self.rows,
            "seq_len": self.seq_len,
            "decode_slots": self.slots,
        }


def estimate_generation_memory(recipe: Mapping, cfg: Mapping, size: ModelSize, training: MemoryEstimate,
                               *, replicas: int) -> GenerationMemory:
    gen = recipe["generation"]
    tp = int(gen["tp"])
    dtype_bytes = PRECISION_BYTES[recipe["policy"]["precision"]]
    rows = rows_per_replica(recipe, replicas)
    seq = PROMPT_ALLOWANCE + int(gen["max_new_tokens"])
    kinds = layer_types(cfg)
    full, linear = kinds.count("full_attention"), kinds.count("linear_attention")
    slots = decode_slots(gen)
    kv = full * kv_bytes_per_token(cfg, dtype_bytes) * rows * seq * slots
    gdn = linear * gdn_state_bytes_per_row(cfg, dtype_bytes) * rows * slots
    offloaded = bool(gen["colocated"]) and bool(gen.get("offload_training", False))
    return GenerationMemory(
        replica=size.total_params * dtype_bytes / tp / GIB,
        kv_cache=kv / tp / GIB,
        gdn_state=gdn / tp / GIB,
        draw=rows * int(cfg.get("vocab_size", 0)) * DRAW_BYTES_PER_LOGIT / tp / GIB,
        resident=resident_during_generation(training, colocated=bool(gen["colocated"]), offloaded=offloaded),
        offloaded=offloaded,
        capacity=training.capacity,
        rows=rows,
        seq_len=seq,
        slots=slots,
    )
