"""A `Timer` that accumulates named wall-clock durations into `timing/...` metrics.

    timer = Timer(prefix="timing/train")
    with timer:                        # the whole span -> "timing/train/total"
        with timer.time("forward"):    # -> "timing/train/forward" (summed over repeats)
            ...
    timer.metrics()   # {"timing/train/total": 1.2, "timing/train/forward": 0.8}

Durations with the same name add up, so a micro-batch loop yields one total per name. Each timed
span is also kept on the epoch clock (`spans()`), for what lines a phase up with other processes'
clocks (rl/metrics/kernel_trace.py: a phase's GPU-busy fraction).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Timer"]


class Timer:
    """Accumulates seconds per name; entering the timer itself times `total`.

    Args:
        prefix: metric-name prefix, e.g. `timing/train`.
        clock: seconds source; tests inject a fake one.
    """

    def __init__(self, prefix: str = "timing", clock: Callable[[], float] = time.perf_counter,
                 epoch_ns: Callable[[], int] = time.time_ns):
        self.prefix = prefix.rstrip("/")
        self._clock = clock
        self._epoch_ns = epoch_ns
        self._seconds: dict[str, float] = {}
        self._spans: list[tuple[str, int, int]] = []
        self._total_start: float | None = None

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        """Time the `with` body and add it to `name` (also on an exception)."""
        assert name and not name.startswith("/"), f"Timer: bad name {name!r}"
        start, start_ns = self._clock(), self._epoch_ns()
        try:
            yield
        finally:
            self.add(name, self._clock() - start)
            self._spans.append((name, start_ns, self._epoch_ns()))

    def spans(self) -> list[tuple[str, int, int]]:
        """(name, start, end) in epoch nanoseconds of every `time` span so far, in the order they ended."""
        return list(self._spans)

    def add(self, name: str, seconds: float) -> None:
        """Add a duration measured elsewhere."""
        self._seconds[name] = self._seconds.get(name, 0.0) + seconds

    def __enter__(self) -> Timer:
        assert self._total_start is None, "Timer: already timing total"
        self._total_start = self._clock()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._total_start is not None
        self.add("total", self._clock() - self._total_start)
        self._total_start = None

    def seconds(self, name: str) -> float:
        """Accumulated seconds for `name` (0.0 if never timed)."""
        return self._seconds.get(name, 0.0)

    def metrics(self) -> dict[str, float]:
        """`{prefix/name: seconds}` for every name timed so far."""
        return {f"{self.prefix}/{name}": s for name, s in self._seconds.items()}

    def reset(self) -> None:
        """Forget all durations (start of a new step)."""
        assert self._total_start is None, "Timer: reset inside the total span"
        self._seconds.clear()
        self._spans.clear()
