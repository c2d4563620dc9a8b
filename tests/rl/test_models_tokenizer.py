"""The shipped `arith` tokenizer: offline loading, round trips, fixed ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rl.assets.tokenizers import make_arith
from rl.tokenizer import load_tokenizer, resolve_tokenizer_dir

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("arith")


def test_special_ids(tok) -> None:
    assert tok.pad_token_id == 0
    assert tok.eos_token_id == 1
    assert tok.bos_token_id == 2
    assert len(tok) == len(make_arith.SPECIAL_TOKENS) + len(make_arith.ALPHABET)


@pytest.mark.parametrize("text", ["07+12=", "19", "3*4-5=7", "what is 2 plus 2?", " 0 "])
def test_round_trip_one_token_per_char(tok, text: str) -> None:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_eos_is_one_token_and_skippable(tok) -> None:
    ids = tok("12<eos>", add_special_tokens=False)["input_ids"]
    assert ids[-1] == tok.eos_token_id and len(ids) == 3
    assert tok.decode(ids + [tok.pad_token_id] * 2, skip_special_tokens=True) == "12"


def test_unknown_char_maps_to_unk(tok) -> None:
    assert tok("A", add_special_tokens=False)["input_ids"] == [tok.unk_token_id]


def test_shipped_files_match_the_script(tmp_path: Path) -> None:
    make_arith.write(tmp_path)
    shipped = resolve_tokenizer_dir("arith")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert json.loads((tmp_path / name).read_text()) == json.loads((shipped / name).read_text()), name


def test_local_path_and_errors(tok, tmp_path: Path) -> None:
    make_arith.write(tmp_path / "copy")
    other = load_tokenizer(str(tmp_path / "copy"))
    assert other.get_vocab() == tok.get_vocab()
    with pytest.raises(ValueError, match="model.tokenizer"):
        load_tokenizer("no_such_tokenizer")
    with pytest.raises(ValueError, match="model.tokenizer"):
        load_tokenizer(str(tmp_path / "missing"))
