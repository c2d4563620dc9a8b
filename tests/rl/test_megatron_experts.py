"""GroupedExperts (two stacked parameters, two grouped GEMMs) against megatron's SequentialMLP.

One-rank gloo process on the CPU, the tiny MoE twin (4 experts, top-2):
* the module: GroupedExperts, grouped and looped, against a SequentialMLP (one MLP per expert, the
  old layout) holding the same weights: outputs and the gradients of the input and of every
  expert weight are equal bit for bit (fp32);
* the backend: a MoE layer has two expert parameters, and log-probs, two optimizer steps'
  losses and grad norms, and the weights after them agree (fp32, 1e-6) between the grouped path
  and the loop, and the grouped path is the one that ran (two `torch._grouped_mm` per MoE layer
  and forward); a run resumed from its checkpoint after step 1 ends bit for bit where the
  uninterrupted run does.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from rank_processes import one_gloo_rank, run_ranks
from train_batches import train_batch

from rl.config import ModelConfig

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

VOCAB, LAYERS = 32, 2
pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=30)]  # the file, measured on 2 shared cores
CFG = ModelConfig(family="qwen3_5_moe", config={"layer_types": ["full_attention"] * LAYERS,
                                                "num_hidden_layers": LAYERS, "router_aux_loss_coef": 0.0})


def _batch() -> dict[str, torch.Tensor]:
    return train_batch(vocab=VOCAB, seed=3)


def _backend():
    from rl.backends import get_backend
    from rl.config import OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.models import build_model

    return get_backend("megatron")(
        model=CFG, vocab_size=VOCAB, seed=0,
        weights=build_model(CFG, vocab_size=VOCAB, seed=0).state_dict(),
        policy=PolicyConfig(micro_batch_size=4,  # one forward per call
                            parallel=ParallelConfig(tp=1, ep=1, cp=1, pp=1, sp=False),
                            optimizer=OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8,
                                                      grad_clip=1.0)))


def _train(grouped: bool) -> dict:
    from rl.algorithms.loss import LossConfig

    calls = []
    real = torch._grouped_mm

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    backend = _backend()
    torch._grouped_mm = counted
    try:
        with _loop_only(not grouped):
            batch = _batch()
            out = {"expert_params": [n for n, _ in backend.gpt.named_parameters() if ".mlp.experts." in n],
                   "lp0": backend.logprobs(batch["input_ids"], batch["attention_mask"])}
            out["calls_per_forward"] = len(calls)
            num_tokens = int(batch["response_mask"].sum())
            out["metrics"] = [backend.train_step(batch, num_tokens=num_tokens, loss_cfg=LossConfig(), step=1)]
            saved = backend.state_dict(), backend.optimizer_state()
            out["metrics"].append(backend.train_step(batch, num_tokens=num_tokens, loss_cfg=LossConfig(), step=2))
            out["lp1"] = backend.logprobs(batch["input_ids"], batch["attention_mask"])
            out["weights"] = backend.state_dict()
            if grouped:  # the checkpoint after step 1 (HF weights, optimizer state), then step 2
                resumed = _backend()
                resumed.load_state(policy=saved[0], optimizer=saved[1])
                resumed.train_step(batch, num_tokens=num_tokens, loss_cfg=LossConfig(), step=2)
                out["resumed"] = resumed.state_dict()
    finally:
        torch._grouped_mm = real
    return out


def _loop_only(on: bool):
    """`GroupedExperts` on its loop (`grouped_mm_supported` false) while the context is open."""
    import contextlib

    from rl.backends.megatron import experts as megatron_experts

    @contextlib.contextmanager
    def patched():
        real = megatron_experts.grouped_mm_supported
        if on:
            megatron_experts.grouped_mm_supported = lambda *args: False
        try:
            yield
        finally:
            megatron_experts.grouped_mm_supported = real

    return patched()


def _against_sequential_mlp(backend) -> dict:
    """Outputs and gradients of GroupedExperts (grouped, looped) and of a SequentialMLP holding the
    same weights, on 10 rows routed [3, 0, 5, 2] to the 4 experts."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_submodules
    from megatron.core.process_groups_config import ProcessGroupCollection

    from rl.backends.megatron.experts import GroupedExperts

    trained = next(m for m in backend.gpt.modules() if isinstance(m, GroupedExperts))  # its grads go to DDP
    grouped = GroupedExperts(4, backend.config)
    spec = get_gpt_layer_local_submodules(num_experts=4, moe_grouped_gemm=False, qk_layernorm=True).mlp
    sequential = spec.keywords["submodules"].experts(4, backend.config,
                                                     pg_collection=ProcessGroupCollection.use_mpu_process_groups())
    with torch.no_grad():
        grouped.fc1.copy_(trained.fc1)
        grouped.fc2.copy_(trained.fc2)
        for e, mlp in enumerate(sequential.local_experts):
            mlp.linear_fc1.weight.copy_(trained.fc1[e])
            mlp.linear_fc2.weight.copy_(trained.fc2[e])
    g = torch.Generator().manual_seed(1)
    x, counts = torch.randn(10, grouped.fc1.shape[2], generator=g), torch.tensor([3, 0, 5, 2])
    probs, dy = torch.rand(10, generator=g), torch.randn(10, grouped.fc1.shape[2], generator=g)

    def run(module, weights):
        xi = x.clone().requires_grad_()
        for w in weights:
            w.grad = None
        out, _ = module(xi, counts, probs)
        out.backward(dy)
        return out.detach(), xi.grad, [w.grad.clone() for w in weights]

    seq = run(sequential, [p for mlp in sequential.local_experts for p in (mlp.linear_fc1.weight,
                                                                           mlp.linear_fc2.weight)])
    seq = (seq[0], seq[1], [torch.stack(seq[2][0::2]), torch.stack(seq[2][1::2])])
    out = {"sequential": seq, "grouped": run(grouped, [grouped.fc1, grouped.fc2])}
    with _loop_only(True):
        out["looped"] = run(grouped, [grouped.fc1, grouped.fc2])
    return out


def _all(rank: int, port: int) -> dict:
    one_gloo_rank(port)
    out = {"grouped": _train(True), "looped": _train(False)}
    out["module"] = _against_sequential_mlp(_backend())
    return out


@pytest.fixture(scope="module")
def result() -> dict:
    return run_ranks(_all)[0]


def test_a_moe_layer_has_two_expert_parameters(result: dict) -> None:
    names = result["grouped"]["expert_params"]
    assert names == [f"decoder.layers.{i}.mlp.experts.{w}" for i in range(LAYERS) for w in ("fc1", "fc2")]


def test_grouped_path_runs_two_gemms_per_moe_layer(result: dict) -> None:
    assert result["grouped"]["calls_per_forward"] == 2 * LAYERS
    assert result["looped"]["calls_per_forward"] == 0


@pytest.mark.parametrize("path", ["grouped", "looped"])
def test_stacked_experts_match_one_mlp_per_expert(result: dict, path: str) -> None:
    """The old layout (megatron's SequentialMLP) and the stacked one: the same output, input
    gradient and expert weight gradients, bit for bit (fp32 on the CPU)."""
    want, got = result["module"]["sequential"], result["module"][path]
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    for a, b in zip(got[2], want[2]):
        assert torch.equal(a, b)
    assert want[2][0][1].abs().max() == 0, "expert 1 got no rows, so no gradient"
    assert want[2][0][0].abs().max() > 0


def test_grouped_experts_match_the_loop_through_training(result: dict) -> None:
    grouped, looped = result["grouped"], result["looped"]
    for key in ("lp0", "lp1"):
        assert (grouped[key] - looped[key]).abs().max() <= 1e-6, key
    assert not torch.equal(grouped["lp0"], grouped["lp1"]), "two optimizer steps left the policy unchanged"
    for a, b in zip(grouped["metrics"], looped["metrics"]):
        for key in ("loss", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-8), key
    assert set(grouped["weights"]) == set(looped["weights"])
    assert max((grouped["weights"][k] - looped["weights"][k]).abs().max().item()
               for k in grouped["weights"]) <= 1e-6


def test_resume_from_a_checkpoint_is_bit_exact(result: dict) -> None:
    """Step 2 from the checkpoint written after step 1 ends at the weights of the uninterrupted run."""
    weights, resumed = result["grouped"]["weights"], result["grouped"]["resumed"]
    assert set(resumed) == set(weights)
    assert all(torch.equal(resumed[k], weights[k]) for k in weights)


def test_supported_widths_follow_the_16_byte_stride_rule() -> None:
    from rl.backends.megatron.experts import grouped_mm_supported

    x32, x16 = torch.zeros(2, 8), torch.zeros(2, 8, dtype=torch.bfloat16)
    assert grouped_mm_supported(x32, 8, 12)
    assert not grouped_mm_supported(x32, 8, 6)  # 24 bytes
    assert grouped_mm_supported(x16, 8, 16)
    assert not grouped_mm_supported(x16, 8, 12)  # 24 bytes


def test_grouped_glu_mlp_is_one_graph_and_matches_the_loop() -> None:
    """What `policy.compile` gets on a GPU (bf16): the grouped experts trace as one graph with no
    host sync, and equal the per-expert loop."""
    import torch.nn.functional as F

    from rl.backends.megatron.experts import grouped_glu_mlp, looped_glu_mlp

    g = torch.Generator().manual_seed(0)
    counts = torch.tensor([3, 0, 5, 2])
    x = torch.randn(10, 16, generator=g).bfloat16()
    fc1 = torch.randn(4, 16, 16, generator=g).bfloat16()
    fc2 = torch.randn(4, 16, 8, generator=g).bfloat16()
    probs = torch.rand(10, generator=g)
    compiled = torch.compile(grouped_glu_mlp, backend="eager", fullgraph=True)
    out = compiled(x, fc1, fc2, counts, probs, F.silu)
    assert torch.allclose(out.float(), looped_glu_mlp(x, fc1, fc2, counts, probs, F.silu).float(),
                          rtol=2e-2, atol=2e-2)
