"""Checkpoints: everything a resumed run needs to continue bit for bit, written by the ranks that
hold it.

Layout: CHECKPOINT_ROOT/step_N/ with
* `weights.pt`: the HF-format policy and reference weights, written by rank 0 (it gathers them);
* `optimizer.rank{R}.pt`: each training rank's own optimizer state, written by that rank;
* `state.json`: step, data cursor, the driver's RNG state, the rank count and the SHA-256 of every
  file above, written by the driver last.
Nothing but file names and hashes passes through the driver: at the flagship's width the
optimizer state is hundreds of GB, which one host could neither hold nor pickle through Ray.
A checkpoint is written into a hidden temp dir (`begin`) and renamed into place (`commit`), so
`latest()` never sees a half-written one; `load` refuses one whose bytes changed after they were
written (a bad disk, a partial copy) with one line, `CheckpointError`, instead of resuming from
garbage or dying in the unpickler. The root must be a path every rank's node sees
(`checkpoint.dir`, or the run dir on a shared filesystem).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["Checkpoint", "CheckpointError", "WEIGHTS", "begin", "capture_rng", "commit", "latest", "load",
           "optimizer_file", "read", "restore_rng", "write"]

_STEP_DIR = re.compile(r"^step_(\d+)$")
WEIGHTS = "weights.pt"


def optimizer_file(rank: int) -> str:
    return f"optimizer.rank{rank}.pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be trusted: unreadable, or not the bytes that were written."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(kw_only=True)
class Checkpoint:
    """One resumable point, checked: the state *after* `step` finished, its files under `path`."""

    step: int
    cursor: int
    path: Path
    ranks: int
    rng: dict[str, Any]

    def weights(self) -> dict[str, Any]:
        """{"policy": ..., "reference": ...}, memory-mapped from weights.pt."""
        return read(self.path, WEIGHTS)

    def optimizer_path(self, rank: int) -> str:
        return str(self.path / optimizer_file(rank))


def capture_rng() -> dict[str, Any]:
    """RNG states of this process (python, numpy, torch CPU), as JSON values."""
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    if not state:
        return
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


def _dir(run_dir: str | Path, directory: str | Path | None = None) -> Path:
    """`checkpoint.dir` when the recipe sets it (a path every node and a restarted job see),
    else RUN_DIR/checkpoints."""
    return Path(directory) if directory else Path(run_dir) / "checkpoints"


def begin(run_dir: str | Path, step: int, *, directory: str | Path | None = None) -> Path:
    """A fresh hidden temp dir for step `step`'s files (the ranks `write` into it)."""
    root = _dir(run_dir, directory)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".step_{step}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def write(directory: str | Path, name: str, obj: Any) -> str:
    """Save `obj` as DIRECTORY/NAME, on disk before this returns; its SHA-256."""
    path = Path(directory) / name
    torch.save(obj, path)
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())
    return _sha256(path)


def commit(tmp: Path, *, step: int, cursor: int, rng: dict[str, Any], files: dict[str, str], ranks: int) -> Path:
    """Write state.json beside the ranks' files (name -> SHA-256) and rename TMP into place as
    step_N; the checkpoint's path."""
    missing = sorted({WEIGHTS, *(optimizer_file(r) for r in range(ranks))} - set(files))
    if missing:
        raise CheckpointError(f"checkpoint {tmp.name}: no rank wrote {', '.join(missing)}")
    state = {"step": step, "cursor": cursor, "ranks": ranks, "rng": rng, "files": files}
    (tmp / "state.json").write_text(json.dumps(state), encoding="utf-8")
    with open(tmp / "state.json", "rb") as fh:
        os.fsync(fh.fileno())
    final = tmp.parent / f"step_{step}"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def latest(run_dir: str | Path, *, directory: str | Path | None = None) -> Path | None:
    """The newest complete checkpoint dir (state.json is written last), or None."""
    root = _dir(run_dir, directory)
    if not root.is_dir():
        return None
    steps = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / "state.json").exists():
            steps.append((int(match.group(1)), child))
    return max(steps)[1] if steps else None


def load(path: str | Path) -> Checkpoint:
    """The checkpoint at `path`, every file checked against its SHA-256. Raises CheckpointError
    (one line) when any is missing, unreadable or changed."""
    path = Path(path)
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        step, cursor, ranks = int(state["step"]), int(state["cursor"]), int(state["ranks"])
        files, rng = dict(state["files"]), dict(state["rng"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: state.json is unreadable ({type(exc).__name__}: {exc})") from None
    for name, want in sorted(files.items()):
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path}: {name} is missing")
        if _sha256(path / name) != want:
            raise CheckpointError(f"checkpoint {path}: {name} does not match the SHA-256 recorded when it was "
                                  f"written (corrupt); delete {path.name} to resume from an earlier one")
    return Checkpoint(step=step, cursor=cursor, path=path, ranks=ranks, rng=rng)


def read(path: str | Path, name: str) -> Any:
    """One of a checkpoint's files (memory-mapped: a rank touches only the pages it copies)."""
    try:
        return torch.load(Path(path) / name, map_location="cpu", weights_only=False, mmap=True)
    except Exception as exc:  # noqa: BLE001 - the unpickler raises many kinds; all mean "corrupt"
        raise CheckpointError(f"checkpoint {path}: {name} is unreadable ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
