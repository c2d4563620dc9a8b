"""The distillation train step on one rank: global counts, micro-batches, teacher and student forwards.

The valid-chunk and valid-token counts are all-reduced FIRST, before any rank could return
early (a rank with no valid chunk still joins the collective, so no rank waits forever), and
divide every rank's loss, so the all-reduced gradient is the single-rank gradient. Micro-batches
have one fixed shape (rl/backends/train_step.py, `micro_batches`); their padding rows are neither
valid chunks nor samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from rl.backends.train_step import add_metrics, micro_batches
from rl.data.errors import DataIntegrityError
from rl.distill.loss import DistillConfig, chunk_mask, xtoken_loss
from rl.distill.projection import Projection

if TYPE_CHECKING:
    from rl.config import TeacherConfig

__all__ = ["DISTILL_FIELDS", "TeacherSpec", "accumulate_distill_grads", "global_counts"]

DISTILL_FIELDS = ("input_ids", "attention_mask", "response_mask", "teacher_input_ids", "teacher_attention_mask",
                  "student_chunks", "teacher_chunks", "chunk_valid", "sample_mask")


@dataclass(kw_only=True)
class TeacherSpec:
    """What a policy rank needs to hold the teacher: its model, weights and the projection."""

    model: TeacherConfig
    vocab_size: int
    weights: dict[str, torch.Tensor]
    projection: Projection


def global_counts(batch: dict[str, torch.Tensor], *, fold_sample_mask: bool = True) -> tuple[int, int]:
    """(valid chunks, valid tokens) over every rank: this rank's counts, all-reduced."""
    mask = chunk_mask(student_chunks=batch["student_chunks"], teacher_chunks=batch["teacher_chunks"],
                      chunk_valid=batch["chunk_valid"], sample_mask=batch["sample_mask"],
                      fold_sample_mask=fold_sample_mask)
    tokens = batch["response_mask"][:, 1:].to(torch.float64) * (batch["sample_mask"] != 0)[:, None]
    counts = torch.tensor([mask.sum().item(), tokens.sum().item()], dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    return int(counts[0]), int(counts[1])


def _logits(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, attention_mask=mask, use_cache=False).logits


def accumulate_distill_grads(model: Any, teacher: Any, batch: dict[str, torch.Tensor], *, projection: Projection,
                             cfg: DistillConfig, micro_batch_size: int, device: torch.device,
                             fold_sample_mask: bool = True) -> dict[str, float]:
    """Backward of this rank's share of the loss over its rows; returns its summed metrics."""
    missing = [f for f in DISTILL_FIELDS if f not in batch]
    if missing:
        raise DataIntegrityError(f"distill batch lacks {missing}")
    columns = {k: batch[k] for k in DISTILL_FIELDS}
    num_chunks, num_tokens = global_counts(columns, fold_sample_mask=fold_sample_mask)
    totals: dict[str, float] = {}
    if not columns["input_ids"].shape[0]:
        return totals
    for mb, real in micro_batches(columns, micro_batch_size):
        mb = {k: v.to(device) for k, v in mb.items()}
        mb["sample_mask"][real:] = 0  # padding copies of a real row
        mb["chunk_valid"][real:] = 0
        with torch.no_grad():
            t_logits = _logits(teacher, mb["teacher_input_ids"], mb["teacher_attention_mask"])
        s_logits = _logits(model, mb["input_ids"], mb["attention_mask"])
        loss, metrics = xtoken_loss(
            student_logits=s_logits, teacher_logits=t_logits, input_ids=mb["input_ids"],
            token_mask=mb["response_mask"], student_chunks=mb["student_chunks"],
            teacher_chunks=mb["teacher_chunks"], chunk_valid=mb["chunk_valid"], sample_mask=mb["sample_mask"],
            projection=projection, cfg=cfg, num_valid_chunks=num_chunks, num_tokens=num_tokens,
            fold_sample_mask=fold_sample_mask)
        loss.backward()
        add_metrics(totals, metrics)
    return totals
