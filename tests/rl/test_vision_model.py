"""The tiny vision-language twin: build, image inputs, log-probs, generation, warm start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers.vision_utils import get_vision_position_ids

from rl.config import ModelConfig, TaskConfig, WarmStartConfig
from rl.envs import make_env
from rl.generation import generate, row_seeds
from rl.models import ImageLayout, build_model, encode_prompts, token_logprobs
from rl.models.image_inputs import patchify
from rl.tokenizer import load_tokenizer
from rl.warm_start import supervised_inputs, warm_start

torch.set_num_threads(1)

TEXT = {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}


def model_cfg(family: str = "qwen3_5_moe", **config) -> ModelConfig:
    return ModelConfig(family=family, modality="vision", tokenizer="arith_vl", config={**TEXT, **config})


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("arith_vl")


@pytest.fixture(scope="module")
def model(tok):
    return build_model(model_cfg(), vocab_size=len(tok), seed=0)


@pytest.fixture(scope="module")
def env():
    return make_env(TaskConfig(name="counting", params={"image_size": 16, "square_size": 4, "max_count": 6}))


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_build_is_seeded_and_takes_ids_from_the_tokenizer(tok, family: str) -> None:
    a = build_model(model_cfg(family), vocab_size=len(tok), seed=1)
    b = build_model(model_cfg(family), vocab_size=len(tok), seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert type(a).__name__.endswith("ForConditionalGeneration")
    assert a.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert a.config.vision_config.out_hidden_size == a.config.text_config.hidden_size == 64
    assert a.config.text_config.vocab_size == len(tok)


@pytest.mark.parametrize("config, match", [
    ({"vision_config": {"dept": 2}}, "vision_config.dept.*depth"),
    ({"vision_config": {"out_hidden_size": 32}}, "out_hidden_size"),
    ({"vision_config": {"num_position_embeddings": 30}}, "num_position_embeddings"),
    ({"hiden_size": 32}, "model.config.hiden_size"),
])
def test_bad_config_names_the_field(tok, config: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_model(model_cfg(**config), vocab_size=len(tok), seed=0)


def test_text_tokenizer_is_refused() -> None:
    with pytest.raises(ValueError, match="model.tokenizer.*arith_vl"):
        build_model(replace(model_cfg(), tokenizer="arith"), vocab_size=60, seed=0)


def test_patch_order_matches_the_vision_tower(model) -> None:
    """Patch k holds the pixels at the (h, w) grid cell the tower's rotary positions give it."""
    layout = ImageLayout.of(model)
    H, W = 8, 16
    image = torch.randint(0, 256, (1, H, W, 3), dtype=torch.uint8)
    pixels, grid = patchify(image, layout)
    P, T = layout.patch_size, layout.temporal_patch_size
    assert grid.tolist() == [[1, H // P, W // P]] and pixels.shape == (1, H * W // P // P, 3 * T * P * P)
    positions = get_vision_position_ids(grid, layout.spatial_merge_size)
    for k, (h, w) in enumerate(positions.tolist()):
        block = (image[0, h * P:(h + 1) * P, w * P:(w + 1) * P].permute(2, 0, 1).float() / 255 - 0.5) / 0.5
        expect = block.unsqueeze(1).expand(3, T, P, P).reshape(-1)
        assert torch.allclose(pixels[0, k], expect), k


def test_prompts_carry_placeholders(tok, model, env) -> None:
    layout = ImageLayout.of(model)
    batch = encode_prompts(tok, env.sample(3, seed=0, step=0), layout)
    n = layout.num_image_tokens(16, 16)
    assert n == 4
    row = batch.input_ids[0].tolist()
    assert row[0] == layout.vision_start_token_id and row[1 + n] == layout.vision_end_token_id
    assert row[1:1 + n] == [layout.image_token_id] * n
    assert batch.images["pixel_values"].shape == (3, 16, 96)
    with pytest.raises(ValueError, match="model.modality"):
        encode_prompts(tok, env.sample(1, seed=0, step=0), None)
    assert ImageLayout.of(build_model(replace(model_cfg(), modality="text", tokenizer="arith"),
                                      vocab_size=len(tok), seed=0)) is None


def test_logprobs_depend_on_the_image_and_are_row_local(tok, model, env) -> None:
    problems = env.sample(4, seed=1, step=0)
    ids, attn, _, images = supervised_inputs(tok, problems, ImageLayout.of(model))
    with torch.no_grad():
        full = token_logprobs(model, ids, attn, **images)
        one = token_logprobs(model, ids[2:3], attn[2:3], **{k: v[2:3] for k, v in images.items()})
        swapped = dict(images, pixel_values=images["pixel_values"].flip(0))
        other = token_logprobs(model, ids, attn, **swapped)
    torch.testing.assert_close(full[2:3], one, atol=1e-5, rtol=0)
    n = ids.shape[1] - 2  # the answer and eos come after every image token
    assert (full[:, n:] - other[:, n:]).abs().max() > 1e-4


def test_gen_logprobs_equal_teacher_forcing(tok, model, env) -> None:
    prompts = encode_prompts(tok, env.sample(6, seed=2, step=0), ImageLayout.of(model))
    gen = generate(model, prompts.input_ids, prompt_lengths=prompts.lengths,
                   max_new_tokens=5, temperature=1.0, eos_token_id=tok.eos_token_id,
                   pad_token_id=tok.pad_token_id, seeds=row_seeds(0, len(prompts.input_ids)), **prompts.columns())
    with torch.no_grad():
        forced = token_logprobs(model, gen.input_ids, gen.attention_mask, **prompts.columns())
    mask = gen.response_mask.bool()
    torch.testing.assert_close(gen.gen_logprobs[mask], forced[mask], atol=1e-5, rtol=0)
    again = generate(model, prompts.input_ids, prompt_lengths=prompts.lengths,
                   max_new_tokens=5, temperature=1.0, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id, seeds=row_seeds(0, len(prompts.input_ids)), **prompts.columns())
    assert torch.equal(gen.input_ids, again.input_ids)


def test_placeholders_are_never_sampled(tok, env) -> None:
    model = build_model(model_cfg(), vocab_size=len(tok), seed=3)
    image_id = model.config.image_token_id
    with torch.no_grad():
        model.lm_head.weight[image_id] = 50 * model.lm_head.weight.abs().max()  # make it the favourite
    prompts = encode_prompts(tok, env.sample(4, seed=0, step=0), ImageLayout.of(model))
    gen = generate(model, prompts.input_ids, prompt_lengths=prompts.lengths,
                   max_new_tokens=3, temperature=1.0, eos_token_id=tok.eos_token_id,
                   pad_token_id=tok.pad_token_id, seeds=row_seeds(0, len(prompts.input_ids)), **prompts.columns())
    assert not (gen.input_ids[:, prompts.input_ids.shape[1]:] == image_id).any()


def test_warm_start_learns_from_images_and_caches(tok, env, tmp_path: Path) -> None:
    cfg = WarmStartConfig(steps=3, lr=3e-3, batch_size=8)
    a = build_model(model_cfg(), vocab_size=len(tok), seed=4)
    before = {k: v.clone() for k, v in a.state_dict().items()}
    first = warm_start(a, tok, env, cfg, seed=4, cache_dir=tmp_path)
    assert not first["cached"] and first["loss"] == first["loss"]
    visual = [k for k in before if "visual" in k]
    assert visual and any(not torch.equal(before[k], a.state_dict()[k]) for k in visual)
    b = build_model(model_cfg(), vocab_size=len(tok), seed=4)
    assert warm_start(b, tok, env, cfg, seed=4, cache_dir=tmp_path)["cached"]
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
