"""Rows decoded apart and put back in the caller's order, and the record that proves they were.

Two reorderings decode a call's rows apart: length bucketing (`rl.generation.length_buckets`,
groups of similar prompt length, one after another) and data-parallel replicas
(`rl.generation.replicas`, shares of the prompt groups, side by side). Both join the parts with
`restore_order` and check the result with `row_order_record`.

Restoring order: the parts' rows, concatenated, are the caller's rows `order[j]`, so the output
is `out[order[j]] = concat[j]`, a gather with the inverse of `order` (each caller names the planted
fault, rl/faults.py, that skips it: rows then stay in the parts' order). The result is then
checked against the caller's own inputs, independently of the index arithmetic: every row's seed
(unique per row), prompt length and prompt tokens must be the caller's row's, and one
`generation_row_order` record a call says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl import faults

__all__ = ["INVARIANT", "SEEDS", "restore_order", "row_order_record"]

INVARIANT = "generation_row_order"
SEEDS = "seeds"  # travels with the rows through the restore, so the check can see where each went


def _widen(column: torch.Tensor, width: int, value: int) -> torch.Tensor:
    """A [b, w] column right-padded with `value` to [b, width]; other shapes unchanged."""
    if column.dim() != 2 or column.shape[1] == width:
        return column
    return torch.cat([column, column.new_full((column.shape[0], width - column.shape[1]), value)], dim=1)


def restore_order(parts: list[dict[str, torch.Tensor]], rows: list[torch.Tensor], *, width: int,
                  pad_token_id: int, fault: str) -> dict[str, torch.Tensor]:
    """The parts' row columns joined and put back in the caller's order (part i holds the caller's
    rows `rows[i]`), 2-D columns right-padded to `width` (input_ids with the pad token, the rest
    with 0). `fault`: the planted fault that skips the restore."""
    order = torch.cat(rows)
    gather = torch.argsort(order)  # the inverse permutation
    if faults.active(fault):
        gather = torch.arange(len(order))
    out = {}
    for name in parts[0]:
        value = {"input_ids": pad_token_id}.get(name, 0)
        out[name] = torch.cat([_widen(part[name], width, value) for part in parts])[gather]
    return out


def row_order_record(out: Mapping[str, torch.Tensor], prompt_ids: torch.Tensor, lengths: torch.Tensor,
                     seeds: torch.Tensor) -> dict[str, Any]:
    """The `generation_row_order` record: each row holds the caller's row's seed, length and prompt."""
    cols = torch.arange(prompt_ids.shape[1])
    in_prompt = cols < lengths.unsqueeze(1)
    same_prompt = ((out["input_ids"][:, :prompt_ids.shape[1]] == prompt_ids) | ~in_prompt).all(dim=1)
    ok_rows = (out[SEEDS] == seeds) & (out["prompt_lengths"] == lengths) & same_prompt
    wrong = (~ok_rows).nonzero().flatten().tolist()
    detail = (f"{len(seeds)} rows in caller order" if not wrong else
              f"{len(wrong)} of {len(seeds)} rows out of place; first at row {wrong[0]}: "
              f"seed {int(out[SEEDS][wrong[0]])}, the caller's {int(seeds[wrong[0]])}")
    return {"check": INVARIANT, "ok": not wrong, "rows": len(seeds), "detail": detail}
