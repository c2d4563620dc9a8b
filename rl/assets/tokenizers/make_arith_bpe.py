"""Build the `arith_bpe` tokenizer shipped in `rl/assets/tokenizers/arith_bpe/`.

Run from the repository root after changing the corpus, then commit the output:

    python rl/assets/tokenizers/make_arith_bpe.py

Why a second tokenizer: cross-tokenizer distillation needs a teacher that splits text unlike the
student's `arith` (one token per character). This one is a byte-level BPE (GPT-2 style: spaces as
`Ġ`, digit runs pre-tokenized together) trained with the `tokenizers` library on arithmetic
lines, so frequent digit pairs ("12", "03") are single tokens and a number of three digits is
two; its special tokens have other names (`<|end|>` for eos), as a Llama-style tokenizer's do.
The alphabet is `arith`'s, so every text the student can write encodes without unknown bytes.
Training is deterministic for a fixed corpus and vocabulary size.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_arith import ALPHABET  # noqa: E402  (the student's alphabet, stated once)

SPECIAL_TOKENS = ["<|pad|>", "<|end|>", "<|begin|>"]
VOCAB_SIZE = 128


def corpus() -> list[str]:
    """Every `a op b = c` with operands 0..99 (zero-padded and not), plus the alphabet itself."""
    lines = [" ".join(ALPHABET)]
    for a in range(100):
        for b in range(100):
            lines.append(f"{a}+{b}={a + b}")
            lines.append(f"{a:02d}+{b:02d}={a + b}")
            lines.append(f"{max(a, b)}-{min(a, b)}={abs(a - b)}")
            lines.append(f"{a}*{b}={a * b}")
    return lines


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    glyphs = sorted({g for ch in ALPHABET for g, _ in pre_tokenizers.ByteLevel(add_prefix_space=False)
                     .pre_tokenize_str(ch)} | {"Ġ"})
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=glyphs, show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "pad_token": "<|pad|>",
        "eos_token": "<|end|>",
        "bos_token": "<|begin|>",
        "model_max_length": 4096,
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
    }


def write(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save(str(out_dir / "tokenizer.json"), pretty=True)
    cfg = tokenizer_config()
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    special = {k: cfg[k] for k in ("pad_token", "eos_token", "bos_token")}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "arith_bpe")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
