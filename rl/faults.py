"""Planted faults, for tests that prove a check (or a recovery path) can fail.

A check that has never been seen failing proves nothing. `RL_FAULTS` (a comma-separated list
in the engine's environment, e.g. from a recipe's `env:`) switches on known bug classes so
tests can show that the harness catches each one. Unset in every real run. A fault that happens
at one step is written `name@K` (K = the step, counted from 1); without `@K` it fires at step 1.
A resumed run (`rl.run --resume`) plants none (rl/run.py drops RL_FAULTS), so a crash planted
in the first run does not repeat in the run that recovers from it. The fault suite that plants
each of them is recipes/suites/faults.yaml (docs/nightly.md).

* `dispatch_inverse_reorder`: dp_dispatch restores rows with the permutation itself instead of
  its inverse: the reference's published reorder bug, right only for self-inverse orders.
* `generation_bucket_order_kept`: length bucketing (`generation.length_buckets`,
  rl/generation/length_buckets.py) skips the restore, so rows come back in prompt-length order
  instead of the caller's; the `generation_row_order` invariant must object.
* `generation_replica_order_kept`: the spread over generation replicas (`generation.replicas`,
  rl/generation/replicas.py) skips the restore, so rows come back in replica order (replica 0's
  share, then replica 1's, ...); the `generation_row_order` invariant must object.
* `worker_sigkill`: policy rank 1 SIGKILLs itself as its train call of step K starts.
* `worker_hang`: policy rank 1 sleeps forever as its train call of step K starts (the engine's
  worker timeout, `limits.worker_timeout_s`, must fire and the run must end).
* `nan_loss`: every rank reports a NaN loss for step K (the value the engine logs as
  `train/loss`; the gradient is left alone, so the run completes and only a check can object).
* `metrics_enospc`: writing step K's metrics line fails with ENOSPC after half of it reached the
  file (a full disk): the engine must fail with a clear status and keep the lines before it.
* `metrics_torn`: half of step K's metrics line is written, then the engine SIGKILLs itself (a
  crash mid-write): `--resume` must cut the torn line and continue with no gap or duplicate.
* `xtoken_sample_mask_ignored`: distillation leaves the sample mask out of the chunk mask, so
  masked samples reach the loss and every metric (the reference's seed bug); the run completes
  and the `xtoken_valid_chunks` invariant must object.
* `xtoken_projection_from_max_index`: distillation sizes the teacher-to-student projection from
  the largest token ids of each batch instead of the configured vocabularies (the reference's
  other seed bug); the `xtoken_projection_shape` invariant must object.
* `checkpoint_corrupt`: the checkpoint of step K is written, its tensors are then overwritten
  with garbage, and the engine SIGKILLs itself: `--resume` must refuse it in one line.
"""

from __future__ import annotations

import os
import signal

KNOWN = frozenset({"dispatch_inverse_reorder", "generation_bucket_order_kept", "generation_replica_order_kept",
                   "worker_sigkill", "worker_hang",
                   "nan_loss", "metrics_enospc", "metrics_torn", "checkpoint_corrupt", "xtoken_sample_mask_ignored",
                   "xtoken_projection_from_max_index"})
ENV = "RL_FAULTS"


def planted() -> dict[str, int]:
    """Fault name -> step of the faults in RL_FAULTS. Raises ValueError on an unknown name."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in os.environ.get(ENV, "").split(","))):
        name, _, step = item.partition("@")
        if name not in KNOWN:
            raise ValueError(f"{ENV}: unknown fault {name!r}; known: {', '.join(sorted(KNOWN))}")
        if step and not step.isdigit():
            raise ValueError(f"{ENV}: {item!r}: the step after '@' must be a positive integer")
        out[name] = int(step) if step else 1
    return out


def active(name: str) -> bool:
    """True when fault `name` is planted in this process's environment."""
    _known(name)
    return name in planted()


def at(name: str, step: int) -> bool:
    """True when fault `name` is planted for step `step`."""
    _known(name)
    return planted().get(name) == step


def _known(name: str) -> None:
    if name not in KNOWN:
        raise ValueError(f"unknown fault {name!r}; known: {sorted(KNOWN)}")


def crash() -> None:
    """Die the way a power cut or the OOM killer ends a process: no handler, no clean-up."""
    os.kill(os.getpid(), signal.SIGKILL)


def garble(path: str | os.PathLike, *, num_bytes: int = 4096) -> None:
    """Overwrite `num_bytes` in the middle of the file at `path` with 0xFF (a bad disk block)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(max(0, size // 2 - num_bytes // 2))
        fh.write(b"\xff" * min(num_bytes, size))
        fh.flush()
        os.fsync(fh.fileno())
