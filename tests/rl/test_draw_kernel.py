"""The one-kernel second level of the draw picks the ids the torch `draw_in_blocks` picks, and the
static decoder samples the same tokens with it. Needs Triton: a GPU, or the CPU under
TRITON_INTERPRET=1; elsewhere (CI) it skips."""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import static_sample, text_model

from rl.generation.draw_kernel import draw_in_blocks_kernel
from rl.generation.sampler import DRAW_BLOCK, block_weights, counter_uniforms, draw_in_blocks


@pytest.fixture
def device(triton_device: str) -> str:
    return triton_device


@pytest.mark.parametrize("temperature", [1.0, 0.6])
@pytest.mark.parametrize("banned", [None, [2, DRAW_BLOCK + 1]])
def test_picks_the_ids_the_torch_draw_picks(device: str, temperature: float, banned: list[int] | None) -> None:
    """Many rows of a three-block vocabulary (the last partial), peaked and flat rows, uniforms from
    the counter; a row whose largest logit is banned."""
    rows = 64
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(rows, 2 * DRAW_BLOCK + 300, generator=g) * torch.linspace(0.1, 6, rows)[:, None]
    logits = logits.to(torch.bfloat16).to(device)
    logits[3, 2] = 50.0
    ids = None if banned is None else torch.tensor(banned, device=device)
    m, blocks = block_weights(logits, temperature, ids)
    for step in range(3):
        u = counter_uniforms(torch.arange(rows, device=device), step)
        want = draw_in_blocks(logits, temperature, u, m, blocks, ids)
        got = draw_in_blocks_kernel(logits, temperature, u, m, blocks, ids)
        assert got.dtype == torch.long and torch.equal(got, want)
        if banned:
            assert not torch.isin(got, ids).any()


def test_a_uniform_at_the_ends_of_the_range(device: str) -> None:
    """u = 0 takes the first drawable id; u just below 1 the last, never past the vocabulary."""
    logits = torch.zeros(2, DRAW_BLOCK + 5, device=device)
    m, blocks = block_weights(logits, 1.0)
    u = torch.tensor([0.0, 1.0 - 2 ** -53], dtype=torch.float64, device=device)
    got = draw_in_blocks_kernel(logits, 1.0, u, m, blocks)
    assert got.tolist() == [0, DRAW_BLOCK + 4] and torch.equal(got, draw_in_blocks(logits, 1.0, u, m, blocks))


def test_the_static_decoder_samples_the_same_tokens_with_it(device: str) -> None:
    model = text_model("qwen3_5").to(device)
    want, got = static_sample(copy.deepcopy(model)), static_sample(model, draw_kernel=True)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.gen_logprobs, want.gen_logprobs)
