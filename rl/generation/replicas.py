"""`generation.replicas`: a call's prompt groups spread over data-parallel generation replicas,
decoded side by side, rows back in the caller's order.

Why: one generator serving a whole job decodes every row of a step on one device while the
others wait. Each replica (a `GenerationWorker` holding the whole policy) decodes a share.

Shares: whole GRPO groups stay on one replica. A group is a run of consecutive rows with the same
prompt (tokens and length): the driver repeats each prompt G times in a row, and length
bucketing's stable sort keeps them adjacent (equal prompts side by side make one group, which
only makes a share coarser). A group's expected tokens are its rows' prompt lengths plus
`new_tokens` (max_new_tokens) each; groups go largest first (ties: the earlier first) to the
replica with the fewest expected tokens so far (ties: the lower index), so no share exceeds the
mean by more than one group. A share's rows keep the caller's relative order and the call's
prompt width (not cut to the share's longest, as a length bucket is), so each replica decodes a
block of one replica's shape but for its rows.

Same tokens whatever the replica count: each row's seed (`rl.generation.sampler.row_seeds`)
travels with it. Its log-probs move only by float rounding of another batch size; on the CPU
they are bitwise the same when the shares' row counts are multiples of 8 (the CPU tiny twin's
64 rows as 32 + 32, tests/rl/test_generation_replicas_engine.py).

Restore and check: `rl.generation.row_order` (the planted fault `generation_replica_order_kept`
skips the restore: rows come back in replica order). Each call with more than one replica writes
one `generation_row_order` record with `replicas` and each replica's rows and expected tokens; a
row out of place is recorded, then raised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from rl.data.errors import DataIntegrityError
from rl.generation.generation import FIELDS
from rl.generation.row_order import INVARIANT, SEEDS, restore_order, row_order_record

__all__ = ["BALANCE_METRIC", "ReplicaSpread", "expected_tokens", "prompt_groups", "replica_rows", "spread_groups"]

FAULT = "generation_replica_order_kept"  # rl/faults.py: the restore skipped, rows left in replica order
BALANCE_METRIC = "performance/generation_replica_max_over_mean"
# (replica, its share's keyword arguments) of one call -> each share's Generation columns, in order
Submit = Callable[[list[tuple[int, dict[str, Any]]]], list[Mapping[str, torch.Tensor]]]


def prompt_groups(prompt_ids: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
    """Row indices of each run of consecutive rows with the same prompt (tokens and length)."""
    rows = len(lengths)
    if rows == 0:
        return []
    same = (prompt_ids[1:] == prompt_ids[:-1]).all(dim=1) & (lengths[1:] == lengths[:-1])
    starts = [0, *((~same).nonzero().flatten() + 1).tolist(), rows]
    return [torch.arange(a, b) for a, b in zip(starts, starts[1:])]


def spread_groups(loads: Sequence[int], num_replicas: int) -> list[list[int]]:
    """Group indices of each replica's share: largest load first to the least loaded replica."""
    if num_replicas < 1:
        raise ValueError(f"generation.replicas must be >= 1, got {num_replicas}")
    totals = [0] * num_replicas
    shares: list[list[int]] = [[] for _ in range(num_replicas)]
    for g in sorted(range(len(loads)), key=lambda i: (-loads[i], i)):
        r = min(range(num_replicas), key=lambda i: (totals[i], i))
        shares[r].append(g)
        totals[r] += loads[g]
    return [sorted(share) for share in shares]


def expected_tokens(lengths: torch.Tensor, rows: torch.Tensor, new_tokens: int) -> int:
    """What decoding `rows` is expected to carry: their prompts and `new_tokens` each."""
    return int(lengths[rows].sum()) + new_tokens * len(rows)


def replica_rows(prompt_ids: torch.Tensor, lengths: torch.Tensor, *, num_replicas: int,
                 new_tokens: int) -> list[torch.Tensor]:
    """Row indices of each replica's share (ascending; empty when there are fewer groups than replicas)."""
    groups = prompt_groups(prompt_ids, lengths)
    loads = [expected_tokens(lengths, g, new_tokens) for g in groups]
    empty = torch.zeros(0, dtype=torch.long)
    return [torch.cat([groups[g] for g in share]) if share else empty
            for share in spread_groups(loads, num_replicas)]


class ReplicaSpread:
    """The `generate` callable the GRPO driver holds, over `num_replicas` generation workers.

    Called as `generate(prompt_ids, seeds=, prompt_lengths=, **images, **options)`: every tensor
    argument is a row-aligned column (it goes with its rows), every other one an option each
    replica gets as it is. `submit` runs the shares on their replicas concurrently.
    """

    def __init__(self, submit: Submit, *, num_replicas: int, new_tokens: int, pad_token_id: int,
                 record_invariant: Callable[[dict], None]) -> None:
        self.submit = submit
        self.num_replicas = num_replicas
        self.new_tokens = new_tokens
        self.pad_token_id = pad_token_id
        self.record_invariant = record_invariant
        self._decoded = [0] * num_replicas  # tokens each replica decoded since `take_balance`

    def __call__(self, prompt_ids: torch.Tensor, *, seeds: torch.Tensor, prompt_lengths: torch.Tensor,
                 **kwargs: Any) -> dict[str, torch.Tensor]:
        seeds = torch.as_tensor(seeds, dtype=torch.long)
        lengths = torch.as_tensor(prompt_lengths, dtype=torch.long)
        columns = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        options = {k: v for k, v in kwargs.items() if k not in columns}
        if self.num_replicas == 1:
            [out] = self.submit([(0, dict(prompt_ids=prompt_ids, seeds=seeds, prompt_lengths=lengths,
                                          **columns, **options))])
            self._decoded[0] += int(out["lengths"].sum())
            return dict(out)
        every = replica_rows(prompt_ids, lengths, num_replicas=self.num_replicas, new_tokens=self.new_tokens)
        shares = [(r, rows) for r, rows in enumerate(every) if len(rows)]
        outs = self.submit([(r, dict(prompt_ids=prompt_ids[rows], seeds=seeds[rows], prompt_lengths=lengths[rows],
                                     **{k: v[rows] for k, v in columns.items()}, **options)) for r, rows in shares])
        versions = {int(out["version"]) for out in outs if "version" in out}
        if len(versions) > 1:
            raise RuntimeError(f"generation replicas hold different weight versions {sorted(versions)}: "
                               "a refit missed one")
        parts = []
        for (r, rows), out in zip(shares, outs):
            parts.append({**{name: out[name] for name in FIELDS}, SEEDS: seeds[rows]})
            self._decoded[r] += int(out["lengths"].sum())
        width = max(part["input_ids"].shape[1] for part in parts)
        joined = restore_order(parts, [rows for _, rows in shares], width=width, pad_token_id=self.pad_token_id,
                               fault=FAULT)
        record = {**row_order_record(joined, prompt_ids, lengths, seeds), "replicas": self.num_replicas,
                  "replica_rows": [len(rows) for rows in every],
                  "replica_tokens": [expected_tokens(lengths, rows, self.new_tokens) for rows in every]}
        self.record_invariant(record)
        if not record["ok"]:
            raise DataIntegrityError(f"{INVARIANT}: {record['detail']}")
        out = {name: joined[name] for name in FIELDS}
        if versions:
            out["version"] = torch.tensor(versions.pop())
        return out

    def take_balance(self) -> dict[str, float]:
        """The busiest replica's decoded tokens (prompt + response of its rows) over the mean
        replica's, since the last take (1.0: even; {} when nothing was decoded); then starts over."""
        decoded, self._decoded = self._decoded, [0] * self.num_replicas
        mean = sum(decoded) / self.num_replicas
        return {BALANCE_METRIC: max(decoded) / mean} if mean else {}
