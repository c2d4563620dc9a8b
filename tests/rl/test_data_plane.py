"""The data-plane backends: registered by name, one interface, and no model code in the data plane."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

from rl.config import DataPlaneConfig, TQConfig
from rl.data import PLANES, DataPlane, MemoryStore, plane_class
from rl.data.plane import CallRows, LegacyPlane, StoreRows, TQPlane

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
    assert isinstance(LegacyPlane.open(section, group_size=4).worker_client, CallRows)
    store = MemoryStore()
    assert TQPlane(store=store, group_size=4).worker_client == StoreRows(store)


@pytest.mark.parametrize("name", sorted(PLANES))
def test_one_step_through_each_backend_gives_the_same_columns(name: str) -> None:
    plane = TQPlane(store=MemoryStore(), group_size=2) if name == "tq" else LegacyPlane(group_size=2)
    columns = {"input_ids": torch.arange(12).reshape(4, 3), "response_mask": torch.ones(4, 3, dtype=torch.bool)}
    handle = plane.put_rollout(step=1, uids=["a", "a", "b", "b"], columns=dict(columns), lengths=[3, 2, 3, 1])
    got = plane.read(handle, ("input_ids", "response_mask"))
    assert all(torch.equal(got[k], columns[k]) for k in columns)
    plane.finish(handle)
    plane.close()


@pytest.mark.parametrize("name", sorted(PLANES))
def test_a_rank_reads_and_answers_through_its_worker_client(name: str) -> None:
    """The rank side of each backend: the field names and columns the driver put, and an answer
    that brings the rank's column back to the driver (legacy: the columns, tq: the store)."""
    plane = TQPlane(store=MemoryStore(), group_size=2) if name == "tq" else LegacyPlane(group_size=2)
    columns = {"input_ids": torch.arange(12).reshape(4, 3), "attention_mask": torch.ones(4, 3, dtype=torch.long)}
    handle = plane.put_rollout(step=1, uids=["a", "a", "b", "b"], columns=dict(columns), lengths=[3, 3, 3, 3])
    rows = plane.worker_client
    assert sorted(rows.fields(handle)) == sorted(columns)
    got = rows.read(handle, ("input_ids",))
    assert list(got) == ["input_ids"] and torch.equal(got["input_ids"], columns["input_ids"])
    answer = rows.answer(handle, {"prev_logprobs": -torch.ones(4, 3)})
    back = answer if name == "legacy" else plane.read(answer, ("prev_logprobs",))
    assert torch.equal(back["prev_logprobs"], -torch.ones(4, 3))
    plane.finish(handle)


def test_the_policy_worker_asks_no_data_plane_type() -> None:
    """rl/workers/ reads and answers rows through the plane's `worker_client`; no `isinstance`
    on a handle type (`KVBatchMeta`, `BatchedDataDict`) picks a path there."""
    switches = []
    for path in sorted((ROOT / "rl" / "workers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if names & {"KVBatchMeta", "BatchedDataDict"}:
                    switches.append(f"{path.name}:{node.lineno}")
    assert switches == []


def test_the_engine_names_no_backend() -> None:
    """rl/run.py asks the registry; it never compares `data_plane.backend` with a name."""
    tree = ast.parse((ROOT / "rl" / "run.py").read_text(encoding="utf-8"))
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in PLANES}
    assert names == set()


def test_the_data_plane_imports_no_model_code() -> None:
    """FLOPs reach the data plane as a callable (`flops_post_train(..., flops=)`), never as a model.
    Imports for type checking only (`if TYPE_CHECKING:`, e.g. the typed config section a store is
    built from) run nowhere."""
    imported = set()
    for path in sorted((ROOT / "rl" / "data").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {(path.name, node.module)}
            elif isinstance(node, ast.Import):
                imported |= {(path.name, alias.name) for alias in node.names}
    engine = sorted((f, m) for f, m in imported if m.startswith("rl.") and not m.startswith(("rl.data", "rl.faults")))
    assert engine == []
