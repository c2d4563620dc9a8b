"""`harness validate [PATHS...]`: resolve, validate and plan every recipe (and its tiny twin), ask the
engine whether it can run each on any machine (its static preflight: model config, keys it reads;
one engine process answers them all), and check every suite found under the paths (docs/nightly.md).
`--self-test` also self-tests each thresholds file on the recorded runs its `why` cites (exit 1 when
a check cannot fail there; docs/thresholds.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.checks.judge import judge_run
from harness.errors import USER_ERRORS, UsageError
from harness.plan import make_plan
from harness.preflight import StaticAnswers, engine_recipes, refusals
from harness.recipe import find_recipes, load_recipe
from harness.selftest import FAILS_AS_IS, OK, PROBLEMS, run_to_run_sd, self_test, status_counts
from harness.selftest.cited import citing_checks
from harness.suites import find_suites, is_suite_path, load_suite, suite_problems
from harness.suites.validate import entry_asks
from harness.thresholds import load_thresholds
from harness.thresholds.of_recipe import recipe_thresholds


def validate_one(path: Path, asks: dict[tuple, Mapping]) -> list[str]:
    """Problems of one recipe at full scale and at each of its scales; what the engine will be
    given is added to `asks`, keyed (path, label, variant), for one preflight of every recipe."""
    problems = []
    try:
        scales = load_recipe(path).scales
    except USER_ERRORS as error:
        return [f"full scale: {error}"]
    for scale in (None, *scales):
        label = f"{scale} twin" if scale else "full scale"
        try:
            resolved = load_recipe(path, scale=scale)
            make_plan(resolved.data)
            recipe_thresholds(resolved.data)
            for variant, recipe in engine_recipes(resolved.data).items():
                asks[(path, label, variant)] = recipe
        except USER_ERRORS as error:
            problems.append(f"{label}: {error}")
    return problems


def engine_problems(asks: dict[tuple, Mapping], needs: dict[Path, list[str]] | None = None,
                    ask: StaticAnswers | None = None) -> dict[Path, list[str]]:
    """The engine's static refusals, per recipe file, each led by its scale (and variant);
    `needs` receives the full-scale recipe's checkpoint and datasets, per recipe file."""
    out: dict[Path, list[str]] = {}
    ask = ask or StaticAnswers()
    for (path, label, variant), answer in ask(asks).items() if asks else ():
        for line in refusals({variant: answer}, "static"):
            out.setdefault(path, []).append(f"{label}: {line}")
        if needs is not None and label == "full scale":
            seen = needs.setdefault(path, [])
            seen.extend(line for line in answer.needs if line not in seen)
    return out


def suite_asks(paths: list[Path]) -> dict[tuple, Mapping]:
    """What the engine will be asked about every enabled entry of the suites under `paths` that
    resolves (validate_suites reports the others), so that one engine start answers them and the
    recipes together."""
    out: dict[tuple, Mapping] = {}
    for path in find_suites(paths):
        try:
            entries = load_suite(path).enabled
        except USER_ERRORS:
            continue
        for entry in entries:
            try:
                out.update({(path, *key): recipe for key, recipe in entry_asks([entry]).items()})
            except (*USER_ERRORS, ValueError):
                continue
    return out


def validate_suites(paths: list[Path], ask: StaticAnswers | None = None) -> int:
    """Suites under the paths (recipes/suites/*.yaml): entries, disabled dates, GPU-hour budget."""
    failed = 0
    for path in find_suites(paths):
        check, problems = suite_problems(path, ask=ask)
        if problems:
            failed += 1
            for problem in problems:
                print(f"FAIL {path}: {problem}", file=sys.stderr)
        else:
            assert check is not None
            print(f"ok   {path} (suite {check.suite.name}: {len(check.suite.enabled)} enabled entries, "
                  f"{check.gpu_hours:.1f} of {check.suite.budget_gpu_hours:g} GPU-hours)")
    return failed


def self_test_run(run: Path, thresholds: str, *, hardware: str | None, recipe: Mapping, history: Path,
                  cited_by: list[str] | None = None) -> int:
    """Self-test the thresholds on one cited run; how many checks cannot be shown to fail there, or
    fail there (a cited run must pass what it was cited for: `cited_by`, the checks citing it;
    None: every check)."""
    judgement = judge_run(run, thresholds=Path(thresholds), hardware=hardware,
                          expected_steps=recipe["algorithm"]["num_steps"])
    tests = self_test(judgement, sd=run_to_run_sd(history, recipe=recipe["name"], hardware=hardware))
    if cited_by is not None:
        tests = [test for test in tests if test.name in cited_by]
    bad = [test for test in tests if test.status in (*PROBLEMS, FAILS_AS_IS)]
    print(f"{'FAIL' if bad else 'ok  '} self-test {os.path.relpath(thresholds)} ({hardware}) on {run}: "
          f"{status_counts(tests)}")
    for test in tests:
        if test.status != OK:
            print(f"       {test.status}: {test.name}: {test.summary()}")
    return len(bad)


def self_test_cited(path: Path, history: Path) -> int:
    """Self-test the recipe's thresholds, at each scale, on the runs their checks' `why` cites;
    how many checks failed the self-test."""
    problems = 0
    seen: set[tuple] = set()
    for scale in (None, *load_recipe(path).scales):
        recipe = load_recipe(path, scale=scale).data
        thresholds, hardware = recipe["checks"].get("thresholds"), recipe["checks"].get("hardware")
        if not thresholds or (thresholds, hardware) in seen:
            continue
        seen.add((thresholds, hardware))
        runs = citing_checks(load_thresholds(Path(thresholds), hardware=hardware))
        if not runs:
            print(f"     self-test {os.path.relpath(thresholds)} ({hardware}): its checks cite no recorded run dir")
        for run, names in runs.items():
            problems += self_test_run(run, thresholds, hardware=hardware, recipe=recipe, history=history,
                                      cited_by=names)
    return problems


def main(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    for p in paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file or folder")
    recipe_paths = [p for p in paths if not (p.is_file() and is_suite_path(p))]
    recipes = find_recipes(recipe_paths) if recipe_paths else []
    if not recipes and not find_suites(paths):
        raise UsageError(f"no recipe found under {', '.join(map(str, paths))}")
    failed = 0
    asks: dict[tuple, Mapping] = {}
    found = {recipe: validate_one(recipe, asks) for recipe in recipes}
    needs: dict[Path, list[str]] = {}
    ask = StaticAnswers()
    every = {**asks, **suite_asks(paths)}
    if every:
        ask(every)  # one engine start; the questions below are answered from it
    refused = engine_problems(asks, needs, ask)
    for recipe in recipes:
        problems = found[recipe] + refused.get(recipe, [])
        if problems:
            failed += 1
            for problem in problems:
                print(f"FAIL {recipe}: {problem}", file=sys.stderr)
        else:
            print(f"ok   {recipe}")
            for line in needs.get(recipe, []):
                print(f"     needs {line}")
    if recipes:
        print(f"{len(recipes) - failed} of {len(recipes)} recipes valid")
    failed_suites = validate_suites(paths, ask)
    if failed or failed_suites:
        return 2
    unproven = sum(self_test_cited(recipe, Path(args.history)) for recipe in recipes) if args.self_test else 0
    return 1 if unproven else 0
