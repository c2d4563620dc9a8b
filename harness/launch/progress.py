"""The progress line shown while the engine runs: step N/total, the latest reward (a distillation
run's KL loss), elapsed, ETA.

On a terminal it is one line rewritten in place; in a log (CI) it is a plain line at most every
`interval_s` seconds, so a 10-hour run does not produce a million lines. No dependency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO


def format_duration(seconds: float) -> str:
    """`0:07`, `12:34`, `3:02:09`."""
    total = max(int(round(seconds)), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_progress(
    *, step: int, total: int, metric: tuple[str, float] | None, elapsed_s: float, eta_s: float | None,
    width: int = 20, phase: str | None = None, phase_s: float | None = None, label: str | None = None,
) -> str:
    """One progress line, e.g. `step 5/20 [#####---------------]  25% | reward 0.31 | elapsed 0:12 | ETA 0:36`;
    before the first step, the engine's start-up phase instead of the bar:
    `starting: warm start (120 steps) 0:41 | elapsed 1:05 | ETA ?`. `metric`: (name, value) of the
    run's headline metric (MetricsTail.headline: `reward 0.31`, a distillation's `kl_loss 0.42`),
    left out until the engine logs one. `label` leads the line (`tq: step 5/20 ...`): which of a
    parity run's variants it is."""
    line = _progress(step=step, total=total, metric=metric, elapsed_s=elapsed_s, eta_s=eta_s, width=width,
                     phase=phase, phase_s=phase_s)
    return f"{label}: {line}" if label else line


def _progress(*, step: int, total: int, metric: tuple[str, float] | None, elapsed_s: float, eta_s: float | None,
              width: int, phase: str | None, phase_s: float | None) -> str:
    frac = min(step / total, 1.0) if total > 0 else 0.0
    filled = int(round(frac * width))
    if step <= 0 and phase:
        took = f" {format_duration(phase_s)}" if phase_s is not None else ""
        return " | ".join([f"starting: {phase}{took}", f"elapsed {format_duration(elapsed_s)}", "ETA ?"])
    parts = [
        f"step {step}/{total} [{'#' * filled}{'-' * (width - filled)}] {frac:4.0%}",
        *([f"{metric[0]} {metric[1]:.4g}"] if metric is not None else []),
        f"elapsed {format_duration(elapsed_s)}",
        f"ETA {format_duration(eta_s)}" if eta_s is not None else "ETA ?",
    ]
    return " | ".join(parts)


class ProgressBar:
    """Renders `format_progress` to `stream`, in place on a TTY, throttled otherwise."""

    def __init__(
        self,
        *,
        total_steps: int,
        stream: TextIO,
        is_tty: bool | None = None,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        label: str | None = None,
    ) -> None:
        self.total_steps = total_steps
        self.label = label
        self.stream = stream
        self.is_tty = stream.isatty() if is_tty is None else is_tty
        self.interval_s = interval_s
        self._clock = clock
        self._start = clock()
        self._first: tuple[float, int] | None = None  # (time, step) when steps were first seen
        self._last_print: float | None = None
        self._last_line = ""
        self._printed = ""

    def eta(self, step: int, now: float) -> float | None:
        """Seconds left, from the pace of the steps completed since the first one we saw: None
        until a second is seen (the first step's time holds the start-up's Ray start, warm start
        and compiles: a 2:11 run's first ETA read 1:23:07)."""
        if step <= 0 or self.total_steps <= 0:
            return None
        if self._first is None:
            self._first = (now, step)
        t0, s0 = self._first
        if step <= s0:
            return None
        return max(self.total_steps - step, 0) * (now - t0) / (step - s0)

    def update(self, *, step: int, metric: tuple[str, float] | None, phase: str | None = None,
               phase_since: float | None = None) -> None:
        now = self._clock()
        line = format_progress(
            step=step, total=self.total_steps, metric=metric, elapsed_s=now - self._start, eta_s=self.eta(step, now),
            phase=phase, phase_s=None if phase_since is None else now - phase_since, label=self.label,
        )
        if self.is_tty:
            self.stream.write("\r" + line + "\x1b[K")
            self.stream.flush()
        elif self._last_print is None or now - self._last_print >= self.interval_s:
            self._print(line, now)
        self._last_line = line

    def close(self) -> None:
        """Ends the in-place line, or prints the final state if the last printed one is stale."""
        if self.is_tty:
            if self._last_line:
                self.stream.write("\n")
                self.stream.flush()
        elif self._last_line and self._last_line != self._printed:
            self._print(self._last_line, self._clock())

    def _print(self, line: str, now: float) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self._last_print, self._printed = now, line
