"""megatron backend numerics on CPU over gloo, in spawned processes (no Ray).

Each case trains the same tiny twin (Qwen3.5's hybrid layout: 3 gated-delta-net layers, then
one attention layer) on the same batch for two
optimizer steps and records log-probs, losses, grad norms and the refit (HF) weights; rank r of
a data-parallel world gets its contiguous share of the rows. Compared:
* megatron (world 1) against the torch backend (HF model, AdamW) in the same process;
* megatron TP=2 (dense) and EP=2 (MoE, each rank a DP rank) against megatron world 1;
* megatron PP=2 (two pipeline stages of 2 layers each, 1F1B schedule; the last stage reports)
  against world 1, dense and the MoE VL twin;
* megatron CP=2 (context parallel: each rank holds half of every sequence and gathers keys and
  values in attention) against world 1, dense and, with EP=2 as well, the MoE VL twin;
* the same for the vision-language twins ("_vl": HF vision tower + GPTModel, M-RoPE positions,
  images in every row): world 1 against the torch backend's HF VL model, EP=2 (MoE) and
  TP=2 with sequence parallelism (dense) against world 1.
(megatron's DistributedOptimizer accepts CUDA tensors only: bench/megatron_gpu.py covers it.)
Tolerances (fp32): log-probs 2e-5 absolute, losses and grad norms 1e-5 relative, weights after
two Adam steps 1e-4 absolute. The router aux loss is off: the torch backend does not add it.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import replace

import pytest
import torch
from rank_processes import spawn_on_free_port

from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

# the file: 29 s alone on 2 cores, one spawn per world size, x2 in CI
pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=60)]

VOCAB, VL_VOCAB, ROWS, LENGTH, STEPS = 32, 56, 8, 12, 2  # VL_VOCAB: the arith_vl tokenizer
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)
# Qwen3.5's own layout (full_attention_interval 4): three gated-delta-net layers, one attention layer
LAYER_TYPES = ["linear_attention"] * 3 + ["full_attention"]
IMAGE_SIDE = 16  # pixels: a 4 x 4 patch grid, 2 x 2 = 4 image tokens per row


def _model_cfg(family: str) -> ModelConfig:
    fields: dict = {"layer_types": LAYER_TYPES}
    base = family.removesuffix("_vl")
    if base == "qwen3_5_moe":
        fields["router_aux_loss_coef"] = 0.0
    if family.endswith("_vl"):
        return ModelConfig(family=base, modality="vision", tokenizer="arith_vl", config=fields)
    return ModelConfig(family=base, config=fields)


def _vocab(family: str) -> int:
    return VL_VOCAB if family.endswith("_vl") else VOCAB


def _batch(family: str) -> dict[str, torch.Tensor]:
    """Right-padded rows; a VL row is `<vision_start> <image_pad> x 4 <vision_end>` + text, with its image."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, VOCAB, (ROWS, LENGTH), generator=g)
    head = 3
    images: dict[str, torch.Tensor] = {}
    if family.endswith("_vl"):
        from rl.models.image_inputs import ImageLayout, patchify
        from rl.models.vision import make_vl_config, vision_token_ids

        config = make_vl_config(family.removesuffix("_vl"), {}, vocab_size=VL_VOCAB,
                                token_ids=vision_token_ids("arith_vl"))
        layout = ImageLayout.of(config)
        prefix = ([layout.vision_start_token_id]
                  + [layout.image_token_id] * layout.num_image_tokens(IMAGE_SIDE, IMAGE_SIDE)
                  + [layout.vision_end_token_id])
        head = len(prefix)
        ids[:, :head] = torch.tensor(prefix)
        pixels = torch.randint(0, 256, (ROWS, IMAGE_SIDE, IMAGE_SIDE, 3), dtype=torch.uint8, generator=g)
        images = dict(zip(("pixel_values", "image_grid_thw"), patchify(pixels, layout)))
    lengths = torch.randint(max(LENGTH // 2, head + 2), LENGTH + 1, (ROWS,), generator=g)
    mask = (torch.arange(LENGTH)[None] < lengths[:, None]).long()
    response = mask.clone()
    response[:, :head] = 0
    base = -torch.rand(ROWS, LENGTH, generator=g) * mask
    return dict(input_ids=ids * mask, attention_mask=mask, response_mask=response, gen_logprobs=base,
                prev_logprobs=base, ref_logprobs=base, advantages=torch.randn(ROWS, generator=g),
                sample_mask=torch.ones(ROWS), **images)


def _train(backend, batch: dict, rows: slice) -> dict:
    from rl.algorithms.loss import LossConfig

    num_tokens = int(batch["response_mask"].sum())
    mine = {k: v[rows] for k, v in batch.items()}
    images = {k: mine[k] for k in ("pixel_values", "image_grid_thw") if k in mine}
    out = {"lp0": backend.logprobs(mine["input_ids"], mine["attention_mask"], **images), "metrics": []}
    for step in range(1, STEPS + 1):
        out["metrics"].append(backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=step))
    out["lp1"] = backend.logprobs(mine["input_ids"], mine["attention_mask"], **images)
    out["ref"] = backend.logprobs(mine["input_ids"], mine["attention_mask"], reference=True, **images)
    out["weights"] = backend.state_dict()
    return out


def _case(world: int, family: str, parallel: dict) -> dict:
    from rl.backends import get_backend
    from rl.models import build_model

    cfg = _model_cfg(family)
    weights = build_model(cfg, vocab_size=_vocab(family), seed=0).state_dict()
    kwargs = dict(model=cfg, vocab_size=_vocab(family), weights=weights, seed=0)
    policy = PolicyConfig(optimizer=OPT, micro_batch_size=2)
    backend = get_backend("megatron")(**kwargs, policy=replace(policy, parallel=ParallelConfig(**parallel)))
    share = ROWS // backend.dp_size
    rows = slice(backend.dp_rank * share, (backend.dp_rank + 1) * share)
    loaded = backend.state_dict()  # the refit's gather (HF names) of the weights just sharded
    result = {"megatron": _train(backend, _batch(family), rows), "reports": backend.reports_metrics,
              "initial": weights, "loaded": loaded}
    if world == 1:
        from rl.backends.torch import TorchBackend

        result["torch"] = _train(TorchBackend(**kwargs, policy=policy), _batch(family), rows)
    return result


def _worker(rank: int, world: int, port: int, out_dir: str, cases: list) -> None:
    """Every case in one process group, one after another: spawning (and importing megatron) once
    per world size instead of once per case is most of this file's time on two cores."""
    import torch.distributed as dist

    from rl.backends.megatron import shims as megatron_shims

    megatron_shims.apply()  # before megatron's first import
    from megatron.core import parallel_state

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    for i, (family, parallel) in enumerate(cases):
        torch.save(_case(world, family, parallel), os.path.join(out_dir, f"case{i}-rank{rank}.pt"))
        parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


def _run_cases(world: int, cases: list) -> list[list[dict]]:
    """[case][rank] results of `cases` ((family, parallel) each) on `world` ranks."""
    with tempfile.TemporaryDirectory() as out_dir:
        spawn_on_free_port(_worker, lambda port: (world, port, out_dir, cases), world)
        return [[torch.load(os.path.join(out_dir, f"case{i}-rank{r}.pt")) for r in range(world)]
                for i in range(len(cases))]


def _summed(results: list[dict], backend: str = "megatron") -> list[dict[str, float]]:
    """Per-step metrics summed over the ranks that report (one per DP replica); grad_norm is global."""
    steps = []
    for step in range(STEPS):
        reporting = [r[backend]["metrics"][step] for r in results if r["reports"]]
        summed = {k: sum(m[k] for m in reporting) for k in reporting[0] if k != "grad_norm"}
        summed["grad_norm"] = reporting[0]["grad_norm"]
        steps.append(summed)
    return steps


def _assert_same(a: list[dict], b: list[dict]) -> None:
    for sa, sb in zip(a, b):
        for key in ("loss", "grad_norm"):
            assert sa[key] == pytest.approx(sb[key], rel=1e-5, abs=1e-7), (key, sa, sb)


def _assert_weights(a: dict, b: dict, atol: float) -> None:
    assert set(a) == set(b)
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst <= atol, f"weights differ by {worst}"


FAMILIES = ("qwen3_5", "qwen3_5_moe", "qwen3_5_vl", "qwen3_5_moe_vl")


@pytest.fixture(scope="module")
def single() -> dict[str, dict]:
    return {f: ranks[0] for f, ranks in zip(FAMILIES, _run_cases(1, [(f, {}) for f in FAMILIES]))}


@pytest.mark.parametrize("family", FAMILIES)
def test_megatron_matches_torch_backend(single: dict, family: str) -> None:
    res = single[family]
    meg, ref = res["megatron"], res["torch"]
    assert (meg["lp0"] - ref["lp0"]).abs().max() <= 2e-5
    assert (meg["lp1"] - ref["lp1"]).abs().max() <= 2e-5
    assert not torch.equal(meg["lp0"], meg["lp1"]), "two optimizer steps left the policy unchanged"
    assert torch.equal(meg["ref"], meg["lp0"]), "the reference copy moved with the policy"
    _assert_same(_summed([res], "megatron"), _summed([res], "torch"))
    _assert_weights(meg["weights"], ref["weights"], atol=1e-4)


# One data-parallel replica over the 2 ranks: the rows of both are all rows. TP and CP ranks each
# return the whole rows' log-probs (rank 0 reports); with PP only the last stage has them.
ONE_REPLICA = [("qwen3_5", {"tp": 2}), ("qwen3_5_vl", {"tp": 2, "sp": True}), ("qwen3_5", {"cp": 2}),
               ("qwen3_5_moe_vl", {"cp": 2, "ep": 2}), ("qwen3_5", {"pp": 2}), ("qwen3_5_moe_vl", {"pp": 2})]


EP2 = [("qwen3_5_moe", {"ep": 2}), ("qwen3_5_moe_vl", {"ep": 2})]


def _case_id(family: str, parallel: dict) -> str:
    return family + "".join(f"-{k}" if v is True else f"-{k}{v}" for k, v in parallel.items())


@pytest.fixture(scope="module")
def two_ranks() -> dict[str, list[dict]]:
    """Every 2-rank case, run in one spawned pair of processes: {case id: [rank 0, rank 1]}."""
    cases = ONE_REPLICA + EP2
    results = _run_cases(2, cases)
    return {_case_id(f, p): ranks for (f, p), ranks in zip(cases, results)}


@pytest.mark.parametrize("family, parallel", ONE_REPLICA, ids=[_case_id(f, p) for f, p in ONE_REPLICA])
def test_one_replica_over_two_ranks_matches_world_1(single: dict, two_ranks: dict, family: str,
                                                    parallel: dict) -> None:
    ranks = two_ranks[_case_id(family, parallel)]
    one = single[family]["megatron"]
    pipeline = parallel.get("pp", 1) > 1
    assert [r["reports"] for r in ranks] == ([False, True] if pipeline else [True, False])
    for r in ranks[1:] if pipeline else ranks:
        assert (r["megatron"]["lp0"] - one["lp0"]).abs().max() <= 2e-5
        assert (r["megatron"]["lp1"] - one["lp1"]).abs().max() <= 2e-5
    _assert_same(_summed(ranks), _summed([single[family]]))
    _assert_weights(ranks[0]["megatron"]["weights"], one["weights"], atol=1e-4)
    _assert_weights(ranks[1]["megatron"]["weights"], ranks[0]["megatron"]["weights"], atol=0.0)


def test_weights_round_trip_bit_exact_on_every_layout(single: dict, two_ranks: dict) -> None:
    """HF weights -> this rank's shard (TP, EP, CP, PP) -> gathered HF weights, on every rank: unchanged."""
    for case, ranks in [*((f, [r]) for f, r in single.items()), *two_ranks.items()]:
        for rank, result in enumerate(ranks):
            assert set(result["loaded"]) == set(result["initial"]), (case, rank)
            assert all(torch.equal(result["loaded"][k], v) for k, v in result["initial"].items()), (case, rank)


@pytest.mark.parametrize("family", ["qwen3_5_moe", "qwen3_5_moe_vl"])
def test_moe_ep2_matches_ep1(single: dict, two_ranks: dict, family: str) -> None:
    ep2 = two_ranks[_case_id(family, {"ep": 2})]
    one = single[family]["megatron"]
    for key in ("lp0", "lp1"):
        joined = torch.cat([r["megatron"][key] for r in ep2])  # each EP rank is a DP rank
        assert (joined - one[key]).abs().max() <= 2e-5
    _assert_same(_summed(ep2), _summed([single[family]]))
    _assert_weights(ep2[0]["megatron"]["weights"], one["weights"], atol=1e-4)
