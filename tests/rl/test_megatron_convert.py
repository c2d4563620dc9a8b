"""HF <-> megatron-core weight conversion and TP/EP sharding (pure tensor code, no megatron import)."""

from __future__ import annotations

import pytest
import torch

from rl.backends.megatron import convert as conv
from rl.config import ModelConfig
from rl.models import build_model

FULL_ATTENTION = {"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2}
HYBRID = {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}


@pytest.fixture(scope="module", params=[("qwen3_5", FULL_ATTENTION), ("qwen3_5_moe", FULL_ATTENTION),
                                        ("qwen3_5", HYBRID), ("qwen3_5_moe", HYBRID)],
                ids=["dense", "moe", "dense-hybrid", "moe-hybrid"])
def hf(request):
    family, config = request.param
    return build_model(ModelConfig(family=family, config=config), vocab_size=16, seed=3)


def test_round_trip_is_bitwise(hf) -> None:
    sd = hf.state_dict()
    back = conv.mcore_to_hf(conv.hf_to_mcore(sd, hf.config), hf.config)
    assert set(back) == set(sd)
    for key, value in sd.items():
        assert torch.equal(back[key], value), key


def test_qkv_layout_groups_query_gate_key_value(hf) -> None:
    cfg = hf.config
    layer = cfg.layer_types.index("full_attention")
    full = conv.hf_to_mcore(hf.state_dict(), cfg)
    qkv = full[f"decoder.layers.{layer}.self_attention.linear_qkv.weight"]
    attn = f"model.layers.{layer}.self_attn."
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
    sections = conv.gdn_sections(cfg)
    shards = {(t, e): conv.shard(full, rank=conv.ShardRank(tp_rank=t, tp_size=tp, ep_rank=e, ep_size=ep),
                                 num_experts=experts, sections=sections)
              for t in range(tp) for e in range(ep)}
    for name, tensor in full.items():
        if conv.expert_weight(name):  # EP rank e holds experts [e E/ep, (e+1) E/ep)
            assert shards[(0, 0)][name].shape[0] == experts // ep
            assert torch.equal(torch.cat([shards[(0, e)][name] for e in range(ep)]), tensor), name
            continue
        parts = [shards[(t, 0)][name] for t in range(tp)]
        assert torch.equal(conv._join(name, parts, sections), tensor), name


def test_experts_are_hf_stacked_tensors_and_expert_tp_splits_each_matrix() -> None:
    """A MoE layer has two expert weights, HF's own [E, out, in] tensors; under expert-TP each
    expert's fc1 keeps its gate and up halves, fc2 its columns, and the parts join back."""
    hf = build_model(ModelConfig(family="qwen3_5_moe", config=FULL_ATTENTION), vocab_size=16, seed=3)
    sd, experts = hf.state_dict(), hf.config.num_experts
    full = conv.hf_to_mcore(sd, hf.config)
    assert [k for k in full if k.startswith("decoder.layers.0.mlp.experts.")] == [
        "decoder.layers.0.mlp.experts.fc1", "decoder.layers.0.mlp.experts.fc2"]
    assert torch.equal(full["decoder.layers.0.mlp.experts.fc1"], sd["model.layers.0.mlp.experts.gate_up_proj"])
    assert torch.equal(full["decoder.layers.0.mlp.experts.fc2"], sd["model.layers.0.mlp.experts.down_proj"])
    for name in ("decoder.layers.0.mlp.experts.fc1", "decoder.layers.0.mlp.experts.fc2"):
        ranks = [conv.shard({name: full[name]}, rank=conv.ShardRank(ep_rank=e, ep_size=2, etp_rank=t, etp_size=2),
                            num_experts=experts)[name] for e in range(2) for t in range(2)]
        joined = [conv._join(name, ranks[2 * e:2 * e + 2], dim=1) for e in range(2)]
        assert torch.equal(torch.cat(joined), full[name]), name
    fc1, half = full["decoder.layers.0.mlp.experts.fc1"], full["decoder.layers.0.mlp.experts.fc1"].shape[1] // 2
    rank = conv.shard({"decoder.layers.0.mlp.experts.fc1": fc1}, num_experts=experts,
                      rank=conv.ShardRank(ep_rank=1, ep_size=2, etp_rank=1, etp_size=2))
    e = experts // 2  # EP rank 1's first expert; expert-TP rank 1: the second quarter of the gate and of the up rows
    expected = torch.cat([fc1[e, half // 2:half], fc1[e, half + half // 2:]])
    assert torch.equal(rank["decoder.layers.0.mlp.experts.fc1"][0], expected)


def test_glu_shard_keeps_gate_and_up_halves() -> None:
    fc1 = torch.arange(8.0)[:, None]  # gate rows 0..3, up rows 4..7
    rank1 = conv._split("decoder.layers.0.mlp.linear_fc1.weight", fc1, 1, 2)
    assert rank1.flatten().tolist() == [2.0, 3.0, 6.0, 7.0]


def test_gdn_in_proj_shard_holds_each_section_of_its_own_heads() -> None:
    """Rank r's in_proj rows are [q_r; k_r; v_r; z_r; beta_r; alpha_r] (megatron's per-rank layout)."""
    sections = {"self_attention.in_proj.weight": (4, 4, 8, 8, 2, 2)}
    rows = torch.arange(28.0)[:, None]
    rank1 = conv._split("decoder.layers.0.self_attention.in_proj.weight", rows, 1, 2, sections)
    assert rank1.flatten().tolist() == [2, 3, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 25, 27]


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_gdn_layout_maps_hf_projections(family: str) -> None:
    hf = build_model(ModelConfig(family=family, config=HYBRID), vocab_size=16, seed=3)
    cfg = hf.config
    sd = hf.state_dict()
    full = conv.hf_to_mcore(sd, cfg)
    in_proj = full["decoder.layers.0.self_attention.in_proj.weight"]
    h = "model.layers.0.linear_attn."
    qkv, z = sd[h + "in_proj_qkv.weight"], sd[h + "in_proj_z.weight"]
    assert torch.equal(in_proj[:qkv.shape[0]], qkv)
    assert torch.equal(in_proj[qkv.shape[0]:qkv.shape[0] + z.shape[0]], z)
    assert torch.equal(in_proj[-cfg.linear_num_value_heads:], sd[h + "in_proj_a.weight"])
    assert torch.equal(full["decoder.layers.0.self_attention.out_norm.weight"], sd[h + "norm.weight"])
