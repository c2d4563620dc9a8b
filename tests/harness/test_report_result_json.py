"""result.json: ok needs at least one verdict and all of them passing; strict JSON; atomic."""

from __future__ import annotations

import json
import math

import pytest

from harness.checks.verdict import Verdict
from harness.report import overall_ok, write_result_json

PASS = Verdict(name="reward_rises", kind="threshold", ok=True, message="0.8 >= 0.5", value=0.8,
               expr="mean(train/reward, last=5) >= 0.5", metrics=("train/reward",))  # fmt: skip
FAIL = Verdict(name="no_nan", kind="invariant", ok=False, message="loss is nan", value=math.nan, why="diverged")
STATUS = {"state": "completed", "last_step": 20, "num_steps": 20}


def read(path):
    return json.loads(path.read_text())  # strict: json.loads accepts NaN, so check the text too


def test_all_passing(tmp_path):
    path = write_result_json(tmp_path, recipe_name="arith", verdicts=[PASS], status=STATUS,
                             extra={"plan": {"world": 2}})
    data = read(path)
    assert path == tmp_path / "result.json"
    assert data["ok"] is True and data["recipe"] == "arith" and data["state"] == "completed"
    assert data["counts"] == {"total": 1, "passed": 1, "failed": 0}
    assert data["verdicts"][0]["expr"] == PASS.expr and data["verdicts"][0]["metrics"] == ["train/reward"]
    assert data["plan"] == {"world": 2} and data["status"] == STATUS


def test_one_failure_fails_and_nan_stays_visible(tmp_path):
    text = write_result_json(tmp_path, recipe_name="arith", verdicts=[PASS, FAIL], status=STATUS).read_text()
    assert "NaN" not in text  # strict JSON
    data = json.loads(text)
    assert data["ok"] is False and data["failed"] == ["no_nan"]
    assert data["counts"] == {"total": 2, "passed": 1, "failed": 1}
    assert data["by_kind"] == {"threshold": {"passed": 1, "failed": 0}, "invariant": {"passed": 0, "failed": 1}}
    assert data["verdicts"][1]["value"] == "nan" and data["verdicts"][1]["why"] == "diverged"


def test_no_verdicts_is_not_ok(tmp_path):
    assert overall_ok([]) is False
    assert read(write_result_json(tmp_path, recipe_name="x", verdicts=[], status={}))["ok"] is False


def test_extra_may_not_shadow_fields(tmp_path):
    with pytest.raises(ValueError, match="extra"):
        write_result_json(tmp_path, recipe_name="x", verdicts=[PASS], status={}, extra={"ok": True})
    assert not (tmp_path / "result.json").exists()


def test_rewrite_leaves_no_temp_files(tmp_path):
    for _ in range(2):
        write_result_json(tmp_path, recipe_name="x", verdicts=[PASS], status={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
