"""harness.thresholds.engine_metrics: what a check may read from a run of the rl engine."""

from __future__ import annotations

import pytest

from harness.thresholds.engine_metrics import BY_ALGORITHM, why_unwritten

GRPO = {"engine": "rl", "algorithm": {"name": "grpo", "loss": {"kl_beta": 0.0}}, "cluster": {"device": "cpu"},
        "data": {"val_every_steps": 0}}


def test_every_listed_metric_of_a_grpo_run_on_a_gpu_with_kl_validation_offload_and_a_trace_is_written():
    recipe = {**GRPO, "algorithm": {"name": "grpo", "loss": {"kl_beta": 0.01}}, "cluster": {"device": "h200"},
              "data": {"val_every_steps": 10}, "generation": {"offload_training": True},
              "profile": {"kernel_steps": [2, 3]}}
    assert [m for m in BY_ALGORITHM["grpo"] if why_unwritten(recipe, m)] == []


@pytest.mark.parametrize("metric,reason", [
    ("train/ref_kl", "kl_beta is 0"),
    ("val/accuracy", "val_every_steps is not set"),
    ("performance/peak_memory_gib", "a CPU run records no device memory"),
    ("performance/offloaded_gib", "generation.offload_training is false"),
    ("performance/gpu_busy_fraction", "profile.kernel_steps is not set"),
    ("train/kl_loss", "write no such metric"),  # distillation's, not GRPO's
    ("train/rewards", "did you mean train/reward?"),
])
def test_a_metric_this_run_cannot_write_is_named_with_why(metric, reason):
    assert reason in why_unwritten(GRPO, metric)


def test_distillation_and_external_engines():
    distill = {"algorithm": {"name": "distill"}}
    assert why_unwritten(distill, "train/kl_loss") is None
    assert "no such metric" in why_unwritten(distill, "train/reward")
    external = {"engine": {"command": ["x"], "metrics": "jsonl"}}
    assert why_unwritten(external, "anything/at_all") is None  # an external engine writes what it writes
