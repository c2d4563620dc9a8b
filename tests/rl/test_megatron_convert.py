"""HF <-> megatron-core weight conversion and TP/EP sharding (pure tensor code, no megatron import)."""

from __future__ import annotations

import pytest
import torch

from rl.backends import megatron_convert as conv
from rl.models import build_model

FULL_ATTENTION = {"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2}


@pytest.fixture(scope="module", params=["qwen3_5", "qwen3_5_moe"])
def hf(request):
    return build_model({"family": request.param, "config": FULL_ATTENTION}, vocab_size=16, seed=3)


def test_round_trip_is_bitwise(hf) -> None:
    sd = hf.state_dict()
    back = conv.mcore_to_hf(conv.hf_to_mcore(sd, hf.config), hf.config)
    assert set(back) == set(sd)
    for key, value in sd.items():
        assert torch.equal(back[key], value), key


def test_qkv_layout_groups_query_gate_key_value(hf) -> None:
    cfg = hf.config
    full = conv.hf_to_mcore(hf.state_dict(), cfg)
    qkv = full["decoder.layers.0.self_attention.linear_qkv.weight"]
    attn = "model.layers.0.self_attn."
    q_proj = hf.state_dict()[attn + "q_proj.weight"]
    per, dim = cfg.num_attention_heads // cfg.num_key_value_heads, cfg.head_dim
    # group 0 starts with query head 0 (first half of HF's [q_0; gate_0] rows), then its gate.
    assert torch.equal(qkv[:dim], q_proj[:dim])
    assert torch.equal(qkv[per * dim:per * dim + dim], q_proj[dim:2 * dim])
    key_row = 2 * per * dim
    assert torch.equal(qkv[key_row:key_row + dim], hf.state_dict()[attn + "k_proj.weight"][:dim])


@pytest.mark.parametrize("tp,ep", [(2, 1), (1, 2), (2, 2)])
def test_shards_join_back_to_the_full_dict(hf, tp: int, ep: int) -> None:
    cfg = hf.config
    experts = int(getattr(cfg, "num_experts", 0) or 0)
    full = conv.hf_to_mcore(hf.state_dict(), cfg)
    shards = {(t, e): conv.shard(full, rank=conv.ShardRank(tp_rank=t, tp_size=tp, ep_rank=e, ep_size=ep),
                                 num_experts=experts)
              for t in range(tp) for e in range(ep)}
    local_experts = experts // ep if experts else 0
    for name, tensor in full.items():
        match = conv._EXPERT.match(name)
        if match:
            e = int(match.group(2))
            local = f"{match.group(1)}{e % local_experts}{match.group(3)}"
            assert torch.equal(shards[(0, e // local_experts)][local], tensor)
            continue
        parts = [shards[(t, 0)][name] for t in range(tp)]
        assert torch.equal(conv._join(parts, conv.split_rule(name)), tensor), name


def test_glu_shard_keeps_gate_and_up_halves() -> None:
    fc1 = torch.arange(8.0)[:, None]  # gate rows 0..3, up rows 4..7
    rank1 = conv._split(fc1, "glu", 1, 2)
    assert rank1.flatten().tolist() == [2.0, 3.0, 6.0, 7.0]
