"""Metrics: a run's step series, the one shape every reader produces and every check consumes."""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from harness.errors import UserError

# Series whose index is not the training step: the reference's GPU-monitor series (`ray/...`)
# are logged at seconds since the start. A run's step span (and with it the completion and
# coverage checks, and "run stopped at step N") comes from the other series, so a run cut at
# step 3 of 40 is not taken as complete because a monitor logged at second 3000 (issue 21).
CLOCK_INDEXED_PREFIXES = ("ray/",)


def step_indexed(name: str) -> bool:
    """Whether series `name` is indexed by training step (every series but the clock-indexed)."""
    return not name.startswith(CLOCK_INDEXED_PREFIXES)


class MetricsError(UserError, ValueError):
    """A run's metrics cannot be read. The message is one line and names the file (and line)."""


class Columns(Mapping[str, dict[int, float]]):
    """The series of a clean metrics.jsonl whose every line holds the same keys (what the engine writes).

    Every metric then has a value at each of `steps` (sorted, unique), and each series is built
    as a {step: value} dict only when it is first read: a check that reads 5 of 30 metrics
    converts 5, and the verdict does not wait for the other 25.
    """

    def __init__(self, steps: list[int], rows: list[dict], names: list[str]) -> None:
        self.steps = steps
        self._rows = rows
        self._names = names
        self._built: dict[str, dict[int, float]] = {}

    def __getitem__(self, name: str) -> dict[int, float]:
        series = self._built.get(name)
        if series is None:
            if name not in self._names:
                raise KeyError(name)
            column = list(map(operator.itemgetter(name), self._rows))
            if set(map(type, column)) != {float}:
                column = list(map(as_number, column))
            series = self._built[name] = dict(zip(self.steps, column))
        return series

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass(frozen=True, kw_only=True)
class Metrics(Mapping[str, dict[int, float]]):
    """Metric name -> {step: value}, each series ordered by step.

    Values are floats; NaN and inf are kept so that checks can see them, and a value that is
    not a number (null, a boolean, a string) is NaN. `notes` holds
    what the reader tolerated (a torn last line, a step logged twice); `source` says
    where the series came from.
    """

    series: Mapping[str, dict[int, float]]  # a dict, or the lazy Columns of a clean metrics.jsonl
    source: str = ""
    notes: tuple[str, ...] = ()
    _first_step: int | None = field(default=None, init=False, repr=False, compare=False)
    _last_step: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.series, Columns):  # every metric at every step: no series need be built
            first, last = (self.series.steps[0], self.series.steps[-1]) if self.series else (None, None)
        else:  # each series ordered by step
            stepped = [s for name, s in self.series.items() if s and step_indexed(name)]
            first = min((next(iter(s)) for s in stepped), default=None)
            last = max((next(reversed(s)) for s in stepped), default=None)
        object.__setattr__(self, "_first_step", first)
        object.__setattr__(self, "_last_step", last)

    def __getitem__(self, name: str) -> dict[int, float]:
        return self.series[name]

    def __contains__(self, name: object) -> bool:  # Mapping's would build a lazy column to answer
        return name in self.series

    def __iter__(self) -> Iterator[str]:
        return iter(self.series)

    def __len__(self) -> int:
        return len(self.series)

    @property
    def first_step(self) -> int | None:
        """The lowest step any metric was logged at; None for a run that logged nothing."""
        return self._first_step

    @property
    def last_step(self) -> int | None:
        """The highest step any metric reached; None for a run that logged nothing."""
        return self._last_step

    def logged_steps(self) -> Collection[int]:
        """The steps at which any step-indexed metric was logged.

        Each series is ordered by step without repeats, so one whose length spans the first to
        the last step holds every step in between: then the union is that range, found without
        touching every value (the usual run, where every metric is logged at every step).
        """
        if isinstance(self.series, Columns):
            return self.series.steps if self.series else ()
        series = [s for name, s in self.series.items() if s and step_indexed(name)]
        if not series:
            return ()
        first, last = self._first_step, self._last_step
        if any(len(s) == last - first + 1 for s in series):
            return range(first, last + 1)
        return set().union(*(s.keys() for s in series))

    def replacing(self, name: str, series: dict[int, float] | None) -> Metrics:
        """A copy with one series (ordered by step) put in or, for None, taken out; the rest shared."""
        rows = dict(self.series)
        if series is None:
            rows.pop(name, None)
        else:
            rows[name] = series
        return Metrics(series=rows, source=self.source, notes=self.notes)

    @classmethod
    def from_rows(
        cls, rows: dict[str, dict[int, float]], *, source: str = "", notes: tuple[str, ...] = ()
    ) -> Metrics:
        """Build from unordered series, sorting each by step (readers append in file order)."""
        ordered = {}
        for name, steps in rows.items():
            if not steps:
                continue
            keys = list(steps)
            if keys != sorted(keys):  # sorting sorted keys is one linear pass in C
                steps = dict(sorted(steps.items()))
            ordered[name] = steps
        return cls(series=ordered, source=source, notes=notes)


_NON_FINITE_TEXT = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
                   "infinity": float("inf"), "-infinity": float("-inf")}


def as_number(value: object) -> float:
    """The float of a JSON/TensorBoard value; anything that is not a number is NaN.

    A metric value that is null, a boolean, a string or a list cannot be read as a number, so
    it must not vanish (all_finite would then pass over a diverged loss): it becomes NaN,
    which fails all_finite and every function that reads it. The strings "nan", "inf" and
    "-inf" that older engines wrote keep their meaning.
    """
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:  # an integer beyond float range: keep it visible as inf
            return float("inf") if value > 0 else float("-inf")  # type: ignore[operator]
    if kind is str:
        return _NON_FINITE_TEXT.get(value.strip().lower(), float("nan"))  # type: ignore[union-attr]
    return float("nan")
