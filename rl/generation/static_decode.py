"""Fast decoding: a preallocated static cache and the decode step replayed from a CUDA graph.

Why: the eager loop (`rl.generation.sampler.generate`) launches every kernel of every layer from
Python and syncs with the host once a token; on a GPU a small or medium model then spends most of
its time in the host. Here the cache is Hugging Face's `StaticCache` (attention K/V and the
gated-delta-net conv/recurrent states, all updated in place at fixed addresses), and one
iteration, "draw a token from the current logits, record it, run the model on it", is captured
once per (batch bucket, cache length, greedy) and replayed: one graph launch a token, and one host
sync every `SYNC_EVERY` tokens to stop once every row has ended. With graphs the model's decode
forward is also put under `torch.compile` (inductor fuses the norms, rotary and gated-delta-rule
arithmetic that eager runs as many small kernels; its own graphs are off, ours capture the
compiled kernels together with the draw). The prompt's forward stays eager (its length varies).

The same iteration runs uncaptured on the CPU (`use_graphs=False`), which is how CPU tests prove
it produces what the eager loop does. Randomness: every draw comes from the decoder's own
generator, seeded per call, registered with the graph, so a seed gives the same bits on the same
machine whether the step is replayed or run eagerly.

A vision-language model: the prompt forward (eager) also gets the images, at the multimodal
rotary (M-RoPE) positions HF's `get_rope_index` lays out. A response token then sits at its cache
position plus its row's rope delta (the layout's largest position + 1 - P) on all three axes, as in
HF's own decode step; here that is a [3, Bb, 1] position tensor set at the prompt and stepped in
place, so the captured step needs no images and no host arithmetic.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, StaticCache

from rl.generation.sampler import Generation, _cache_kwarg, banned_ids, check_request, draw_tokens
from rl.models.image_inputs import image_forward_kwargs
from rl.models.logprobs import gather_logprobs

SYNC_EVERY = 8  # tokens between host checks for "every row has ended"
MAX_SLOTS = 4  # captured shapes kept per decoder (each holds a cache and a graph)


def batch_bucket(batch: int) -> int:
    """Rows padded up to a multiple of 8 (powers of two below 8), so nearby batch sizes share a graph.

    The padding rows draw from the same generator, so a padded batch's tokens are a pure function
    of (seed, bucket), not equal to an unpadded run's."""
    if batch <= 8:
        return 1 << (batch - 1).bit_length()
    return -(-batch // 8) * 8


def _pad_rows(x: torch.Tensor | None, rows: int, device: torch.device) -> torch.Tensor | None:
    """`x` on `device` with copies of its row 0 up to `rows` rows (a bucket's extra rows, dropped
    from the result); None stays None."""
    if x is None:
        return None
    x = x.to(device)
    return torch.cat([x, x[:1].expand(rows - x.shape[0], *x.shape[1:])]) if rows > x.shape[0] else x


@dataclass(kw_only=True)
class _Slot:
    """The static buffers of one shape; every tensor keeps its address for the graph's lifetime."""

    cache: StaticCache
    logits: torch.Tensor  # [Bb, V] float32, the logits the next draw reads
    tok_in: torch.Tensor  # [Bb, 1] the token the model is fed
    position: torch.Tensor  # [Bb, 1] its position; [3, Bb, 1] (t, h, w) for a vision-language model
    done: torch.Tensor  # [Bb] bool
    step: torch.Tensor  # [1] long, the column the next draw writes
    tokens: torch.Tensor  # [Bb, N]
    logprobs: torch.Tensor  # [Bb, N] float32
    live: torch.Tensor  # [Bb, N] long
    generator: torch.Generator
    graph: torch.cuda.CUDAGraph | None = None


class StaticDecoder:
    """Samples like `rl.generation.sampler.generate`, from a static cache, CUDA graphs on a GPU."""

    def __init__(self, model: PreTrainedModel, *, use_graphs: bool) -> None:
        self.model = model
        self.vision = getattr(model.config, "vision_config", None) is not None
        self.use_graphs = use_graphs
        self.device = next(model.parameters()).device
        if use_graphs and self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, the model is on {self.device}")
        self.cache_kw = _cache_kwarg(model)
        self.decode_model = torch.compile(model, dynamic=False) if use_graphs else model
        self.banned = banned_ids(model, self.device)
        self._slots: OrderedDict[tuple, _Slot] = OrderedDict()

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, *, max_new_tokens: int, temperature: float,
                 eos_token_id: int, pad_token_id: int, seed: int, pixel_values: torch.Tensor | None = None,
                 image_grid_thw: torch.Tensor | None = None) -> Generation:
        """Same contract as `rl.generation.sampler.generate`, every draw from a generator seeded with `seed`."""
        check_request(prompt_ids, max_new_tokens, temperature)
        B, P = prompt_ids.shape
        Bb = batch_bucket(B) if self.use_graphs else B  # buckets share graphs; without one, no padding
        prompt = _pad_rows(prompt_ids, Bb, self.device)
        images = image_forward_kwargs(self.model, prompt, _pad_rows(pixel_values, Bb, self.device),
                                      _pad_rows(image_grid_thw, Bb, self.device))
        was_training = self.model.training
        self.model.eval()
        try:
            key = (Bb, P + max_new_tokens, max_new_tokens, temperature, eos_token_id, pad_token_id)
            slot = self._slot(key, prompt, images, temperature=temperature, eos=eos_token_id, pad=pad_token_id)
            self._prefill(slot, prompt, images, seed=seed, pad=pad_token_id)
            run = slot.graph.replay if slot.graph is not None else (
                lambda: self._iterate(slot, temperature=temperature, eos=eos_token_id, pad=pad_token_id))
            for i in range(max_new_tokens):
                run()
                if (i + 1) % SYNC_EVERY == 0 and i + 1 < max_new_tokens and bool(slot.done.all()):
                    break
        finally:
            self.model.train(was_training)
        live = slot.live[:B].clone()
        prompt_mask = torch.ones(B, P, dtype=torch.long, device=self.device)
        return Generation(
            input_ids=torch.cat([prompt_ids.to(self.device), slot.tokens[:B].clone()], dim=1),
            attention_mask=torch.cat([prompt_mask, live], dim=1),
            response_mask=torch.cat([torch.zeros_like(prompt_mask), live], dim=1),
            gen_logprobs=torch.cat([torch.zeros(B, P, device=self.device), slot.logprobs[:B].clone()], dim=1),
            lengths=P + live.sum(dim=1),
            truncated=~slot.done[:B].clone(),
            prompt_length=P,
        )

    def _forward(self, slot: _Slot, input_ids: torch.Tensor, position_ids: torch.Tensor, *,
                 decode: bool = False, **images: torch.Tensor) -> torch.Tensor:
        model = self.decode_model if decode else self.model
        out = model(input_ids=input_ids, position_ids=position_ids, use_cache=True, logits_to_keep=1,
                    **{self.cache_kw: slot.cache}, **images)
        return out.logits[:, -1].float()

    def _positions(self, prompt: torch.Tensor, images: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(the prompt's position ids, the first response token's), shaped as `_Slot.position`.

        A text model counts 0..P-1, then P. A vision-language model's prompt takes HF's layout
        ([3, Bb, P]); its response continues at P + the row's rope delta on every axis."""
        Bb, P = prompt.shape
        if not self.vision:
            return torch.arange(P, device=self.device).expand(Bb, P), torch.full((Bb, 1), P, device=self.device)
        kinds = images.get("mm_token_type_ids", torch.zeros_like(prompt, dtype=torch.int32))  # text prompts: 0
        positions, deltas = self.model.model.get_rope_index(prompt, mm_token_type_ids=kinds,
                                                            image_grid_thw=images.get("image_grid_thw"))
        return positions, (P + deltas).expand(3, Bb, 1)

    def _iterate(self, slot: _Slot, *, temperature: float, eos: int, pad: int) -> None:
        """One token for every row: draw, record, feed it to the model. Fixed shapes, no host sync."""
        tok = draw_tokens(slot.logits, temperature, slot.generator, self.banned)
        tok = torch.where(slot.done, pad, tok)
        column = slot.step
        slot.live.index_copy_(1, column, (~slot.done).long().unsqueeze(1))
        slot.tokens.index_copy_(1, column, tok.unsqueeze(1))
        lp = torch.where(slot.done, 0.0, gather_logprobs(slot.logits, tok))
        slot.logprobs.index_copy_(1, column, lp.unsqueeze(1))
        slot.done.logical_or_(tok == eos)
        slot.step.add_(1)
        slot.tok_in.copy_(tok.unsqueeze(1))
        slot.logits.copy_(self._forward(slot, slot.tok_in, slot.position, decode=True))
        slot.position.add_(1)

    def _prefill(self, slot: _Slot, prompt: torch.Tensor, images: dict[str, torch.Tensor], *, seed: int,
                 pad: int) -> None:
        """Reset the slot's buffers in place and run the prompt (eagerly, with its images) into its cache."""
        slot.cache.reset()  # in place: zeroed K/V and states, write position 0, "prefill next"
        positions, following = self._positions(prompt, images)
        slot.logits.copy_(self._forward(slot, prompt, positions, **images))
        slot.position.copy_(following)
        slot.done.zero_()
        slot.step.zero_()
        slot.tokens.fill_(pad)
        slot.logprobs.zero_()
        slot.live.zero_()
        slot.generator.manual_seed(seed)

    def _slot(self, key: tuple, prompt: torch.Tensor, images: dict[str, torch.Tensor], *, temperature: float,
              eos: int, pad: int) -> _Slot:
        if key in self._slots:
            self._slots.move_to_end(key)
            return self._slots[key]
        while len(self._slots) >= MAX_SLOTS:
            self._slots.popitem(last=False)
        Bb, length, n = key[0], key[1], key[2]
        d = self.device
        vocab = self.model.get_output_embeddings().weight.shape[0]
        slot = _Slot(
            cache=StaticCache(config=self.model.config, max_cache_len=length),
            logits=torch.zeros(Bb, vocab, dtype=torch.float32, device=d),
            tok_in=torch.zeros(Bb, 1, dtype=torch.long, device=d),
            position=torch.zeros((3, Bb, 1) if self.vision else (Bb, 1), dtype=torch.long, device=d),
            done=torch.zeros(Bb, dtype=torch.bool, device=d),
            step=torch.zeros(1, dtype=torch.long, device=d),
            tokens=torch.full((Bb, n), pad, dtype=torch.long, device=d),
            logprobs=torch.zeros(Bb, n, dtype=torch.float32, device=d),
            live=torch.zeros(Bb, n, dtype=torch.long, device=d),
            generator=torch.Generator(device=d),
        )
        if self.use_graphs:
            slot.graph = self._capture(slot, prompt, images, temperature=temperature, eos=eos, pad=pad)
        self._slots[key] = slot
        return slot

    def _capture(self, slot: _Slot, prompt: torch.Tensor, images: dict[str, torch.Tensor], *, temperature: float,
                 eos: int, pad: int) -> torch.cuda.CUDAGraph:
        """Warm the step up on a side stream (compiles the decode forward, allocates), then capture
        one iteration."""
        self._prefill(slot, prompt, images, seed=0, pad=pad)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._iterate(slot, temperature=temperature, eos=eos, pad=pad)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(slot.generator)
        with torch.cuda.graph(graph):
            self._iterate(slot, temperature=temperature, eos=eos, pad=pad)
        return graph
