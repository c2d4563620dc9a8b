"""The metrics the `rl` engine writes to metrics.jsonl, so a check that reads one it cannot write
is refused before launch instead of failing after the run as "metric absent".

The harness never imports rl: this is the engine's side of the run-dir contract, kept in step with
it by the integration tests (every key a GRPO or distillation run logs must be listed here:
tests/rl/test_engine_integration.py, tests/integration/test_xtoken_distill_run.py). A metric that
only some runs write says when (`ONLY_WHEN`). An external engine (`engine.command`) writes what it
writes: its checks are not judged here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

__all__ = ["why_unwritten"]

# Every step of either algorithm.
COMMON = (
    "step", "train/loss", "train/grad_norm", "train/lr", "train/num_valid_samples", "train/num_tokens",
    "train/truncated_fraction", "train/mean_response_length", "train/logprob_digest",
    "total_flops", "num_ranks", "theoretical_tflops",
    "timing/train/total", "timing/train/training", "clock/step_end_unix_s",
    "performance/tokens_per_sec_per_gpu", "performance/mfu", "performance/train_tokens_per_sec",
    "performance/peak_memory_gib", "performance/gpu_busy_fraction", "performance/gpu_busy_fraction/training",
)
GRPO = (
    "train/reward", "train/pg_loss", "train/token_mult_prob_error", "train/gen_kl_error", "train/kl_penalty",
    "train/ref_kl", "train/clip_fraction", "train/approx_kl", "train/is_truncated_fraction",
    "train/padding_fraction_generation", "train/padding_fraction_training",
    "timing/train/generation", "timing/train/old_logprobs", "timing/train/ref_logprobs", "timing/train/refit",
    "timing/train/data_plane", "timing/train/offload", "timing/train/reload", "timing/train/other",
    "performance/generation_tokens_per_sec", "performance/generation_replica_max_over_mean",
    "performance/offloaded_gib", "performance/generation_peak_gib", "performance/training_peak_gib",
    "performance/gpu_busy_fraction/generation", "val/accuracy", "val/num_samples",
)
DISTILL = (
    "train/kl_loss", "train/ce_loss", "train/accuracy", "train/proj_accuracy", "train/num_valid_chunks",
    "timing/train/data", "timing/train/logprobs",
)
BY_ALGORITHM = {"grpo": COMMON + GRPO, "distill": COMMON + DISTILL}


def _get(recipe: Mapping, dotted: str, default=None):
    node = recipe
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


# metric -> (does this recipe's run write it?, why not)
ONLY_WHEN: dict[str, tuple[Callable[[Mapping], bool], str]] = {
    "train/ref_kl": (lambda r: bool(_get(r, "algorithm.loss.kl_beta", 0.0)),
                     "algorithm.loss.kl_beta is 0, so the engine runs no reference pass"),
    "val/accuracy": (lambda r: bool(_get(r, "data.val_every_steps")),
                     "data.val_every_steps is not set, so no step runs validation"),
    "val/num_samples": (lambda r: bool(_get(r, "data.val_every_steps")),
                        "data.val_every_steps is not set, so no step runs validation"),
    "performance/peak_memory_gib": (lambda r: _get(r, "cluster.device", "cpu") != "cpu",
                                    "a CPU run records no device memory"),
    "performance/generation_peak_gib": (lambda r: _get(r, "cluster.device", "cpu") != "cpu",
                                        "a CPU run records no device memory"),
    "performance/training_peak_gib": (lambda r: _get(r, "cluster.device", "cpu") != "cpu",
                                      "a CPU run records no device memory"),
    **{key: (lambda r: bool(_get(r, "profile.kernel_steps")),
             "profile.kernel_steps is not set, so no step traces its kernels")
       for key in ("performance/gpu_busy_fraction", "performance/gpu_busy_fraction/generation",
                   "performance/gpu_busy_fraction/training")},
    "performance/offloaded_gib": (lambda r: bool(_get(r, "generation.offload_training", False)),
                                  "generation.offload_training is false, so nothing goes to host memory"),
}


def why_unwritten(recipe: Mapping, metric: str) -> str | None:
    """None when a run of `recipe` by the rl engine writes `metric`, else why it does not."""
    if _get(recipe, "engine", "rl") != "rl":
        return None
    algorithm = _get(recipe, "algorithm.name", "grpo")
    names = BY_ALGORITHM.get(algorithm)
    if names is None:
        return None  # an algorithm the schema refuses before this is asked
    if metric not in names:
        close = difflib.get_close_matches(metric, names, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"the engine's {algorithm} runs write no such metric{hint}"
    condition = ONLY_WHEN.get(metric)
    if condition is not None and not condition[0](recipe):
        return condition[1]
    return None
