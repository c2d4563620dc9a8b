"""`harness check --self-test`: prove that each check can fail, by perturbing the run's series
in memory (docs/thresholds.md, "Self-test")."""

from harness.selftest.noise import run_to_run_sd
from harness.selftest.selftest import (
    CANNOT_FAIL,
    FAILS_AS_IS,
    OK,
    PROBLEMS,
    UNTESTED,
    WEAK,
    CheckSelfTest,
    self_test,
    status_counts,
)

__all__ = ["CANNOT_FAIL", "FAILS_AS_IS", "OK", "PROBLEMS", "UNTESTED", "WEAK", "CheckSelfTest", "run_to_run_sd",
           "self_test", "status_counts"]
