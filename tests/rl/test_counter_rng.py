"""The GPU's draw: a counter-based uniform per row and token, then the row's inverse CDF.

It replaced one registered generator per row (a CUDA-graph replay advanced each one's state), so
what the generators gave must hold here: an exact draw from softmax(logits / T), a row's draw a
function of its seed and token index only (not of the batch), banned ids never drawn, and the
eager and static loops agreeing token for token (the loops themselves: test_generation_mixed_lengths'
`*_counter` modes).
"""

from __future__ import annotations

import torch

from rl.config import ModelConfig
from rl.generation import generate, row_seeds
from rl.generation.sampler import (
    MAX_ROWS,
    counter_uniforms,
    draw_tokens,
    fused_counter_uniforms,
    inverse_cdf_draw,
)
from rl.generation.static_decode import StaticDecoder
from rl.models import build_model

torch.set_num_threads(1)


def test_uniforms_are_a_function_of_seed_and_step_only() -> None:
    seeds = row_seeds(42, 64)
    u = counter_uniforms(seeds, 3)
    assert u.dtype == torch.float64 and u.shape == (64,) and bool(((u >= 0) & (u < 1)).all())
    assert torch.equal(u, counter_uniforms(seeds, torch.tensor([3])))
    assert torch.equal(u[10:11], counter_uniforms(seeds[10:11], 3)), "a row alone draws what it draws in a batch"
    assert torch.equal(u.flip(0), counter_uniforms(seeds.flip(0), 3)), "reordered rows keep their draws"
    assert len(set(u.tolist())) == 64
    assert not torch.equal(u, counter_uniforms(seeds, 4)) and not torch.equal(u, counter_uniforms(row_seeds(43, 64), 3))
    big = torch.tensor([2**62 + 5, -7, (1 << 40) * MAX_ROWS + 3])  # any int64 seed, no overflow
    assert bool(((counter_uniforms(big, 2**40) >= 0) & (counter_uniforms(big, 2**40) < 1)).all())


def test_the_fused_uniforms_are_the_eager_bits() -> None:
    # what the CUDA graph replays is inductor's kernel; its bits must be the eager function's, for
    # seeds past 32 bits and negative ones, and steps past 32 bits and negative (masked to 32 bits)
    wide = torch.randint(-2**62, 2**62, (2048,), generator=torch.Generator().manual_seed(5))
    seeds = torch.cat([row_seeds(42, 2048), wide,
                       torch.tensor([0, -1, 2**32, 2**32 - 1, 2**63 - 1, -2**63, (1 << 40) * MAX_ROWS + 3, -7] * 8)])
    for step in (0, 1, 255, 2**31, 2**32 - 1, 2**32 + 5, 2**40 + 17, -1, -2**40):
        step = torch.tensor([step])
        assert torch.equal(fused_counter_uniforms(seeds, step), counter_uniforms(seeds, step)), int(step)
    steps = torch.randint(-2**62, 2**62, seeds.shape, generator=torch.Generator().manual_seed(6))
    assert torch.equal(fused_counter_uniforms(seeds, steps), counter_uniforms(seeds, steps))


def test_uniforms_are_uniform() -> None:
    u = counter_uniforms(torch.arange(200_000), 0)
    counts = torch.histc(u.float(), bins=20, min=0, max=1)
    expected = len(u) / 20
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 45, chi2  # 19 degrees of freedom: p ~ 1e-3
    steps = counter_uniforms(torch.full((50_000,), 9), torch.arange(50_000))  # along the token index too
    assert abs(float(steps.mean()) - 0.5) < 0.01


def test_inverse_cdf_draws_the_softmax_and_never_a_zero_weight_id() -> None:
    logits = torch.tensor([[2.0, 0.5, float("-inf"), -1.0, 1.0]]).expand(100_000, 5)
    for temperature in (1.0, 0.5):
        u = counter_uniforms(torch.arange(100_000) + int(temperature * 1000), 0)
        tokens = inverse_cdf_draw(logits, temperature, u)
        freq = torch.bincount(tokens, minlength=5).double() / len(tokens)
        probs = torch.softmax(logits[0].double() / temperature, dim=-1)
        sigma = (probs * (1 - probs) / len(tokens)).sqrt()
        assert bool(((freq - probs).abs() <= 5 * sigma + 1e-12).all()), (freq, probs)
        assert int((tokens == 2).sum()) == 0
    edges = inverse_cdf_draw(logits[:3], 1.0, torch.tensor([0.0, 1 - 2**-53, 0.5]))
    assert edges.tolist()[:2] == [0, 4]


def test_the_two_level_draw_is_the_flat_inverse_cdf_across_blocks() -> None:
    # 5,000 ids: four whole blocks of DRAW_BLOCK and a partial fifth; every third id banned
    from rl.generation.sampler import DRAW_BLOCK

    rows, vocab = 4096, 5000
    assert vocab > 4 * DRAW_BLOCK
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0)) * 3
    logits[:, ::3] = float("-inf")
    u = counter_uniforms(torch.arange(rows), 7)
    for temperature in (1.0, 0.7):
        weights = ((logits - logits.amax(-1, keepdim=True)) / temperature).exp()
        flat = torch.cumsum(weights, dim=-1, dtype=torch.float64)
        expected = torch.searchsorted(flat, (u * flat[:, -1]).unsqueeze(1), right=True).squeeze(1)
        tokens = inverse_cdf_draw(logits, temperature, u)
        assert torch.equal(tokens, expected)
        assert int((tokens % 3 == 0).sum()) == 0
    assert len(set((tokens // DRAW_BLOCK).tolist())) == 5  # every block drawn from


def test_banned_ids_and_bf16_logits_draw_as_their_masked_float32_copy() -> None:
    # the decode step hands the draw bf16 logits and the banned ids, never a masked float32 copy
    rows, vocab = 512, 3000
    raw = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(1)).mul(3).bfloat16()
    banned = torch.arange(0, vocab, 3)
    masked = raw.float().index_fill(1, banned, float("-inf"))
    u = counter_uniforms(torch.arange(rows), 3)
    for temperature in (1.0, 0.6):
        want = inverse_cdf_draw(masked, temperature, u)
        assert torch.equal(inverse_cdf_draw(raw, temperature, u, banned), want)
        assert int((want % 3 == 0).sum()) == 0


def test_draw_tokens_bans_and_goes_greedy() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    banned = torch.tensor([1])
    seeds = row_seeds(0, 2)
    for step in range(20):
        assert 1 not in draw_tokens(logits, 1.0, None, banned, seeds=seeds, step=step).tolist()
    assert draw_tokens(logits, 0.0, None, banned, seeds=seeds).tolist() == [2, 0]


def test_eager_and_static_loops_draw_the_same_tokens_from_the_counter() -> None:
    m = build_model(ModelConfig(family="qwen3_5"), vocab_size=52, seed=0)
    ids = torch.randint(4, 52, (6, 5), generator=torch.Generator().manual_seed(1))
    args = dict(max_new_tokens=12, temperature=1.0, eos_token_id=1, pad_token_id=0, seeds=row_seeds(3, 6))
    eager = generate(m, ids, counter_rng=True, **args)
    static = StaticDecoder(m, use_graphs=False, counter_rng=True).generate(ids, **args)
    generators = generate(m, ids, **args)  # the CPU's default: per-row generators, another stream
    assert torch.equal(eager.input_ids, static.input_ids)
    assert not torch.equal(eager.input_ids, generators.input_ids)
