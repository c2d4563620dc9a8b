"""The smallest change that fails a check: a decade grid, then bisection.

The grid runs from 1e-6 to 1e12 units (and the domain's edge, where the change stops): a check
that no change in that span fails is, for this search, one that no change fails. The span is
wide on purpose: a bound 10^7 times above a metric that sits near zero (`max(kl) < 0.1` on a
run at 5e-9) can fail, only grossly, so it is `weak`, not `cannot fail`. Between the
last amount that held and the first that failed, 16 halvings narrow the answer to 1.5e-5 of that
bracket (a decade), well inside the three digits it is reported with. For a check monotone in the
metric (every statistic of the language; a two-sided bound is searched in each direction) the
answer is the smallest failing amount.
"""

from __future__ import annotations

import math
from collections.abc import Callable

DECADES = range(-6, 13)
_HALVINGS = 16


def grid(unit: float, edge: float) -> list[float]:
    """Amounts to try, increasing: unit * 10**k below the edge, then the edge itself if finite."""
    amounts = [unit * 10.0**k for k in DECADES if unit * 10.0**k < edge]
    return amounts + ([edge] if math.isfinite(edge) and edge > 0 else [])


def smallest_failing(fails: Callable[[float], bool], *, unit: float, edge: float) -> float | None:
    """The smallest amount in (0, edge] for which fails(amount) is true, or None.

    Args:
        fails: whether the check fails by its own comparison at this amount of change.
        unit: the scale of the amounts (the metric's magnitude; 1 for a scale factor).
        edge: the largest meaningful amount (the metric's domain reached); may be inf.
    """
    held = 0.0
    for amount in grid(unit, edge):
        if fails(amount):
            break
        held = amount
    else:
        return None
    if held == 0.0:  # the first, tiny amount fails: any change does
        return amount
    low, high = held, amount
    for _ in range(_HALVINGS):
        middle = (low + high) / 2
        if fails(middle):
            high = middle
        else:
            low = middle
    return high
