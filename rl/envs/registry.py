"""Verifiable tasks by name: the `Problem` type, the `Env` protocol and `make_env`.

A task file (e.g. `arith.py`) defines one environment and registers a factory that builds it
from the recipe's `task.params`; a name registered twice is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A prompt and its reference answer (text, without the eos token)."""

    prompt: str
    answer: str


class Env(Protocol):
    """What the GRPO driver needs from a task."""

    name: str

    @property
    def spec(self) -> dict:
        """{name, params} with every default filled in: identifies the task (cache keys, logs)."""
        ...

    def sample(self, n: int, *, seed: int, step: int) -> list[Problem]:
        """n problems, a pure function of (params, seed, step)."""
        ...

    def score(self, problem: Problem, completion: str) -> float:
        """Reward of one decoded completion."""
        ...


EnvFactory = Callable[[dict], Env]
ENVS: dict[str, EnvFactory] = {}


def register_env(name: str) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator registering `factory(params) -> Env` under `name`."""

    def deco(factory: EnvFactory) -> EnvFactory:
        if name in ENVS:
            raise ValueError(f"task {name!r} is already registered (by {ENVS[name]!r})")
        ENVS[name] = factory
        return factory

    return deco


def make_env(task_cfg: dict) -> Env:
    """Build the recipe's task from its `task` section: {name, params}."""
    name = task_cfg.get("name")
    if name not in ENVS:
        raise ValueError(f"task.name: unknown task {name!r}; known: {sorted(ENVS)}")
    params = task_cfg.get("params") or {}
    if not isinstance(params, dict):
        raise ValueError(f"task.params: expected a mapping, got {type(params).__name__}")
    return ENVS[name](dict(params))
