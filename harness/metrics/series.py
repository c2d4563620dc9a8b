"""Metrics: a run's step series, the one shape every reader produces and every check consumes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from harness.errors import UserError


class MetricsError(UserError, ValueError):
    """A run's metrics cannot be read. The message is one line and names the file (and line)."""


@dataclass(frozen=True, kw_only=True)
class Metrics(Mapping[str, dict[int, float]]):
    """Metric name -> {step: value}, each series ordered by step.

    Values are floats; NaN and inf are kept so that checks can see them, and a value that is
    not a number (null, a boolean, a string) is NaN. `notes` holds
    what the reader tolerated (a torn last line, a step logged twice); `source` says
    where the series came from.
    """

    series: dict[str, dict[int, float]]
    source: str = ""
    notes: tuple[str, ...] = ()
    _last_step: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        last = max((next(reversed(s)) for s in self.series.values() if s), default=None)  # each ordered by step
        object.__setattr__(self, "_last_step", last)

    def __getitem__(self, name: str) -> dict[int, float]:
        return self.series[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.series)

    def __len__(self) -> int:
        return len(self.series)

    @property
    def last_step(self) -> int | None:
        """The highest step any metric reached; None for a run that logged nothing."""
        return self._last_step

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
