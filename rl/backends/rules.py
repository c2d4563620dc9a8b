"""What each training backend can run, stated once, and asked by name without importing the backend.

A backend registers a `BackendRules` subclass from a light module (no torch, no megatron-core:
rl/preflight.py answers `harness validate` in milliseconds per recipe): its capabilities as class
attributes and its limits as `refusals(cfg)`, one line each naming the recipe key and the reason.
The preflight asks before launch, the backend's constructor asks the same rules again, and
`rl.backends.get_backend` imports the heavy `implementation` only when a worker builds it. Code
that needs to know what a backend does reads an attribute here, never its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rl.backends.names import RULES_MODULES, backend_names

if TYPE_CHECKING:
    from rl.config import RunConfig

__all__ = ["BackendRules", "backend_names", "backend_rules", "register_rules"]

PARALLEL_SIZES = ("tp", "pp", "cp", "ep", "etp")
_RULES: dict[str, BackendRules] = {}


class BackendRules:
    """A training backend's capabilities and limits. The base `refusals` turns the capabilities
    into refusals; a backend adds its own rules after `super().refusals(cfg)`."""

    name: str = ""
    implementation: str = ""  # the module that registers the backend class, imported when a worker builds it
    requires: str | None = None  # a module it imports beyond the engine's own dependencies
    requires_package: str | None = None  # the package that installs `requires`
    parallel: tuple[str, ...] = ()  # the policy.parallel sizes it may run above 1 (PARALLEL_SIZES)
    precisions: tuple[str, ...] = ("fp32",)  # policy.precision values it trains in
    distributed_optimizer: bool = False  # policy.distributed_optimizer
    compiles: bool = False  # policy.compile
    packs: bool = True  # policy.sequence_packing of a text model
    vision: bool = True  # model.modality: vision
    cpu: bool = True  # cluster.device: cpu
    distills: bool = False  # algorithm.name: distill has a step for it
    reads_own_weights: bool = False  # each rank reads its shards of model.path itself (the driver loads none)
    takes_device: bool = False  # its constructor is given the worker's device (else it finds its own)

    def refusals(self, cfg: RunConfig) -> list[str]:
        """Why this backend cannot run `cfg`, one line per recipe key; empty when it can."""
        p, name = cfg.policy, self.name
        out = self.policy_refusals(parallel=p.parallel, precision=p.precision,
                                   distributed_optimizer=p.distributed_optimizer, compile=p.compile)
        if not self.cpu and cfg.cluster.device == "cpu":
            out.append(f"cluster.device: the {name} backend needs a GPU; {self._instead('cpu', 'use a GPU')}")
        if not self.vision and cfg.model.modality == "vision":
            instead = self._instead("vision", "use model.modality: text")
            out.append(f"model.modality: the {name} backend trains text models only; {instead}")
        if not self.packs and p.sequence_packing.enabled:
            out.append(f"policy.sequence_packing.enabled: the {name} backend does not pack rows; set it false")
        if not self.distills and cfg.algorithm.name == "distill":
            instead = self._instead("distills", "use algorithm.name: grpo")
            out.append(f"policy.backend: {name} has no distillation step yet; {instead}")
        return out

    def policy_refusals(self, *, parallel: Any, precision: str, distributed_optimizer: bool,
                        compile: bool) -> list[str]:
        """The `policy` keys alone: what the backend's constructor is given, so it refuses the same."""
        out, name = [], self.name
        beyond = {k: getattr(parallel, k) for k in PARALLEL_SIZES
                  if getattr(parallel, k) != 1 and k not in self.parallel}
        if beyond:
            how = "is data parallel only" if not self.parallel else f"shards over {', '.join(self.parallel)} only"
            out.append(f"policy.parallel: the {name} backend {how}, got {beyond}; "
                       f"{self._instead('parallel', 'set them to 1')}")
        if precision not in self.precisions:
            out.append(f"policy.precision: the {name} backend trains in {' or '.join(self.precisions)} only, "
                       f"got {precision!r}")
        if distributed_optimizer and not self.distributed_optimizer:
            out.append(f"policy.distributed_optimizer: the {name} backend has no distributed optimizer")
        if compile and not self.compiles:
            out.append(f"policy.compile: the {name} backend runs eager; {self._instead('compiles')}")
        return out

    def shape_refusals(self, cfg: RunConfig, shape: Mapping[str, Any]) -> list[str]:
        """Rules that need the model's shape (`shape`: its Hugging Face text config as a mapping),
        asked where the engine knows it; none by default."""
        return []

    def _instead(self, capability: str, otherwise: str = "set it false") -> str:
        """'use policy.backend: X' for the other backends that have `capability`, else `otherwise`."""
        others = [r.name for r in _all().values() if r.name != self.name and getattr(r, capability)]
        return f"use policy.backend: {' or '.join(others)}" if others else otherwise


def register_rules(cls: type[BackendRules]) -> type[BackendRules]:
    """Class decorator: register one instance under `cls.name`; registering a name twice is an error."""
    if cls.name not in RULES_MODULES:
        raise ValueError(f"training backend {cls.name!r} is not named in rl/backends/names.py")
    if cls.name in _RULES:
        raise ValueError(f"training backend {cls.name!r} is already registered by {type(_RULES[cls.name])!r}")
    _RULES[cls.name] = cls()
    return cls


def _all() -> dict[str, BackendRules]:
    """Every backend's rules, their light modules (rl/backends/names.py) imported on the first
    question, so that registering here never imports a backend."""
    for module in RULES_MODULES.values():
        importlib.import_module(module)
    return _RULES


def backend_rules(name: str) -> BackendRules:
    """The rules of `policy.backend: name`; an unknown name is a `ValueError` listing the known ones."""
    rules = _all().get(name)
    if rules is None:
        raise ValueError(f"policy.backend: unknown backend {name!r}; known: {backend_names()}")
    return rules
