"""The recipe harness: resolve, validate, plan, launch, check and report RL recipes.

It never imports `rl` (nor torch or Ray): the run dir is its only contract with an engine.
"""

__version__ = "0.1.0"
