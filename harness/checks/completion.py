"""Did the run finish? A truncated run must fail loudly, never skip its checks and pass."""

from __future__ import annotations

from typing import Mapping

from harness.checks.verdict import Verdict


def check_completion(
    *, status: Mapping | None, steps: set[int], expected_steps: int, repeated: tuple[str, ...] = ()
) -> Verdict:
    """Fails unless the engine says "completed" and metrics hold steps 1..expected_steps, once each.

    `repeated` are the metric reader's notes about steps logged twice (a bad resume).
    """
    name = "run_completed"
    if status is None:
        return Verdict(name=name, kind="completion", ok=False, message="no status.json in the run dir")
    state = status.get("state")
    if state != "completed":
        why = status.get("error") or "no error recorded"
        return Verdict(name=name, kind="completion", ok=False,
                       message=f"run state is {state!r} at step {status.get('last_step')}: {why}")
    if repeated:
        return Verdict(name=name, kind="completion", ok=False, message=f"metrics repeat a step: {repeated[0]}")
    missing = sorted(set(range(1, expected_steps + 1)) - steps)
    if missing:
        return Verdict(name=name, kind="completion", ok=False,
                       message=f"metrics miss {len(missing)} of {expected_steps} steps (first: {missing[0]})")
    return Verdict(name=name, kind="completion", ok=True, value=float(expected_steps),
                   message=f"completed {expected_steps} of {expected_steps} steps")
