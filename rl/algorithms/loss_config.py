"""The recipe's `algorithm.loss` section, torch-free: rl/config.py (and through it the preflight)
reads it without importing the loss's maths (rl/algorithms/loss.py)."""

from __future__ import annotations

from dataclasses import dataclass

from rl.recipe.key import Section, key

__all__ = ["LossConfig", "PREV_LOGPROBS", "TRUNCATIONS"]

TRUNCATIONS = (None, "tis", "icepop")
# Where `prev` comes from: "pass", a no-grad forward over the step's rows before training (the
# reference's way); "training", the training forward's own log-probs, detached. A GRPO step is one
# optimizer step over its rows, so the weights the training forward runs with are the ones the
# pass would have seen: the same policy, one forward fewer (r = 1 exactly, where the pass gives
# r = 1 up to the two forwards' rounding).
PREV_LOGPROBS = ("pass", "training")


@dataclass(kw_only=True, frozen=True)
class LossConfig(Section):
    """The recipe's `algorithm.loss` section."""

    clip_low: float = key(0.2, ge=0, lt=1)
    clip_high: float = key(0.2, ge=0)
    kl_beta: float = key(0.0, ge=0)
    is_correction: bool = key(True, doc='importance-sampling correction for the generation/training mismatch')
    truncation: str | None = key(None, choices=TRUNCATIONS, doc='how the importance ratio is truncated')
    tis_cap: float = key(2.0, gt=0, doc='cap for `tis`')
    icepop_low: float = key(0.5, ge=0, doc='lower bound for `icepop`')
    icepop_high: float = key(2.0, gt=0, doc='upper bound for `icepop`')
    prev_logprobs: str = key("pass", choices=PREV_LOGPROBS, doc=(
        'where the pre-update log-probs come from: a no-grad forward before training, or the '
        "training forward's own, detached (a GRPO step is one optimizer step, so they are the "
        "same policy's; one forward a step fewer). `training`: grpo only, `policy.parallel.pp` 1"))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.truncation is not None and not self.is_correction:
            raise ValueError(
                "algorithm.loss.truncation needs algorithm.loss.is_correction: true "
                "(truncation acts on the importance weights)"
            )
        if self.icepop_low >= self.icepop_high:
            raise ValueError(
                "algorithm.loss.icepop_low must be below icepop_high, got "
                f"[{self.icepop_low}, {self.icepop_high}]"
            )
