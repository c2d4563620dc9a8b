"""Write the tiny checkpoints shipped in `rl/assets/checkpoints/`: weights, config and a chat tokenizer.

Run from the repository root after changing a model or the alphabet, then commit the output:

    python rl/assets/checkpoints/make_tiny.py

Why: the full-scale recipes load a released checkpoint through `model.path` (its tokenizer and
chat template with it); their tiny twins go through the same loading code with a checkpoint
this script writes with `save_pretrained`, so no download is needed and CI covers the path.
Like a released checkpoint, it already knows its task: the weights are the tiny family config's
seeded initialisation (rl/models/tiny_configs.py, seed 42) after the engine's supervised warm
start on the shipped `word_math` train split (problems of 3 to 71 characters), chat-templated
(rl/warm_start.py, 120 steps, lr 3e-3, batch 32: the settings the twin used to run itself), so
the twin starts GRPO from a nonzero, improvable reward with `algorithm.warm_start.steps: 0`, as
the full-scale recipe does. The warm start is cached as every warm start is (~/.cache/rl or
$RL_CACHE_DIR). `SOURCE` records all this.

The tokenizer is character level (one token per character but the role names) with Qwen's chat
special tokens and a ChatML template: `<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n`;
`<|im_end|>` is the eos token, and the role names are single tokens (as in a BPE vocabulary).
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
WARM_START = {"steps": 120, "lr": 3.0e-3, "batch_size": 32}
# the twin's data settings (recipes/qwen3_5_35b.yaml): the warm start reads them as GRPO will
DATA = {"train": {"path": "word_math", "split": "train"}, "validation": {"path": "word_math", "split": "validation"},
        "prompt_key": "problem", "answer_key": "answer", "prompt_template": "{prompt}", "chat_template": True,
        "shuffle": True, "val_every_steps": 25, "val_max_samples": 0}


def build_tokenizer() -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + ALPHABET)}
    if len(vocab) != len(SPECIAL_TOKENS) + len(ALPHABET):
        raise ValueError("duplicate symbol in the alphabet")
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


def write_checkpoint(name: str, out_dir: Path, *, warm: bool = True) -> None:
    from transformers import PreTrainedTokenizerFast

    from rl.config import DataConfig, ModelConfig, TaskConfig, WarmStartConfig
    from rl.envs import make_env
    from rl.models import build_model
    from rl.models.qwen3_5 import FAMILIES, init_from_config, make_config
    from rl.recipe.read import build
    from rl.warm_start import warm_start

    family, overrides = CHECKPOINTS[name]
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_size = write_tokenizer(out_dir)
    model = init_from_config(make_config(family, overrides, vocab_size=vocab_size), FAMILIES[family][1], SEED)
    model.generation_config.pad_token_id = 0
    source = {"family": family, "overrides": overrides, "seed": SEED, "warm_start": None}
    if warm:
        # Warm-start the model as the engine loads it (the same config, so the same warm-start cache key).
        model.save_pretrained(str(out_dir))
        model = build_model(ModelConfig(family=family, path=str(out_dir)), vocab_size=vocab_size, seed=SEED)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out_dir))
        env = make_env(TaskConfig(name="math", params={}), data=build(DataConfig, DATA, "data"), tokenizer=tokenizer)
        info = warm_start(model, tokenizer, env, WarmStartConfig(**WARM_START), seed=SEED)
        source["warm_start"] = {**WARM_START, "data": DATA["train"], "final_loss": info["loss"]}
    model.save_pretrained(str(out_dir))
    (out_dir / "SOURCE").write_text(json.dumps(source) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the checkpoints into")
    parser.add_argument("--no-warm-start", action="store_true", help="the seeded initialisation only (tests)")
    args = parser.parse_args()
    for name in CHECKPOINTS:
        write_checkpoint(name, args.out / name, warm=not args.no_warm_start)


if __name__ == "__main__":
    main()
