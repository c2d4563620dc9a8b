"""Prompts of different token lengths: how every decoding loop lays them out, and how it hands them back.

Callers give right-padded prompts (`prompt_ids` [B, P], row b's prompt in columns 0..n_b-1) with
their lengths, and get right-padded rollouts back (row b = its prompt, its response, then pad),
which is the layout the log-prob and training passes read. Inside a decoding loop the prompts are
LEFT-padded (right-aligned, row b's prompt in columns P-n_b..P-1) with a padding mask, for these
reasons:

* Every row then writes its next token to the same cache column, so the decode step keeps one
  shape and HF's own caches (`DynamicCache`, `StaticCache`, which index the sequence axis with
  one position shared by all rows) hold the batch unchanged; right padding would need a per-row
  write position in every cache.
* A full-attention layer gets the padding mask (HF builds its causal mask from our 2D mask), so
  no real token ever attends to a pad.
* A gated-delta-net layer gets the same mask as HF gives it (`apply_mask_to_padding_states`):
  the hidden states of pad positions are zeroed before the projections. The conv inputs there are
  then 0, which is what the causal conv's own zero left-padding would feed a prompt decoded
  alone, and the delta rule's k and v are 0, so the recurrent state stays exactly 0 through the
  pads (the decay of a zero state is zero): the state entering a row's first real token is the
  zero state it would start from alone. With right padding the pads would come after the prompt
  and their decay would shrink the state the response reads.
* Positions are per row: a text prompt counts 0..n_b-1 from its first real token and its
  response continues at n_b; a vision-language prompt takes HF's multimodal rotary layout with
  the mask (`get_rope_index` skips the pads) and its response continues at the layout's largest
  position + 1 on all three axes, as it would alone.

Exact in real arithmetic, not in bits: a padded row's attention sums over more (masked) keys and
its delta rule chunks start at another offset, so on a CPU its fp32 log-probs differ from the
prompt decoded alone by float rounding (about 1e-7; the tests hold them to 1e-5, the tolerance
the batch-row independence test already used), while every sampled token is the same. No layout
reaches bits: the CPU's GEMMs already differ between a batch of 1 and of 4 rows (MKL's small-M
path), with no padding at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl.generation.generation import Generation


@dataclass(kw_only=True)
class LeftPadded:
    """Prompts right-aligned in [B, P]: `ids` (pad on the left), `mask` (1 on prompt tokens), `lengths`."""

    ids: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor


def prompt_lengths_of(prompt_ids: torch.Tensor, prompt_lengths: torch.Tensor | None) -> torch.Tensor:
    """The lengths as a LongTensor [B] on the prompts' device (None: every row is P tokens long).

    Raises ValueError for lengths that do not fit [B, P] (each in 1..P)."""
    B, P = prompt_ids.shape
    if prompt_lengths is None:
        return torch.full((B,), P, dtype=torch.long, device=prompt_ids.device)
    lengths = torch.as_tensor(prompt_lengths, dtype=torch.long).to(prompt_ids.device)
    if lengths.shape != (B,) or bool((lengths < 1).any()) or bool((lengths > P).any()):
        raise ValueError(f"prompt_lengths must be {B} lengths in 1..{P}, got {lengths.tolist()}")
    return lengths


def left_pad(prompt_ids: torch.Tensor, lengths: torch.Tensor, pad: int) -> LeftPadded:
    """Right-padded prompts [B, P] -> the same prompts right-aligned, with their padding mask."""
    B, P = prompt_ids.shape
    cols = torch.arange(P, device=prompt_ids.device)
    shift = (P - lengths).unsqueeze(1)  # row b's token j moves to column j + P - n_b
    mask = (cols >= shift).long()
    source = (cols - shift).clamp(min=0).expand(B, P)
    ids = torch.where(mask.bool(), prompt_ids.gather(1, source), pad)
    return LeftPadded(ids=ids, mask=mask, lengths=lengths)


def padding_mask(prompt: LeftPadded) -> torch.Tensor:
    """The [B, P] mask the model gets with the prompt (one function, so a test can drop it)."""
    return prompt.mask


def prompt_positions(model, prompt: LeftPadded, images: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(the prompt's position ids, the first response token's): [B, P] and [B, 1] for a text model,
    [3, B, P] and [3, B, 1] for a vision-language model (pads get position 0; they are masked)."""
    mask = padding_mask(prompt)
    if getattr(model.config, "vision_config", None) is None:
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        return positions, prompt.lengths.unsqueeze(1)
    kinds = images.get("mm_token_type_ids", torch.zeros_like(prompt.ids, dtype=torch.int32))  # text prompts: 0
    positions, _ = model.model.get_rope_index(prompt.ids, mm_token_type_ids=kinds,
                                              image_grid_thw=images.get("image_grid_thw"), attention_mask=mask)
    following = positions.amax(dim=(0, 2)) + 1  # [B]: the layout's largest position + 1
    return positions, following.view(1, -1, 1).expand(3, -1, 1).clone()


def right_padded(prompt_ids: torch.Tensor, lengths: torch.Tensor, *, tokens: torch.Tensor, logprobs: torch.Tensor,
                 live: torch.Tensor, done: torch.Tensor, pad: int) -> Generation:
    """The rollouts laid out as the training passes read them: row b = prompt, response, pad.

    Args:
        prompt_ids, lengths: the right-padded prompts as the caller gave them.
        tokens, logprobs, live: [B, N] response columns from the decoding loop (pad / 0 / 0 after a row ended).
        done: [B] True where the row produced eos.
    """
    B, P = prompt_ids.shape
    N = tokens.shape[1]
    device = prompt_ids.device
    cols = torch.arange(P + N, device=device)
    ends = lengths + live.sum(dim=1)
    in_prompt = cols < lengths.unsqueeze(1)
    input_ids = torch.full((B, P + N), pad, dtype=torch.long, device=device)
    input_ids[:, :P] = torch.where(in_prompt[:, :P], prompt_ids, pad)
    slots = lengths.unsqueeze(1) + torch.arange(N, device=device)  # row b's response column j
    input_ids.scatter_(1, slots, tokens)
    gen_logprobs = torch.zeros(B, P + N, dtype=torch.float32, device=device).scatter_(1, slots, logprobs)
    attention_mask = (cols < ends.unsqueeze(1)).long()
    return Generation(input_ids=input_ids, attention_mask=attention_mask,
                      response_mask=attention_mask * (~in_prompt).long(), gen_logprobs=gen_logprobs,
                      lengths=ends, truncated=~done, prompt_lengths=lengths.clone())
