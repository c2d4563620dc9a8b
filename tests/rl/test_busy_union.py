"""rl.metrics.kernel_trace.busy_ns: the time a set of intervals covers inside a window, against a
brute-force count of covered nanoseconds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.metrics.kernel_trace import busy_ns

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)).map(sorted), max_size=25)


@settings(max_examples=300, deadline=None)
@given(st.lists(spans, min_size=1, max_size=3), st.integers(0, 60), st.integers(0, 60))
def test_busy_time_is_the_union_of_the_intervals_inside_the_window(processes, a, b) -> None:
    start, stop = min(a, b), max(a, b)
    covered = np.zeros(61, dtype=bool)  # covered[t]: some interval holds [t, t + 1)
    for process in processes:
        for lo, hi in process:
            covered[lo:hi] = True
    expect = int(covered[start:stop].sum())
    assert busy_ns([np.array(p, dtype=np.int64).reshape(-1, 2) for p in processes], start, stop) == expect
