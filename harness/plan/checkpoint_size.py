"""The disk a run's checkpoints take: `harness plan` prints it, `harness run` checks it against the
free space where they go before launch (a run that fills the disk dies at a save, after the GPU
time is spent; at 4.38 B parameters one save is ~82 GiB).

What a save holds (rl/checkpoint.py): the policy and its reference as fp32 Hugging Face tensors,
and every rank's optimizer state, together Adam's two fp32 moments per parameter plus, under bf16,
the fp32 main copy. Every save is kept. An external engine keeps its own checkpoints: not planned.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.plan.model_size import ModelSize

__all__ = ["CheckpointSize", "disk_refusal", "estimate_checkpoints", "free_bytes", "gib_text",
           "save_steps"]

GIB = 1024**3
WEIGHT_BYTES = 4 + 4  # the policy and the reference, fp32
MOMENT_BYTES = 4 + 4  # Adam's exp_avg and exp_avg_sq, fp32
MAIN_COPY_BYTES = {"bf16": 4, "fp32": 0}  # the optimizer's fp32 copy of bf16 parameters


@dataclass(frozen=True, kw_only=True)
class CheckpointSize:
    weights: float  # GiB a save, the policy and the reference
    optimizer: float  # GiB a save, every rank's optimizer state together
    steps: tuple[int, ...]  # the steps that save

    @property
    def per_save(self) -> float:
        return self.weights + self.optimizer

    def after(self, step: int) -> float:
        """GiB the saves after `step` add (a resumed run keeps what it saved before)."""
        return self.per_save * sum(1 for s in self.steps if s > step)

    def to_json(self) -> dict:
        return {"per_save": round(self.per_save, 2), "weights": round(self.weights, 2),
                "optimizer": round(self.optimizer, 2), "saves": len(self.steps),
                "total": round(self.after(0), 2)}


def save_steps(num_steps: int, every: int, at_end: bool) -> tuple[int, ...]:
    """The steps after which the engine saves (rl/run.py): every `every` steps, and the last."""
    steps = set(range(every, num_steps + 1, every)) if every else set()
    if at_end and num_steps > 0:
        steps.add(num_steps)
    return tuple(sorted(steps))


def estimate_checkpoints(recipe: Mapping, size: ModelSize) -> CheckpointSize:
    params = size.total_params
    ckpt, precision = recipe.get("checkpoint") or {}, recipe["policy"]["precision"]
    num_steps = int((recipe.get("algorithm") or {}).get("num_steps") or 0)  # resolved recipes always say
    steps = save_steps(num_steps, int(ckpt.get("every_steps") or 0), bool(ckpt.get("at_end", True)))
    return CheckpointSize(weights=params * WEIGHT_BYTES / GIB,
                          optimizer=params * (MOMENT_BYTES + MAIN_COPY_BYTES.get(precision, 4)) / GIB, steps=steps)


def gib_text(gib: float) -> str:
    return f"{gib:.1f} GiB" if gib >= 0.1 else f"{gib * 1024:.1f} MiB"


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem that will hold `path` (its nearest existing ancestor's)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def disk_refusal(size: CheckpointSize, where: Path, *, after_step: int = 0) -> str | None:
    """One line when the saves after `after_step` do not fit the free space at `where`, else None."""
    need = size.after(after_step)
    free = free_bytes(where) / GIB
    if need <= free:
        return None
    saves = sum(1 for s in size.steps if s > after_step)
    return (f"checkpoint: {saves} save(s) of {gib_text(size.per_save)} ({gib_text(need)}) do not fit the "
            f"{gib_text(free)} free at {where}; save less often (checkpoint.every_steps, checkpoint.at_end: "
            "false) or elsewhere (checkpoint.dir)")
