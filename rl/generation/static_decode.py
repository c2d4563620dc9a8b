"""Fast decoding: a preallocated static cache and the decode step replayed from a CUDA graph.

Why: the eager loop (`rl.generation.sampler.generate`) launches every kernel of every layer from
Python and syncs with the host once a token; on a GPU a small or medium model then spends most of
its time in the host. Here the cache is Hugging Face's `StaticCache` (attention K/V and the
gated-delta-net conv/recurrent states, all updated in place at fixed addresses), and one
iteration, "draw a token from the current logits, record it, run the model on it", is captured
once per (batch bucket, cache length, greedy) and replayed: one graph launch a token, and one host
sync every `SYNC_EVERY` tokens to stop once every row has ended. With graphs the decode step,
"the model's forward on the fed token, then the statistics the next draw and log-prob need", is
also put under `torch.compile` (inductor fuses the norms, rotary and gated-delta-rule arithmetic
that eager runs as many small kernels; its own graphs are off, ours capture the compiled kernels
together with the draw). The prompt's forward stays eager (its length varies).

The logits stay in the model's dtype (bf16 on a GPU; upcast from it exactly), and the step
reduces them as it writes them: their log-sum-exp (`next_token_stats`, for the log-prob) and the
first level of the two-level draw (`rl.generation.sampler.block_weights`). The draw then reads
one block of ids per row. Eager, every token made float32 copies of the [B, V] logits (the copy,
the draw's weights, log_softmax's output): ~660 MB of memory traffic a step at batch 64 and a
152k vocabulary, where the fused reductions read the bf16 logits once.

The same iteration runs uncaptured on the CPU (`use_graphs=False`), which is how CPU tests prove
it produces what the eager loop does. Randomness: row r draws from its own generator, seeded
per call with that row's seed, registered with the graph, so the seeds give the same bits on the
same machine whether the step is replayed or run eagerly. On a GPU row r draws from a counter
instead (`rl.generation.sampler.counter_uniforms` of its seed and the slot's step, both device
buffers): a replay then advances no generator state at all.

Prompts of any lengths are laid out as `rl.generation.prompt_layout` says (right-aligned, with a
padding mask and per-row positions); the mask of the whole static cache is fixed for a call (pads
0, every later column 1; causality hides the columns not written yet), so the captured step reads
it from a buffer set at the prompt. A vision-language model: the prompt forward (eager) also gets
the images, at the multimodal rotary (M-RoPE) positions HF's `get_rope_index` lays out, and its
response continues at the layout's largest position + 1 on all three axes; here that is a
[3, Bb, 1] position tensor set at the prompt and stepped in place, so the captured step needs no
images and no host arithmetic.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, StaticCache

from rl.generation.draw_kernel import draw_in_blocks_kernel
from rl.generation.generation import Generation
from rl.generation.logit_stats import combine_block_stats, logit_block_stats
from rl.generation.prompt_layout import (
    LeftPadded,
    left_pad,
    padding_mask,
    prompt_lengths_of,
    prompt_positions,
    right_padded,
)
from rl.generation.sampler import (
    DRAW_BLOCK,
    _cache_kwarg,
    banned_ids,
    block_weights,
    check_request,
    counter_uniforms,
    draw_in_blocks,
    draw_tokens,
    fused_counter_uniforms,
    use_counter_rng,
)
from rl.generation.triton_runs import triton_runs
from rl.models.image_inputs import image_forward_kwargs
from rl.models.logprobs import gather_logprobs

SYNC_EVERY = 8  # tokens between host checks for "every row has ended"
# the model classes whose logits are their base model's last hidden state times the output
# projection's weight, nothing else (transformers' `forward`): the decode step can write them itself
DIRECT_HEAD_CLASSES = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForConditionalGeneration",
                       "Qwen3_5MoeForConditionalGeneration")
MAX_SLOTS = 4  # captured shapes kept per decoder (each holds a cache and a graph): generation.decode_slots' default


def batch_bucket(batch: int) -> int:
    """Rows padded up to a multiple of 8 (powers of two below 8), so nearby batch sizes share a graph.

    The padding rows draw from generators of their own, so they change no real row's tokens."""
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


def next_token_stats(logits: torch.Tensor, temperature: float, banned: torch.Tensor | None, blocks: bool,
                     fused: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """What the next draw and log-prob read besides the logits [B, V]: logsumexp in float32 [B]
    (`gather_logprobs`' `lse`), and with `blocks` `block_weights`' (row max, block weights).
    `fused` (with `blocks`): all three from `rl.generation.logit_stats`' one pass over the logits."""
    if fused and blocks:
        return combine_block_stats(logit_block_stats(logits, temperature, banned), temperature)
    lse = torch.logsumexp(logits.float(), dim=-1)
    return (lse, *block_weights(logits, temperature, banned)) if blocks else (lse, None, None)


@dataclass(kw_only=True)
class _Slot:
    """The static buffers of one shape; every tensor keeps its address for the graph's lifetime."""

    cache: StaticCache
    logits: torch.Tensor  # [Bb, V] in the model's dtype, the logits the next draw reads
    lse: torch.Tensor  # [Bb] float32, their log-sum-exp
    draw_max: torch.Tensor  # [Bb, 1] float32, their row max over drawable ids (the counter's draw)
    draw_blocks: torch.Tensor  # [Bb, blocks] float64, `block_weights` (the counter's draw)
    tok_in: torch.Tensor  # [Bb, 1] the token the model is fed
    position: torch.Tensor  # [Bb, 1] its position; [3, Bb, 1] (t, h, w) for a vision-language model
    mask: torch.Tensor  # [Bb, P + N] long: 0 on prompt padding, 1 elsewhere
    done: torch.Tensor  # [Bb] bool
    step: torch.Tensor  # [1] long, the column the next draw writes
    tokens: torch.Tensor  # [Bb, N]
    logprobs: torch.Tensor  # [Bb, N] float32
    live: torch.Tensor  # [Bb, N] long
    seeds: torch.Tensor  # [Bb] long, the rows' seeds (the counter's input)
    generators: list[torch.Generator] | None  # one per row; None: the counter draws
    graph: torch.cuda.CUDAGraph | None = None


class StaticDecoder:
    """Samples like `rl.generation.sampler.generate`, from a static cache, CUDA graphs on a GPU."""

    def __init__(self, model: PreTrainedModel, *, use_graphs: bool, counter_rng: bool | None = None,
                 max_slots: int = MAX_SLOTS, fused_draw: bool = False, compile_mode: str | None = None,
                 fused_stats: bool = False, draw_kernel: bool = False, direct_head: bool | None = None) -> None:
        """`max_slots`: call shapes kept captured, each with its cache (`generation.decode_slots`).
        `fused_draw`: with graphs, the counter generator's hash as one compiled kernel
        (`fused_counter_uniforms`, the same bits) instead of ~100 small ones (the generation worker's).
        `compile_mode`: `torch.compile`'s mode for the graphs' step (None: its default; the bench's
        `ours_graphs_autotune` tries "max-autotune-no-cudagraphs", which times inductor's matrix
        products against cuBLAS's for the step's shapes).
        `fused_stats`: the step's logit statistics from one Triton pass (`rl.generation.logit_stats`)
        where Triton runs (the generation worker's; bench/bench_generation.py `ours_graphs_torch_stats`
        measures the compiled torch arithmetic beside it).
        `draw_kernel`: the counter draw's second level as one Triton kernel
        (`rl.generation.draw_kernel`) where Triton runs, where torch ran ~8 small kernels (the
        generation worker's: dense_1b batch 64, one H100, 2026-12-05: 46,432 -> 48,714 decode tokens/s;
        bench/bench_generation.py `ours_graphs_draw_torch` measures the torch draw beside it).
        `direct_head`: the decode step's output projection writes the logits into the slot's buffer
        (`torch.mm(..., out=)`), where the compiled step's product wrote a buffer of its own that was
        then copied (a [B, V] copy a token: 9.6 us at batch 64, 36 us at 256 on dense_1b, one H200).
        None: with graphs, for `DIRECT_HEAD_CLASSES` without an output bias (bench/bench_generation.py
        `ours_graphs_head_copy` measures the copy beside it); True: always (a CPU test)."""
        if max_slots < 1:
            raise ValueError(f"max_slots must be >= 1, got {max_slots}")
        self.model = model
        self.max_slots = max_slots
        self.vision = getattr(model.config, "vision_config", None) is not None
        self.use_graphs = use_graphs
        self.bucket_rows = use_graphs  # rows padded to `batch_bucket`; a CPU test sets it to run the graphs' layout
        self.device = next(model.parameters()).device
        if use_graphs and self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, the model is on {self.device}")
        self.counter = use_counter_rng(self.device, counter_rng)  # the graphs' draw on a GPU; a CPU test sets it
        self.cache_kw = _cache_kwarg(model)
        self.decode_step = torch.compile(self._step, dynamic=False, mode=compile_mode) if use_graphs else self._step
        head = model.get_output_embeddings()
        fits = type(model).__name__ in DIRECT_HEAD_CLASSES and getattr(head, "bias", None) is None
        if direct_head and not fits:
            raise ValueError(f"direct_head: {type(model).__name__}'s logits are not its hidden state times a weight")
        self.direct_head = fits and (use_graphs if direct_head is None else direct_head)
        self.decode_body = torch.compile(self._body, dynamic=False, mode=compile_mode) if use_graphs else self._body
        self.decode_stats = torch.compile(self._stats, dynamic=False) if use_graphs else self._stats
        self.uniforms = fused_counter_uniforms if use_graphs and fused_draw else counter_uniforms
        self.banned = banned_ids(model, self.device)
        self.fused_stats = fused_stats and triton_runs(next(model.parameters()))
        self.draw_kernel = draw_kernel and triton_runs(next(model.parameters()))
        self.draw_second_level = draw_in_blocks_kernel if self.draw_kernel else draw_in_blocks
        self._slots: OrderedDict[tuple, _Slot] = OrderedDict()
        self._marks: list = []  # the last call's start, end of prompt, end: CUDA events, or host clocks on a CPU

    def _mark(self) -> None:
        if self.device.type == "cuda":
            self._marks.append(torch.cuda.Event(enable_timing=True))
            self._marks[-1].record()
        else:
            self._marks.append(time.perf_counter())

    def phase_seconds(self) -> tuple[float, float]:
        """(the prompt's forward, the decode steps) of the last call, in seconds: a generation
        figure's two parts, which scale differently (the prompt with its length, the steps with the
        new tokens), so a decode step's roofline is set against the steps alone. Syncs with the device."""
        if len(self._marks) != 3:
            raise RuntimeError("no finished generate call to time")
        start, prompt, end = self._marks
        if self.device.type == "cuda":
            end.synchronize()
            return start.elapsed_time(prompt) / 1e3, prompt.elapsed_time(end) / 1e3
        return prompt - start, end - prompt

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, *, max_new_tokens: int, temperature: float,
                 eos_token_id: int, pad_token_id: int, seeds: torch.Tensor, prompt_lengths: torch.Tensor | None = None,
                 pixel_values: torch.Tensor | None = None, image_grid_thw: torch.Tensor | None = None) -> Generation:
        """Same contract as `rl.generation.sampler.generate`: row r draws from a generator seeded `seeds[r]`."""
        check_request(prompt_ids, max_new_tokens, temperature, seeds)
        B, P = prompt_ids.shape
        prompt_ids = prompt_ids.to(self.device)
        lengths = prompt_lengths_of(prompt_ids, prompt_lengths)
        Bb = batch_bucket(B) if self.bucket_rows else B  # buckets share graphs; without one, no padding
        prompt = left_pad(prompt_ids, lengths, pad_token_id)
        prompt = LeftPadded(ids=_pad_rows(prompt.ids, Bb, self.device), mask=_pad_rows(prompt.mask, Bb, self.device),
                            lengths=_pad_rows(lengths, Bb, self.device))
        images = image_forward_kwargs(self.model, prompt.ids, _pad_rows(pixel_values, Bb, self.device),
                                      _pad_rows(image_grid_thw, Bb, self.device))
        seeds = torch.as_tensor(seeds, dtype=torch.long)
        seeds = torch.cat([seeds, seeds[:1].expand(Bb - B) + 1 + seeds.max()])  # bucket rows: seeds of their own
        was_training = self.model.training
        self.model.eval()
        try:
            key = (Bb, P, max_new_tokens, temperature, eos_token_id, pad_token_id)
            slot = self._slot(key, prompt, images, temperature=temperature, eos=eos_token_id, pad=pad_token_id)
            self._marks = []
            self._mark()
            self._prefill(slot, prompt, images, seeds=seeds, temperature=temperature, pad=pad_token_id)
            self._mark()
            run = slot.graph.replay if slot.graph is not None else (
                lambda: self._iterate(slot, temperature=temperature, eos=eos_token_id, pad=pad_token_id))
            for i in range(max_new_tokens):
                run()
                if (i + 1) % SYNC_EVERY == 0 and i + 1 < max_new_tokens and bool(slot.done.all()):
                    break
            self._mark()
        finally:
            self.model.train(was_training)
        return right_padded(prompt_ids, lengths, tokens=slot.tokens[:B].clone(), logprobs=slot.logprobs[:B].clone(),
                            live=slot.live[:B].clone(), done=slot.done[:B].clone(), pad=pad_token_id)

    def _block_draw(self, temperature: float) -> bool:
        """Whether the draw reads the step's block weights: the counter's draw, when sampling."""
        return self.counter and temperature != 0.0

    def _step(self, cache: StaticCache, input_ids: torch.Tensor, position_ids: torch.Tensor,
              attention_mask: torch.Tensor, temperature: float,
              **images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The model on `input_ids`: the last position's logits and their `next_token_stats`."""
        out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, use_cache=True,
                         logits_to_keep=1, **{self.cache_kw: cache}, **images)
        logits = out.logits[:, -1]
        return (logits, *self._stats(logits, temperature))

    def _body(self, cache: StaticCache, input_ids: torch.Tensor, position_ids: torch.Tensor,
              attention_mask: torch.Tensor) -> torch.Tensor:
        """The base model on the fed token (`direct_head`'s step): its last hidden state [B, H]."""
        out = self.model.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                               use_cache=True, **{self.cache_kw: cache})
        return out.last_hidden_state[:, -1]

    def _stats(self, logits: torch.Tensor, temperature: float) -> tuple[torch.Tensor | None, ...]:
        return next_token_stats(logits, temperature, self.banned, self._block_draw(temperature), self.fused_stats)

    def _store(self, slot: _Slot, step: tuple[torch.Tensor, ...]) -> None:
        slot.logits.copy_(step[0])
        self._store_stats(slot, step[1:])

    def _store_stats(self, slot: _Slot, stats: tuple[torch.Tensor | None, ...]) -> None:
        lse, m, blocks = stats
        slot.lse.copy_(lse)
        if m is not None:
            slot.draw_max.copy_(m)
            slot.draw_blocks.copy_(blocks)

    def _iterate(self, slot: _Slot, *, temperature: float, eos: int, pad: int) -> None:
        """One token for every row: draw, record, feed it to the model. Fixed shapes, no host sync."""
        if self._block_draw(temperature):  # `draw_tokens`' counter draw, its first level done by the step
            tok = self.draw_second_level(slot.logits, temperature, self.uniforms(slot.seeds, slot.step), slot.draw_max,
                                         slot.draw_blocks, self.banned)
        else:
            tok = draw_tokens(slot.logits, temperature, slot.generators, self.banned, seeds=slot.seeds,
                              step=slot.step)
        tok = torch.where(slot.done, pad, tok)
        column = slot.step
        slot.live.index_copy_(1, column, (~slot.done).long().unsqueeze(1))
        slot.tokens.index_copy_(1, column, tok.unsqueeze(1))
        lp = torch.where(slot.done, 0.0, gather_logprobs(slot.logits, tok, slot.lse))
        slot.logprobs.index_copy_(1, column, lp.unsqueeze(1))
        slot.done.logical_or_(tok == eos)
        slot.step.add_(1)
        slot.tok_in.copy_(tok.unsqueeze(1))
        if self.direct_head:
            hidden = self.decode_body(slot.cache, slot.tok_in, slot.position, slot.mask)
            torch.mm(hidden, self.model.get_output_embeddings().weight.t(), out=slot.logits)
            self._store_stats(slot, self.decode_stats(slot.logits, temperature))
        else:
            self._store(slot, self.decode_step(slot.cache, slot.tok_in, slot.position, slot.mask, temperature))
        slot.position.add_(1)

    def _prefill(self, slot: _Slot, prompt: LeftPadded, images: dict[str, torch.Tensor], *, seeds: torch.Tensor,
                 temperature: float, pad: int) -> None:
        """Reset the slot's buffers in place and run the prompt (eagerly, with its images) into its cache."""
        slot.cache.reset()  # in place: zeroed K/V and states, write position 0, "prefill next"
        P = prompt.ids.shape[1]
        mask = padding_mask(prompt)
        slot.mask.fill_(1)
        slot.mask[:, :P].copy_(mask)
        positions, following = prompt_positions(self.model, prompt, images)
        self._store(slot, self._step(slot.cache, prompt.ids, positions, slot.mask[:, :P], temperature, **images))
        slot.position.copy_(following)
        slot.done.zero_()
        slot.step.zero_()
        slot.tokens.fill_(pad)
        slot.logprobs.zero_()
        slot.live.zero_()
        slot.seeds.copy_(seeds)
        for g, seed in zip(slot.generators or (), seeds.tolist()):
            g.manual_seed(seed)

    def _slot(self, key: tuple, prompt: LeftPadded, images: dict[str, torch.Tensor], *, temperature: float,
              eos: int, pad: int) -> _Slot:
        if key in self._slots:
            self._slots.move_to_end(key)
            return self._slots[key]
        while len(self._slots) >= self.max_slots:
            self._slots.popitem(last=False)
        Bb, P, n = key[0], key[1], key[2]
        d = self.device
        head = self.model.get_output_embeddings().weight
        vocab = head.shape[0]
        slot = _Slot(
            cache=StaticCache(config=self.model.config, max_cache_len=P + n),
            logits=torch.zeros(Bb, vocab, dtype=head.dtype, device=d),
            lse=torch.zeros(Bb, dtype=torch.float32, device=d),
            draw_max=torch.zeros(Bb, 1, dtype=torch.float32, device=d),
            draw_blocks=torch.zeros(Bb, -(-vocab // DRAW_BLOCK), dtype=torch.float64, device=d),
            tok_in=torch.zeros(Bb, 1, dtype=torch.long, device=d),
            position=torch.zeros((3, Bb, 1) if self.vision else (Bb, 1), dtype=torch.long, device=d),
            mask=torch.ones(Bb, P + n, dtype=torch.long, device=d),
            done=torch.zeros(Bb, dtype=torch.bool, device=d),
            step=torch.zeros(1, dtype=torch.long, device=d),
            tokens=torch.full((Bb, n), pad, dtype=torch.long, device=d),
            logprobs=torch.zeros(Bb, n, dtype=torch.float32, device=d),
            live=torch.zeros(Bb, n, dtype=torch.long, device=d),
            seeds=torch.zeros(Bb, dtype=torch.long, device=d),
            generators=None if self.counter else [torch.Generator(device=d) for _ in range(Bb)],
        )
        if self.use_graphs:
            slot.graph = self._capture(slot, prompt, images, temperature=temperature, eos=eos, pad=pad)
        self._slots[key] = slot
        return slot

    def _capture(self, slot: _Slot, prompt: LeftPadded, images: dict[str, torch.Tensor], *, temperature: float,
                 eos: int, pad: int) -> torch.cuda.CUDAGraph:
        """Warm the step up on a side stream (compiles the decode forward, allocates), then capture
        one iteration."""
        self._prefill(slot, prompt, images, seeds=torch.arange(len(slot.seeds)), temperature=temperature, pad=pad)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._iterate(slot, temperature=temperature, eos=eos, pad=pad)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        for g in slot.generators or ():
            graph.register_generator_state(g)
        with torch.cuda.graph(graph):
            self._iterate(slot, temperature=temperature, eos=eos, pad=pad)
        return graph
