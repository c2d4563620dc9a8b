"""A compiled megatron transformer layer (dense) traces as one graph with no graph break.

Dynamo only (`backend="eager"`), on the CPU, in a one-rank gloo process: the breaks are the same
as on the GPU. Before `quiet_default_tp_group`, megatron-core 0.19's RowParallelLinear warning
broke every layer and left the rest of it eager (docs/benchmarks.md, issue 11).
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch
from rank_processes import one_gloo_rank, run_ranks
from train_batches import train_batch

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

VOCAB = 64


def _counts(rank: int, port: int) -> dict:
    from torch._dynamo.utils import counters

    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.backends.megatron.compile import quiet_default_tp_group
    from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.models import build_model

    one_gloo_rank(port)
    cfg = ModelConfig(family="qwen3_5", config={"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2})
    backend = get_backend("megatron")(
        model=cfg, vocab_size=VOCAB, seed=0,
        weights=build_model(cfg, vocab_size=VOCAB, seed=0).state_dict(),
        policy=PolicyConfig(micro_batch_size=2, parallel=ParallelConfig(tp=1, ep=1, cp=1, pp=1, sp=False),
                            optimizer=OptimizerConfig(lr=1e-5, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8,
                                                      grad_clip=1.0)))
    quiet_default_tp_group()  # what compile_layers does first (policy.compile itself is GPU-only)
    module = backend.gpt
    while hasattr(module, "module"):
        module = module.module
    for layer in module.decoder.layers:
        layer.forward = torch.compile(layer.forward, backend="eager")
    batch = train_batch(vocab=VOCAB, seed=1, length=16)
    backend.train_step(batch, num_tokens=int(batch["response_mask"].sum()), loss_cfg=LossConfig(), step=1)
    return {"breaks": sum(counters["graph_break"].values()), "graphs": counters["stats"]["unique_graphs"]}


def test_a_compiled_dense_layer_is_one_graph_without_breaks() -> None:
    counts = run_ranks(_counts)[0]
    assert counts == {"breaks": 0, "graphs": 1}


def _hybrid(rank: int, port: int, opaque: bool = False) -> dict:
    from torch._dynamo.utils import counters

    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.backends.megatron import shims
    from rl.backends.megatron.compile import compile_layers
    from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.models import build_model

    one_gloo_rank(port)
    cfg = ModelConfig(family="qwen3_5", config={"layer_types": ["linear_attention", "full_attention"],
                                                "num_hidden_layers": 2})
    weights = build_model(cfg, vocab_size=VOCAB, seed=0).state_dict()
    batch = train_batch(vocab=VOCAB, seed=1, length=16)
    losses, layers = [], None
    for compiled in (False, True):  # the eager run: the torch stand-ins, no custom ops
        shims.OPAQUE_GDN_OPS = compiled and opaque
        backend = get_backend("megatron")(
            model=cfg, vocab_size=VOCAB, seed=0, weights=weights,
            policy=PolicyConfig(micro_batch_size=2, parallel=ParallelConfig(tp=1, ep=1, cp=1, pp=1, sp=False),
                                optimizer=OptimizerConfig(lr=1e-5, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8,
                                                          grad_clip=1.0)))
        if compiled:
            module = backend.gpt
            while hasattr(module, "module"):
                module = module.module
            counters.clear()
            compile_layers(module, compiler=lambda fn: torch.compile(fn, backend="eager"))
            layers = module.decoder.layers
        metrics = backend.train_step(batch, num_tokens=int(batch["response_mask"].sum()), loss_cfg=LossConfig(), step=1)
        losses.append(metrics["loss"])
    linear, full = layers
    compiled = {name: hasattr(getattr(part, "forward"), "_torchdynamo_orig_callable")
                for name, part in [("linear", linear), ("linear.in_proj", linear.self_attention.in_proj),
                                   ("linear.out_proj", linear.self_attention.out_proj),
                                   ("full", full)]}
    compiled["linear._forward_mlp"] = hasattr(linear._forward_mlp, "_torchdynamo_orig_callable")
    return {"breaks": sum(counters["graph_break"].values()), "why": dict(counters["graph_break"]),
            "graphs": counters["stats"]["unique_graphs"],
            "compiled": compiled, "losses": losses}


def test_a_gated_delta_net_layer_compiles_around_its_recurrence() -> None:
    """The hybrid layout's linear-attention layer runs eagerly, its projections, input norm and MLP
    half compiled (whole, it was slower than eager on the H200); the attention layer compiles whole.
    No graph breaks, and the compiled step's loss equals the eager one's."""
    out = run_ranks(_hybrid)[0]
    assert out["compiled"] == {"linear": False, "linear.in_proj": True, "linear.out_proj": True,
                               "full": True, "linear._forward_mlp": True}
    assert out["breaks"] == 0
    assert out["losses"][0] == out["losses"][1]


def test_with_its_kernels_as_custom_ops_a_gated_delta_net_layer_is_one_graph() -> None:
    """`shims.OPAQUE_GDN_OPS`: conv, L2 norm and the gated delta rule are opaque custom ops
    (rl.backends.megatron.fla_ops), so the linear-attention layer compiles whole: one graph per
    layer, no break, the same loss as the eager stand-ins."""
    out = run_ranks(functools.partial(_hybrid, opaque=True))[0]
    assert out["compiled"] == {"linear": True, "linear.in_proj": False, "linear.out_proj": False,
                               "full": True, "linear._forward_mlp": False}
    assert out["breaks"] == 0, out["why"]
    assert out["graphs"] == 2
    assert out["losses"][1] == pytest.approx(out["losses"][0], rel=1e-6)
