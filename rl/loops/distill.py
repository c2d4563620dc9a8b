"""The distillation driver loop: `algorithm.name: distill`, off-policy from the task's answers.

Per step: draw problems (a pure function of seed and data cursor), tokenize and align each text
for both sides (rl/distill/batch.py), put the rows on the data path, take the student's
log-probs of the batch before the update (the per-sample digest the parity check compares),
and train the student on the teacher's projected distributions. As with GRPO the data path is
a switch: both give each rank the same contiguous rows, so their metrics are bitwise equal.

Two invariants per step guard the reference's seed bugs (rl/faults.py):
* `xtoken_valid_chunks`: the chunks the ranks counted equal the driver's own count of valid
  pairs in rows whose sample mask is 1 (a masked sample must reach no loss and no metric);
* `xtoken_projection_shape`: every rank's projection had the configured vocabularies' shape.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from rl.config import RunConfig
from rl.distill.batch import Side, build_batch
from rl.distill.loss import chunk_mask
from rl.metrics import Timer
from rl.metrics.digest import logprob_digest
from rl.metrics.mfu import performance_metrics

__all__ = ["DistillDriver"]

TIMING_KEYS = ("total", "data", "logprobs", "training")
TRAIN_METRICS = ("loss", "kl_loss", "ce_loss", "accuracy", "proj_accuracy", "grad_norm", "lr")


class DistillDriver:
    """Runs distillation steps against a policy group whose ranks hold the teacher.

    Args:
        cfg: the run config.
        policy: driver-side policy group (`get_logprobs`, `distill`, `dp_size`).
        student, teacher: each side's tokenizer and canonical token texts.
        env: the task whose (prompt, answer) pairs are the dataset.
        store: the data path (legacy or TQ).
        record_invariant: takes one invariant record (the engine adds the step).
        projection_shape: the configured (student vocab, teacher vocab).
    """

    def __init__(self, *, cfg: RunConfig, policy: Any, student: Side, teacher: Side, env: Any, store: Any,
                 record_invariant: Callable[[dict[str, Any]], None], projection_shape: tuple[int, int]) -> None:
        self.cfg = cfg
        self.alg = cfg.algorithm
        self.policy = policy
        self.student = student
        self.teacher = teacher
        self.env = env
        self.store = store
        self._record = record_invariant
        self.projection_shape = projection_shape
        self.cursor = 0
        self.phase_spans: list[tuple[str, int, int]] = []  # the last step's (rl.metrics.timers.Timer.spans)

    def step(self, step: int) -> dict[str, Any]:
        """One distillation step; returns the step's metrics."""
        alg = self.alg
        timer = Timer(prefix="timing/train")
        with timer:
            with timer.time("data"):
                cursor, self.cursor = self.cursor, self.cursor + 1
                problems = self.env.sample(alg.prompts_per_step, seed=alg.seed, step=cursor)
                batch = build_batch(problems, student=self.student, teacher=self.teacher,
                                    max_new_tokens=self.cfg.generation.max_new_tokens)
            sample_mask = torch.ones(len(problems))
            if alg.overlong_filtering:
                sample_mask = (~batch.truncated).to(torch.float32)
            handle = self.store.put_rollout(step=step, uids=[f"c{cursor}p{j}" for j in range(len(problems))],
                                            columns=batch.columns, lengths=batch.lengths,
                                            tags=[{"teacher_length": n} for n in batch.teacher_lengths])
            with timer.time("logprobs"):
                handle = self.store.logprobs(handle, self.policy, reference=False)
                lp = self.store.read(handle, ("prev_logprobs",))["prev_logprobs"]
            with timer.time("training"):
                train = self.store.distill(handle, self.policy, sample_mask=sample_mask, cfg=alg.distill,
                                           step=step)
            self.store.finish(handle)
        self._check(batch.columns, sample_mask, train)
        self.phase_spans = timer.spans()  # the step's phases on the epoch clock (profile.kernel_steps)
        return self._metrics(batch, lp, sample_mask, train, timer.metrics())

    def _check(self, columns: dict[str, torch.Tensor], sample_mask: torch.Tensor, train: dict[str, Any]) -> None:
        expected = int(chunk_mask(student_chunks=columns["student_chunks"], teacher_chunks=columns["teacher_chunks"],
                                  chunk_valid=columns["chunk_valid"], sample_mask=sample_mask).sum())
        counted = int(train["num_valid_chunks"])
        masked = int((sample_mask == 0).sum())
        self._record({"check": "xtoken_valid_chunks", "ok": counted == expected,
                      "detail": f"ranks counted {counted} valid chunks, the batch has {expected} "
                                f"({masked} masked samples)"})
        wrong = int(train["projection_mismatch"])
        self._record({"check": "xtoken_projection_shape", "ok": wrong == 0,
                      "detail": f"{wrong} of {self.policy.num_ranks} ranks used a projection other than the "
                                f"configured {self.projection_shape[0]} x {self.projection_shape[1]}"})

    def _metrics(self, batch: Any, lp: torch.Tensor, sample_mask: torch.Tensor, train: dict[str, Any],
                 seconds: dict[str, float]) -> dict[str, Any]:
        mask = batch.columns["response_mask"].to(torch.float32)
        out: dict[str, Any] = {f"train/{k}": train[k] for k in TRAIN_METRICS}
        out.update({
            "train/num_valid_chunks": int(train["num_valid_chunks"]),
            "train/num_valid_samples": int(sample_mask.sum()),
            "train/num_tokens": int(train["num_tokens"]),
            "train/truncated_fraction": float(batch.truncated.float().mean()),
            "train/mean_response_length": float(mask.sum(dim=1).mean()),
            "train/logprob_digest": logprob_digest(lp, mask),
            "total_flops": train["total_flops"],
            "num_ranks": train["num_ranks"],
            "theoretical_tflops": train["theoretical_tflops"],
        })
        for key in TIMING_KEYS:
            out[f"timing/train/{key}"] = seconds.get(f"timing/train/{key}", 0.0)
        out.update(performance_metrics(
            tokens=sum(batch.lengths), total_flops=out["total_flops"], theoretical_tflops=out["theoretical_tflops"],
            num_ranks=out["num_ranks"], step_seconds=out["timing/train/total"],
            train_seconds=out["timing/train/training"]))
        if "peak_memory_gib" in train:
            out["performance/peak_memory_gib"] = train["peak_memory_gib"]
        return out
