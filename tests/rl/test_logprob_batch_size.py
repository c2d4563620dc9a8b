"""`policy.logprob_batch_size`: the log-prob passes cut their own micro-batches, and give the log-probs
they give at the training micro-batch (up to float rounding), on both backends: padded and packed
rows, megatron at one rank and on two pipeline stages (whose schedule takes the log-prob pass's
micro-batch as its activation shape). The training pass keeps `micro_batch_size`.
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch
from rank_processes import run_ranks

from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig, SequencePackingConfig, parse_config

VOCAB, ROWS, LENGTH = 64, 10, 14
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)
CFG = ModelConfig(family="qwen3_5",
                  config={"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2})


def _rows() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, VOCAB, (ROWS, LENGTH), generator=g)
    lengths = torch.randint(LENGTH // 2, LENGTH + 1, (ROWS,), generator=g)
    mask = (torch.arange(LENGTH)[None] < lengths[:, None]).long()
    return ids * mask, mask


def _logprobs(backend_name: str, sizes: list[int | None], packed: bool, parallel: dict | None = None) -> list:
    from rl.backends import get_backend
    from rl.models import build_model

    ids, mask = _rows()
    weights = build_model(CFG, vocab_size=VOCAB, seed=0).state_dict()
    out = []
    for size in sizes:
        backend = get_backend(backend_name)(
            model=CFG, vocab_size=VOCAB, weights=weights, seed=0, policy=PolicyConfig(
                optimizer=OPT, micro_batch_size=4, parallel=ParallelConfig(**(parallel or {})),
                logprob_batch_size=size,
                sequence_packing=SequencePackingConfig(enabled=packed, max_tokens_per_row=2 * LENGTH)))
        cut, plain = [], backend._forwards
        backend._forwards = lambda columns, rows, plain=plain: cut.append(rows) or plain(columns, rows)
        out.append(backend.logprobs(ids, mask))
        assert cut == [size or 4]  # the pass cut its rows at the log-prob micro-batch
    return out


def _assert_all_close(results: list[torch.Tensor]) -> None:
    first, *rest = results
    assert first.abs().sum() > 0
    for other in rest:
        torch.testing.assert_close(other, first, rtol=0, atol=2e-6)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_torch_backend(packed: bool) -> None:
    _assert_all_close(_logprobs("torch", [None, 1, 3, 16], packed))


def _megatron(rank: int, port: int, world: int, parallel: dict, packed: bool) -> list:
    import torch.distributed as dist

    from rl.backends.megatron import shims

    shims.apply()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    return _logprobs("megatron", [None, 1, 3, 16], packed, parallel)


@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="megatron-core not installed")
@pytest.mark.parametrize(("world", "parallel", "packed"), [(1, {}, False), (1, {}, True), (2, {"pp": 2}, False)],
                         ids=["one_rank", "one_rank_packed", "pp2"])
def test_megatron_backend(world: int, parallel: dict, packed: bool) -> None:
    results = run_ranks(functools.partial(_megatron, world=world, parallel=parallel, packed=packed), nprocs=world)
    _assert_all_close(results[-1])  # with pp the last stage holds the log-probs


def test_the_key_is_read_and_checked() -> None:
    base = {"name": "t", "cluster": {"devices_per_node": 2}, "algorithm": {"prompts_per_step": 4,
                                                                           "generations_per_prompt": 4}}
    assert parse_config(base).policy.logprob_batch_size is None
    assert parse_config({**base, "policy": {"logprob_batch_size": 32}}).policy.logprob_batch_size == 32
    with pytest.raises(ValueError, match="policy.logprob_batch_size: must be >= 1"):
        parse_config({**base, "policy": {"logprob_batch_size": 0}})
