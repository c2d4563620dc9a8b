"""The GRPO step's per-phase seconds: every phase named, `other` the rest of the step."""

from __future__ import annotations

import pytest

from rl.loops.grpo import PHASES, TIMING_KEYS, phase_seconds


def test_phases_and_other_add_up_to_the_step() -> None:
    timed = {"total": 10.0, "generation": 3.0, "old_logprobs": 1.0, "ref_logprobs": 0.5, "training": 4.0,
             "refit": 0.2, "data_plane": 0.3}
    out = phase_seconds({f"timing/train/{k}": v for k, v in timed.items()})
    assert sorted(out) == sorted(f"timing/train/{k}" for k in TIMING_KEYS)
    assert out["timing/train/other"] == pytest.approx(1.0)
    assert sum(out[f"timing/train/{k}"] for k in (*PHASES, "other")) == pytest.approx(10.0)


def test_a_phase_that_did_not_run_is_zero_and_other_never_negative() -> None:
    out = phase_seconds({"timing/train/total": 1.0, "timing/train/generation": 1.0 + 1e-12})
    assert out["timing/train/refit"] == 0.0 and out["timing/train/other"] == 0.0
