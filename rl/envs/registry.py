"""Verifiable tasks by name: the `Problem` type, the `Env` protocol and `make_env`.

A task file (e.g. `arith.py`) defines one environment and registers a factory that builds it
from the recipe's `task.params`; a name registered twice is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from rl.config import DataConfig, TaskConfig


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A prompt and its reference answer (text, without the eos token).

    `demonstration`: the completion the warm start teaches when it is not the bare answer (a
    math task answers `\\boxed{7}` for the answer `7`); None: the answer itself.
    """

    prompt: str
    answer: str
    demonstration: str | None = None

    @property
    def target(self) -> str:
        """What a correct completion says (before eos)."""
        return self.answer if self.demonstration is None else self.demonstration


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
# Tasks whose score does not read where a completion ends, so `generation.ignore_eos` (every
# completion runs to max_new_tokens) leaves their reward meaningful; every other task refuses it.
EOS_FREE_TASKS: set[str] = set()


def register_env(name: str, *, reads_eos: bool = True) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator registering `factory(params) -> Env` under `name`; `reads_eos=False` for a task
    whose score ignores the end of sequence (see EOS_FREE_TASKS)."""

    def deco(factory: EnvFactory) -> EnvFactory:
        if name in ENVS:
            raise ValueError(f"task {name!r} is already registered (by {ENVS[name]!r})")
        ENVS[name] = factory
        if not reads_eos:
            EOS_FREE_TASKS.add(name)
        return factory

    return deco


# Tasks whose problems come from the recipe's `data:` section: factory(params, data, tokenizer).
DATASET_ENVS: dict[str, Callable[[dict, DataConfig, Any], Env]] = {}


def register_dataset_env(name: str) -> Callable:
    """Decorator registering `factory(params, data, tokenizer) -> Env` under `name`."""

    def deco(factory: Callable[[dict, DataConfig, Any], Env]) -> Callable[[dict, DataConfig, Any], Env]:
        if name in ENVS or name in DATASET_ENVS:
            raise ValueError(f"task {name!r} is already registered")
        DATASET_ENVS[name] = factory
        return factory

    return deco


def make_env(task: TaskConfig, *, data: DataConfig | None = None, tokenizer: Any = None) -> Env:
    """Build the recipe's task from its `task` section; a dataset task also takes the recipe's
    `data` section and the tokenizer (for its chat template)."""
    if task.name not in ENVS and task.name not in DATASET_ENVS:
        raise ValueError(f"task.name: unknown task {task.name!r}; known: {sorted([*ENVS, *DATASET_ENVS])}")
    if task.name in DATASET_ENVS:
        if data is None or data.train is None:
            raise ValueError(f"data.train: task {task.name!r} reads its problems from a dataset; name one")
        return DATASET_ENVS[task.name](dict(task.params), data, tokenizer)
    return ENVS[task.name](dict(task.params))
