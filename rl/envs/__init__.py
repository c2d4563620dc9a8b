"""Verifiable tasks, one file each, registered by name: `make_env(recipe["task"])`."""

from rl.envs import arith as _arith  # noqa: F401  (registers "arith")
from rl.envs import counting as _counting  # noqa: F401  (registers "counting")
from rl.envs.registry import ENVS, Env, Problem, make_env, register_env

__all__ = ["ENVS", "Env", "Problem", "make_env", "register_env"]
