"""KV-cache sampling with our own loop, so a rollout is bitwise reproducible from its seeds.

Why not `model.generate`: its sampling draws from the global RNG through logits processors we
do not control, and it does not return the log-probs we need for the importance-sampling
correction. Here, on the CPU, every random draw is one `torch.multinomial(..., generator=generator)`
per row and step, from that row's own generator (`row_seeds`), and the model's own cache
(`DynamicCache`, which for Qwen3.5 holds both the attention KV tensors and the linear-attention
conv/recurrent states) carries the context.

On a GPU the draws come from a counter instead (`counter_uniforms`: a hash of the row's seed and
the token's index, one uniform per row and token, then the inverse CDF of the row's
distribution): no generator object at all, so a CUDA-graph replay has no per-row generator state
to advance (with one registered generator per row, every replay updated each one's state from the
host, and each row's draw was a kernel of its own) and the whole draw is a few batched kernels.
Same seeds, same tokens, whatever the batch; `counter_rng=True` runs it on the CPU too, which is
how CPU tests prove it.

`gen_logprobs` are temperature-1 log-probs, `log_softmax(raw logits)`, of the sampled tokens,
whatever the sampling temperature: they are what `token_logprobs` recomputes by teacher forcing
on the same weights, which is what the GRPO loss and the refit/parity checks compare.

Images (a vision-language model): the prompt forward also gets the row-aligned image columns;
later steps only feed tokens at the multimodal rotary positions the prompt's layout continues
to (`rl.generation.prompt_layout.prompt_positions`). The image placeholder tokens are never
sampled (their logits are masked before the draw, not in the recorded log-probs): a placeholder
in a response would not match any image when the rollout is scored by teacher forcing.

Prompts of any lengths: `rl.generation.prompt_layout` says how every loop lays them out and why.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from rl.generation.generation import Generation
from rl.generation.prompt_layout import left_pad, padding_mask, prompt_lengths_of, prompt_positions, right_padded
from rl.models.image_inputs import image_forward_kwargs
from rl.models.logprobs import gather_logprobs

MAX_ROWS = 1 << 20  # rows of one call; a row's seed is seed * MAX_ROWS + row (`row_seeds`)


def _cache_kwarg(model: PreTrainedModel) -> str:
    """transformers >= 5.2x names the cache `cache`; older 5.x (the GPU machine) `past_key_values`."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _banned_token_ids(model: PreTrainedModel) -> list[int]:
    """Image/video placeholder ids of a VL model (never valid in a response); [] for text."""
    config = model.config
    if getattr(config, "vision_config", None) is None:
        return []
    return [int(getattr(config, f)) for f in ("image_token_id", "video_token_id")
            if getattr(config, f, None) is not None]


def row_seeds(seed: int, batch: int) -> torch.Tensor:
    """One seed per row: row r of a call seeded `seed` draws from its own generator, seeded
    seed * MAX_ROWS + r, so a row's tokens do not depend on which rows share its batch (a prompt
    decoded alone with its row's seed samples what it samples in any batch, and reordered or
    bucketed rows keep their draws)."""
    if not 0 < batch <= MAX_ROWS:
        raise ValueError(f"a generation call takes 1..{MAX_ROWS} rows, got {batch}")
    return seed * MAX_ROWS + torch.arange(batch, dtype=torch.long)


def row_generators(seeds: Sequence[int] | torch.Tensor, device: torch.device | str) -> list[torch.Generator]:
    """A generator per row on `device`, seeded with that row's seed."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in torch.as_tensor(seeds).tolist()]


_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for 0 <= x < 2**32 in int64, in 16-bit halves of c so nothing overflows."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32


def _fmix32(x: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's 32-bit finalizer (every input bit reaches every output bit)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x85EBCA6B)
    x = x ^ (x >> 13)
    x = _mul32(x, 0xC2B2AE35)
    return x ^ (x >> 16)


def counter_uniforms(seeds: torch.Tensor, step: int | torch.Tensor) -> torch.Tensor:
    """One uniform in [0, 1) per row (float64, 53 random bits): a hash of (the row's seed, step).

    A pure function of its inputs, the same bits on any device and in any batch, so a row's draw
    at token `step` needs no generator state (nothing for a CUDA graph to advance)."""
    seeds = seeds.to(torch.long)
    step = torch.as_tensor(step, dtype=torch.long, device=seeds.device) & _M32
    row = _fmix32((seeds & _M32) ^ _fmix32(((seeds >> 32) & _M32) ^ 0x9E3779B9))
    a = _fmix32(row ^ _fmix32(step ^ 0x7F4A7C15))
    b = _fmix32(a ^ 0x6A09E667)
    return ((a >> 5) * (1 << 26) + (b >> 6)).to(torch.float64) / float(1 << 53)


# `counter_uniforms` as one kernel: eager, its ~100 int64 ops were ~100 one-microsecond kernels,
# ~110 us of a 1,640 us decode step (dense 1.2 B, batch 64, H200, docs/benchmarks.md). Inductor
# fuses them; integer ops and the final division by a power of two are exact, so the bits are the
# eager ones (tests/rl/test_counter_rng.py). Shapes are fixed per call, hence dynamic=False; pass
# `step` as a tensor, since a Python int would be specialised and recompile at every step.
fused_counter_uniforms = torch.compile(counter_uniforms, dynamic=False, fullgraph=True)


DRAW_BLOCK = 1024  # ids per block of the two-level draw


def drawable_logits(logits: torch.Tensor, banned: torch.Tensor | None) -> torch.Tensor:
    """The logits in float32 with the banned ids (a LongTensor on their device, or None) at -inf."""
    logits = logits.float()
    return logits.index_fill(1, banned, float("-inf")) if banned is not None and banned.numel() else logits


def block_weights(logits: torch.Tensor, temperature: float,
                  banned: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first level of `inverse_cdf_draw`: (the row max of the drawable logits, [B, 1] float32;
    the float64 sum of exp((logit - max) / temperature) over each `DRAW_BLOCK` ids, [B, blocks]).

    Elementwise and row reductions only, so the decode step's compiled forward computes it in the
    same pass that reads its logits (`rl.generation.static_decode`), without a [B, V] weights copy."""
    x = drawable_logits(logits, banned)
    B, V = x.shape
    m = x.amax(dim=-1, keepdim=True)
    weights = torch.nn.functional.pad(((x - m) / temperature).exp(), (0, -(-V // DRAW_BLOCK) * DRAW_BLOCK - V))
    return m, weights.view(B, -1, DRAW_BLOCK).sum(dim=-1, dtype=torch.float64)


def draw_in_blocks(logits: torch.Tensor, temperature: float, uniforms: torch.Tensor, m: torch.Tensor,
                   blocks: torch.Tensor, banned: torch.Tensor | None = None) -> torch.Tensor:
    """The second level of `inverse_cdf_draw`, from `block_weights`' (m, blocks): the block where
    u x total falls, then the cumulative sum of the weights inside that block only."""
    B, V = logits.shape
    n = blocks.shape[1]
    ends = torch.cumsum(blocks, dim=-1)  # [B, n], inclusive
    target = (uniforms.to(ends.device) * ends[:, -1]).unsqueeze(1)
    block = torch.searchsorted(ends, target, right=True).clamp_(max=n - 1)  # [B, 1]
    start = torch.where(block > 0, ends.gather(1, (block - 1).clamp_(min=0)), 0.0)
    ids = block * DRAW_BLOCK + torch.arange(DRAW_BLOCK, device=logits.device)  # [B, DRAW_BLOCK]
    x = logits.gather(1, ids.clamp(max=V - 1)).float()
    drawable = ids < V
    if banned is not None and banned.numel():
        drawable &= ~torch.isin(ids, banned)
    inside = torch.where(drawable, ((x - m) / temperature).exp(), 0.0)
    cdf = torch.cumsum(inside, dim=-1, dtype=torch.float64)
    at = torch.searchsorted(cdf, target - start, right=True).clamp_(max=DRAW_BLOCK - 1)
    return (block * DRAW_BLOCK + at).squeeze(1).clamp_(max=V - 1)


def inverse_cdf_draw(logits: torch.Tensor, temperature: float, uniforms: torch.Tensor,
                     banned: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from softmax(logits / temperature), row r's at uniform `uniforms[r]`.

    The first id whose cumulative (unnormalised, float64) weight exceeds u x the row's total:
    an exact draw; a zero-weight id (a banned one, -inf) is never chosen. Fixed shapes, no host
    sync: it can be captured in a CUDA graph.

    Two levels (`block_weights`, then `draw_in_blocks`), because one cumulative sum along a
    152k-id row is one GPU block per row (288 us of a 2,215 us decode step at batch 64 on an
    H200, 2026-12-02): the float64 weight of each block of `DRAW_BLOCK` ids, the block where
    u x total falls, then the cumulative sum inside that block only."""
    m, blocks = block_weights(logits, temperature, banned)
    return draw_in_blocks(logits, temperature, uniforms, m, blocks, banned)


def use_counter_rng(device: torch.device | str, counter_rng: bool | None) -> bool:
    """`counter_rng` None: the counter on a CUDA device, per-row generators elsewhere."""
    return torch.device(device).type == "cuda" if counter_rng is None else counter_rng


def draw_tokens(logits: torch.Tensor, temperature: float, generators: Sequence[torch.Generator] | None,
                banned: torch.Tensor | None = None, *, seeds: torch.Tensor | None = None,
                step: int | torch.Tensor = 0) -> torch.Tensor:
    """One token per row from softmax(logits / temperature); greedy at temperature 0.

    `generators` None: row r's draw is `inverse_cdf_draw` at `counter_uniforms(seeds, step)[r]`;
    otherwise row r draws from `generators[r]` only (`torch.multinomial`). `banned` (a LongTensor
    of ids on the logits' device) is masked before the draw.
    """
    if generators is None and temperature != 0.0:
        return inverse_cdf_draw(logits, temperature, counter_uniforms(seeds, step), banned)
    logits = drawable_logits(logits, banned)
    if temperature == 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.cat([torch.multinomial(probs[r:r + 1], 1, generator=g) for r, g in enumerate(generators)]).squeeze(-1)


def banned_ids(model: PreTrainedModel, device: torch.device | str) -> torch.Tensor | None:
    """The banned ids of `_banned_token_ids` as a tensor on `device`, or None when there are none."""
    ids = _banned_token_ids(model)
    return torch.tensor(ids, dtype=torch.long, device=device) if ids else None


def check_request(prompt_ids: torch.Tensor, max_new_tokens: int, temperature: float,
                  seeds: Sequence[int] | torch.Tensor) -> None:
    """The arguments every decoding loop refuses, one line naming the key."""
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must be [B, P] with P > 0, got {tuple(prompt_ids.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"generation.max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"generation.temperature must be >= 0, got {temperature}")
    if len(seeds) != prompt_ids.shape[0]:
        raise ValueError(f"seeds: one per row, got {len(seeds)} for {prompt_ids.shape[0]} rows")


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float,
    eos_token_id: int,
    pad_token_id: int,
    seeds: Sequence[int] | torch.Tensor,
    prompt_lengths: torch.Tensor | None = None,
    pixel_values: torch.Tensor | None = None,
    image_grid_thw: torch.Tensor | None = None,
    counter_rng: bool | None = None,
) -> Generation:
    """Sample up to `max_new_tokens` per row after prompts of any lengths.

    Args:
        prompt_ids: LongTensor [B, P], right-padded: row b's prompt is its first prompt_lengths[b]
            tokens (`rl.generation.prompt_layout` says how the loop lays them out and why).
        prompt_lengths: LongTensor [B]; None when every row is P tokens long.
        temperature: > 0 samples from softmax(logits / temperature); 0 is greedy.
        seeds: one per row (`row_seeds`), the only source of randomness; same seeds -> same tokens.
        pixel_values, image_grid_thw: a VL model's row-aligned image columns ([B, N, D], [B, 3]).
        counter_rng: draw from `counter_uniforms` (None: on a CUDA device) instead of per-row generators.
    Returns:
        A right-padded `Generation`; rows that hit eos are pad (and masked) afterwards.
    """
    check_request(prompt_ids, max_new_tokens, temperature, seeds)
    B = prompt_ids.shape[0]
    device = prompt_ids.device
    lengths = prompt_lengths_of(prompt_ids, prompt_lengths)
    prompt = left_pad(prompt_ids, lengths, pad_token_id)
    counter = use_counter_rng(device, counter_rng)
    generators = None if counter else row_generators(seeds, device)
    seeds = torch.as_tensor(seeds, dtype=torch.long).to(device)
    tokens = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    logprobs = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=device)
    live = torch.zeros(B, max_new_tokens, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)

    was_training = model.training
    model.eval()
    cache_kw = _cache_kwarg(model)
    banned = banned_ids(model, device)
    images = image_forward_kwargs(model, prompt.ids, pixel_values, image_grid_thw)
    positions, position = prompt_positions(model, prompt, images)
    mask = padding_mask(prompt)
    out = model(input_ids=prompt.ids, attention_mask=mask, position_ids=positions, use_cache=True,
                logits_to_keep=1, **images)
    cache = _returned_cache(out)
    for i in range(max_new_tokens):
        logits = out.logits[:, -1].float()
        tok = draw_tokens(logits, temperature, generators, banned, seeds=seeds, step=i)
        tok = torch.where(done, torch.full_like(tok, pad_token_id), tok)
        live[:, i] = (~done).long()
        tokens[:, i] = tok
        logprobs[:, i] = torch.where(done, 0.0, gather_logprobs(logits, tok))
        done = done | (tok == eos_token_id)
        if bool(done.all()) or i == max_new_tokens - 1:
            break
        # Finished rows keep being fed pad; causality keeps that out of every other row.
        mask = torch.cat([mask, mask.new_ones(B, 1)], dim=1)
        out = model(input_ids=tok.unsqueeze(1), attention_mask=mask, position_ids=position, use_cache=True,
                    **{cache_kw: cache})
        cache = _returned_cache(out)
        position = position + 1
    model.train(was_training)
    return right_padded(prompt_ids, lengths, tokens=tokens, logprobs=logprobs, live=live, done=done,
                        pad=pad_token_id)
