"""KV-cache sampling with our own loop, so a rollout is bitwise reproducible from a generator.

Why not `model.generate`: its sampling draws from the global RNG through logits processors we
do not control, and it does not return the log-probs we need for the importance-sampling
correction. Here every random draw is one `torch.multinomial(..., generator=generator)` per
step, and the model's own cache (`DynamicCache`, which for Qwen3.5 holds both the attention
KV tensors and the linear-attention conv/recurrent states) carries the context.

`gen_logprobs` are temperature-1 log-probs, `log_softmax(raw logits)`, of the sampled tokens,
whatever the sampling temperature: they are what `token_logprobs` recomputes by teacher forcing
on the same weights, which is what the GRPO loss and the refit/parity checks compare.

Images (a vision-language model): the prompt forward also gets the row-aligned image columns;
later steps only feed tokens, and the model continues its multimodal rotary positions from
the offset it stored at the prompt. The image placeholder tokens are never sampled (their
logits are masked before the draw, not in the recorded log-probs): a placeholder in a
response would not match any image when the rollout is scored by teacher forcing.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.models.image_inputs import image_forward_kwargs
from rl.models.logprobs import gather_logprobs


@dataclass(kw_only=True)
class Generation:
    """One batch of rollouts, right-padded to [B, P + max_new_tokens].

    input_ids: prompt then response, pad after the end of each row.
    attention_mask: 1 on prompt and response tokens (including the eos).
    response_mask: 1 on generated tokens only (including the eos).
    gen_logprobs: temperature-1 log-prob of each generated token; 0 elsewhere.
    lengths: unpadded total length (prompt + response) per row.
    truncated: True where no eos was produced within max_new_tokens.
    prompt_length: P, the same for every row.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    gen_logprobs: torch.Tensor
    lengths: torch.Tensor
    truncated: torch.Tensor
    prompt_length: int

    def response_ids(self) -> list[list[int]]:
        """The generated token ids of each row (eos included when produced)."""
        P = self.prompt_length
        return [row[P:n].tolist() for row, n in zip(self.input_ids, self.lengths.tolist())]


def decode_responses(tokenizer: PreTrainedTokenizerBase, gen: Generation) -> list[str]:
    """Response texts without special tokens (eos, pad): what a task's `score` reads."""
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in gen.response_ids()]


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


def draw_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator,
                banned: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from softmax(logits / temperature); greedy at temperature 0.

    `banned` (a LongTensor of ids on the logits' device) is masked before the draw. On a CUDA
    device the draw is the exponential race (argmax of p / E, E ~ Exp(1) from `generator`): an
    exact sample from p like `torch.multinomial`, with fixed shapes and no host sync, so it can be
    captured in a CUDA graph (rl.generation.static_decode). On the CPU it is `torch.multinomial`.
    """
    if banned is not None and banned.numel():
        logits = logits.index_fill(1, banned, float("-inf"))
    if temperature == 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if logits.device.type == "cuda":
        race = torch.empty_like(probs).exponential_(generator=generator)
        return (probs / race).argmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def banned_ids(model: PreTrainedModel, device: torch.device | str) -> torch.Tensor | None:
    """The banned ids of `_banned_token_ids` as a tensor on `device`, or None when there are none."""
    ids = _banned_token_ids(model)
    return torch.tensor(ids, dtype=torch.long, device=device) if ids else None


def check_request(prompt_ids: torch.Tensor, max_new_tokens: int, temperature: float) -> None:
    """The arguments every decoding loop refuses, one line naming the key."""
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must be [B, P] with P > 0, got {tuple(prompt_ids.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"generation.max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"generation.temperature must be >= 0, got {temperature}")


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float,
    eos_token_id: int,
    pad_token_id: int,
    generator: torch.Generator,
    pixel_values: torch.Tensor | None = None,
    image_grid_thw: torch.Tensor | None = None,
) -> Generation:
    """Sample up to `max_new_tokens` per row after unpadded, equal-length prompts.

    Args:
        prompt_ids: LongTensor [B, P]; every position is a real token (tasks render prompts at
            a fixed token length, so a batch needs no padding).
        temperature: > 0 samples from softmax(logits / temperature); 0 is greedy.
        generator: the only source of randomness; same generator state -> same tokens.
        pixel_values, image_grid_thw: a VL model's row-aligned image columns ([B, N, D], [B, 3]).
    Returns:
        A `Generation`; rows that hit eos are pad (and masked) afterwards.
    """
    check_request(prompt_ids, max_new_tokens, temperature)
    B, P = prompt_ids.shape
    device = prompt_ids.device
    tokens = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    logprobs = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=device)
    live = torch.zeros(B, max_new_tokens, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)

    was_training = model.training
    model.eval()
    cache_kw = _cache_kwarg(model)
    banned = banned_ids(model, device)
    images = image_forward_kwargs(model, prompt_ids, pixel_values, image_grid_thw)
    out = model(input_ids=prompt_ids, use_cache=True, logits_to_keep=1, **images)
    cache = _returned_cache(out)
    for i in range(max_new_tokens):
        logits = out.logits[:, -1].float()
        tok = draw_tokens(logits, temperature, generator, banned)
        tok = torch.where(done, torch.full_like(tok, pad_token_id), tok)
        live[:, i] = (~done).long()
        tokens[:, i] = tok
        logprobs[:, i] = torch.where(done, 0.0, gather_logprobs(logits, tok))
        done = done | (tok == eos_token_id)
        if bool(done.all()) or i == max_new_tokens - 1:
            break
        # Finished rows keep being fed pad; causality keeps that out of every other row.
        out = model(input_ids=tok.unsqueeze(1), use_cache=True, **{cache_kw: cache})
        cache = _returned_cache(out)
    model.train(was_training)

    prompt_mask = torch.ones(B, P, dtype=torch.long, device=device)
    return Generation(
        input_ids=torch.cat([prompt_ids, tokens], dim=1),
        attention_mask=torch.cat([prompt_mask, live], dim=1),
        response_mask=torch.cat([torch.zeros_like(prompt_mask), live], dim=1),
        gen_logprobs=torch.cat([torch.zeros(B, P, device=device), logprobs], dim=1),
        lengths=P + live.sum(dim=1),
        truncated=~done,
        prompt_length=P,
    )
