"""Property tests: deep merge keeps what it should, and an override reads back as its value."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.recipe import apply_overrides, dump_recipe, load_recipe
from harness.recipe.errors import Origin
from harness.recipe.show import _scalar
from harness.recipe.tree import Tree, leaves

KEYS = st.sampled_from(["a", "b", "c", "d"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("xyz", max_size=3),
                    st.lists(st.integers(0, 3), max_size=2))
TREES = st.recursive(SCALARS, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=12)
MAPPINGS = st.dictionaries(KEYS, TREES, max_size=4)
_MISSING = object()

_DIR = Path(tempfile.mkdtemp(prefix="recipe-prop-"))
RECIPE = _DIR / "r.yaml"
RECIPE.write_text("name: r\nmodel: {family: qwen3_5, tokenizer: arith}\n"
                  "cluster: {devices_per_node: 2, device: cpu}\nalgorithm: {num_steps: 2}\ntask: {name: arith}\n")
BASE = load_recipe(RECIPE).data


def _tree(data: dict, name: str) -> Tree:
    origin = Origin(label=name, where=name, base_dir=_DIR)
    tree = Tree()
    for path in leaves(data):
        tree.set(path, _get(data, path), origin)
    return tree


def _get(data: object, path: tuple) -> object:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


@settings(max_examples=100, deadline=None)
@given(MAPPINGS, MAPPINGS)
def test_deep_merge(a: dict, b: dict):
    merged = _tree(a, "a")
    merged.merge(_tree(b, "b"))
    for path in leaves(b):                                    # the top layer wins...
        if _get(b, path) == {}:                               # ...but an empty mapping merges
            assert isinstance(_get(merged.data, path), dict)
        else:
            assert _get(merged.data, path) == _get(b, path)
        assert merged.origins[path].label == "b"
    for path in leaves(a):                                    # the base survives unless shadowed
        above = [_get(b, path[:n]) for n in range(1, len(path))]
        if _get(b, path) is _MISSING and all(v is _MISSING or isinstance(v, dict) for v in above):
            assert _get(merged.data, path) == _get(a, path)
            assert merged.origins[path].label == "a"
    for path in leaves(merged.data):                         # every leaf knows who set it
        assert merged.origins[path].label in ("a", "b")


INT_KEYS = st.sampled_from(["algorithm.num_steps", "algorithm.seed", "policy.parallel.tp", "cluster.nodes",
                            "checkpoint.every_steps", "limits.timeout_s"])
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\n\t"), max_size=20)
ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20)  # env values: no control chars


@settings(max_examples=30, deadline=None)
@given(INT_KEYS, st.integers(1, 10**6))
def test_override_reads_back(key: str, value: int):
    resolved = load_recipe(RECIPE, [f"{key}={value}"])
    assert _get(resolved.data, tuple(key.split("."))) == value
    assert resolved.provenance[key] == f"override '{key}={value}'"
    assert _get(apply_overrides(BASE, {key: value}), tuple(key.split("."))) == value


@settings(max_examples=30, deadline=None)
@given(TEXT, st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True), ENV_TEXT, max_size=3))
@example("0E0", {"E": "1e5"})  # found by this test: PyYAML writes them plain, our loader reads floats
def test_text_survives_override_dump_and_reload(text: str, env: dict):
    overrides = [f"description={_scalar(text)}"] + [f"++env.{k}={_scalar(v)}" for k, v in env.items()]
    resolved = load_recipe(RECIPE, overrides)
    assert resolved.data["description"] == text and resolved.data["env"] == env
    again = _DIR / "again.yaml"
    again.write_text(dump_recipe(resolved.data))
    assert load_recipe(again).data == resolved.data
