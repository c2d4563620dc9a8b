"""The data-plane backends: registered by name, one interface, and no model code in the data plane."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

from rl.config import DataPlaneConfig, TQConfig
from rl.data import PLANES, DataPlane, MemoryStore, plane_class
from rl.data.plane import LegacyPlane, TQPlane

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "harness" / "schema" / "recipe.schema.json").read_text(encoding="utf-8"))


def test_every_backend_the_schema_allows_is_registered_and_nothing_else() -> None:
    enum = SCHEMA["properties"]["data_plane"]["properties"]["backend"]["enum"]
    assert sorted(PLANES) == sorted(enum)
    assert all(issubclass(cls, DataPlane) and cls.name == name for name, cls in PLANES.items())


def test_an_unknown_backend_is_refused_by_its_key() -> None:
    assert plane_class("tq") is TQPlane and plane_class("legacy") is LegacyPlane
    with pytest.raises(ValueError, match=r"data_plane.backend: unknown backend 'redis'; valid: \['legacy', 'tq'\]"):
        plane_class("redis")


def test_what_each_backend_asks_of_ray_and_hands_the_workers() -> None:
    section = DataPlaneConfig(backend="tq", tq=TQConfig(num_storage_units=3))
    assert LegacyPlane.ray_cpus(section) == 0
    assert TQPlane.ray_cpus(section) == 4  # the controller and each storage unit: a whole CPU each
    assert LegacyPlane.open(section, group_size=4).worker_client is None
    store = MemoryStore()
    assert TQPlane(store=store, group_size=4).worker_client is store


@pytest.mark.parametrize("name", sorted(PLANES))
def test_one_step_through_each_backend_gives_the_same_columns(name: str) -> None:
    plane = TQPlane(store=MemoryStore(), group_size=2) if name == "tq" else LegacyPlane(group_size=2)
    columns = {"input_ids": torch.arange(12).reshape(4, 3), "response_mask": torch.ones(4, 3, dtype=torch.bool)}
    handle = plane.put_rollout(step=1, uids=["a", "a", "b", "b"], columns=dict(columns), lengths=[3, 2, 3, 1])
    got = plane.read(handle, ("input_ids", "response_mask"))
    assert all(torch.equal(got[k], columns[k]) for k in columns)
    plane.finish(handle)
    plane.close()


def test_the_engine_names_no_backend() -> None:
    """rl/run.py asks the registry; it never compares `data_plane.backend` with a name."""
    tree = ast.parse((ROOT / "rl" / "run.py").read_text(encoding="utf-8"))
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in PLANES}
    assert names == set()


def test_the_data_plane_imports_no_model_code() -> None:
    """FLOPs reach the data plane as a callable (`flops_post_train(..., flops=)`), never as a model."""
    imported = set()
    for path in sorted((ROOT / "rl" / "data").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {(path.name, node.module)}
            elif isinstance(node, ast.Import):
                imported |= {(path.name, alias.name) for alias in node.names}
    engine = sorted((f, m) for f, m in imported if m.startswith("rl.") and not m.startswith(("rl.data", "rl.faults")))
    assert engine == []
