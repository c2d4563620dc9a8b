"""Environment names a recipe's env may not set without saying so: they change every process of the run.

A recipe's env reaches the engine process and every worker (rl/config.py, `RunConfig.worker_env`).
Some names do more than configure a library: `LD_PRELOAD` ran its constructor in 15 processes of a
tiny run, `PYTHONPATH` ran a `sitecustomize.py` in 13, `RAY_ADDRESS` made the engine leave its
private token-auth Ray for whatever listened there, and `RL_FAULTS` plants faults (rl/faults.py).
Each is refused before launch with the sanctioned way in, unless the recipe lists it in
`env_unsafe_allow` (the fault matrix's bases, recipes/_faults, list RL_FAULTS).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["guarded", "refusal"]

# (a name, or a prefix ending in "*"; why; the sanctioned way in): the first that matches a name applies.
_RULES: tuple[tuple[str, str, str], ...] = (
    ("RAY_ADDRESS", "it would make the engine join whatever Ray listens there instead of its private, token-auth one",
                    "use `harness run --ray-address URL` or RAY_ADDRESS in the launching environment"),
    ("RAY_*", "it changes how Ray runs for every process of the run (its auth, its temp dir, its limits)",
             "list it in env_unsafe_allow to set it anyway"),
    ("RL_FAULTS", "it plants faults (rl/faults.py)",
                  "faults are planted by the fault matrix (recipes/suites/faults.yaml on the recipes/_faults "
                  "bases, which list it in env_unsafe_allow)"),
    ("LD_*", "it changes what the dynamic loader runs in every process of the run",
            "list it in env_unsafe_allow to set it anyway"),
    ("PYTHON*", "it changes what the interpreter runs in every process of the run",
               "list it in env_unsafe_allow to set it anyway"),
)


def _rule(name: str) -> tuple[str, str, str] | None:
    for rule in _RULES:
        pattern = rule[0]
        if name == pattern or pattern.endswith("*") and name.startswith(pattern[:-1]):
            return rule
    return None


def guarded(name: str) -> bool:
    """Whether `name` is one that env_unsafe_allow must list before a recipe's env sets it."""
    return _rule(name) is not None


def refusal(scope: str, names: Iterable[str], allowed: Iterable[str]) -> str | None:
    """The one-line refusal for the first name of env mapping `scope` that is guarded and not
    allowed, or None."""
    allowed = set(allowed)
    for name in names:
        rule = _rule(name)
        if rule is not None and name not in allowed:
            return f"{scope}.{name}: not settable from a recipe's env: {rule[1]}; {rule[2]}"
    return None
