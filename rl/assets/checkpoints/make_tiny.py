"""Write the tiny checkpoints shipped in `rl/assets/checkpoints/`: weights, config and a chat tokenizer.

Run from the repository root after changing a model or the alphabet, then commit the output:

    python rl/assets/checkpoints/make_tiny.py

Why: the full-scale recipes load a released checkpoint through `model.path` (its tokenizer and
chat template with it); their tiny twins go through the same loading code with a checkpoint
this script writes with `save_pretrained`, so no download is needed and CI covers the path.
The weights are the tiny family config's seeded initialisation (rl/models/tiny_configs.py,
seed 42), so they are reproducible; `tests/rl/test_model_source.py` checks that they are.

The tokenizer is character level (one token per character but the role names, so fixed-width
prompts have a fixed token length, as the sampler needs) with Qwen's chat special tokens and a ChatML template:
`<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n`; `<|im_end|>` is the eos token, and
the role names are single tokens (as in a BPE vocabulary).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

HERE = Path(__file__).resolve().parent
SEED = 42
# Ids 0..3 are fixed: the engine and tests rely on <pad> == 0.
SPECIAL_TOKENS = ["<pad>", "<|im_end|>", "<|im_start|>", "<unk>"]
ALPHABET = (list("0123456789") + list("+-*/=()^") + list("\\{}$") + list(" .,?:!\n")
            + list("abcdefghijklmnopqrstuvwxyz") + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Whole-word tokens, as a BPE vocabulary has them: the chat roles cost one token each, which keeps
# the twin's prompts short (CPU time grows with every token of the ~40 a row holds).
WORDS = ["system", "user", "assistant"]
# name -> (family, tiny config overrides)
CHECKPOINTS = {"tiny_qwen3_5_moe": ("qwen3_5_moe", {})}


def build_tokenizer() -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + ALPHABET)}
    assert len(vocab) == len(SPECIAL_TOKENS) + len(ALPHABET), "duplicate symbol in the alphabet"
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in WORDS])
    return tok


def write_tokenizer(out_dir: Path) -> int:
    """tokenizer.json and tokenizer_config.json (with the chat template); returns the vocab size."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=build_tokenizer(), pad_token="<pad>", eos_token="<|im_end|>",
                                  unk_token="<unk>", model_max_length=4096, padding_side="right",
                                  clean_up_tokenization_spaces=False)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(str(out_dir))
    return len(tok)


def write_checkpoint(name: str, out_dir: Path) -> None:
    from rl.models.qwen3_5 import FAMILIES, _init_from_config, make_config

    family, overrides = CHECKPOINTS[name]
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_size = write_tokenizer(out_dir)
    model = _init_from_config(make_config(family, overrides, vocab_size=vocab_size), FAMILIES[family][1], SEED)
    model.generation_config.pad_token_id = 0
    model.save_pretrained(str(out_dir))
    (out_dir / "SOURCE").write_text(json.dumps({"family": family, "overrides": overrides, "seed": SEED}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the checkpoints into")
    args = parser.parse_args()
    for name in CHECKPOINTS:
        write_checkpoint(name, args.out / name)


if __name__ == "__main__":
    main()
