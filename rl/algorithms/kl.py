"""KL estimators (Schulman's k1, k2, k3) and the train/generation mismatch metrics.

Every estimator takes per-token log-probs of the sampled tokens under two policies and
estimates KL(p || q) from samples of p, with `log_ratio = logq - logp`:

* k1 = -log_ratio                       unbiased, high variance, can be negative
* k2 = log_ratio**2 / 2                 biased, low variance, >= 0
* k3 = exp(log_ratio) - 1 - log_ratio   unbiased, low variance, >= 0

The reference KL (`ref_kl`: the loss's penalty and the driver's `train/ref_kl`) is the token mean
of k3(p = current policy, q = reference policy), i.e. of `exp(ref - curr) - 1 - (ref - curr)`.

All means here are token means over a 0/1 mask, divided either by the mask's own token count
or by a caller-given `num_tokens` (the global count across data-parallel ranks, so that the
per-rank values sum to the global mean).
"""

from __future__ import annotations

import torch

__all__ = [
    "k1",
    "k2",
    "k3",
    "masked_mean",
    "gen_kl_error",
    "ref_kl",
    "token_mult_prob_error",
]


def k1(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Per-token k1 estimate of KL(p || q): `logp - logq`."""
    return logp - logq


def k2(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Per-token k2 estimate of KL(p || q): `(logq - logp)**2 / 2`."""
    return (logq - logp).square() / 2


def k3(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(p || q): `exp(logq - logp) - 1 - (logq - logp)`."""
    log_ratio = logq - logp
    return torch.exp(log_ratio) - 1 - log_ratio


def masked_mean(
    values: torch.Tensor, mask: torch.Tensor, num_tokens: float | int | None = None
) -> torch.Tensor:
    """`sum(mask * values) / N`, N = `num_tokens` or `mask.sum()`; 0 when nothing is masked in.

    Token counts are whole numbers, so N is clamped to at least 1 (no host sync, no 0/0). A given
    N is filled in on the device (`torch.full`: a kernel argument), not copied there: made a tensor
    from the host it was a blocking copy in every call, eight a micro-batch in the loss
    (tests/rl/test_train_step_no_sync.py); dividing by the Python number itself would multiply
    by its reciprocal on a GPU, a last bit away from the division.
    Masked-out positions are zeroed before the product, so an inf or NaN in padding cannot
    poison the sum.
    """
    mask = mask.to(values.dtype)
    total = (torch.where(mask != 0, values, torch.zeros_like(values)) * mask).sum()
    if num_tokens is None:
        return total / mask.sum().clamp(min=1)
    return total / torch.full((), max(num_tokens, 1), dtype=values.dtype, device=values.device)


def gen_kl_error(
    gen_logprobs: torch.Tensor,
    prev_logprobs: torch.Tensor,
    mask: torch.Tensor,
    num_tokens: int | None = None,
) -> torch.Tensor:
    """Token mean of k3(p = generator, q = trainer): KL(generation || training) estimate.

    `exp(prev - gen) - 1 - (prev - gen)`: 0 when the generation engine and the training
    forward agree on every sampled token's log-prob.
    """
    return masked_mean(k3(gen_logprobs, prev_logprobs), mask, num_tokens)


def ref_kl(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    num_tokens: int | None = None,
) -> torch.Tensor:
    """Token mean of k3(p = policy, q = reference): KL(policy || reference) estimate, the one
    definition behind the loss's KL penalty and the driver's `train/ref_kl` monitor."""
    return masked_mean(k3(logprobs, ref_logprobs), mask, num_tokens)


def token_mult_prob_error(
    gen_logprobs: torch.Tensor,
    prev_logprobs: torch.Tensor,
    mask: torch.Tensor,
    num_tokens: int | None = None,
) -> torch.Tensor:
    """Token mean of `exp(|gen - prev|)`: the multiplicative probability error, 1 when exact."""
    return masked_mean(torch.exp((gen_logprobs - prev_logprobs).abs()), mask, num_tokens)
