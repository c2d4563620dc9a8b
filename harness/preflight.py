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

__all__ = ["Answer", "EngineRefusal", "PreflightError", "StaticAnswers", "ask_before_launch", "ask_engine",
           "engine_recipes", "format_answer", "refusals"]


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

    With `machine`, recipes are grouped by their `env` (it reaches the engine and changes what it
    finds, e.g. CUDA_VISIBLE_DEVICES), one subprocess per group. Without, one subprocess answers
    all: static answers come from the recipe files, so the engine needs only each pass-through
    name to be set (to "", as for a validate without the secret); a suite of fault entries, each with
    its own RL_FAULTS, cost one engine start each (the faults suite's validation: 250 s on 2 cores).

    Raises:
        PreflightError: the preflight crashed or timed out.
    """
    groups: dict[tuple, list[Hashable]] = {}
    if machine:
        for key, recipe in recipes.items():
            groups.setdefault(tuple(sorted(launch_env(recipe, os.environ, missing="").items())), []).append(key)
    else:
        names = sorted({name for recipe in recipes.values() for name in launch_env(recipe, {}, missing="")})
        groups[tuple((name, "") for name in names)] = list(recipes)
    answers = {}
    for env, keys in groups.items():
        if not keys:
            continue
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


class StaticAnswers:
    """The engine's static answers for one command, by the resolved recipe's text (the static
    preflight is a function of the recipe file alone): `harness validate` asks about each recipe
    and about each suite entry that runs it, and every engine start costs ~10 s on 2 cores, so it
    asks them all at once (`prefetch`), then answers each question from here."""

    def __init__(self) -> None:
        self._by_text: dict[str, Answer] = {}

    def __call__(self, recipes: Mapping[Hashable, Mapping]) -> dict[Hashable, Answer]:
        """`ask_engine(recipes, machine=False)`, asking the engine only about recipes not yet answered."""
        texts = {key: dump_recipe(redact_recipe(recipe)) for key, recipe in recipes.items()}
        todo = {key: recipes[key] for key in recipes if texts[key] not in self._by_text}
        for key, answer in (ask_engine(todo, machine=False) if todo else {}).items():
            self._by_text[texts[key]] = answer
        return {key: self._by_text[texts[key]] for key in recipes}


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
