"""`fixed_length`: a throughput task. Prompts of exactly `prompt_tokens` characters, and a
reward that reads the whole completion, so a run can generate every row to
`generation.max_new_tokens` (`generation.ignore_eos: true`) and measure a step of a known shape.

Why: the shipped learning tasks answer in 2-4 tokens, and at those shapes a GRPO step is bound by
fixed per-call costs, not by generation or training; a performance recipe needs the shape of a
real run (prompt 128, response 256 to 8k tokens) without a dataset or a grader.

Prompts are drawn from digits and lowercase letters, a pure function of (seed, step); with a
one-token-per-character tokenizer (`arith`) every prompt is `prompt_tokens` tokens, as the
sampler needs. The reward is the share of digits among the completion's characters (0 for an
empty one): deterministic, a few microseconds a row, and something a policy can learn to raise.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field, fields

from rl.envs.registry import Problem, register_env

ALPHABET = string.digits + string.ascii_lowercase


@dataclass(frozen=True, kw_only=True)
class FixedLengthParams:
    """task.params of `fixed_length`. prompt_tokens: characters (= tokens with `arith`) a prompt."""

    prompt_tokens: int = 128

    @classmethod
    def from_dict(cls, params: dict) -> "FixedLengthParams":
        known = {f.name for f in fields(cls)}
        for key in params:
            if key not in known:
                raise ValueError(f"task.params.{key}: unknown fixed_length parameter; known: {sorted(known)}")
        return cls(**params)

    def __post_init__(self) -> None:
        n = self.prompt_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"task.params.prompt_tokens: expected an integer >= 1, got {n!r}")


@dataclass(kw_only=True)
class FixedLengthEnv:
    params: FixedLengthParams = field(default_factory=FixedLengthParams)
    name: str = "fixed_length"

    @property
    def spec(self) -> dict:
        return {"name": self.name, "params": {"prompt_tokens": self.params.prompt_tokens}}

    def sample(self, n: int, *, seed: int, step: int) -> list[Problem]:
        rng = random.Random(f"fixed_length:{seed}:{step}")  # a string seed: stable across runs
        length = self.params.prompt_tokens
        return [Problem(prompt="".join(rng.choices(ALPHABET, k=length)), answer="") for _ in range(n)]

    def score(self, problem: Problem, completion: str) -> float:
        """The share of digits among the completion's characters."""
        return sum(c.isdigit() for c in completion) / len(completion) if completion else 0.0


@register_env("fixed_length", reads_eos=False)
def make_fixed_length(params: dict) -> FixedLengthEnv:
    return FixedLengthEnv(params=FixedLengthParams.from_dict(params))
