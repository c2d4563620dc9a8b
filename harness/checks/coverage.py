"""Is every metric a check reads present at every step of the run?

The run's step span is the union of all metrics, so a metric that stopped being logged halfway
(reward at steps 1-5 of 10) used to pass on the steps it had. A threshold is evidence only over a
complete series: each metric it reads must have a value at every step from the run's first step
(step 1 when the recipe's step count is known) through its last; the evaluator fails a run whose
last step is short of that count.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.metrics import Metrics


def first_gap(series: dict[int, float], first: int, last: int) -> int | None:
    """The lowest step in [first, last] that `series` has no value for, or None."""
    if len(series) == last - first + 1 and next(iter(series)) == first and next(reversed(series)) == last:
        return None  # steps are unique and sorted: the count and both ends prove it is complete
    return next(step for step in range(first, last + 1) if step not in series)


def coverage_gap(metrics: Metrics, names: Iterable[str], *, expected_steps: int | None) -> str | None:
    """Why the metrics `names` (those the run has) are not complete series, or None."""
    if metrics.last_step is None or metrics.first_step is None:
        return None  # the evaluator says "run has no metrics"
    first = metrics.first_step
    if expected_steps is not None:
        first = min(first, 1)
    last = metrics.last_step  # a run short of expected_steps: the evaluator says where it stopped
    for name in names:
        series = metrics.get(name)
        if not series:
            continue  # the evaluator names a metric the run never logged
        gap = first_gap(series, first, last)
        if gap is not None:
            return (f"{name} has no value at step {gap} (it has {len(series)} of the "
                    f"{last - first + 1} steps {first}..{last}): a check reads only complete series")
    return None
