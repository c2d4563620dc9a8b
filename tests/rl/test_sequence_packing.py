"""`policy.sequence_packing` changes the layout, not the numbers: packed log-probs equal the
unpacked ones, and a torch-backend train step with packing gives the unpacked loss and gradients
(the megatron backend refuses it, here and before launch: tests/rl/test_preflight.py).

fp32 on the CPU, tolerance 1e-5 absolute on log-probs and gradients (measured 2026-12: at most
2.4e-7 on log-probs and 1.5e-8 on gradients, float rounding of differently shaped matmuls).
Rows have random lengths up to 80 tokens, so sequences cross the gated-delta-net's 64-token
chunks both packed and unpacked, and several sequences share a packed row at non-zero offsets
(asserted, so the equality is not trivial). The controls show each piece of isolation matters:
without the block-diagonal mask, or with the gated-delta-net layers run across the packed row,
the same rows give other log-probs; rotary attention is relative, so the positions are read off
the rotary embedding itself.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rl.algorithms.loss import LossConfig
from rl.backends.torch import TorchBackend
from rl.config import (
    ModelConfig,
    OptimizerConfig,
    ParallelConfig,
    PolicyConfig,
    SequencePackingConfig,
    TaskConfig,
    TeacherConfig,
)
from rl.envs import make_env
from rl.models import ImageLayout, build_model, encode_prompts, token_logprobs
from rl.models.packed_forward import packed_token_logprobs
from rl.models.packing import packed_groups
from rl.tokenizer import load_tokenizer

pytestmark = pytest.mark.slow(seconds=20)  # the file, measured on 2 shared cores

TOL = 1e-5
VOCAB = 32
HYBRID = {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}
MODELS = {
    "llama": TeacherConfig(family="llama"),
    "qwen3_5_all_attention": ModelConfig(family="qwen3_5",
                                         config={"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2}),
    "qwen3_5_hybrid": ModelConfig(family="qwen3_5", config=HYBRID),
    "qwen3_5_moe_hybrid": ModelConfig(family="qwen3_5_moe", config={**HYBRID, "router_aux_loss_coef": 0.0}),
}


def _rows(seed: int, rows: int = 7, width: int = 80) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, width + 1, (rows,), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return torch.randint(0, VOCAB, (rows, width), generator=g) * mask, mask


def _packed(model, ids, mask, *, budget: int, per_forward: int, **images) -> tuple[torch.Tensor, list]:
    out = torch.zeros(ids.shape)
    groups = packed_groups(mask.sum(1).tolist(), width=ids.shape[1], budget=budget, rows_per_forward=per_forward)
    for rows, packing in groups:
        out[rows] = packed_token_logprobs(model, ids[rows], mask[rows], packing,
                                          **{k: v[rows] for k, v in images.items()})
    return out, groups


def _shares_rows(groups: list) -> bool:
    """Some packed row holds a sequence that starts past its first token."""
    return any(bool(((p.positions == 0) & (p.sequence >= 0))[:, 1:].any()) for _, p in groups)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_packed_logprobs_equal_unpacked(name: str) -> None:
    model = build_model(MODELS[name], vocab_size=VOCAB, seed=0)
    ids, mask = _rows(seed=1)
    with torch.no_grad():
        plain = token_logprobs(model, ids, mask)
        packed, groups = _packed(model, ids, mask, budget=100, per_forward=1)
    assert _shares_rows(groups) and len(groups) > 1
    assert (packed - plain).abs().max() <= TOL
    assert torch.equal(packed == 0, plain == 0)  # the same places hold no log-prob (first token, padding)


@pytest.mark.parametrize("name", ["llama", "qwen3_5_hybrid"])
def test_rotary_positions_restart_at_every_sequence(name: str) -> None:
    """Rotary attention depends on relative positions only, so log-probs cannot show offset
    positions; the rotary embedding is asked what it was given."""
    model = build_model(MODELS[name], vocab_size=VOCAB, seed=0)
    ids, mask = _rows(seed=1)
    ((rows, packing), *_) = packed_groups(mask.sum(1).tolist(), width=80, budget=100, rows_per_forward=2)
    seen = []
    model.model.rotary_emb.register_forward_hook(
        lambda module, args, kwargs, out: seen.append(kwargs.get("position_ids", args[-1])), with_kwargs=True)
    with torch.no_grad():
        packed_token_logprobs(model, ids[rows], mask[rows], packing)
    (positions,) = seen
    assert _shares_rows([(rows, packing)])
    for axis in positions.reshape(-1, *packing.positions.shape):  # qwen3_5: the (t, h, w) axes of text
        assert torch.equal(axis, packing.positions)


def test_without_isolation_the_same_rows_give_other_logprobs() -> None:
    """The controls: the packed rows through the model with only the per-sequence positions, and
    with the block-diagonal mask but the gated-delta-net layers across the whole packed row."""
    ids, mask = _rows(seed=1)
    ((rows, packing), *_) = packed_groups(mask.sum(1).tolist(), width=80, budget=160, rows_per_forward=2)
    packed_ids = packing.pack(ids[rows])
    scored = packing.scored()
    causal = torch.ones(packing.packed_shape[1], packing.packed_shape[1], dtype=torch.bool).tril()
    for name, mask4d in (("qwen3_5_all_attention", causal.expand(len(packed_ids), 1, -1, -1)),
                         ("qwen3_5_hybrid", packing.attention_mask())):
        model = build_model(MODELS[name], vocab_size=VOCAB, seed=0)
        with torch.no_grad():
            right = packed_token_logprobs(model, ids[rows], mask[rows], packing)
            logits = model(input_ids=packed_ids, position_ids=packing.positions, attention_mask=mask4d,
                           use_cache=False).logits
        wrong = torch.log_softmax(logits[:, :-1], -1).gather(-1, packed_ids[:, 1:, None])[..., 0]
        wrong = packing.unpack(torch.cat([wrong.new_zeros(len(wrong), 1), wrong], 1) * scored)
        assert (wrong - right).abs().max() > 1e-3, name


def test_packed_vision_logprobs_equal_unpacked() -> None:
    """The VLM: each row an image then text; packed, its multimodal rotary positions are its own
    and the images go in in packed order."""
    tok = load_tokenizer("arith_vl")
    env = make_env(TaskConfig(name="counting", params={"image_size": 16, "square_size": 4, "max_count": 6}))
    model = build_model(ModelConfig(family="qwen3_5", modality="vision", tokenizer="arith_vl", config=HYBRID),
                        vocab_size=len(tok), seed=0)
    prompts = encode_prompts(tok, env.sample(6, seed=2, step=0), ImageLayout.of(model))
    g = torch.Generator().manual_seed(3)
    prompt = prompts.input_ids.shape[1]
    text = torch.randint(4, tok.convert_tokens_to_ids("<|vision_start|>"), (6, 30), generator=g)  # no vision tokens
    ids = torch.cat([prompts.input_ids, text], 1)
    lengths = prompt + torch.randint(1, 31, (6,), generator=g)
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    ids = ids * mask
    with torch.no_grad():
        plain = token_logprobs(model, ids, mask, **prompts.columns())
        packed, groups = _packed(model, ids, mask, budget=3 * ids.shape[1] // 2, per_forward=2, **prompts.columns())
    assert _shares_rows(groups) and any(p.order != tuple(sorted(p.order)) for _, p in groups)  # images reordered
    assert (packed - plain).abs().max() <= TOL


def _backend(model: ModelConfig, vocab: int, packing: SequencePackingConfig, checkpointing: bool) -> TorchBackend:
    policy = PolicyConfig(micro_batch_size=2, optimizer=OptimizerConfig(lr=1e-3, grad_clip=1.0),
                          sequence_packing=packing, activation_checkpointing=checkpointing)
    return TorchBackend(model=model, policy=policy, vocab_size=vocab, seed=0,
                        weights=build_model(model, vocab_size=vocab, seed=0).state_dict())


def _train_batch(ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows as the generator hands them back: prompts of mixed lengths (1 .. row length - 1),
    each followed by its response, then pad."""
    g = torch.Generator().manual_seed(5)
    lengths = mask.sum(1)
    prompts = 1 + (torch.rand(len(ids), generator=g) * (lengths - 1)).long()
    assert len(set(prompts.tolist())) > 1
    response = mask * (torch.arange(ids.shape[1])[None, :] >= prompts[:, None]).long()
    base = -torch.rand(ids.shape, generator=g)
    return dict(input_ids=ids, attention_mask=mask, response_mask=response, gen_logprobs=base,
                prev_logprobs=base, ref_logprobs=base, advantages=torch.randn(len(ids), generator=g),
                sample_mask=torch.tensor([1.0, 1, 0, 1, 1, 1, 1]))


@pytest.mark.parametrize("budget, checkpointing", [(None, False), (120, True)])
def test_a_packed_train_step_gives_the_unpacked_loss_and_gradients(budget: int | None, checkpointing: bool) -> None:
    """The hybrid MoE twin (gated-delta-net, attention, experts), KL on, one row masked, rows of
    mixed prompt and response lengths; with a budget, also under activation checkpointing (the
    layers' hooks run again in the recompute)."""
    cfg = MODELS["qwen3_5_moe_hybrid"]
    ids, mask = _rows(seed=4)
    batch = _train_batch(ids, mask)
    out = {}
    for packed in (False, True):
        packing = SequencePackingConfig(enabled=packed, max_tokens_per_row=budget if packed else None)
        backend = _backend(cfg, VOCAB, packing, checkpointing)
        own = backend.logprobs(ids, mask)
        metrics = backend.train_step({**batch, "prev_logprobs": own}, num_tokens=int(batch["response_mask"].sum()),
                                     loss_cfg=LossConfig(kl_beta=0.1), step=1)
        grads = torch.cat([p.grad.reshape(-1) for p in backend.params])  # this step's, before its update
        out[packed] = own, metrics, grads
    (lp, m, g), (lp_p, m_p, g_p) = out[False], out[True]
    assert (lp - lp_p).abs().max() <= TOL
    assert m.keys() == m_p.keys()
    for key in m:
        assert m_p[key] == pytest.approx(m[key], rel=1e-5, abs=1e-7), key
    assert m["loss"] != 0 and g.abs().max() > 1e-3
    assert (g - g_p).abs().max() <= TOL


def test_a_backend_with_a_short_budget_refuses_the_row_naming_the_key() -> None:
    packing = SequencePackingConfig(enabled=True, max_tokens_per_row=10)
    backend = _backend(MODELS["qwen3_5_all_attention"], VOCAB, packing, False)
    ids, mask = _rows(seed=1)
    with pytest.raises(ValueError, match=r"policy\.sequence_packing\.max_tokens_per_row: row \d+ has \d+ tokens"):
        backend.logprobs(ids, mask)


def test_the_megatron_backend_refuses_packing_a_vlm_before_building_anything() -> None:
    if importlib.util.find_spec("megatron") is None:
        pytest.skip("megatron-core not installed")
    from rl.backends import get_backend
    from rl.backends.megatron.rules import packing_refusals

    with pytest.raises(ValueError) as info:
        get_backend("megatron")(model=ModelConfig(modality="vision"), vocab_size=VOCAB, weights=None, seed=0,
                                policy=PolicyConfig(micro_batch_size=1, parallel=ParallelConfig(cp=2),
                                                    sequence_packing=SequencePackingConfig(enabled=True)))
    assert str(info.value) == packing_refusals(cp=2, pp=1, vision=True)[0]
