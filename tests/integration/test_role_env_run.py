"""The real engine (`python -m rl.run`, private local Ray, one step of the CPU tiny twin) with a
role env on each side: every training worker sees `policy.env` and not `generation.env`, the
generator the other way round, and both see the top-level `env` where their role does not
override it.

The policy's secret is handed to the engine process through its environment, as the harness
does; a local Ray starts every worker from that environment, so the generator must drop it
itself (rl/workers/base.py). What each worker saw is its salted-hash report: env.json and the
env_propagated invariant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=30)]  # the file, measured on 2 shared cores

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "arith_grpo_cpu.yaml"
SECRET = "sk-policy-only-5d2e8a"


def test_each_role_sees_its_own_env_and_not_the_other_roles(tmp_path):
    data = yaml.safe_load(RECIPE.read_text())
    data["algorithm"].update(num_steps=1, prompts_per_step=4, warm_start={"steps": 0})
    data["policy"]["micro_batch_size"] = 8
    data["env"] = {"SHARED": "all", "CLASH": "top"}
    data["policy"]["env"] = {"ROLE_P": "p", "CLASH": "policy", "POLICY_PROBE_TOKEN": "<redacted>"}
    data["generation"]["env"] = {"ROLE_G": "g"}
    recipe, out = tmp_path / "recipe.yaml", tmp_path / "run"
    recipe.write_text(yaml.safe_dump(data))
    env = dict(os.environ, RAY_AUTH_MODE="disabled", POLICY_PROBE_TOKEN=SECRET)
    env.pop("RAY_ADDRESS", None)  # a private local Ray: its workers start from the engine's environment
    done = subprocess.run([sys.executable, "-m", "rl.run", str(recipe), "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    workers = {w["name"]: w["env"] for w in json.loads((out / "env.json").read_text())["workers"]}
    policy = {"SHARED": "all", "CLASH": "policy", "ROLE_P": "p", "POLICY_PROBE_TOKEN": "<redacted>", "ROLE_G": None}
    generation = {"SHARED": "all", "CLASH": "top", "ROLE_G": "g", "ROLE_P": None, "POLICY_PROBE_TOKEN": None}
    assert workers == {"policy-0": policy, "policy-1": policy, "generation-0": generation}
    records = [json.loads(line) for line in (out / "invariants.jsonl").read_text().splitlines() if line.strip()]
    propagated = {r["worker"]: r["ok"] for r in records if r["check"] == "env_propagated"}
    assert propagated == {"policy-0": True, "policy-1": True, "generation-0": True}, records
    assert [p for p in out.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()] == []
