"""The run-dir writers: metrics.jsonl, invariants.jsonl, env.json, status.json.

These files are the whole contract with the harness (docs/architecture.md), so every write is
durable on its own: JSONL lines are flushed and fsync'ed as they are written, JSON documents are
replaced atomically, and a resumed run cuts each series back to its checkpoint step so the
series continues with no gap and no duplicate.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

from rl import faults

__all__ = ["STEP_END", "RunLog", "read_jsonl", "write_json_atomic"]

METRICS = "metrics.jsonl"
INVARIANTS = "invariants.jsonl"
STEP_END = "clock/step_end_unix_s"  # every metrics row: the step's end, seconds since the epoch
ENV = "env.json"
STATUS = "status.json"


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to a temp file in the same dir, fsync it, then rename over `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class _JsonlWriter:
    """Append-only JSONL file that is durable after every record.

    A record either lands whole or not at all: when a write fails (a full disk, ENOSPC), the
    file is cut back to where the record began, so the lines before it stay readable and no
    torn line is left for a reader or a resume to trip on.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = open(path, "ab", buffering=0)

    def write(self, record: dict[str, Any], *, step: int | None = None) -> None:
        # NaN and inf go out as JSON's NaN / Infinity / -Infinity tokens (allow_nan), which
        # Python's json and the reference's reader parse back as floats: a diverged loss stays a
        # number that fails all_finite, not a string a reader could skip.
        data = (json.dumps(record, sort_keys=False, allow_nan=True) + "\n").encode()
        fd = self._fh.fileno()
        start = os.fstat(fd).st_size
        try:
            if step is not None:
                _plant_write_faults(self._fh, data, step)
            view = memoryview(data)
            while view:
                view = view[self._fh.write(view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:  # noqa: BLE001 - the original error is the one to report
                pass
            raise OSError(exc.errno, f"writing {self.path.name}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        self._fh.close()


def _plant_write_faults(fh: Any, data: bytes, step: int) -> None:
    """metrics_enospc and metrics_torn (rl/faults.py): half the line reaches the file first."""
    torn, enospc = faults.at("metrics_torn", step), faults.at("metrics_enospc", step)
    if torn or enospc:
        fh.write(data[: len(data) // 2])
        os.fsync(fh.fileno())
    if torn:
        faults.crash()
    if enospc:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _truncate_jsonl(path: Path, keep_through_step: int) -> None:
    """Rewrite `path` keeping records with step <= keep_through_step (atomically)."""
    if not path.exists():
        return
    kept = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= keep_through_step]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for record in kept:
            fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunLog:
    """Writers for one run dir.

    Args:
        run_dir: created if missing.
        num_steps: the planned number of steps (reported in status.json).
        resume_step: when resuming from a checkpoint at this step, records past it are cut.
    """

    def __init__(self, run_dir: str | Path, *, num_steps: int, resume_step: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.num_steps = num_steps
        self._t0 = time.monotonic()
        if resume_step is None:
            for name in (METRICS, INVARIANTS):
                (self.run_dir / name).unlink(missing_ok=True)
            self.last_step = 0
        else:
            _truncate_jsonl(self.run_dir / METRICS, resume_step)
            _truncate_jsonl(self.run_dir / INVARIANTS, resume_step)
            self.last_step = resume_step
        self._metrics = _JsonlWriter(self.run_dir / METRICS)
        self._invariants = _JsonlWriter(self.run_dir / INVARIANTS)
        self.dead_worker: str | None = None
        self.write_status("running")

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self._t0

    def log_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        """Append one step; steps must increase by exactly one (no gap, no duplicate).

        A raise, not an assert: the harness trusts metrics.jsonl to be in order, and -O must not
        turn that promise off.
        """
        if type(step) is not int or step != self.last_step + 1:
            raise ValueError(f"metrics step {step!r} after {self.last_step}: steps must increase by one")
        # When the step ended on this machine's clock: what lines a step up with what was sampled
        # beside it (bench/gpu_busy.py: the GPU's busy fraction over the timed steps).
        self._metrics.write({"step": step, **metrics, STEP_END: time.time()}, step=step)
        self.last_step = step

    def log_invariant(self, record: dict[str, Any]) -> None:
        """Append one invariant record (`check`, `step`, `ok`, ...)."""
        if "check" not in record or type(record.get("ok")) is not bool:
            raise ValueError(f"an invariant record needs 'check' and a boolean 'ok', got {record!r}")
        record = dict(record)
        record.setdefault("step", self.last_step + 1)
        self._invariants.write(record)

    def write_env(self, workers: list[dict[str, Any]]) -> None:
        write_json_atomic(self.run_dir / ENV, {"workers": workers})

    def write_status(self, state: str, *, error: str | None = None,
                     exit_code: int | None = None) -> None:
        write_json_atomic(self.run_dir / STATUS, {
            "state": state,
            "exit_code": exit_code,
            "error": error,
            "last_step": self.last_step,
            "num_steps": self.num_steps,
            "wall_s": round(self.wall_s, 3),
            "dead_worker": self.dead_worker,
        })

    def close(self) -> None:
        self._metrics.close()
        self._invariants.close()
