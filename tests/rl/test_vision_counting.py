"""The `counting` task and the shipped `arith_vl` tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rl.assets.tokenizers import make_arith, make_arith_vl
from rl.config import TaskConfig
from rl.envs import make_env
from rl.envs.counting import PALETTE, PROMPT, QUESTIONS, CountingParams
from rl.tokenizer import load_tokenizer, resolve_tokenizer_dir


def count_squares(image: torch.Tensor, square_size: int) -> int:
    """Cells that are not background: an independent check of the env's drawing (the test's oracle)."""
    h, w, _ = image.shape
    cells = image.reshape(h // square_size, square_size, w // square_size, square_size, 3)
    return int((cells.amax(dim=(1, 3, 4)) > 0).sum())

def test_problems_are_seeded_and_answers_match_the_images() -> None:
    env = make_env(TaskConfig(name="counting", params={"image_size": 24, "square_size": 4, "max_count": 9}))
    a = env.sample(64, seed=3, step=5)
    b = env.sample(64, seed=3, step=5)
    c = env.sample(64, seed=3, step=6)
    assert all(torch.equal(x.image, y.image) and x.answer == y.answer for x, y in zip(a, b))
    assert any(not torch.equal(x.image, y.image) for x, y in zip(a, c))
    counts = [int(p.answer) for p in a]
    assert min(counts) >= 1 and max(counts) <= 9 and len(set(counts)) > 5
    for p in a:
        assert p.prompt == PROMPT
        assert p.image.dtype == torch.uint8 and p.image.shape == (24, 24, 3)
        assert count_squares(p.image, 4) == int(p.answer)
        colours = {tuple(px) for px in p.image.reshape(-1, 3).tolist()} - {(0, 0, 0)}
        assert colours <= set(PALETTE)


def test_score_is_exact_count() -> None:
    env = make_env(TaskConfig(name="counting", params={"min_count": 3, "max_count": 3}))
    (p,) = env.sample(1, seed=0, step=0)
    assert p.answer == "3"
    assert env.score(p, "3") == 1.0 and env.score(p, " 3 <eos>junk") == 1.0
    assert env.score(p, "4") == 0.0 and env.score(p, "33") == 0.0 and env.score(p, "") == 0.0
    assert env.spec == {"name": "counting", "params": {"image_size": 24, "square_size": 4,
                                                        "min_count": 3, "max_count": 3, "questions": 1}}


def test_questions_vary_the_prompt_length_and_keep_the_problems() -> None:
    one = make_env(TaskConfig(name="counting", params={})).sample(64, seed=3, step=5)
    assert {p.prompt for p in one} == {PROMPT}
    varied = make_env(TaskConfig(name="counting", params={"questions": len(QUESTIONS)}))
    a, b = varied.sample(64, seed=3, step=5), varied.sample(64, seed=3, step=5)
    assert [p.prompt for p in a] == [p.prompt for p in b]  # seeded
    assert {p.prompt for p in a} == set(QUESTIONS) and len({len(q) for q in QUESTIONS}) == len(QUESTIONS)
    tok = load_tokenizer("arith_vl")
    assert all(tok.unk_token_id not in tok(q, add_special_tokens=False)["input_ids"] for q in QUESTIONS)


@pytest.mark.parametrize("params, field", [
    ({"image_size": 25}, "square_size"),
    ({"min_count": 5, "max_count": 2}, "min_count"),
    ({"image_size": 8, "square_size": 4, "max_count": 5}, "max_count"),
    ({"max_count": 0}, "max_count"),
    ({"colour": 1}, "colour"),
    ({"questions": len(QUESTIONS) + 1}, "questions"),
])
def test_bad_params_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"task.params.{field}"):
        CountingParams.from_dict(params)


def test_arith_vl_extends_arith() -> None:
    vl, text = load_tokenizer("arith_vl"), load_tokenizer("arith")
    assert {k: v for k, v in vl.get_vocab().items() if k in text.get_vocab()} == text.get_vocab()
    assert len(vl) == len(text) + len(make_arith_vl.VISION_TOKENS)
    ids = vl(f"{make_arith_vl.VISION_START}{make_arith_vl.IMAGE_PAD}{make_arith_vl.IMAGE_PAD}"
             f"{make_arith_vl.VISION_END}{PROMPT}", add_special_tokens=False)["input_ids"]
    assert ids[:4] == vl.convert_tokens_to_ids([make_arith_vl.VISION_START, make_arith_vl.IMAGE_PAD,
                                                make_arith_vl.IMAGE_PAD, make_arith_vl.VISION_END])
    assert len(ids) == 4 + len(PROMPT)
    assert vl.decode(ids, skip_special_tokens=True) == PROMPT
    assert len(make_arith.ALPHABET) + len(make_arith.SPECIAL_TOKENS) == len(text)


def test_shipped_arith_vl_matches_the_script(tmp_path: Path) -> None:
    make_arith_vl.write(tmp_path)
    shipped = resolve_tokenizer_dir("arith_vl")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert json.loads((tmp_path / name).read_text()) == json.loads((shipped / name).read_text()), name
