"""The gated-delta-net decode step (rl/generation/gdn_decode.py) computes transformers' recurrence.

Three levels: the step's torch arithmetic against transformers' own `torch_recurrent_gated_delta_rule`
(CPU, always); the Triton kernel against that arithmetic (a GPU, or the CPU under
TRITON_INTERPRET=1; skipped elsewhere); and whole models that decode with the new layer forward,
the same tokens and log-probs as transformers' forward, the conv and recurrent states updated in
place, through dynamo's tracing as the graphs mode compiles the step.
"""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import EOS, PAD, text_model

from rl.config import ModelConfig
from rl.generation import row_seeds
from rl.generation.gdn_decode import (
    conv_step_reference,
    gdn_conv_step,
    gdn_decode_step,
    gdn_step_reference,
    use_gdn_decode,
)
from rl.generation.sampler import _cache_kwarg
from rl.generation.static_decode import StaticDecoder
from rl.models import build_model

torch.set_num_threads(1)


def _inputs(batch: int, key_heads: int, value_heads: int, dim: int, dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    mixed = torch.randn(batch, (2 * key_heads + value_heads) * dim, generator=g).to(dtype)
    a, b = (torch.randn(batch, value_heads, generator=g).to(dtype) * 3 for _ in range(2))
    a_log = torch.rand(value_heads, generator=g).mul(4).log()
    dt_bias = torch.randn(value_heads, generator=g).to(dtype)
    state = torch.randn(batch, value_heads, dim, dim, generator=g) * 0.3
    return mixed, a, b, a_log, dt_bias, state


def _transformers_step(mixed, a, b, a_log, dt_bias, state, key_heads):
    """transformers' layer arithmetic around its torch recurrence; q/k repeated to the value heads
    here, as 5.17's layer does before the call (5.24's repeats inside it, a no-op then)."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    rule = getattr(m.torch_recurrent_gated_delta_rule, "__wrapped__", m.torch_recurrent_gated_delta_rule)
    batch, value_heads, dim, _ = state.shape
    key_dim = key_heads * dim
    q, k, v = mixed[:, :key_dim], mixed[:, key_dim:2 * key_dim], mixed[:, 2 * key_dim:]
    beta = b.sigmoid()
    g = -a_log.float().exp() * torch.nn.functional.softplus(a.float() + dt_bias)
    ratio = value_heads // key_heads
    q, k = (x.reshape(batch, 1, key_heads, dim).repeat_interleave(ratio, dim=2) for x in (q, k))
    out, new_state = rule(q, k,
                          v.reshape(batch, 1, value_heads, dim), g=g[:, None], beta=beta[:, None],
                          initial_state=state.clone(), output_final_state=True, use_qk_l2norm_in_kernel=True)
    return out, new_state


@pytest.mark.parametrize("key_heads,value_heads", [(2, 2), (2, 4), (1, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_torch_step_is_transformers_recurrence(key_heads: int, value_heads: int, dtype) -> None:
    inputs = _inputs(3, key_heads, value_heads, 32, dtype)
    want_out, want_state = _transformers_step(*inputs, key_heads)
    state = inputs[5].clone()
    got = gdn_step_reference(*inputs[:5], state, key_heads)
    assert got.shape == want_out.shape == (3, 1, value_heads, 32) and got.dtype == dtype
    torch.testing.assert_close(state, want_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.float(), want_out.float(), rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-2)
    assert (state - inputs[5]).abs().max() > 1e-2  # it did move the state


@pytest.mark.parametrize("key_heads,value_heads,dim", [(2, 2, 16), (2, 4, 64), (1, 4, 128)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_kernel_is_the_torch_step(triton_device: str, key_heads: int, value_heads: int, dim: int, dtype) -> None:
    inputs = [x.to(triton_device) for x in _inputs(5, key_heads, value_heads, dim, dtype, seed=dim)]
    want_state = inputs[5].clone()
    want = gdn_step_reference(*inputs[:5], want_state, key_heads)
    state = inputs[5].clone()
    got = gdn_decode_step(*inputs[:5], state, key_heads)
    assert got.shape == want.shape and got.dtype == dtype
    torch.testing.assert_close(state, want_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=2e-5 if dtype == torch.float32 else 1e-2)


def test_the_kernel_reads_strided_inputs(triton_device: str) -> None:
    """a and b are column slices of the stacked product's output, as the layer passes them."""
    mixed, a, b, a_log, dt_bias, state = (x.to(triton_device) for x in _inputs(4, 2, 4, 32, torch.float32))
    wide = torch.cat([mixed, b, a], dim=1)
    mixed_view, b_view, a_view = wide.split([mixed.shape[1], 4, 4], dim=1)
    want_state = state.clone()
    want = gdn_step_reference(mixed, a, b, a_log, dt_bias, want_state, 2)
    got = gdn_decode_step(mixed_view, a_view, b_view, a_log, dt_bias, state, 2)
    torch.testing.assert_close(got, want, rtol=0, atol=2e-5)
    torch.testing.assert_close(state, want_state, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_conv_kernel_is_the_torch_conv(triton_device: str, bias: bool, dtype) -> None:
    """200 channels (a partial block of 128), a window of 4, x a column slice of a wider product."""
    g = torch.Generator().manual_seed(5)
    wide = torch.randn(3, 260, generator=g).to(dtype)
    x = wide[:, 30:230]
    state = torch.randn(3, 200, 4, generator=g).to(dtype)
    weight = torch.randn(200, 4, generator=g).to(dtype)
    b = torch.randn(200, generator=g).to(dtype) if bias else None
    x, state, weight, wide = (t.to(triton_device) for t in (x, state, weight, wide))
    b = b.to(triton_device) if bias else None
    want_state = state.clone()
    want = conv_step_reference(x, want_state, weight, b, "silu")
    got = gdn_conv_step(x, state, weight, b, "silu")
    assert torch.equal(state, want_state)  # the window slid: copies, exact
    assert torch.equal(state[:, :, -1], x.to(dtype)) and got.shape == (3, 200) and got.dtype == dtype
    tolerance = dict(rtol=0, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)  # 2 bf16 steps
    torch.testing.assert_close(got.float(), want.float(), **tolerance)


def _hybrid(family: str = "qwen3_5") -> torch.nn.Module:
    """Three gated-delta-net layers and one attention layer, 2 q/k heads for 4 value heads."""
    config = {"layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_hidden_layers": 4,
              "linear_num_key_heads": 2, "linear_num_value_heads": 4}
    m = build_model(ModelConfig(family=family, config=config), vocab_size=52, seed=0)
    with torch.no_grad():
        m.lm_head.weight[EOS] *= 25
    return m


def _sample(model, compiled: list | None = None):
    """`compiled`: the decode step through dynamo (fullgraph), the traced graphs' call targets appended."""
    ids = torch.randint(4, 40, (4, 9), generator=torch.Generator().manual_seed(1))
    decoder = StaticDecoder(model, use_graphs=False)
    if compiled is not None:
        def backend(graph: torch.fx.GraphModule, inputs):  # dynamo's "eager", recording the graph's calls
            compiled.extend(node.target for node in graph.graph.nodes)
            return graph.forward

        decoder.decode_step = torch.compile(decoder._step, dynamic=False, fullgraph=True, backend=backend)
    return decoder.generate(ids, max_new_tokens=10, temperature=1.0, eos_token_id=EOS, pad_token_id=PAD,
                            seeds=row_seeds(7, 4), prompt_lengths=torch.tensor([9, 3, 6, 1]))


@pytest.mark.parametrize("conv_kernel", [False, True])
@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_a_model_decodes_the_same_with_the_step(family: str, conv_kernel: bool) -> None:
    model = _hybrid(family) if family == "qwen3_5" else text_model(family)
    want = _sample(model)
    stepped = copy.deepcopy(model)
    layers = sum(t == "linear_attention" for t in stepped.config.layer_types)
    assert use_gdn_decode(stepped, conv_kernel=conv_kernel) == layers
    assert {k: v.shape for k, v in stepped.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    got = _sample(stepped)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.attention_mask, want.attention_mask)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_the_step_traces_as_one_graph() -> None:
    """As the graphs mode compiles it (fullgraph: the op is one node, no break, no host sync)."""
    model = _hybrid()
    want = _sample(model)
    stepped = copy.deepcopy(model)
    use_gdn_decode(stepped, conv_kernel=True)
    targets = []
    got = _sample(stepped, compiled=targets)
    assert torch.ops.rl.gdn_decode_step.default in targets and torch.ops.rl.gdn_conv_step.default in targets
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


@torch.no_grad()
def test_the_layer_updates_the_cache_in_place() -> None:
    """The conv window and the recurrent state advance in the cache's own tensors (the captured
    step replays on fixed addresses), as transformers' forward advances them."""
    from transformers import StaticCache

    stock, stepped = _hybrid(), _hybrid()
    use_gdn_decode(stepped, conv_kernel=True)
    ids = torch.randint(4, 40, (2, 6), generator=torch.Generator().manual_seed(2))
    states = []
    for model in (stock, stepped):
        cache = StaticCache(config=model.config, max_cache_len=16)
        kwarg = {_cache_kwarg(model): cache}
        model(ids, use_cache=True, **kwarg)
        layer = cache.layers[0]
        conv, rec = layer.conv_states[0], layer.recurrent_states[0]
        addresses = conv.data_ptr(), rec.data_ptr()
        before = rec.clone()
        logits = model(ids[:, :1], use_cache=True, **kwarg).logits
        assert (conv.data_ptr(), rec.data_ptr()) == addresses and (rec - before).abs().max() > 0
        states.append((logits, conv.clone(), rec.clone()))
    for want, got in zip(*states):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


@torch.no_grad()
def test_a_refit_in_place_reaches_the_stacked_input_weights() -> None:
    old, new = _hybrid(), _hybrid()
    for p in new.parameters():
        p.mul_(1.5)
    stepped = copy.deepcopy(old)
    use_gdn_decode(stepped)
    stepped.load_state_dict(new.state_dict())
    layer = stepped.model.layers[0].linear_attn
    torch.testing.assert_close(layer.fused_in_proj[: layer.in_proj_qkv.weight.shape[0]],
                               new.model.layers[0].linear_attn.in_proj_qkv.weight, rtol=0, atol=0)
    assert use_gdn_decode(stepped) == 0  # a second call changes nothing
