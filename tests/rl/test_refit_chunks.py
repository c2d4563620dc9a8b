"""A streamed refit's chunks: every weight once, whole layers, within the budget, the same weights.

`rl.refit.buckets.chunked` is checked as a property (any layer sizes and budget: a partition of the names,
the weights outside the layers first, each layer whole and in order, a chunk over the budget only
when one layer alone is); then each training backend's chunks, gathered from its layout (megatron
over TP 2 and over EP 2 on gloo ranks), join to exactly the weights `state_dict` gives, bit for bit,
one chunk per layer when the budget is one byte.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from rank_processes import one_gloo_rank, run_ranks

from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig
from rl.refit import buckets

MEGATRON = importlib.util.find_spec("megatron") is not None
VOCAB = 32
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)


@given(layers=st.lists(st.lists(st.integers(1, 50), min_size=1, max_size=4), max_size=8),
       rest=st.lists(st.integers(1, 50), max_size=3), budget=st.integers(1, 120))
def test_chunks_partition_the_weights_into_whole_layers_within_the_budget(layers, rest, budget) -> None:
    sizes = {f"model.embed.{i}": n for i, n in enumerate(rest)}
    for layer, weights in enumerate(layers):
        sizes.update({f"model.layers.{layer}.w{j}": n for j, n in enumerate(weights)})
    chunks = buckets.chunked(sizes, budget)
    flat = [name for chunk in chunks for name in chunk]
    assert sorted(flat) == sorted(sizes) and len(flat) == len(set(flat))
    if rest:
        assert chunks[0] == list(sizes)[:len(rest)]
    order = [buckets.layer_of(n) for n in flat if buckets.layer_of(n) is not None]
    assert order == sorted(order)  # layers in order, none split across a non-layer chunk
    for chunk in chunks:
        held = {buckets.layer_of(n) for n in chunk} - {None}
        if held:
            assert all(buckets.layer_of(n) is not None for n in chunk)
            whole = [n for n in sizes if buckets.layer_of(n) in held]
            assert sorted(chunk) == sorted(whole)  # whole layers only
            assert sum(sizes[n] for n in chunk) <= budget or len(held) == 1


def test_layer_numbers_are_read_from_any_prefix() -> None:
    assert buckets.layer_of("model.language_model.layers.12.mlp.up_proj.weight") == 12
    assert buckets.layer_of("decoder.layers.3.self_attention.linear_qkv.weight") == 3
    assert buckets.layer_of("model.norm.weight") is None and buckets.layer_of("model.visual.blocks.1.w") is None


def _chunks_against_state_dict(backend_name: str, family: str, parallel: dict) -> dict:
    from rl.backends import get_backend
    from rl.models import build_model

    buckets.CHUNK_BYTES = 1  # one chunk per layer
    cfg = ModelConfig(family=family, config={"layer_types": ["full_attention", "linear_attention"],
                                             "num_hidden_layers": 2})
    if family == "qwen3_5_moe":
        cfg.config.update(num_experts=4, num_experts_per_tok=2)
    extra = {"device": "cpu"} if backend_name == "torch" else {}
    policy = PolicyConfig(micro_batch_size=2, optimizer=OPT, precision="fp32", parallel=ParallelConfig(**parallel))
    backend = get_backend(backend_name)(model=cfg, policy=policy, vocab_size=VOCAB, seed=0,
                                        weights=build_model(cfg, vocab_size=VOCAB, seed=0).state_dict(), **extra)
    whole = backend.state_dict()
    parts = [backend.refit_chunk(i) for i in range(backend.refit_chunks())]
    joined = {k: v for part in parts for k, v in part.items()}
    return {"chunks": len(parts), "names": [sorted(p) for p in parts], "keys": (list(whole), sorted(joined)),
            "equal": all(torch.equal(joined[k].cpu(), whole[k]) and joined[k].dtype == whole[k].dtype
                         for k in whole if k in joined)}


def _one_rank(rank: int, port: int) -> dict:
    one_gloo_rank(port)
    out = {"torch": _chunks_against_state_dict("torch", "qwen3_5", {})}
    if MEGATRON:
        import rl.backends.megatron.backend  # noqa: F401 - registers the backend and applies the CPU shims
        out["megatron"] = _chunks_against_state_dict("megatron", "qwen3_5", {})
    return out


def _two_ranks(rank: int, port: int) -> dict:
    import torch.distributed as dist

    from rl.backends.megatron import shims

    shims.apply()
    from megatron.core import parallel_state

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    out = {}
    for name, family, parallel in (("tp2", "qwen3_5", {"tp": 2}), ("ep2", "qwen3_5_moe", {"ep": 2})):
        out[name] = _chunks_against_state_dict("megatron", family, parallel)
        parallel_state.destroy_model_parallel()
    return out


def _assert_joined(out: dict, chunks: int) -> None:
    whole, joined = out["keys"]
    assert sorted(whole) == joined and out["equal"]
    assert out["chunks"] == chunks
    assert all(buckets.layer_of(n) is None for n in out["names"][0])  # embedding, norm, head first


@pytest.mark.integration
@pytest.mark.slow(seconds=30)
def test_each_backends_chunks_join_to_its_state_dict_bit_for_bit() -> None:
    results = run_ranks(_one_rank)[0]
    for out in results.values():
        _assert_joined(out, chunks=3)  # the rest, layer 0, layer 1


@pytest.mark.integration
@pytest.mark.slow(seconds=60)
@pytest.mark.skipif(not MEGATRON, reason="needs megatron-core")
def test_megatron_chunks_are_gathered_over_tp_and_ep() -> None:
    ranks = run_ranks(_two_ranks, nprocs=2)
    for case in ("tp2", "ep2"):
        for out in ranks:  # every rank gathers the whole chunk
            _assert_joined(out[case], chunks=3)
