"""`policy.sequence_packing` on the megatron backend (rl/backends/megatron/packed.py), on CPU over
gloo in spawned processes (rank_processes.py).

In one process, the same weights as two backends, unpacked and packed, read log-probs and take
one train step on the same rows; the packed one must give the unpacked one's log-probs, loss,
metrics and gradients (each parameter's `main_grad` after the step). Rows have random lengths
and a packed row holds several of them (asserted on the plan). Twins: Qwen3.5 all-attention
("dense"), its hybrid layout (3 gated-delta-net layers, then attention) and the MoE hybrid; on
one rank, and on two the hybrid with TP 2 + sequence parallelism, the MoE with EP 2, the
hybrid on two pipeline stages, and the dense and hybrid twins with context parallelism 2 (packed
CP 2 against padded CP 2; padded CP 2 equals CP 1 in test_megatron_parallel.py).
Controls on the dense and hybrid twins: attention that only masks the future (not the other
sequences of its packed row), or gated-delta-net cuts only at packed rows, move the log-probs
by far more than the tolerance; with CP 2, so do attention causal over the whole row and the row
cut into 2cp chunks instead of each sequence. The CP layout itself is checked against the order
megatron's GatedDeltaNet all-to-all assumes. Tolerances (fp32): log-probs 1e-5 absolute, metrics 1e-5
relative, gradients 1e-5 absolute + 1e-4 relative. The router aux loss is off (the loss would
count the padding tokens' routing, which packing changes).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig, SequencePackingConfig
from rl.models.packing import first_fit_decreasing, row_lengths
from tests.rl.rank_processes import run_ranks

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=75)]  # the file: 38 s alone on 2 cores, x2 in CI

VOCAB, ROWS, LENGTH, BUDGET, MICRO = 32, 8, 12, 16, 2
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=None)
HYBRID = ["linear_attention"] * 3 + ["full_attention"]
TWINS = {"dense": ("qwen3_5", ["full_attention"] * 4), "hybrid": ("qwen3_5", HYBRID),
         "moe": ("qwen3_5_moe", HYBRID)}


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    lengths = torch.randint(2, LENGTH + 1, (ROWS,), generator=g)
    mask = (torch.arange(LENGTH)[None] < lengths[:, None]).long()
    response = mask.clone()
    response[:, :2] = 0
    base = -torch.rand(ROWS, LENGTH, generator=g) * mask
    return dict(input_ids=torch.randint(0, VOCAB, (ROWS, LENGTH), generator=g) * mask, attention_mask=mask,
                response_mask=response, gen_logprobs=base, prev_logprobs=base, ref_logprobs=base,
                advantages=torch.randn(ROWS, generator=g), sample_mask=torch.ones(ROWS))


def test_the_batch_really_shares_packed_rows() -> None:
    bins = first_fit_decreasing(row_lengths(_batch()["attention_mask"]), BUDGET)
    assert max(len(b) for b in bins) >= 2 and len(bins) > MICRO  # shared rows, and more than one forward


def _sabotage(control: str | None) -> None:
    """A control: break one of the things that keep packed sequences apart."""
    from rl.backends.megatron import packed
    from rl.models.packing import Packing

    if control == "mask":  # causal over the whole packed row
        def causal(self):
            width = self.packed_shape[1]
            return torch.ones(width, width, dtype=torch.bool).tril().expand(self.packed_shape[0], 1, -1, -1)

        Packing.attention_mask = causal
    elif control == "cuts":  # the gated-delta-net layers see each packed row as one sequence
        def rows_only(packing):
            rows, width = packing.packed_shape
            return torch.arange(0, rows * width + 1, width, dtype=torch.int32)

        packed.cu_seqlens = rows_only
    elif control == "cp_mask":  # context parallel: causal over the whole grown row
        from rl.backends.megatron.packed_context import Layout

        def row_causal(self, rank):
            queries, keys = self.rank_index(rank), torch.cat([self.rank_index(r) for r in range(self.cp)])
            return (keys[None, :] > queries[:, None])[None, None]

        Layout.attention_mask = row_causal
    elif control == "cp_layout":  # context parallel: the row cut into 2cp chunks, not each sequence
        from rl.backends.megatron.context import token_index
        from rl.backends.megatron.packed_context import Layout

        Layout.rank_index = lambda self, rank: token_index(self.size, self.cp, rank)


def _run(twin: str, parallel: dict, control: str | None, world: int, fields: dict, rank: int, port: int,
         opaque_ops: bool = False) -> dict:
    import torch.distributed as dist

    from rl.backends.megatron import shims

    shims.apply()
    shims.OPAQUE_GDN_OPS = opaque_ops
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    _sabotage(control)
    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.models import build_model

    family, layers = TWINS[twin]
    cfg = ModelConfig(family=family, config={"layer_types": layers, **fields})
    if family == "qwen3_5_moe":
        cfg.config["router_aux_loss_coef"] = 0.0
    weights = build_model(cfg, vocab_size=VOCAB, seed=0).state_dict()
    batch = _batch()
    num_tokens = int(batch["response_mask"].sum())
    out = {}
    for name, packing in (("padded", SequencePackingConfig()),
                          ("packed", SequencePackingConfig(enabled=True, max_tokens_per_row=BUDGET))):
        policy = PolicyConfig(optimizer=OPT, micro_batch_size=MICRO, parallel=ParallelConfig(**parallel),
                              sequence_packing=packing)
        backend = get_backend("megatron")(model=cfg, policy=policy, vocab_size=VOCAB,
                                          weights=weights, seed=0)
        share = ROWS // backend.dp_size
        mine = {k: v[backend.dp_rank * share:(backend.dp_rank + 1) * share] for k, v in batch.items()}
        result = {"lp": backend.logprobs(mine["input_ids"], mine["attention_mask"])}
        if control is None:
            result["metrics"] = backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=1)
            result["grads"] = {n: p.main_grad.detach().clone() for n, p in backend.gpt.named_parameters()}
        out[name] = result
    return out


def _ranks(twin: str, parallel: dict | None = None, control: str | None = None, world: int | None = None,
           fields: dict | None = None, opaque_ops: bool = False) -> list[dict]:
    import functools

    world = world or (2 if parallel else 1)
    return run_ranks(functools.partial(_run, twin, parallel or {}, control, world, fields or {},
                                       opaque_ops=opaque_ops), nprocs=world)


def _assert_same(result: dict) -> None:
    padded, packed = result["padded"], result["packed"]
    torch.testing.assert_close(packed["lp"], padded["lp"], atol=1e-5, rtol=0)
    for key, value in padded["metrics"].items():
        assert packed["metrics"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert set(packed["grads"]) == set(padded["grads"])
    for name, grad in padded["grads"].items():
        torch.testing.assert_close(packed["grads"][name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_packed_rows_give_the_padded_rows_log_probs_loss_and_gradients(twin: str) -> None:
    (result,) = _ranks(twin)
    assert result["padded"]["lp"].abs().sum() > 0
    _assert_same(result)


@pytest.mark.parametrize(("twin", "parallel"), [("hybrid", {"tp": 2, "sp": True}), ("moe", {"ep": 2}),
                                               ("hybrid", {"pp": 2}), ("dense", {"cp": 2}), ("hybrid", {"cp": 2})],
                         ids=["tp2_sp", "ep2", "pp2", "dense_cp2", "hybrid_cp2"])
def test_packing_on_two_ranks_matches_padding(twin: str, parallel: dict) -> None:
    for result in _ranks(twin, parallel):  # pp: each stage's gradients; log-probs and loss on the last
        _assert_same(result)


@pytest.mark.parametrize("parallel", [{}, {"cp": 2}], ids=["one_rank", "cp2"])
def test_packing_with_the_kernels_as_custom_ops_matches_padding(parallel: dict) -> None:
    """The gated-delta-net kernels behind rl.backends.megatron.fla_ops carry cu_seqlens through."""
    for result in _ranks("hybrid", parallel, opaque_ops=True):
        _assert_same(result)


def test_packing_on_the_flagship_layout_matches_padding() -> None:
    """Qwen3.5-35B's own layout in small: tp 2 with sequence parallel, cp 2, ep 2 (4 ranks; tp x cp
    must divide the linear-attention heads)."""
    heads = {"linear_num_key_heads": 4, "linear_num_value_heads": 4}
    for result in _ranks("moe", {"tp": 2, "sp": True, "cp": 2, "ep": 2}, world=4, fields=heads):
        _assert_same(result)


@pytest.mark.parametrize(("twin", "control"), [("dense", "mask"), ("hybrid", "cuts")])
def test_the_control_without_a_boundary_moves_the_log_probs(twin: str, control: str) -> None:
    (result,) = _ranks(twin, control=control)
    assert (result["packed"]["lp"] - result["padded"]["lp"]).abs().max() > 1e-3


@pytest.mark.parametrize(("twin", "control"), [("dense", "cp_mask"), ("hybrid", "cp_layout")])
def test_the_control_with_context_parallelism_moves_the_log_probs(twin: str, control: str) -> None:
    for result in _ranks(twin, {"cp": 2}, control=control):
        assert (result["packed"]["lp"] - result["padded"]["lp"]).abs().max() > 1e-3


def _stand_ins(rank: int, port: int) -> dict[str, float]:
    """The torch stand-ins on three sequences packed in one row (`cu_seqlens`) against the same
    sequences as right-padded batch rows; and the packed row without its cuts (a control)."""
    from rl.backends.megatron import gdn_torch, shims

    shims.apply()
    torch.set_num_threads(1)
    lengths, heads, dim = [5, 9, 3], 2, 4
    g = torch.Generator().manual_seed(3)
    rows = len(lengths)
    valid = torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]  # [B, L]
    cuts = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)

    def packed(x: torch.Tensor) -> torch.Tensor:  # [B, L, ...] -> [1, sum(lengths), ...]
        return x[valid][None]

    x = torch.randn(rows, max(lengths), 6, generator=g) * valid[..., None]
    weight, bias = torch.randn(6, 4, generator=g), torch.randn(6, generator=g)
    conv_rows = gdn_torch.causal_conv1d(x, weight, bias, "silu")[0]
    conv_packed = gdn_torch.causal_conv1d(packed(x), weight, bias, "silu", cu_seqlens=cuts)[0]
    conv_uncut = gdn_torch.causal_conv1d(packed(x), weight, bias, "silu")[0]

    q, k = (gdn_torch.l2norm(torch.randn(rows, max(lengths), heads, dim, generator=g)) for _ in range(2))
    v = torch.randn(rows, max(lengths), heads, dim, generator=g)
    decay = -torch.rand(rows, max(lengths), heads, generator=g)
    beta = torch.rand(rows, max(lengths), heads, generator=g)
    rule_rows = gdn_torch.chunk_gated_delta_rule(q, k, v, decay, beta)[0]
    rule_packed = gdn_torch.chunk_gated_delta_rule(*map(packed, (q, k, v, decay, beta)), cu_seqlens=cuts)[0]
    rule_uncut = gdn_torch.chunk_gated_delta_rule(*map(packed, (q, k, v, decay, beta)))[0]
    diff = lambda a, b: (a - b).abs().max().item()  # noqa: E731
    return {"conv": diff(conv_packed, packed(conv_rows)), "conv_uncut": diff(conv_uncut, packed(conv_rows)),
            "rule": diff(rule_packed, packed(rule_rows)), "rule_uncut": diff(rule_uncut, packed(rule_rows))}


def test_the_torch_stand_ins_run_each_packed_sequence_as_its_own_row() -> None:
    (diffs,) = run_ranks(_stand_ins)
    assert diffs["conv"] <= 1e-6 and diffs["rule"] <= 1e-5, diffs
    assert diffs["conv_uncut"] > 1e-3 and diffs["rule_uncut"] > 1e-3, diffs  # the control


def _layout_against_megatron(rank: int, port: int) -> dict[str, bool]:
    """Our CP layout of a packing whose rows hold several sequences and padding, against the
    per-sequence order megatron's GatedDeltaNet all-to-all assumes (`_build_thd_cp_a2a_perm`)."""
    from rl.backends.megatron import shims

    shims.apply()
    from megatron.core.ssm.gated_delta_net.common import _build_thd_cp_a2a_perm

    from rl.backends.megatron.packed_context import Layout
    from rl.models.packing import Packing

    packing = Packing.of([[0, 1], [2]], [5, 3, 7], width=8, budget=11)
    layout = Layout.of(packing, cp=2, multiple=1)
    ranks = torch.cat([layout.rank_index(r) for r in range(2)])
    idx, _ = _build_thd_cp_a2a_perm(layout.cuts, 2, layout.size)
    grown = (layout.cuts[1:] - layout.cuts[:-1]).tolist()
    return {"megatron_order": torch.equal(ranks[idx], torch.arange(layout.size)),
            "grown": grown == [8, 4, 4, 8, 4],  # 5, 3, padding 3; 7, padding 4: grown to multiples of 2cp
            "sources": torch.equal(layout.source[layout.source >= 0], torch.arange(22))}


def test_the_context_parallel_layout_is_megatrons_per_sequence_order() -> None:
    (checks,) = run_ranks(_layout_against_megatron)
    assert all(checks.values()), checks
