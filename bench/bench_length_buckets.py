"""The generation padding fraction on word_math, one block against `generation.length_buckets` groups.

    python bench/bench_length_buckets.py --steps 4 --groups 1 8 | python bench/record.py \
        --out bench/results/length_buckets.jsonl --command "python bench/bench_length_buckets.py --steps 4 --groups 1 8"

The flagship tiny twin's generation as the engine runs it, without Ray: the shipped tiny
Qwen3.5-MoE checkpoint and its tokenizer (chat template on), `word_math` train rows in the math
task's seeded order, 16 prompts x 4 a step, 12 new tokens, temperature 1, the eager loop, each
step's seeds as the GRPO driver draws them. Every step is decoded in one block and in each group
count; a row's tokens must be the same either way (it raises otherwise). One JSON line a group
count: the mean and max per-step `train/padding_fraction_generation`.
"""

from __future__ import annotations

import argparse
import json

import torch

from rl.config import DataConfig, ModelConfig, TaskConfig
from rl.envs import make_env
from rl.generation import generate, row_seeds
from rl.generation.length_buckets import decode_in_groups
from rl.metrics.padding import decoded_slots, padding_fractions
from rl.models import build_model, encode_prompts
from rl.recipe.read import build
from rl.tokenizer import load_tokenizer

DATA = {"train": {"path": "word_math", "split": "train"}, "validation": None, "prompt_key": "problem",
        "answer_key": "answer", "prompt_template": "{prompt}", "chat_template": True, "shuffle": True,
        "val_every_steps": 0, "val_max_samples": 0}
SEED, PROMPTS, G, NEW_TOKENS = 42, 16, 4, 12


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--groups", type=int, nargs="+", default=[1, 2, 4, 8])
    args = p.parse_args()
    torch.set_num_threads(2)
    tok = load_tokenizer(None, model_path="tiny_qwen3_5_moe")
    model = build_model(ModelConfig(family="qwen3_5_moe", path="tiny_qwen3_5_moe"),
                        vocab_size=len(tok), seed=SEED)
    env = make_env(TaskConfig(name="math", params={}), data=build(DataConfig, DATA, "data"), tokenizer=tok)

    def run(prompt_ids, **kwargs):
        return generate(model, prompt_ids, max_new_tokens=NEW_TOKENS, temperature=1.0, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id, **kwargs).columns()

    fractions: dict[int, list[float]] = {k: [] for k in args.groups}
    for step in range(args.steps):
        prompts = encode_prompts(tok, env.sample(PROMPTS, seed=SEED, step=step), None)
        ids, lengths = prompts.input_ids.repeat_interleave(G, dim=0), prompts.lengths.repeat_interleave(G)
        seeds = row_seeds(SEED * 1_000_003 + step, len(ids))
        whole = run(ids, seeds=seeds, prompt_lengths=lengths)
        for k in args.groups:
            if k == 1:
                columns, slots = whole, decoded_slots(whole["lengths"], whole["prompt_lengths"])
            else:
                out = decode_in_groups(run, ids, seeds=seeds, prompt_lengths=lengths, images={}, num_groups=k,
                                       pad_token_id=tok.pad_token_id, record_invariant=lambda record: None)
                columns, slots = out.columns, out.slots
            if not torch.equal(columns["input_ids"], whole["input_ids"]):
                raise SystemExit(f"step {step}: {k} groups sampled other tokens than one block")
            fractions[k].append(padding_fractions(columns["lengths"], slots)["train/padding_fraction_generation"])
    for k, values in fractions.items():
        print(json.dumps({"bench": "length_buckets", "dataset": "word_math", "length_buckets": k, "steps": args.steps,
                          "rows_per_step": PROMPTS * G, "padding_fraction_generation_mean": sum(values) / len(values),
                          "padding_fraction_generation_max": max(values)}))


if __name__ == "__main__":
    main()
