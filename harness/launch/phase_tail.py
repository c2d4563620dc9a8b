"""The engine's start-up phase, read from engine.log while no step has finished yet.

Before step 1 the progress line had nothing to show but `step 0/N ... ETA ?`, for minutes on a
GPU (Ray start, the warm start, the first step's compiles and CUDA-graph captures). The engine
prints `rl.run: phase: NAME` when it enters each (rl/run.py, `PHASE_PREFIX`: the two packages
share no code, the line is the contract); this tail keeps the newest, and when it began.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

PHASE_PREFIX = b"rl.run: phase: "
MAX_READ = 1 << 20  # bytes of new log read per poll: a chatty engine cannot make a poll slow
MAX_NAME = 60

__all__ = ["PhaseTail"]


class PhaseTail:
    """The newest `rl.run: phase:` line of a growing log and the time it was first seen."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.phase: str | None = None
        self.since: float | None = None
        self._clock = clock
        self._offset = 0
        self._partial = b""

    def poll(self) -> str | None:
        """Reads what the log gained; returns the current phase (None before the first)."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return self.phase
        if size < self._offset:
            self._offset, self._partial = 0, b""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read(MAX_READ)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-MAX_READ:]
        for line in lines:
            at = line.find(PHASE_PREFIX)
            if at >= 0:
                name = line[at + len(PHASE_PREFIX):].decode("utf-8", "replace").strip()[:MAX_NAME]
                if name and name != self.phase:
                    self.phase, self.since = name, self._clock()
        return self.phase
