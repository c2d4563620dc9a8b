"""`generation.length_buckets`: decode prompts of similar length together, rows back in the caller's order.

A decoding loop carries every row of a call in one [rows, longest prompt + longest response]
block, so one long prompt makes every short one pay its length in pad. Here a call's rows are
stably sorted by prompt length and cut into `num_groups` runs of near-equal size (quantiles of
the length); each run is decoded alone, its prompts cut to its own longest, and the rows are put
back in the caller's order. On the shipped `word_math` rows, decoded as the flagship tiny twin
decodes them (16 prompts x 4 a step, 12 new tokens), the generation padding fraction was 0.434
a step in one block (max 0.560) and 0.042 in 8 groups (max 0.065), the same tokens either way
(bench/bench_length_buckets.py, 4 steps, bench/results/length_buckets.jsonl).

Same tokens either way: row r draws from its own generator, seeded `seeds[r]`
(`rl.generation.sampler.row_seeds`), and its seed travels with it into its group, so where a row
is decoded changes none of its draws (its log-probs move by float rounding: another batch).

Restoring order and its check are `rl.generation.row_order`'s (the planted fault
`generation_bucket_order_kept` skips the restore: rows stay in length order); one
`generation_row_order` record a call says every row is back in place (a mismatch is recorded,
then raised).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rl.data.errors import DataIntegrityError
from rl.generation.generation import FIELDS
from rl.generation.row_order import INVARIANT, SEEDS, restore_order, row_order_record
from rl.metrics.padding import SlotCount, decoded_slots

__all__ = ["INVARIANT", "Decoded", "decode_in_groups", "length_groups"]

FAULT = "generation_bucket_order_kept"  # rl/faults.py: the restore skipped, rows left in length order


@dataclass(kw_only=True)
class Decoded:
    """A call's rollouts in the caller's order (`Generation` fields) and the slots its loops carried."""

    columns: dict[str, torch.Tensor]
    slots: SlotCount


def length_groups(lengths: torch.Tensor, num_groups: int) -> list[torch.Tensor]:
    """Row indices of each group: rows stably sorted by length, cut into `num_groups` runs of
    near-equal size (fewer when there are fewer rows)."""
    if num_groups < 1:
        raise ValueError(f"generation.length_buckets must be >= 1, got {num_groups}")
    order = torch.argsort(torch.as_tensor(lengths), stable=True)
    return [g for g in torch.tensor_split(order, min(num_groups, len(order))) if len(g)]


def decode_in_groups(generate: Callable[..., Mapping[str, torch.Tensor]], prompt_ids: torch.Tensor, *,
                     seeds: torch.Tensor, prompt_lengths: torch.Tensor, images: Mapping[str, torch.Tensor],
                     num_groups: int, pad_token_id: int, record_invariant: Callable[[dict], None],
                     **options: Any) -> Decoded:
    """Rollouts of right-padded prompts, decoded in `num_groups` groups of similar prompt length.

    Args:
        generate: `prompt_ids, seeds=, prompt_lengths=, **images, **options -> Generation columns`.
        images: the row-aligned image columns of a vision task ({} for text); they go with their rows.
        record_invariant: receives the call's `generation_row_order` record.
    Raises:
        DataIntegrityError: a row came back out of place (after its record is written).
    """
    seeds = torch.as_tensor(seeds, dtype=torch.long)
    lengths = torch.as_tensor(prompt_lengths, dtype=torch.long)
    groups = length_groups(lengths, num_groups)
    parts, slots, new_tokens = [], SlotCount(tokens=0, slots=0), 0
    for rows in groups:
        longest = int(lengths[rows].max())
        out = generate(prompt_ids[rows, :longest], seeds=seeds[rows], prompt_lengths=lengths[rows],
                       **{k: v[rows] for k, v in images.items()}, **options)
        part = {name: out[name] for name in FIELDS}
        parts.append({**part, SEEDS: seeds[rows]})
        slots = slots + decoded_slots(part["lengths"], part["prompt_lengths"])
        new_tokens = part["input_ids"].shape[1] - longest  # max_new_tokens: every group's rows are prompt + it
    out = restore_order(parts, groups, width=prompt_ids.shape[1] + new_tokens, pad_token_id=pad_token_id,
                        fault=FAULT)
    record = {**row_order_record(out, prompt_ids, lengths, seeds), "groups": len(groups)}
    record_invariant(record)
    if not record["ok"]:
        raise DataIntegrityError(f"{INVARIANT}: {record['detail']}")
    return Decoded(columns={name: out[name] for name in FIELDS}, slots=slots)
