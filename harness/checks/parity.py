"""Parity of two runs of one recipe (e.g. the legacy and the TQ data path, same seed).

Rather than holding a TQ variant to the base recipe's fixed thresholds, compare it step by step
to its legacy twin: every shared, deterministic metric must agree within the tolerance (exact on
CPU), and a metric present on one path but missing on the other is itself a failure (the class
of bug where one path dropped its FLOPs fields).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from harness.checks.verdict import Verdict

# Wall-clock-dependent metrics differ between any two runs; they are not parity material.
NONDETERMINISTIC_PREFIXES = ("timing/", "performance/", "clock/")
NONDETERMINISTIC_NAMES = frozenset({"performance/mfu", "wall_s"})
DIGEST_METRIC = "train/logprob_digest"


def is_compared(metric: str) -> bool:
    return not metric.startswith(NONDETERMINISTIC_PREFIXES) and metric not in NONDETERMINISTIC_NAMES


def _close(a: float, b: float, tolerance: float) -> bool:
    """Equal within the relative tolerance. inf equals only an inf of its sign; NaN equals nothing."""
    if a == b:  # also inf == inf: an identical run holding an inf is not a divergence
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False  # NaN, or inf against another value: `inf - inf` must not decide it
    return tolerance > 0.0 and abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


def compare_metrics(
    a: Mapping[str, Mapping[int, float]],
    b: Mapping[str, Mapping[int, float]],
    *,
    names: Sequence[str] = ("a", "b"),
    tolerance: float = 0.0,
) -> list[Verdict]:
    """Verdicts for metric-set equality, per-step agreement and the log-prob digests."""
    label_a, label_b = names
    compared_a = {m for m in a if is_compared(m)}
    compared_b = {m for m in b if is_compared(m)}
    verdicts = []
    only_a, only_b = sorted(compared_a - compared_b), sorted(compared_b - compared_a)
    if only_a or only_b:
        parts = [f"only in {label}: {', '.join(ms[:6])}" for label, ms in ((label_a, only_a), (label_b, only_b)) if ms]
        verdicts.append(Verdict(name="parity:metric_set", kind="parity", ok=False, message="; ".join(parts)))
    else:
        verdicts.append(Verdict(name="parity:metric_set", kind="parity", ok=True,
                                message=f"both runs report the same {len(compared_a)} metrics"))
    shared = sorted(compared_a & compared_b)
    if not shared:
        steps = sorted({step for run in (a, b) for m in run if is_compared(m) for step in run[m]})
        empty = [label for label, names in ((label_a, compared_a), (label_b, compared_b)) if not names]
        message = (f"first divergence at step {steps[0]}: {' and '.join(empty)} logged no metrics"
                   if steps and empty else "the runs share no metric to compare")
        verdicts.append(Verdict(name="parity:metrics", kind="parity", ok=False, message=message))
        return verdicts
    first = _first_divergence(a, b, shared, tolerance, (label_a, label_b))
    steps = len(a[shared[0]])
    if first:
        verdicts.append(Verdict(name="parity:metrics", kind="parity", ok=False, message=first))
    else:
        verdicts.append(Verdict(name="parity:metrics", kind="parity", ok=True, value=float(steps),
                                message=f"{len(shared)} metrics agree on {steps} steps (tolerance {tolerance:g})"))
    if DIGEST_METRIC not in shared:
        verdicts.append(Verdict(name="parity:logprob_digest", kind="parity", ok=False,
                                message=f"{DIGEST_METRIC} missing from a run: per-sample log-probs cannot be compared"))
    else:
        digest = _first_divergence(a, b, [DIGEST_METRIC], 0.0, (label_a, label_b))
        verdicts.append(Verdict(name="parity:logprob_digest", kind="parity", ok=digest is None,
                                message=digest or "per-sample log-prob digests agree on every step"))
    return verdicts


def _first_divergence(a, b, metrics, tolerance, labels) -> str | None:
    """The earliest step at which any metric differs, named with both values."""
    steps = sorted(set().union(*(set(a[m]) | set(b[m]) for m in metrics)))
    for step in steps:
        for metric in metrics:
            va, vb = a[metric].get(step), b[metric].get(step)
            if va is None or vb is None:
                missing = labels[0] if va is None else labels[1]
                return f"first divergence at step {step}, {metric}: missing in {missing}"
            nan = next((label for label, v in zip(labels, (va, vb)) if math.isnan(v)), None)
            if nan is not None:  # NaN is no value: two NaNs are not evidence of parity
                return f"first divergence at step {step}, {metric}: {nan} is nan, which cannot be compared"
            if not _close(float(va), float(vb), tolerance):
                return f"first divergence at step {step}, {metric}: {labels[0]}={va!r} {labels[1]}={vb!r}"
    return None
