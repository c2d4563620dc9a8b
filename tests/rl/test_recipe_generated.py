"""The recipe is described once, by the config dataclasses: the schema the harness reads and the
key tables of docs/recipes.md are written from them by `python -m rl.recipe`. These tests fail
when either checked-in file is not what the generator writes (run it and commit), and show that
a new field reaches both with no other edit."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rl import config as rl_config
from rl.recipe.generate import DOCS, SCHEMA, generated
from rl.recipe.key import key, section

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_schema_and_docs_are_generated() -> None:
    for rel, text in generated(ROOT).items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel} is stale: run `python -m rl.recipe`"


# A throwaway key, two sections deep, added by subclassing (the acceptance demo of issue 34).
@dataclasses.dataclass(kw_only=True)
class PatchedCheckpoint(rl_config.CheckpointConfig):
    keep_last: int = key(3, ge=1, doc="the newest checkpoints kept; older ones are deleted")


@dataclasses.dataclass(kw_only=True)
class PatchedRun(rl_config.RunConfig):
    checkpoint: PatchedCheckpoint = section(PatchedCheckpoint)


def test_a_new_field_reaches_the_schema_and_the_key_table() -> None:
    files = generated(ROOT, PatchedRun)
    node = json.loads(files[SCHEMA])["properties"]["checkpoint"]["properties"]["keep_last"]
    assert node == {"type": "integer", "minimum": 1, "default": 3,
                    "description": "the newest checkpoints kept; older ones are deleted"}
    row = "| `checkpoint.keep_last` | int >= 1 | `3` | the newest checkpoints kept; older ones are deleted |"
    assert row in files[DOCS] and row not in (ROOT / DOCS).read_text(encoding="utf-8")


def test_a_new_field_is_checked_by_the_engine() -> None:
    assert PatchedCheckpoint(keep_last=2).keep_last == 2
    try:
        PatchedCheckpoint(keep_last=0)
    except ValueError as exc:
        assert str(exc) == "keep_last: must be >= 1, got 0"
    else:
        raise AssertionError("keep_last: 0 was accepted")


def test_the_harness_forms_name_only_keys_the_engine_carries() -> None:
    """harness_keys.json gives the JSON form of keys the dataclasses hold but do not describe."""
    from rl.recipe.schema import harness_forms

    engine_keys = set(json.loads(generated(ROOT)[SCHEMA])["properties"])
    for dotted in harness_forms()["forms"]:
        assert dotted.split(".")[0] in engine_keys
