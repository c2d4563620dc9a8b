"""`generation.length_buckets`: rows decoded in groups of similar prompt length come back in the
caller's order with the tokens one block gives, fewer padded slots, and a row-order record that a
scrambled restore fails."""

from __future__ import annotations

import functools
import json
import operator
from pathlib import Path

import pytest
import torch

from rl.config import ModelConfig
from rl.data.errors import DataIntegrityError
from rl.generation import generate, row_seeds
from rl.generation.length_buckets import INVARIANT, decode_in_groups, length_groups
from rl.generation.static_decode import StaticDecoder
from rl.metrics.padding import decoded_slots, padding_fractions
from rl.models import build_model

torch.set_num_threads(1)
VOCAB, PAD, EOS = 52, 0, 1
LENGTHS = [9, 3, 6, 1, 7, 3, 2, 8, 5, 4]  # rows of one call, two of length 3
WORD_MATH = Path(__file__).resolve().parents[2] / "rl" / "assets" / "data" / "word_math" / "train.jsonl"


def test_groups_are_near_equal_runs_of_the_stably_sorted_lengths() -> None:
    groups = length_groups(torch.tensor(LENGTHS), 3)
    assert [g.tolist() for g in groups] == [[3, 6, 1, 5], [9, 8, 2], [4, 7, 0]]  # lengths 1,2,3,3 | 4,5,6 | 7,8,9
    assert [len(g) for g in length_groups(torch.tensor([5, 5]), 4)] == [1, 1]  # never an empty group
    with pytest.raises(ValueError, match="generation.length_buckets must be >= 1"):
        length_groups(torch.tensor(LENGTHS), 0)


def model() -> torch.nn.Module:
    m = build_model(ModelConfig(family="qwen3_5"), vocab_size=VOCAB, seed=0)
    with torch.no_grad():  # a louder eos logit: rows end at different steps
        m.lm_head.weight[EOS] *= 25
    return m


def caller(mode: str):
    """A `generate` callable as the driver holds it: Generation columns of one decoding loop."""
    m = model()
    decoder = StaticDecoder(m, use_graphs=False) if mode == "static" else None

    def run(prompt_ids, **kwargs):
        args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=EOS, pad_token_id=PAD, **kwargs)
        gen = decoder.generate(prompt_ids, **args) if decoder else generate(m, prompt_ids, **args)
        return gen.columns()

    return run


def prompts() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = torch.randint(4, VOCAB, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(1))
    return ids, torch.tensor(LENGTHS), row_seeds(5, len(LENGTHS))


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_same_seeds_give_the_same_tokens_with_or_without_buckets(mode: str) -> None:
    run = caller(mode)
    ids, lengths, seeds = prompts()
    whole = run(ids, seeds=seeds, prompt_lengths=lengths)
    records: list[dict] = []
    grouped = decode_in_groups(run, ids, seeds=seeds, prompt_lengths=lengths, images={}, num_groups=3,
                               pad_token_id=PAD, record_invariant=records.append)
    for name in ("input_ids", "attention_mask", "response_mask", "lengths", "truncated", "prompt_lengths"):
        assert torch.equal(grouped.columns[name], whole[name]), name
    assert whole["truncated"].any() and (~whole["truncated"]).any(), "rows should end at different steps"
    torch.testing.assert_close(grouped.columns["gen_logprobs"], whole["gen_logprobs"], atol=1e-5, rtol=0)
    assert records == [{"check": INVARIANT, "ok": True, "rows": 10, "detail": "10 rows in caller order", "groups": 3}]
    one_block = decoded_slots(whole["lengths"], whole["prompt_lengths"])
    assert grouped.slots.tokens == one_block.tokens and grouped.slots.slots < one_block.slots
    fractions = padding_fractions(whole["lengths"], grouped.slots)
    assert 0.0 <= fractions["train/padding_fraction_generation"] < padding_fractions(
        whole["lengths"], one_block)["train/padding_fraction_generation"]


def test_a_scrambled_restore_fails_the_row_order_record(monkeypatch) -> None:
    monkeypatch.setenv("RL_FAULTS", "generation_bucket_order_kept")
    ids, lengths, seeds = prompts()
    records: list[dict] = []
    with pytest.raises(DataIntegrityError, match="generation_row_order: .* rows out of place"):
        decode_in_groups(caller("eager"), ids, seeds=seeds, prompt_lengths=lengths, images={}, num_groups=3,
                         pad_token_id=PAD, record_invariant=records.append)
    [record] = records
    assert record["check"] == INVARIANT and record["ok"] is False and "out of place" in record["detail"]


def test_rows_a_generator_hands_back_out_of_order_fail_the_record() -> None:
    """The check reads the rows' seeds and prompts, not the restore's arithmetic: a group whose
    rows come back swapped (the two rows of length 3 too, whose prompts differ only in seed) fails."""
    run = caller("eager")
    ids, lengths, seeds = prompts()
    ids[5] = ids[1]  # rows 1 and 5: the same prompt, told apart by their seeds only

    def swapped(prompt_ids, **kwargs):
        out = run(prompt_ids, **kwargs)
        return {k: v.flip(0) if v.dim() else v for k, v in out.items()}

    records: list[dict] = []
    with pytest.raises(DataIntegrityError, match="out of place"):
        decode_in_groups(swapped, ids, seeds=seeds, prompt_lengths=lengths, images={}, num_groups=5,
                         pad_token_id=PAD, record_invariant=records.append)
    assert records[0]["ok"] is False


def test_eight_groups_keep_word_math_generation_padding_under_a_fifth() -> None:
    """The slots arithmetic on the shipped word_math prompts (characters = tokens of the character
    tokenizers), 16 prompts x 4 a step with 11-token responses: one block vs 8 groups."""
    rows = [json.loads(line) for line in WORD_MATH.read_text().splitlines()]
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        pick = torch.randperm(len(rows), generator=g)[:16]
        prompt = torch.tensor([len(rows[i]["problem"]) for i in pick]).repeat_interleave(4)
        total = prompt + 11
        grouped = functools.reduce(operator.add, (decoded_slots(total[r], prompt[r]) for r in length_groups(prompt, 8)))
        assert padding_fractions(total, grouped)["train/padding_fraction_generation"] < 0.2
    assert padding_fractions(total, decoded_slots(total, prompt))["train/padding_fraction_generation"] > 0.3
