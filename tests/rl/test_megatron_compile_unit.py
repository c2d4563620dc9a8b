"""The one log-prob formula (`gather_logprobs`, compiled by `policy.compile`) equals log_softmax + gather."""

from __future__ import annotations

import pytest
import torch

from rl.backends.megatron.rules import CPU_REFUSAL
from rl.config import parse_config
from rl.models.logprobs import gather_logprobs
from rl.preflight import static_refusals


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_logprobs_matches_log_softmax(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 7, 50, generator=g) * 4).to(dtype)
    labels = torch.randint(0, 50, (3, 7), generator=g)
    got = gather_logprobs(logits, labels)
    assert got.dtype == torch.float32
    expected = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    lse = torch.logsumexp(logits.float(), dim=-1)
    assert torch.equal(gather_logprobs(logits, labels, lse), got)  # a caller's own log-sum-exp: the same bits


def test_compile_is_refused_on_cpu_and_for_the_torch_backend() -> None:
    base = {"name": "x", "model": {"family": "qwen3_5", "tokenizer": "arith"}, "algorithm": {"num_steps": 1},
            "task": {"name": "arith"}}
    mega = {**base, "policy": {"backend": "megatron", "compile": True}}
    assert static_refusals(mega) == [CPU_REFUSAL]
    torch_backend = {**base, "policy": {"backend": "torch", "compile": True}}
    assert static_refusals(torch_backend) == [
        "policy.compile: the torch backend runs eager; use policy.backend: megatron"]
    gpu = {**mega, "cluster": {"device": "h200"}}
    assert parse_config(gpu).policy.compile is True and static_refusals(gpu) == []
