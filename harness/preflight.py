"""Ask the engine, before launch, whether it can run a recipe (docs/architecture.md, "Preflight").

The harness never imports `rl`: it writes each resolved recipe to a temporary file and runs the
engine's `python -m rl.preflight FILE... --json [--machine]` with the interpreter the launcher
uses for `python -m rl.run` (harness/engines). The engine answers one line per refusal, split
into `static` (the recipe is wrong everywhere) and `machine` (wrong on this machine: no GPUs,
vLLM not installed). One subprocess answers every recipe of a `harness validate` (an engine
start costs seconds of imports; a config check, milliseconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness import engines
from harness.errors import UserError
from harness.recipe import apply_overrides, dump_recipe
from harness.recipe.secret_env import launch_env, redact_recipe

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300.0

__all__ = ["Answer", "EngineRefusal", "PreflightError", "ask_before_launch", "ask_engine", "engine_recipes",
           "format_answer", "refusals"]


class EngineRefusal(UserError):
    """The engine refuses the recipe; its text is one line per refusal."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("\n".join(lines))


class PreflightError(Exception):
    """The engine's preflight could not answer (it crashed or printed no answer): an internal error."""


@dataclass(kw_only=True)
class Answer:
    static: list[str] = field(default_factory=list)  # refused on any machine
    machine: list[str] = field(default_factory=list)  # refused on this machine
    needs: list[str] = field(default_factory=list)  # what a run reads: checkpoint, datasets (informational)


def engine_recipes(recipe: Mapping) -> dict[str, Mapping]:
    """What the engine will be given: the recipe, or each of its parity variants (by name)."""
    if recipe.get("engine", "rl") != "rl":
        return {}  # an external engine has its own rules; we cannot ask it
    parity = (recipe.get("checks") or {}).get("parity")
    if not parity:
        return {"": recipe}
    out = {}
    for name, overrides in parity["variants"].items():
        variant = apply_overrides(dict(recipe), overrides)
        variant.setdefault("checks", {}).pop("parity", None)
        out[f"variant {name}"] = variant
    return out


def refusals(answers: Mapping[str, Answer], kind: str) -> list[str]:
    """The `static` or `machine` lines of `engine_recipes`' answers, each led by its variant."""
    return [f"{name}: {line}" if name else line for name, answer in answers.items() for line in getattr(answer, kind)]


def ask_engine(recipes: Mapping[Hashable, Mapping], *, machine: bool) -> dict[Hashable, Answer]:
    """The engine's answer for each recipe (keyed as given); `machine` adds this machine's checks.

    Recipes are grouped by their `env` (it reaches the engine, e.g. CUDA_VISIBLE_DEVICES), one
    subprocess per group.

    Raises:
        PreflightError: the preflight crashed or timed out.
    """
    answers = {key: Answer() for key in recipes}
    groups: dict[tuple, list[Hashable]] = {}
    for key, recipe in recipes.items():
        groups.setdefault(tuple(sorted(launch_env(recipe, os.environ, missing="").items())), []).append(key)
    for env, keys in groups.items():
        with tempfile.TemporaryDirectory(prefix="harness-preflight-") as tmp:
            files = {}
            for i, key in enumerate(keys):
                path = Path(tmp) / f"recipe{i}.yaml"
                path.write_text(dump_recipe(redact_recipe(recipes[key])), encoding="utf-8")
                files[str(path)] = key
            said = _run(engines.preflight_command(list(files), machine=machine), dict(env))
            for path, key in files.items():
                if not isinstance(said.get(path), dict):  # fail closed: no answer is not a yes
                    raise PreflightError(f"the engine's preflight gave no answer for {path}")
                answers[key] = Answer(static=list(said[path]["static"]), machine=list(said[path]["machine"]),
                                      needs=list(said[path].get("needs", [])))
    return answers


def _run(command: list[str], env: dict[str, str]) -> dict[str, dict]:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=TIMEOUT_S,
                              env={**os.environ, **{k: str(v) for k, v in env.items()}}, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PreflightError(f"the engine's preflight did not answer: {error}") from None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        if proc.returncode not in (0, 2) or not lines:
            raise ValueError("no answer")
        return json.loads(lines[-1])
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PreflightError(f"the engine's preflight failed (exit {proc.returncode}): {tail}") from None


def ask_before_launch(recipe: Mapping, *, launching: bool, needs: list[str] | None = None,
                      machine_here: bool = True) -> list[str] | None:
    """Ask the engine (with this machine's checks) before anything is written; None: not asked.
    `needs`, when given, receives what a run reads (checkpoint, datasets), once per line.
    `machine_here=False` (a Ray job: the engine runs on the cluster) asks the static checks only;
    the engine answers the machine's part on the cluster, refusing before its run starts.

    Raises:
        EngineRefusal: the engine refuses the recipe anywhere, or (when `launching`) here.
    """
    asks = engine_recipes(recipe)
    if not asks:
        return None
    answers = ask_engine(asks, machine=machine_here)
    static, machine = refusals(answers, "static"), refusals(answers, "machine")
    if needs is not None:
        needs.extend(dict.fromkeys(line for answer in answers.values() for line in answer.needs))
    if static or (machine and launching):
        raise EngineRefusal(static + machine)
    return machine


def format_answer(machine: list[str] | None) -> str:
    """The engine's answer for this machine, for the plan printout (`harness run --dry-run`, `harness plan`)."""
    if machine is None:
        return "engine     external: not asked\n"
    if not machine:
        return "engine     accepts it on this machine\n"
    return "".join(f"engine     refuses it on this machine: {line}\n" for line in machine)
