"""Verifiable tasks, one file each, registered by name: `make_env(cfg.task)`."""

from rl.envs import arith as _arith  # noqa: F401  (registers "arith")
from rl.envs import counting as _counting  # noqa: F401  (registers "counting")
from rl.envs import fixed_length as _fixed_length  # noqa: F401  (registers "fixed_length")
from rl.envs import math as _math  # noqa: F401  (registers "math", a dataset task)
from rl.envs.registry import (
    DATASET_ENVS,
    ENVS,
    EOS_FREE_TASKS,
    Env,
    Problem,
    make_env,
    register_dataset_env,
    register_env,
)

__all__ = ["DATASET_ENVS", "ENVS", "EOS_FREE_TASKS", "Env", "Problem", "make_env", "register_dataset_env",
           "register_env"]
