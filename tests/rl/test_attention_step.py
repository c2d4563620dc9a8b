"""The full-attention layer's one-token step (rl/generation/attention_step.py) is transformers' layer.

The kernel against transformers' own norm, rotary and cache write (query out; key and value in the
cache's column, every other column untouched), partial and full rotary, fp32 and bf16; the gate in
the attention's merge against the product after it; whole models that decode the same tokens and
log-probs with the step, through dynamo's tracing as the graphs mode compiles it. Needs Triton: a
GPU, or the CPU under TRITON_INTERPRET=1; elsewhere (CI) it skips, and the layer keeps the
fused-projections forward (the last test, which always runs).
"""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import static_sample, text_model, vision_model

from rl.generation.attention_step import attention_prep, use_attention_step
from rl.generation.decode_attention import use_grouped_decode_attention
from rl.generation.flash_decode import flash_decode
from rl.generation.fused_projections import fuse_projections

torch.set_num_threads(1)


def _transformers_prep(qkv, q_weight, k_weight, cos, sin, heads, kv_heads, dim, eps):
    """transformers' Qwen3.5 attention between its products and the cache: norms, rotary."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm, apply_rotary_pos_emb

    batch = qkv.shape[0]
    q_norm, k_norm = Qwen3_5RMSNorm(dim, eps), Qwen3_5RMSNorm(dim, eps)
    q_norm.weight.data, k_norm.weight.data = q_weight, k_weight
    q_gate, k, v = qkv.split([heads * 2 * dim, kv_heads * dim, kv_heads * dim], -1)
    q = q_gate.view(batch, 1, heads, 2 * dim)[..., :dim]
    q = q_norm(q).transpose(1, 2)
    k = k_norm(k.view(batch, 1, kv_heads, dim)).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos[:, None], sin[:, None])
    return q, k, v.view(batch, 1, kv_heads, dim).transpose(1, 2)


@pytest.mark.parametrize("heads,kv_heads,dim,rotary", [(4, 2, 16, 4), (16, 4, 128, 32), (8, 8, 64, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_kernel_is_transformers_norms_rotary_and_cache_write(triton_device: str, heads: int, kv_heads: int,
                                                                 dim: int, rotary: int, dtype) -> None:
    g = torch.Generator().manual_seed(dim + heads)
    batch, length, column = 3, 12, 7
    wide = torch.randn(batch, (2 * heads + 2 * kv_heads) * dim + 8, generator=g)  # a strided row, as a split's
    qkv = wide[:, :-8]
    q_weight, k_weight = (torch.randn(dim, generator=g) * 0.2 for _ in range(2))
    angles = torch.rand(batch, rotary // 2, generator=g) * 6
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    keys, values = (torch.randn(batch, kv_heads, length, dim, generator=g) for _ in range(2))
    want_q, want_k, want_v = _transformers_prep(*(x.to(dtype) for x in (qkv, q_weight, k_weight, cos, sin)),
                                                heads, kv_heads, dim, 1e-6)
    to = dict(device=triton_device, dtype=dtype)
    k_cache, v_cache = keys.to(**to), values.to(**to)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    got = attention_prep(qkv.to(**to), q_weight.to(**to), k_weight.to(**to), cos.to(**to), sin.to(**to), k_cache,
                         v_cache, torch.tensor(column, device=triton_device), 1e-6, heads)
    assert got.shape == (batch, heads, 1, dim) and got.dtype == dtype
    # bf16: transformers rounds each rotary term and their sum, the kernel the sum once: a few units in the last place
    tol = dict(rtol=0, atol=2e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got.cpu().float(), want_q.float(), **tol)
    torch.testing.assert_close(k_cache[:, :, column].cpu().float(), want_k[:, :, 0].float(), **tol)
    assert torch.equal(v_cache[:, :, column].cpu(), want_v[:, :, 0])
    others = torch.arange(length) != column
    assert torch.equal(k_cache[:, :, others], before_k[:, :, others])
    assert torch.equal(v_cache[:, :, others], before_v[:, :, others])


def test_the_op_traces_for_torch_compile(triton_device: str) -> None:
    g = torch.Generator().manual_seed(5)
    qkv = torch.randn(2, (2 * 4 + 2 * 2) * 16, generator=g)
    weights = [torch.randn(16, generator=g) for _ in range(2)]
    rotary = [torch.randn(2, 4, generator=g) for _ in range(2)]
    cache = [torch.randn(2, 2, 6, 16, generator=g) for _ in range(2)]
    args = [x.to(triton_device) for x in (qkv, *weights, *rotary, *cache, torch.tensor(3))]
    torch.library.opcheck(attention_prep, (*args, 1e-6, 4), test_utils=("test_schema", "test_faketensor"))


def test_the_gate_is_applied_in_the_merge(triton_device: str) -> None:
    g = torch.Generator().manual_seed(3)
    q, gate = torch.randn(2, 8, 1, 64, generator=g), torch.randn(2, 8, 128, generator=g)[..., 64:]
    k, v = (torch.randn(2, 2, 150, 64, generator=g) for _ in range(2))
    mask = (torch.arange(150) < torch.tensor([[150], [90]])).view(2, 1, 1, 150)
    q, gate, k, v, mask = (x.to(triton_device) for x in (q, gate, k, v, mask))
    want = flash_decode(q, k, v, mask, 0.125) * torch.sigmoid(gate)[:, None]
    torch.testing.assert_close(flash_decode(q, k, v, mask, 0.125, gate), want, rtol=0, atol=1e-6)


def _models(family: str, device: str):
    """The model with the worker's decode attention and stacked projections, and a copy with the step."""
    model = (vision_model()[0] if family == "vision" else text_model(family)).to(device)
    use_grouped_decode_attention(model, flash=True)
    fuse_projections(model)
    stepped = copy.deepcopy(model)
    return model, stepped


def _counted(monkeypatch: pytest.MonkeyPatch) -> list:
    """The step's kernel calls, counted."""
    import rl.generation.attention_step as attention_step

    calls, kernel = [], attention_step.attention_prep
    monkeypatch.setattr(attention_step, "attention_prep", lambda *a: calls.append(1) or kernel(*a))
    return calls


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe", "vision"])
def test_a_model_decodes_the_same_with_the_step(triton_device: str, family: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    model, stepped = _models(family, triton_device)
    layers = sum(t == "full_attention" for t in model.config.get_text_config().layer_types)
    assert use_attention_step(stepped) == layers and use_attention_step(stepped) == 0  # once a layer
    want = static_sample(model)
    calls = _counted(monkeypatch)
    got = static_sample(stepped)
    assert len(calls) == 10 * layers  # every decode step took it; the prompt did not
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.attention_mask, want.attention_mask)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_the_step_traces_as_one_graph(triton_device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the graphs mode compiles the step (fullgraph: the ops are nodes, no break, no host sync)."""
    from rl.generation.static_decode import StaticDecoder

    model, stepped = _models("qwen3_5", triton_device)
    use_attention_step(stepped)
    init = StaticDecoder.__init__

    targets = []

    def backend(graph: torch.fx.GraphModule, inputs):  # dynamo's "eager", recording the graph's calls
        targets.extend(node.target for node in graph.graph.nodes)
        return graph.forward

    def compiled(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.decode_step = torch.compile(self._step, dynamic=False, fullgraph=True, backend=backend)

    want = static_sample(model)
    monkeypatch.setattr(StaticDecoder, "__init__", compiled)
    got = static_sample(stepped)
    assert torch.ops.rl.attention_prep.default in targets and torch.ops.rl.flash_decode.default in targets
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_without_triton_the_layer_keeps_the_fused_projections_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Triton does not run (CI), the step's forward hands every call to the forward it wrapped."""
    import rl.generation.decode_attention as decode_attention

    monkeypatch.setattr(decode_attention, "triton_runs", lambda tensor: False)
    model, stepped = _models("qwen3_5", "cpu")
    use_attention_step(stepped)
    calls = []
    for module in stepped.modules():
        if hasattr(module, "projections_forward"):
            wrapped = module.projections_forward
            module.projections_forward = lambda *a, _w=wrapped, **k: calls.append(1) or _w(*a, **k)
    want, got = static_sample(model), static_sample(stepped)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.gen_logprobs, want.gen_logprobs)
    assert len(calls) == 11  # the prompt and the 10 steps' forwards, one attention layer


def test_one_increment_advances_every_layer_s_write_position(triton_device: str) -> None:
    """Two attention layers around a gated-delta-net one: the last stepped layer's multi-tensor add
    moves both positions, so both caches are written where transformers' own update writes them."""
    from rl.config import ModelConfig
    from rl.models import build_model

    config = {"layer_types": ["full_attention", "linear_attention", "full_attention"], "num_hidden_layers": 3}
    model = build_model(ModelConfig(family="qwen3_5", config=config), vocab_size=52, seed=0).to(triton_device)
    use_grouped_decode_attention(model, flash=True)
    fuse_projections(model)
    stepped = copy.deepcopy(model)
    assert use_attention_step(stepped, one_increment=True) == 2
    assert [m.step_increments for m in stepped.modules() if hasattr(m, "step_increments")] == [(), (0, 2)]
    want, got = static_sample(model), static_sample(stepped)
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


@pytest.mark.parametrize("one_increment", [False, True])
def test_the_write_bound_decodes_the_same(triton_device: str, one_increment: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`bound_by_write_position`: each stepped layer hands the kernel its cache's write position
    and the offset that makes it the count of written columns (1 where the position has not yet
    advanced: a layer before the last under one_increment), and the tokens stay the same."""
    import rl.generation.attention_step as attention_step
    from rl.config import ModelConfig
    from rl.generation.attention_step import bound_by_write_position
    from rl.models import build_model

    config = {"layer_types": ["full_attention", "linear_attention", "full_attention"], "num_hidden_layers": 3}
    model = build_model(ModelConfig(family="qwen3_5", config=config), vocab_size=52, seed=0).to(triton_device)
    use_grouped_decode_attention(model, flash=True)
    fuse_projections(model)
    stepped = copy.deepcopy(model)
    use_attention_step(stepped, one_increment=one_increment)
    assert bound_by_write_position(stepped) == 2
    ends, kernel = [], attention_step.flash_decode

    def recorded(*args, written=None, written_offset=0, **kwargs):
        ends.append(int(written) + written_offset)
        return kernel(*args, written=written, written_offset=written_offset, **kwargs)

    monkeypatch.setattr(attention_step, "flash_decode", recorded)
    want, got = static_sample(model), static_sample(stepped)
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5
    # the 9-column prompt, then each step's token written before its attention: 10, 11, ... both layers alike
    assert ends == [n for n in range(10, 10 + len(ends) // 2) for _ in range(2)] and len(ends) >= 18
