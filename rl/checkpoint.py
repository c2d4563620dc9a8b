"""Checkpoints: everything a resumed run needs to continue bit for bit.

Layout: RUN_DIR/checkpoints/step_N/{state.json, tensors.pt}. A checkpoint is written into a
hidden temp dir and renamed into place, so `latest()` never sees a half-written one.
`state.json` holds the plain values (step, data cursor, Python/NumPy RNG state);
`tensors.pt` holds policy weights, optimizer state, reference weights and torch RNG state.
state.json also holds the SHA-256 of tensors.pt, so `load` refuses a checkpoint whose bytes
changed after it was written (a bad disk, a partial copy) with one line, `CheckpointError`,
instead of resuming from garbage or dying in the unpickler.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["Checkpoint", "CheckpointError", "latest", "load", "save", "capture_rng", "restore_rng"]

_STEP_DIR = re.compile(r"^step_(\d+)$")


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
    """One resumable point: the state *after* `step` finished."""

    step: int
    cursor: int
    policy: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    reference: dict[str, torch.Tensor] | None = None
    rng: dict[str, Any] = field(default_factory=dict)


def capture_rng() -> dict[str, Any]:
    """RNG states of this process (python, numpy, torch CPU)."""
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    if not state:
        return
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(state["torch"])


def _dir(run_dir: str | Path, directory: str | Path | None = None) -> Path:
    """`checkpoint.dir` when the recipe sets it (a path every node and a restarted job see),
    else RUN_DIR/checkpoints."""
    return Path(directory) if directory else Path(run_dir) / "checkpoints"


def save(run_dir: str | Path, ckpt: Checkpoint, *, directory: str | Path | None = None) -> Path:
    """Write `ckpt` atomically to RUN_DIR/checkpoints/step_N (or DIRECTORY/step_N) and return that path."""
    root = _dir(run_dir, directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{ckpt.step}"
    tmp = root / f".step_{ckpt.step}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    rng = dict(ckpt.rng)
    torch_rng = rng.pop("torch", None)
    tensors = {"policy": ckpt.policy, "optimizer": ckpt.optimizer,
               "reference": ckpt.reference, "torch_rng": torch_rng}
    torch.save(tensors, tmp / "tensors.pt")
    state = {"step": ckpt.step, "cursor": ckpt.cursor, "rng": rng, "tensors_sha256": _sha256(tmp / "tensors.pt")}
    (tmp / "state.json").write_text(json.dumps(state), encoding="utf-8")
    for name in ("tensors.pt", "state.json"):
        with open(tmp / name, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def latest(run_dir: str | Path, *, directory: str | Path | None = None) -> Path | None:
    """The newest complete checkpoint dir, or None."""
    root = _dir(run_dir, directory)
    if not root.is_dir():
        return None
    steps = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / "state.json").exists() and (child / "tensors.pt").exists():
            steps.append((int(match.group(1)), child))
    return max(steps)[1] if steps else None


def load(path: str | Path) -> Checkpoint:
    """Read the checkpoint at `path`. Raises CheckpointError (one line) when it is corrupt."""
    path = Path(path)
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        step, cursor = int(state["step"]), int(state["cursor"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: state.json is unreadable ({type(exc).__name__}: {exc})") from None
    want = state.get("tensors_sha256")
    if want is not None and _sha256(path / "tensors.pt") != want:
        raise CheckpointError(f"checkpoint {path}: tensors.pt does not match the SHA-256 recorded when it was "
                              f"written (corrupt); delete {path.name} to resume from an earlier one")
    try:
        tensors = torch.load(path / "tensors.pt", map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - the unpickler raises many kinds; all mean "corrupt"
        raise CheckpointError(f"checkpoint {path}: tensors.pt is unreadable ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    rng = dict(state.get("rng") or {})
    if tensors.get("torch_rng") is not None:
        rng["torch"] = tensors["torch_rng"]
    return Checkpoint(step=step, cursor=cursor,
                      policy=tensors["policy"], optimizer=tensors["optimizer"],
                      reference=tensors.get("reference"), rng=rng)
