"""Follows a growing metrics.jsonl while the engine writes it.

The engine appends one JSON object per step and flushes; we may read at any moment, so the last
line can be torn (half written). A torn tail is kept and completed on the next read; a line that
is complete but not valid JSON is counted and skipped, never fatal: progress is a view, not a check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HEADLINE = ("train/reward", "train/kl_loss", "train/loss")  # the first one a run logs is shown


class MetricsTail:
    """Reads the records appended to `path` since the last call to `poll`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.last_step = 0
        self.latest: dict[str, float] = {}
        self.num_records = 0
        self.num_bad_lines = 0
        self._offset = 0
        self._partial = b""

    def poll(self, *, final: bool = False) -> int:
        """Reads new complete lines; returns how many records they held.

        final=True also parses a last line that has no newline (the engine has exited, so it
        will never be completed); it is dropped quietly if it is torn.
        """
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return 0
        if size < self._offset:  # rewritten from scratch: start over
            self._offset, self._partial = 0, b""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        count = sum(self._take(line, strict=True) for line in lines)
        if final and self._partial.strip():
            count += self._take(self._partial, strict=False)
            self._partial = b""
        return count

    @property
    def reward(self) -> float | None:
        """The latest `train/reward`, if the engine reported one."""
        value = self.latest.get("train/reward")
        return value if isinstance(value, (int, float)) else None

    @property
    def headline(self) -> tuple[str, float] | None:
        """(name, latest value) of what the progress line shows: GRPO's reward, else distillation's
        KL loss (it has no reward; engine.log's step lines show the same), else the loss."""
        for key in HEADLINE:
            value = self.latest.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return key.removeprefix("train/"), float(value)
        return None

    def _take(self, line: bytes, *, strict: bool) -> int:
        if not line.strip():
            return 0
        try:
            record = json.loads(line)
        except ValueError:
            self.num_bad_lines += int(strict)
            return 0
        if not isinstance(record, dict):
            self.num_bad_lines += 1
            return 0
        step = record.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            self.last_step = max(self.last_step, step)
        self.latest.update(record)
        self.num_records += 1
        return 1
