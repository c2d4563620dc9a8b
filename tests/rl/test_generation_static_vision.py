"""The static-cache decoder samples what the eager loop samples for a vision-language model (CPU,
no graph): each row's response continues from its own prompt's multimodal rotary layout."""

from __future__ import annotations

import pytest
import torch

from rl.config import ModelConfig
from rl.generation import Generation, generate, row_seeds, static_decode
from rl.generation.prompt_layout import left_pad, prompt_positions
from rl.generation.static_decode import StaticDecoder
from rl.models import ImageLayout, build_model
from rl.models.image_inputs import image_forward_kwargs, patchify
from rl.tokenizer import load_tokenizer
from rl.workers.generation import GenerationWorker

torch.set_num_threads(1)
TEXT = {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}
FIELDS = ("input_ids", "attention_mask", "response_mask", "lengths", "truncated")
# (image height, width) in pixels, all 64 patches: merged grids 4x4, 2x8 and 1x16, so the rows'
# text resumes 12, 8 and 0 positions before the token count (rope deltas -12, -8, 0)
SHAPES = ((32, 32), (16, 64), (8, 128))


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("arith_vl")


def model_cfg(family: str) -> ModelConfig:
    return ModelConfig(family=family, modality="vision", tokenizer="arith_vl", config=TEXT)


def vl_model(tok, family: str) -> torch.nn.Module:
    m = build_model(model_cfg(family), vocab_size=len(tok), seed=0)
    with torch.no_grad():  # eos likelier at some steps than others, so that rows end at different steps
        m.lm_head.weight[tok.eos_token_id] += 0.04
    return m


def image_prompts(model) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Five rows of one token length: the three image shapes, the image at different offsets."""
    layout = ImageLayout.of(model)
    g = torch.Generator().manual_seed(1)
    shapes = (*SHAPES, SHAPES[0], SHAPES[1])
    pixels, grids = zip(*(patchify(torch.randint(0, 256, (1, h, w, 3), dtype=torch.uint8, generator=g), layout)
                          for h, w in shapes))
    image = [layout.vision_start_token_id, *[layout.image_token_id] * 16, layout.vision_end_token_id]
    rows = []
    for before in (0, 0, 0, 3, 6):
        text = torch.randint(10, 40, (8,), generator=g).tolist()
        rows.append(text[:before] + image + text[before:])
    return torch.tensor(rows), {"pixel_values": torch.cat(pixels), "image_grid_thw": torch.cat(grids)}


def eager(model, ids, images, seed: int, **args) -> Generation:
    return generate(model, ids, seeds=row_seeds(seed, len(ids)), **images, **args)


def assert_same(eager: Generation, static: Generation) -> None:
    for name in FIELDS:
        assert torch.equal(getattr(eager, name), getattr(static, name)), name
    # Same tokens; the log-probs differ only by the static cache's masked attention sums.
    assert torch.allclose(eager.gen_logprobs, static.gen_logprobs, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("family", "temperature"), [("qwen3_5", 1.0), ("qwen3_5", 0.0), ("qwen3_5_moe", 1.0)])
def test_static_decoder_equals_the_eager_loop_with_images(tok, family: str, temperature: float) -> None:
    m = vl_model(tok, family)
    ids, images = image_prompts(m)
    args = dict(max_new_tokens=10, temperature=temperature, eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id)
    reference = eager(m, ids, images, 3, **args)
    prompt = left_pad(ids, torch.full((len(ids),), ids.shape[1]), tok.pad_token_id)
    _, following = prompt_positions(m, prompt, image_forward_kwargs(m, ids, **images))
    assert sorted(set((following[0, :, 0] - ids.shape[1]).tolist())) == [-12, -8, 0]  # the layouts differ
    assert reference.truncated.any() and len(set(reference.lengths.tolist())) > 2, "rows should end at different steps"
    decoder = StaticDecoder(m, use_graphs=False)
    assert_same(reference, decoder.generate(ids, seeds=row_seeds(3, len(ids)), **images, **args))
    # The slot is reused (positions reset in place) for other rows with other layouts.
    order = torch.tensor([4, 2, 0, 3, 1])
    shuffled = {k: v[order] for k, v in images.items()}
    assert_same(eager(m, ids[order], shuffled, 5, **args), decoder.generate(ids[order], seeds=row_seeds(5, len(ids)),
                                                                        **shuffled, **args))
    assert len(decoder._slots) == 1


def test_positions_without_the_rope_delta_are_caught(tok, monkeypatch) -> None:
    """The check above fails on a decoder whose responses continue at P (a text model's positions)."""
    m = vl_model(tok, "qwen3_5")
    ids, images = image_prompts(m)
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    reference = eager(m, ids, images, 3, **args)
    positions = static_decode.prompt_positions

    def without_delta(model, prompt, images):
        layout, _ = positions(model, prompt, images)
        return layout, torch.full((3, prompt.ids.shape[0], 1), prompt.ids.shape[1])

    monkeypatch.setattr(static_decode, "prompt_positions", without_delta)
    wrong = StaticDecoder(m, use_graphs=False).generate(ids, seeds=row_seeds(3, len(ids)), **images, **args)
    with pytest.raises(AssertionError):
        assert_same(reference, wrong)


def test_text_prompts_on_a_vision_model(tok) -> None:
    """Without images every row's response continues at P, as the eager loop's does on a fresh model."""
    m = vl_model(tok, "qwen3_5")
    ids = torch.randint(10, 40, (3, 8), generator=torch.Generator().manual_seed(2))
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    static = StaticDecoder(m, use_graphs=False).generate(ids, seeds=row_seeds(3, len(ids)), **args)
    assert_same(eager(m, ids, {}, 3, **args), static)


def test_text_prompts_after_images_decode_from_their_own_positions(tok) -> None:
    """HF keeps an image batch's rope deltas on the model (a teacher-forcing pass leaves them); the
    eager loop must not reuse them."""
    m = vl_model(tok, "qwen3_5")
    ids = torch.randint(10, 40, (5, 8), generator=torch.Generator().manual_seed(2))
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    fresh = eager(m, ids, {}, 3, **args)
    m.model.rope_deltas = torch.full((5, 1), -12)
    after_images = eager(m, ids, {}, 3, **args)
    for name in FIELDS + ("gen_logprobs",):
        assert torch.equal(getattr(fresh, name), getattr(after_images, name)), name


def test_the_generation_worker_hands_the_images_to_the_static_decoder(tok) -> None:
    m = vl_model(tok, "qwen3_5")
    ids, images = image_prompts(m)
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    out = {}
    for decode in ("eager", "static"):
        worker = GenerationWorker(name=f"generation-{decode}", rank=0, env_keys=[], decode=decode)
        worker.setup(model=model_cfg("qwen3_5"), vocab_size=len(tok), seed=0, weights=m.state_dict())
        out[decode] = worker.generate(ids, seeds=row_seeds(3, len(ids)), **images, **args)
    assert isinstance(worker.decoder, StaticDecoder)
    for name in FIELDS:
        assert torch.equal(out["eager"][name], out["static"][name]), name
