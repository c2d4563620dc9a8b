"""The values a metric can take by construction, so that the self-test never pushes a metric
where no run could put it.

A shift or scale toward a check's bound stops at the metric's domain: `min(total_flops) >= 0`
cannot be failed by any run (FLOPs are counted, never negative) and is reported `cannot fail`,
while `min(total_flops) > 0` is failed by a run that logs zero. A metric not listed here is
unbounded, so the self-test never calls a check unfailable on a guess. Each entry says why it
holds; the engine's definitions are in rl/ (k3 estimator, 0/1 rewards, norms, counters, timers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class Domain:
    """[low, high]: every value the metric can take."""

    low: float = -math.inf
    high: float = math.inf


UNBOUNDED = Domain()
NON_NEGATIVE = Domain(0.0)
FRACTION = Domain(0.0, 1.0)

# name pattern (fnmatch, first match wins) -> domain, and why it holds by construction
DOMAINS: tuple[tuple[str, Domain, str], ...] = (
    ("train/reward", FRACTION, "the mean of per-sample rewards, each 0 or 1 in both shipped envs"),
    ("train/gen_kl_error", NON_NEGATIVE, "a token mean of the k3 estimator, exp(r) - 1 - r >= 0"),
    ("train/ref_kl", NON_NEGATIVE, "a token mean of k3"),
    ("train/approx_kl", NON_NEGATIVE, "a token mean of k3"),
    ("train/token_mult_prob_error", Domain(1.0), "a token mean of exp(|difference|) >= 1"),
    ("train/grad_norm", NON_NEGATIVE, "a norm"),
    ("train/lr", NON_NEGATIVE, "a learning rate: warmup_init_lr, lr and min_lr are all >= 0"),
    ("train/*fraction", FRACTION, "a fraction of samples or tokens"),
    ("train/num_*", NON_NEGATIVE, "a count"),
    ("train/mean_response_length", NON_NEGATIVE, "a length"),
    ("total_flops", NON_NEGATIVE, "FLOPs counted from sequence lengths"),
    ("theoretical_tflops", NON_NEGATIVE, "a device's peak"),
    ("num_ranks", Domain(1.0), "a count of ranks"),
    ("timing/*", NON_NEGATIVE, "a duration"),
    ("clock/*", NON_NEGATIVE, "a time of day in seconds since the epoch"),
    ("performance/*", NON_NEGATIVE, "a rate, a utilisation or a memory size"),
)


def domain_of(metric: str) -> Domain:
    """The metric's domain by construction; unbounded when it is not known."""
    return next((domain for pattern, domain, _ in DOMAINS if fnmatchcase(metric, pattern)), UNBOUNDED)
