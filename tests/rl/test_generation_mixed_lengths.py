"""Prompts of different lengths in one batch: every row samples what its prompt samples alone.

For each decoding loop (eager, static; graphs where a GPU is present) and each model class
(qwen3_5, qwen3_5_moe, the vision-language class with images), a mixed batch's rows are compared
with each prompt decoded alone with that row's seed: the same tokens, bit for bit, and the same
log-probs up to float rounding (1e-5; rl.generation.prompt_layout says why not bits). The rows
come longest first and longest last, with garbage in the callers' pad slots. Dropping the
padding mask fails the same comparison (the negative case below). Counting positions from the
column instead of the row's first token is not a fault this can see, nor one that matters: rotary
attention reads only position differences, and a row's shift is the same for all its tokens
(a VL prompt's positions relative to its image are test_generation_static_vision's case).
"""

from __future__ import annotations

import pytest
import torch
from decode_models import EOS, PAD, VOCAB, text_model, vision_model

from rl.generation import Generation, generate, prompt_layout, row_seeds, sampler, static_decode
from rl.generation.static_decode import StaticDecoder
from rl.models import ImageLayout, token_logprobs
from rl.models.image_inputs import patchify

torch.set_num_threads(1)
LENGTHS = (9, 3, 6, 1, 7)  # rows of one batch; the longest needs no padding
TOL = 1e-5
# Teacher forcing runs on the CPU; a GPU's decode (fla's Triton kernels, which multiply fp32 in TF32)
# is held to bf16 rounding there, as the proof asks (3e-4 seen on an H200, 2026-12-02).
FORCED_TOL = {"graphs": 2.0 ** -8}
MODES = ["eager", "static", pytest.param("graphs", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="CUDA graphs need a GPU; the static mode runs the same step uncaptured"))]
COUNTER_MODES = ["eager_counter", "static_counter"]  # the GPU's draw (sampler.counter_uniforms), on the CPU


def text_batch(order: list[int]) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Right-padded prompts of LENGTHS (in `order`), the pad slots holding random tokens, not pad."""
    lengths = torch.tensor([LENGTHS[i] for i in order])
    ids = torch.randint(4, VOCAB, (len(order), max(LENGTHS)), generator=torch.Generator().manual_seed(1))
    return ids, lengths, {}


def image_batch(model, tok, order: list[int]) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Each row an image of 2x2 merged windows (4 placeholders) then text of LENGTHS[i] tokens."""
    layout = ImageLayout.of(model)
    side = 2 * layout.patch_size * layout.spatial_merge_size
    g = torch.Generator().manual_seed(2)
    images = torch.randint(0, 256, (len(order), side, side, 3), dtype=torch.uint8, generator=g)
    pixels, grid = patchify(images, layout)
    head = [layout.vision_start_token_id, *[layout.image_token_id] * layout.num_image_tokens(side, side),
            layout.vision_end_token_id]
    text = torch.randint(10, 40, (len(order), max(LENGTHS)), generator=g)
    ids = torch.cat([torch.tensor(head).expand(len(order), -1), text], dim=1)
    lengths = torch.tensor([len(head) + LENGTHS[i] for i in order])
    return ids, lengths, {"pixel_values": pixels, "image_grid_thw": grid}


def decode(model, mode: str, ids, lengths, seeds, pad: int, eos: int, **images) -> Generation:
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=eos, pad_token_id=pad, seeds=seeds,
                prompt_lengths=lengths, **images)
    mode, counter = mode.removesuffix("_counter"), True if mode.endswith("_counter") else None
    if mode == "eager":
        return generate(model.to("cpu"), ids, counter_rng=counter, **args)
    device = "cuda" if mode == "graphs" else "cpu"
    decoder = StaticDecoder(model.to(device), use_graphs=mode == "graphs", counter_rng=counter)
    return decoder.generate(ids, **{k: (v.to(device) if torch.is_tensor(v) else v) for k, v in args.items()})


def assert_rows_as_alone(model, mode: str, ids, lengths, images: dict, pad: int, eos: int) -> Generation:
    seeds = row_seeds(4 if mode.endswith("_counter") else 7, len(ids))  # seeds whose rows end at different steps
    mixed = decode(model, mode, ids, lengths, seeds, pad, eos, **images)
    assert mixed.input_ids.shape == (len(ids), ids.shape[1] + 10)
    for b, n in enumerate(lengths.tolist()):
        row_images = {k: v[b:b + 1] for k, v in images.items()}
        alone = decode(model, mode, ids[b:b + 1, :n], None, seeds[b:b + 1], pad, eos, **row_images)
        end = int(alone.lengths[0])
        assert int(mixed.lengths[b]) == end and int(mixed.prompt_lengths[b]) == n, f"row {b}"
        assert torch.equal(mixed.input_ids[b, :end].cpu(), alone.input_ids[0, :end].cpu()), f"row {b} tokens"
        assert torch.equal(mixed.input_ids[b, :n].cpu(), ids[b, :n]), f"row {b} prompt"
        assert bool((mixed.input_ids[b, end:] == pad).all()) and not bool(mixed.attention_mask[b, end:].any())
        assert mixed.response_mask[b].tolist() == [0] * n + [1] * (end - n) + [0] * (mixed.input_ids.shape[1] - end)
        gap = (mixed.gen_logprobs[b, :end].cpu() - alone.gen_logprobs[0, :end].cpu()).abs().max()
        assert gap <= TOL, f"row {b} log-probs differ by {float(gap):.2e}"
    return mixed


ORDERS = {"longest_first": [0, 1, 2, 3, 4], "longest_last": [3, 1, 2, 4, 0]}


@pytest.mark.parametrize("mode", MODES + COUNTER_MODES)
@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
@pytest.mark.parametrize("order", ["longest_first", "longest_last"])
def test_text_rows_decode_as_alone(mode: str, family: str, order: str) -> None:
    if mode == "graphs" and family == "qwen3_5_moe":
        pytest.skip("HF's fp32 experts (its grouped-mm fallback) read expert offsets on the host, which a "
                    "CUDA graph cannot capture; the GPU twins decode their experts in bf16")
    m = text_model(family)
    ids, lengths, _ = text_batch(ORDERS[order])
    mixed = assert_rows_as_alone(m, mode, ids, lengths, {}, PAD, EOS)
    if mode != "graphs":  # the seeds were chosen on the CPU's draws; a GPU's numerics draw others
        assert mixed.truncated.any() and (~mixed.truncated).any(), "rows should end at different steps"
    with torch.no_grad():  # the right-padded rows are what teacher forcing scores
        forced = token_logprobs(m.cpu(), mixed.input_ids.cpu(), mixed.attention_mask.cpu())
    resp = mixed.response_mask.bool().cpu()
    torch.testing.assert_close(forced[resp], mixed.gen_logprobs.cpu()[resp], atol=FORCED_TOL.get(mode, TOL), rtol=0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["longest_first", "longest_last"])
def test_vision_rows_decode_as_alone(mode: str, order: str) -> None:
    m, tok = vision_model()
    ids, lengths, images = image_batch(m, tok, ORDERS[order])
    mixed = assert_rows_as_alone(m, mode, ids, lengths, images, tok.pad_token_id, tok.eos_token_id)
    with torch.no_grad():
        forced = token_logprobs(m.cpu(), mixed.input_ids.cpu(), mixed.attention_mask.cpu(), **images)
    resp = mixed.response_mask.bool().cpu()
    torch.testing.assert_close(forced[resp], mixed.gen_logprobs.cpu()[resp], atol=FORCED_TOL.get(mode, TOL), rtol=0)


@pytest.mark.parametrize("mode", MODES)
def test_text_prompts_of_mixed_lengths_on_the_vision_model(mode: str) -> None:
    m, tok = vision_model()
    ids = torch.randint(10, 40, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(3))
    assert_rows_as_alone(m, mode, ids, torch.tensor(LENGTHS), {}, tok.pad_token_id, tok.eos_token_id)


def _ones_mask(prompt):
    return torch.ones_like(prompt.mask)


@pytest.mark.parametrize("mode", ["eager", "static", "static_counter"])
@pytest.mark.parametrize("vision", [False, True])
def test_the_comparison_catches_a_dropped_padding_mask(mode: str, vision: bool, monkeypatch) -> None:
    """Without the mask, attention reads the pads and the gated-delta-net states absorb them."""
    for module in (prompt_layout, sampler, static_decode):
        monkeypatch.setattr(module, "padding_mask", _ones_mask)
    if vision:
        m, tok = vision_model()
        ids, lengths, images = image_batch(m, tok, ORDERS["longest_first"])
        pad, eos = tok.pad_token_id, tok.eos_token_id
    else:
        m, (ids, lengths, images), pad, eos = text_model("qwen3_5"), text_batch(ORDERS["longest_first"]), PAD, EOS
    with pytest.raises(AssertionError):
        assert_rows_as_alone(m, mode, ids, lengths, images, pad, eos)


def test_prompt_lengths_are_checked() -> None:
    ids = torch.ones(2, 4, dtype=torch.long)
    for bad in ([0, 4], [5, 1], [1]):
        with pytest.raises(ValueError, match="prompt_lengths must be 2 lengths in 1..4"):
            prompt_layout.prompt_lengths_of(ids, torch.tensor(bad))
