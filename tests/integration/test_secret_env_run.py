"""`harness run` of the CPU tiny twin with a pass-through secret and a literal `*_TOKEN` value.

Issue 18: neither value may land anywhere in the run dir (CI uploads run dirs as artifacts),
yet every worker must see both: env_propagated compares salted hashes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "recipes" / "arith_grpo_cpu.yaml")
PASSED = "sk-passthrough-4b1d9e7c"
LITERAL = "hf-literal-93a0f2d6"


def test_secrets_reach_every_worker_and_no_file_of_the_run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", PASSED)
    out = tmp_path / "run"
    code = main(["run", RECIPE, "algorithm.num_steps=2", "algorithm.warm_start.steps=0", "--no-progress",
                 "++env.WANDB_API_KEY={from_env: true}", f"++env.HF_TOKEN={LITERAL}", "--out", str(out)])
    assert code in (0, 1)  # thresholds may fail on 2 steps; judged here: the secrets only
    leaks = [str(p) for p in out.rglob("*") if p.is_file()
             if PASSED.encode() in p.read_bytes() or LITERAL.encode() in p.read_bytes()]
    assert leaks == []
    records = [json.loads(line) for line in (out / "invariants.jsonl").read_text().splitlines() if line.strip()]
    env = [r for r in records if r["check"] == "env_propagated"]
    assert env and all(r["ok"] for r in env), env
    workers = json.loads((out / "env.json").read_text())["workers"]
    assert workers and all(w["env"]["WANDB_API_KEY"] == "<redacted>" == w["env"]["HF_TOKEN"] for w in workers)
    assert "<redacted>" in (out / "recipe.yaml").read_text()
