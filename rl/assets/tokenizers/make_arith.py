"""Build the `arith` tokenizer shipped in `rl/assets/tokenizers/arith/`.

Run from the repository root after changing the alphabet, then commit the output:

    python rl/assets/tokenizers/make_arith.py

Why a hand-made character-level tokenizer: the arithmetic task needs a vocabulary of a few dozen
symbols so that tiny models (hidden 64) train in seconds on CPU, it must load offline with
`transformers.AutoTokenizer`, and every character of a prompt must be one token so that prompts
rendered at a fixed character width also have a fixed token length.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

# Ids 0..3 are fixed: the engine and tests rely on <pad> == 0.
SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>"]
DIGITS = list("0123456789")
OPERATORS = list("+-*/=()")
PUNCTUATION = [" ", ".", ",", "?", ":"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz")
ALPHABET = DIGITS + OPERATORS + PUNCTUATION + LETTERS


def build_tokenizer() -> Tokenizer:
    """One token per character of ALPHABET; anything else is <unk>."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + ALPHABET)}
    if len(vocab) != len(SPECIAL_TOKENS) + len(ALPHABET):
        raise ValueError("duplicate symbol in the alphabet")
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Every character (spaces included) becomes its own pre-token.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    # Concatenate tokens back without inserting separators.
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


def tokenizer_config() -> dict:
    """What `PreTrainedTokenizerFast` reads next to tokenizer.json."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "pad_token": "<pad>",
        "eos_token": "<eos>",
        "bos_token": "<bos>",
        "unk_token": "<unk>",
        "model_max_length": 4096,
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
    }


def write(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save(str(out_dir / "tokenizer.json"), pretty=True)
    cfg = tokenizer_config()
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    special = {k: cfg[k] for k in ("pad_token", "eos_token", "bos_token", "unk_token")}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "arith")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
