"""The one-pass logit statistics equal the torch ones the decode step computes otherwise, and the
static decoder samples the same tokens with them. Needs Triton: a GPU, or the CPU under
TRITON_INTERPRET=1; elsewhere (CI) it skips."""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import static_sample, text_model

from rl.generation.logit_stats import combine_block_stats, logit_block_stats
from rl.generation.sampler import DRAW_BLOCK, block_weights


@pytest.fixture
def device(triton_device: str) -> str:
    return triton_device


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("banned", [None, [5, 1024, 2 * DRAW_BLOCK + 3]])
def test_equals_the_torch_statistics(device: str, temperature: float, banned: list[int] | None) -> None:
    """Three blocks, the last one partial; the banned ids leave the row max and weights, not the lse."""
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(5, 2 * DRAW_BLOCK + 37, generator=g) * 4).to(torch.bfloat16).to(device)
    logits[1, 5] = 40.0  # a banned id holds the row's largest logit
    ids = None if banned is None else torch.tensor(banned, device=device)
    lse, row_max, weights = combine_block_stats(logit_block_stats(logits, temperature, ids), temperature)
    want_max, want_weights = block_weights(logits, temperature, ids)
    torch.testing.assert_close(lse, torch.logsumexp(logits.float(), dim=-1), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(row_max, want_max, rtol=0, atol=0)
    assert weights.dtype == torch.float64 and weights.shape == want_weights.shape == (5, 3)
    torch.testing.assert_close(weights, want_weights, rtol=1e-5, atol=0)


def test_a_strided_view_of_the_logits(device: str) -> None:
    """The step's logits are the last position of [B, 1, V] (or a wider prompt's): a row-strided view."""
    logits = torch.randn(3, 2, DRAW_BLOCK + 9, generator=torch.Generator().manual_seed(4)).to(device)
    view = logits[:, -1]
    torch.testing.assert_close(logit_block_stats(view, 1.0, None), logit_block_stats(view.contiguous(), 1.0, None),
                               rtol=0, atol=0)


def test_the_op_traces_for_torch_compile(device: str) -> None:
    logits = torch.randn(2, DRAW_BLOCK + 1, device=device)
    torch.library.opcheck(logit_block_stats, (logits, 0.5, torch.tensor([3], device=device)),
                          test_utils=("test_schema", "test_faketensor"))


def test_the_static_decoder_samples_the_same_tokens_with_them(device: str) -> None:
    model = text_model("qwen3_5").to(device)
    want, got = static_sample(copy.deepcopy(model)), static_sample(model, fused_stats=True)
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5
