"""Build the `arith_vl` tokenizer shipped in `rl/assets/tokenizers/arith_vl/`.

Run from the repository root after changing either alphabet, then commit the output:

    python rl/assets/tokenizers/make_arith_vl.py

`arith_vl` is `arith` (same ids for every character, so text recipes and vision recipes share
a vocabulary prefix) plus the four special tokens a Qwen3.5 vision-language model reads: an
image is `<|vision_start|>`, one `<|image_pad|>` per merged patch, `<|vision_end|>`.
They are appended after `arith`'s ids, so `<pad>` stays 0 and `<eos>` 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokenizers import AddedToken

if __package__:
    from rl.assets.tokenizers import make_arith
else:  # run as a script: its folder is on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_arith  # type: ignore[no-redef]

VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = (
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
VISION_TOKENS = [VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD]


def build_tokenizer():
    """`arith` with the vision tokens added as special tokens (never split into characters)."""
    tok = make_arith.build_tokenizer()
    before = tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS])
    assert tok.get_vocab_size() == before + len(VISION_TOKENS), "a vision token clashed with arith"
    return tok


def tokenizer_config() -> dict:
    cfg = make_arith.tokenizer_config()
    cfg["additional_special_tokens"] = list(VISION_TOKENS)
    return cfg


def write(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save(str(out_dir / "tokenizer.json"), pretty=True)
    cfg = tokenizer_config()
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    keys = ("pad_token", "eos_token", "bos_token", "unk_token", "additional_special_tokens")
    (out_dir / "special_tokens_map.json").write_text(json.dumps({k: cfg[k] for k in keys}, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "arith_vl")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
