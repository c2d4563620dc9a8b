"""GroupedExperts (two grouped GEMMs for all routed experts) against megatron's SequentialMLP.

One-rank gloo process on the CPU, the tiny MoE twin (4 experts, top-2): log-probs, two optimizer
steps' losses and grad norms, and the weights after them agree (fp32, 1e-6), and the grouped
path is the one that ran (two `torch._grouped_mm` calls per MoE layer and forward).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from rank_processes import one_gloo_rank, run_ranks

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

VOCAB, LAYERS = 32, 2
pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=30)]  # the file, measured on 2 shared cores


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (4, 12), generator=g)
    mask = torch.ones_like(ids)
    response = mask.clone()
    response[:, :4] = 0
    base = -torch.rand(4, 12, generator=g)
    return dict(input_ids=ids, attention_mask=mask, response_mask=response, gen_logprobs=base,
                prev_logprobs=base, ref_logprobs=base, advantages=torch.randn(4, generator=g),
                sample_mask=torch.ones(4))


def _train(grouped: bool) -> dict:
    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.backends.megatron import experts as megatron_experts
    from rl.config import OptimizerConfig, ParallelConfig
    from rl.models import build_model

    SequentialMLP = megatron_experts.SequentialMLP

    calls = []
    real = torch._grouped_mm

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    cfg = {"family": "qwen3_5_moe", "config": {"layer_types": ["full_attention"] * LAYERS,
                                               "num_hidden_layers": LAYERS, "router_aux_loss_coef": 0.0}}
    backend = get_backend("megatron")(
        model_cfg=cfg, vocab_size=VOCAB, micro_batch_size=4, seed=0,  # one forward per call
        weights=build_model(cfg, vocab_size=VOCAB, seed=0).state_dict(),
        optimizer_cfg=OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0),
        parallel=ParallelConfig(tp=1, ep=1, cp=1, pp=1, sp=False))
    experts = [m for m in backend.gpt.modules() if isinstance(m, megatron_experts.GroupedExperts)]
    forward = megatron_experts.GroupedExperts.forward if grouped else SequentialMLP.forward
    torch._grouped_mm = counted
    try:
        for module in experts:
            module.forward = forward.__get__(module)
        batch = _batch()
        out = {"experts": len(experts), "lp0": backend.logprobs(batch["input_ids"], batch["attention_mask"])}
        out["calls_per_forward"] = len(calls)
        out["metrics"] = [backend.train_step(batch, num_tokens=int(batch["response_mask"].sum()),
                                             loss_cfg=LossConfig(), step=step) for step in (1, 2)]
        out["lp1"] = backend.logprobs(batch["input_ids"], batch["attention_mask"])
        out["weights"] = backend.state_dict()
    finally:
        torch._grouped_mm = real
    return out


def _both(rank: int, port: int) -> dict:
    one_gloo_rank(port)
    return {"grouped": _train(True), "sequential": _train(False)}


@pytest.fixture(scope="module")
def result() -> dict:
    return run_ranks(_both)[0]


def test_grouped_path_runs_two_gemms_per_moe_layer(result: dict) -> None:
    assert result["grouped"]["experts"] == LAYERS
    assert result["grouped"]["calls_per_forward"] == 2 * LAYERS
    assert result["sequential"]["calls_per_forward"] == 0


def test_grouped_experts_match_sequential_mlp(result: dict) -> None:
    grouped, sequential = result["grouped"], result["sequential"]
    for key in ("lp0", "lp1"):
        assert (grouped[key] - sequential[key]).abs().max() <= 1e-6, key
    assert not torch.equal(grouped["lp0"], grouped["lp1"]), "two optimizer steps left the policy unchanged"
    for a, b in zip(grouped["metrics"], sequential["metrics"]):
        for key in ("loss", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-8), key
    assert set(grouped["weights"]) == set(sequential["weights"])
    assert max((grouped["weights"][k] - sequential["weights"][k]).abs().max().item()
               for k in grouped["weights"]) <= 1e-6


def test_supported_widths_follow_the_16_byte_stride_rule() -> None:
    from rl.backends.megatron.experts import grouped_mm_supported

    x32, x16 = torch.zeros(2, 8), torch.zeros(2, 8, dtype=torch.bfloat16)
    assert grouped_mm_supported(x32, 8, 12)
    assert not grouped_mm_supported(x32, 8, 6)  # 24 bytes
    assert grouped_mm_supported(x16, 8, 16)
    assert not grouped_mm_supported(x16, 8, 12)  # 24 bytes


def test_grouped_glu_mlp_is_one_graph_and_matches_a_loop() -> None:
    """What `policy.compile` gets on a GPU (bf16): the grouped experts trace as one graph with no
    host sync, and equal a per-expert loop."""
    import torch.nn.functional as F

    from rl.backends.megatron.experts import grouped_glu_mlp

    g = torch.Generator().manual_seed(0)
    counts = torch.tensor([3, 0, 5, 2])
    x = torch.randn(10, 16, generator=g).bfloat16()
    fc1 = torch.randn(4, 16, 16, generator=g).bfloat16()
    fc2 = torch.randn(4, 16, 8, generator=g).bfloat16()
    probs = torch.rand(10, generator=g)
    compiled = torch.compile(grouped_glu_mlp, backend="eager", fullgraph=True)
    out = compiled(x, fc1, fc2, counts, probs, F.silu)
    rows, start = [], 0
    for e, n in enumerate(counts.tolist()):
        gate, linear = (x[start:start + n] @ fc1[e].T).chunk(2, dim=-1)
        rows.append(((F.silu(gate) * linear) * probs[start:start + n, None]).bfloat16() @ fc2[e].T)
        start += n
    assert torch.allclose(out.float(), torch.cat(rows).float(), rtol=2e-2, atol=2e-2)
