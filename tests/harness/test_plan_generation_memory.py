"""The generation phase's memory terms, computed by hand on the tiny Qwen3.5-MoE twin's shape."""

from __future__ import annotations

import pytest

from harness.plan.generation_memory import (
    DRAW_BYTES_PER_LOGIT,
    RESIDENT_DURING_GENERATION,
    RESIDENT_WHEN_OFFLOADED,
    estimate_generation_memory,
    gdn_state_bytes_per_row,
    kv_bytes_per_token,
    resident_during_generation,
    rows_per_replica,
)
from harness.plan.memory import GIB, MemoryEstimate
from harness.plan.model_size import model_size

TINY = {
    "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "vocab_size": 100, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
}
TRAINING = MemoryEstimate(weights=1.0, reference=1.0, grads=2.0, optimizer=3.0, activations=0.5, capacity=139.8,
                          seq_len=512)


def recipe(*, precision="bf16", tp=1, colocated=True, max_new_tokens=44, prompts=4, per_prompt=2) -> dict:
    return {"policy": {"precision": precision},
            "generation": {"tp": tp, "colocated": colocated, "max_new_tokens": max_new_tokens, "decode": "auto",
                           "decode_slots": 1},
            "algorithm": {"prompts_per_step": prompts, "generations_per_prompt": per_prompt}}


def test_a_full_attention_layer_caches_a_key_and_a_value_per_kv_head():
    assert kv_bytes_per_token(TINY, 2) == 2 * 2 * 16 * 2 == 128
    assert kv_bytes_per_token(TINY, 4) == 256
    without_head_dim = {k: v for k, v in TINY.items() if k != "head_dim"}  # hidden 64 / 4 heads
    assert kv_bytes_per_token(without_head_dim, 2) == 128


def test_a_gated_delta_net_layer_keeps_an_fp32_recurrent_state_and_the_conv_window():
    recurrent = 4 * 16 * 16 * 4  # value heads x key dim x value dim, fp32 whatever the model dtype
    conv_channels = 2 * 2 * 16 + 4 * 16  # query and key (2 heads x 16) and value (4 heads x 16)
    assert gdn_state_bytes_per_row(TINY, 2) == recurrent + conv_channels * 4 * 2 == 4096 + 1024
    assert gdn_state_bytes_per_row(TINY, 4) == 4096 + 2048


def test_whole_groups_go_to_a_replica():
    assert rows_per_replica(recipe(prompts=32, per_prompt=16), 16) == 32
    assert rows_per_replica(recipe(prompts=32, per_prompt=16), 5) == 7 * 16  # ceil(32 / 5) groups
    assert rows_per_replica(recipe(prompts=32, per_prompt=16), 64) == 16  # one group; the rest idle


def test_training_stays_resident_beside_a_colocated_replica_only():
    assert resident_during_generation(TRAINING, colocated=True) == {
        "weights": 1.0, "reference": 1.0, "grads": 2.0, "optimizer": 3.0, "activations": 0.5}
    assert tuple(resident_during_generation(TRAINING, colocated=True)) == RESIDENT_DURING_GENERATION
    assert resident_during_generation(TRAINING, colocated=False) == {}


def test_no_training_term_stays_once_the_engine_offloads_it_and_empties_its_cache():
    assert RESIDENT_WHEN_OFFLOADED == ()
    assert resident_during_generation(TRAINING, colocated=True, offloaded=True) == {}
    size = model_size(TINY, family="qwen3_5_moe")
    offloaded = recipe()
    offloaded["generation"]["offload_training"] = True
    est = estimate_generation_memory(offloaded, TINY, size, TRAINING, replicas=1)
    kept = estimate_generation_memory(recipe(), TINY, size, TRAINING, replicas=1)
    assert est.offloaded and not kept.offloaded and est.to_json()["resident_from_training"] == {}
    assert est.total == pytest.approx(kept.total - 7.5)  # weights, reference, grads, optimizer, activations


def test_the_generation_phase_of_the_tiny_shape():
    size = model_size(TINY, family="qwen3_5_moe")
    est = estimate_generation_memory(recipe(), TINY, size, TRAINING, replicas=1)
    rows, seq = 8, 256 + 44  # 4 prompts x 2 on one replica; the prompt allowance + max_new_tokens
    assert (est.rows, est.seq_len) == (rows, seq)
    assert est.replica == size.total_params * 2 / GIB
    assert est.kv_cache == 1 * 128 * rows * seq / GIB  # one full-attention layer
    assert est.gdn_state == 3 * 5120 * rows / GIB  # three gated-delta-net layers
    assert est.draw == rows * TINY["vocab_size"] * DRAW_BYTES_PER_LOGIT / GIB  # one draw's logits, not per slot
    assert est.total == pytest.approx(est.replica + est.kv_cache + est.gdn_state + est.draw + 7.5)
    assert est.to_json()["resident_from_training"]["optimizer"] == 3.0

    sharded = estimate_generation_memory(recipe(tp=2, colocated=False), TINY, size, TRAINING, replicas=2)
    assert sharded.rows == 4 and sharded.resident == {}
    assert sharded.kv_cache == 128 * 4 * seq / 2 / GIB and sharded.replica == est.replica / 2
