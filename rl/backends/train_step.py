"""The train-step pieces every training backend shares: fixed-shape micro-batches (padded, or
packed: `policy.sequence_packing`), the loss of one micro-batch, summing its metrics on the device,
and the step's learning rate.

They live here, not in one backend, so the torch and megatron backends (and distillation's
step, rl/distill/step.py) cannot drift apart: the same rows make the same micro-batches, and
the same micro-batch gives the same loss, whichever backend trains on it.
"""

from __future__ import annotations

import torch

from rl.algorithms.loss import LOSS_METRICS, LossConfig, clipped_pg_loss_on_device, needs_reference, prev_from_training
from rl.config import OptimizerConfig, SequencePackingConfig
from rl.lr_schedule import lr_at
from rl.models.packing import Packing, packed_groups, row_lengths

__all__ = ["TRAIN_FIELDS", "DeviceSums", "Forward", "PrevLogprobs", "add_metrics", "backward_micro_batch", "forwards",
           "micro_batch_loss", "micro_batches", "packed_micro_batches", "schedule_lr", "train_fields"]

# Per-row columns the train step reads; all [B, T] except advantages and sample_mask ([B]).
TRAIN_FIELDS = ("input_ids", "attention_mask", "response_mask", "gen_logprobs", "prev_logprobs",
                "ref_logprobs", "advantages", "sample_mask")


def train_fields(loss_cfg: LossConfig) -> tuple[str, ...]:
    """TRAIN_FIELDS as a step with this loss reads them: no `ref_logprobs` without a KL term, no
    `prev_logprobs` when the training forward makes them."""
    skip = {"ref_logprobs"} if not needs_reference(loss_cfg) else set()
    if prev_from_training(loss_cfg):
        skip.add("prev_logprobs")
    return tuple(f for f in TRAIN_FIELDS if f not in skip)


class PrevLogprobs:
    """A train step's `prev_logprobs` from its own forwards (`algorithm.loss.prev_logprobs:
    training`): each micro-batch's detached log-probs stand in for the pass's and are kept for the
    driver (its digest and monitors). Without that setting it does nothing."""

    def __init__(self, loss_cfg: LossConfig, shape: torch.Size) -> None:
        self.active = prev_from_training(loss_cfg)
        self.shape = shape
        self._parts: list[tuple[torch.Tensor, torch.Tensor]] = []

    def fill(self, mb: dict[str, torch.Tensor], rows: torch.Tensor, curr: torch.Tensor) -> dict[str, torch.Tensor]:
        """`mb` with `prev_logprobs` = `curr` detached (active), else `mb` as given; keeps the
        micro-batch's real rows (its first len(rows))."""
        if not self.active:
            return mb
        prev = curr.detach()
        self._parts.append((rows, prev[:len(rows)]))
        return {**mb, "prev_logprobs": prev}

    def columns(self) -> dict[str, torch.Tensor]:
        """{"prev_logprobs": [rows, T] float32 on the CPU, rows in the batch's order}, or {}."""
        if not self.active:
            return {}
        out = torch.zeros(self.shape, dtype=torch.float32)
        if self._parts:  # one host copy at the end, not one a micro-batch
            rows = torch.cat([rows for rows, _ in self._parts])
            out[rows] = torch.cat([prev.float() for _, prev in self._parts]).cpu()
        return {"prev_logprobs": out}


def micro_batches(columns: dict[str, torch.Tensor], size: int) -> list[tuple[dict[str, torch.Tensor], int]]:
    """Cut row-aligned columns into micro-batches of exactly `size` rows.

    The last one is padded with copies of its first row; returns (columns, real_rows) pairs.
    """
    rows = next(iter(columns.values())).shape[0]
    out = []
    for start in range(0, rows, size):
        real = min(size, rows - start)
        index = torch.arange(start, start + size)
        index[real:] = start
        out.append(({k: v[index] for k, v in columns.items()}, real))
    return out


def packed_micro_batches(columns: dict[str, torch.Tensor], size: int, budget: int | None
                         ) -> list[tuple[dict[str, torch.Tensor], torch.Tensor, Packing]]:
    """Cut row-aligned columns into packed micro-batches: the rows first-fit-decreasing into packed
    rows of `budget` tokens (None: a row's width), `size` packed rows to a forward
    (rl/models/packing.py). Returns (columns of the forward's rows, their row indices, packing);
    every row is real, and each row is in exactly one forward.
    """
    mask = columns["attention_mask"]
    width = mask.shape[1]
    groups = packed_groups(row_lengths(mask), width=width, budget=budget or width, rows_per_forward=size)
    out = []
    for rows, packing in groups:
        index = torch.tensor(rows, dtype=torch.long)
        out.append(({k: v[index] for k, v in columns.items()}, index, packing))
    return out


# A forward: its columns, the batch rows it holds (the first len(rows) of it; the rest are
# padding copies), and its packing (None: padded rows).
Forward = tuple[dict[str, torch.Tensor], torch.Tensor, Packing | None]


def forwards(columns: dict[str, torch.Tensor], size: int, packing: SequencePackingConfig, *,
             multiple: int = 1) -> list[Forward]:
    """A pass's forwards: `micro_batches`, or with `packing.enabled` `packed_micro_batches`, its
    budget rounded up to a multiple of `multiple` (a backend whose packed row must split evenly)."""
    if packing.enabled:
        budget = packing.max_tokens_per_row or columns["attention_mask"].shape[1]
        return packed_micro_batches(columns, size, -(-budget // multiple) * multiple)
    return [(mb, torch.arange(start, start + real), None)
            for start, (mb, real) in zip(range(0, len(columns["input_ids"]), size), micro_batches(columns, size))]


def micro_batch_loss(mb: dict[str, torch.Tensor], real: int, curr: torch.Tensor, *, loss_cfg: LossConfig,
                     num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ClippedPG loss of one micro-batch from its current log-probs, and its metrics as one tensor
    on the loss's device (`LOSS_METRICS` order; `DeviceSums` adds them up).

    Rows past `real` are padding copies (see `micro_batches`): they carry no loss and no metric.
    Shared by every backend, so the loss a backend trains on cannot drift from another's.
    """
    sample_mask = mb["sample_mask"].clone()
    sample_mask[real:] = 0
    return clipped_pg_loss_on_device(
        curr_logprobs=curr, prev_logprobs=mb["prev_logprobs"], gen_logprobs=mb["gen_logprobs"],
        ref_logprobs=mb.get("ref_logprobs"), advantages=mb["advantages"], token_mask=mb["response_mask"],
        sample_mask=sample_mask, cfg=loss_cfg, num_tokens=num_tokens)


class DeviceSums:
    """A step's micro-batch metrics summed on the device they were computed on, read once.

    Why: a read of a device value waits for the GPU. Read after each micro-batch, it held the host
    until that micro-batch's forward had run, and the GPU idled while the host queued the backward
    and the next forward. The sums are float64 in micro-batch order from 0, as Python's float sums
    were, so the step's metrics keep their bits.
    """

    def __init__(self, names: tuple[str, ...] = LOSS_METRICS) -> None:
        self.names = names
        self._total: torch.Tensor | None = None

    def add(self, values: torch.Tensor) -> None:
        """Add one micro-batch's metrics ([len(names)], any float dtype)."""
        if values.shape != (len(self.names),):
            raise ValueError(f"metrics of shape {tuple(values.shape)} for {len(self.names)} names")
        values = values.detach().to(torch.float64)
        if self._total is None:
            self._total = torch.zeros_like(values)
        self._total = self._total + values

    def floats(self) -> dict[str, float]:
        """The sums by name, in one device-to-host copy; {} when nothing was added."""
        if self._total is None:
            return {}
        return dict(zip(self.names, self._total.tolist()))


def add_metrics(totals: dict[str, float], metrics: dict[str, float]) -> None:
    """Sum one micro-batch's metrics into the step's totals."""
    for key, value in metrics.items():
        totals[key] = totals.get(key, 0.0) + value


def backward_micro_batch(mb: dict[str, torch.Tensor], real: int, curr: torch.Tensor, *, loss_cfg: LossConfig,
                         num_tokens: int, sums: DeviceSums) -> None:
    """`micro_batch_loss`, backward, metrics summed into `sums`."""
    loss, metrics = micro_batch_loss(mb, real, curr, loss_cfg=loss_cfg, num_tokens=num_tokens)
    loss.backward()
    sums.add(metrics)


def schedule_lr(param_groups: list[dict], cfg: OptimizerConfig, step: int) -> float:
    """Set every param group's lr to `lr_at(cfg, step)` (rl/lr_schedule.py) and return it; called
    before each optimizer step. Taking the engine's step every time, neither a restored optimizer
    state (it carries the lr it was saved with) nor a count of the backend's own decides the lr
    after a resume."""
    lr = lr_at(cfg, step)
    for group in param_groups:
        group["lr"] = lr
    return lr
