"""The repository's own suites: valid, within budget, and the CPU suite covers every recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.recipe import find_recipes, load_recipe
from harness.suites import find_suites, load_suite, validate_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "recipes" / "suites"


def test_the_four_suites_exist():
    assert {p.stem for p in find_suites([SUITES])} >= {"cpu", "nightly", "release", "performance"}


@pytest.mark.parametrize("path", find_suites([SUITES]), ids=lambda p: p.stem)
def test_repository_suite_is_valid(path):
    check = validate_suite(load_suite(path))
    assert check.ok, check.problems


def test_every_recipe_has_a_cpu_entry_in_the_cpu_suite():
    """A recipe runs in the CPU suite as itself (if CPU-sized) or as its tiny twin."""
    suite = load_suite(SUITES / "cpu.yaml")
    covered = set()
    for entry in suite.enabled:
        assert entry.hardware == "cpu"
        recipe = load_recipe(entry.recipe, entry.overrides, scale=entry.scale).data
        assert recipe["cluster"]["device"] == "cpu", entry.id
        covered.add(entry.recipe.resolve())
    missing = [str(p.relative_to(REPO)) for p in find_recipes([REPO / "recipes"]) if p.resolve() not in covered]
    assert not missing, f"recipes without an entry in recipes/suites/cpu.yaml: {missing}"


def test_gpu_suites_run_h200_entries_at_full_scale_or_the_h200x2_twin():
    for name in ("nightly", "release", "performance"):
        for entry in load_suite(SUITES / f"{name}.yaml").entries:
            assert entry.hardware == "h200" and entry.scale in (None, "h200x2"), (name, entry.id)
