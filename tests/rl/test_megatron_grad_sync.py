"""The data-parallel gradient reduce overlapped with the backward (rl.backends.megatron.grad_sync).

Two gloo ranks, data parallel 2, the hybrid twin, four micro-batches a step. With the overlap on,
from the second step every gradient bucket's reduce has started by the end of the backward
(before `finalize_model_grads`), and three steps give the same weights and losses as the reduce
after the backward. A step without rows still finishes. A VL model keeps the plain reduce.
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch
from rank_processes import run_ranks

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

pytestmark = pytest.mark.slow(seconds=45)  # the file: 22 s alone on 2 cores, x2 in CI
VOCAB, ROWS, LENGTH = 64, 16, 12


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (ROWS, LENGTH), generator=g)
    mask = torch.ones_like(ids)
    response = mask.clone()
    response[:, :4] = 0
    base = -torch.rand(ROWS, LENGTH, generator=g)
    return dict(input_ids=ids, attention_mask=mask, response_mask=response, gen_logprobs=base, prev_logprobs=base,
                ref_logprobs=base, advantages=torch.randn(ROWS, generator=g), sample_mask=torch.ones(ROWS))


def _train(rank: int, port: int, overlap: bool) -> dict:
    import torch.distributed as dist

    from rl.backends.megatron import shims

    shims.apply()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.backends.megatron import grad_sync
    from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.models import build_model

    if not overlap:
        grad_sync.wanted = lambda pp, vision: False
    started_in_backward = []
    plain_start_remaining = grad_sync.start_remaining

    def spy(ddp) -> None:  # called after the last micro-batch's backward, before the finish
        groups = ddp.bucket_groups + ddp.expert_parallel_bucket_groups
        started_in_backward.append(all(g.grad_reduce_handle is not None for g in groups))
        plain_start_remaining(ddp)

    grad_sync.start_remaining = spy
    cfg = ModelConfig(family="qwen3_5", config={"layer_types": ["linear_attention", "full_attention"],
                                                "num_hidden_layers": 2})
    backend = get_backend("megatron")(
        model=cfg, vocab_size=VOCAB, seed=0,
        weights=build_model(cfg, vocab_size=VOCAB, seed=0).state_dict(),
        policy=PolicyConfig(micro_batch_size=2, parallel=ParallelConfig(tp=1, ep=1, cp=1, pp=1, sp=False),
                            optimizer=OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8,
                                                      grad_clip=1.0)))
    batch = _batch()
    share = ROWS // backend.dp_size
    mine = {k: v[backend.dp_rank * share:(backend.dp_rank + 1) * share] for k, v in batch.items()}
    num_tokens = int(batch["response_mask"].sum())
    losses = [backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=s)["loss"]
              for s in (1, 2, 3)]
    empty = {k: v[:0] for k, v in mine.items()}
    backend.train_step(empty, num_tokens=num_tokens, loss_cfg=LossConfig(), step=4)
    return {"overlap": backend.ddp.ddp_config.overlap_grad_reduce, "started_in_backward": started_in_backward,
            "losses": losses, "weights": backend.state_dict(), "dp": backend.dp_size}


def test_the_reduce_overlaps_the_backward_and_changes_nothing() -> None:
    on = run_ranks(functools.partial(_train, overlap=True), nprocs=2)
    off = run_ranks(functools.partial(_train, overlap=False), nprocs=2)
    for rank_on, rank_off in zip(on, off):
        assert rank_on["dp"] == 2 and rank_on["overlap"] is True and rank_off["overlap"] is False
        # step 1 records which gradients to expect (megatron reduces it at the finish); steps 2 and
        # 3 start every bucket in the backward; the empty step 4 starts none there
        assert rank_on["started_in_backward"] == [False, True, True, False]
        assert rank_off["started_in_backward"] == [False] * 4
        assert rank_on["losses"] == rank_off["losses"]
        for name, value in rank_off["weights"].items():
            torch.testing.assert_close(rank_on["weights"][name], value, rtol=0, atol=0, msg=name)


def test_a_vl_model_and_pipeline_stages_keep_the_plain_reduce() -> None:
    from rl.backends.megatron import shims

    shims.apply()
    from rl.backends.megatron import grad_sync

    assert grad_sync.wanted(pp=2, vision=False) is False
    assert grad_sync.wanted(pp=1, vision=True) is False
