"""`generation.replicas` through the real engine: real Ray, two gloo policy ranks, CPU replicas.

`harness run` of the CPU parity recipe with one and with two generation replicas from the same
seed: every deterministic metric and the log-prob digest (a fingerprint of every sampled token's
log-prob under the policy, so of the tokens) must agree bit for bit, and the two-replica run must
record its spread-and-restore every step. Then the planted fault that skips the restore
(`generation_replica_order_kept`) must be caught by the harness's row-order check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=300)]  # the file, 2 shared cores (560 s at load 29)

REPO = Path(__file__).resolve().parents[2]
PARITY = str(REPO / "recipes" / "arith_grpo_cpu_parity.yaml")
FAULTS = str(REPO / "recipes" / "_faults" / "arith_grpo_cpu_faults.yaml")
STEPS = 3
REPLICAS = "checks.parity.variants={one: {generation.replicas: 1}, two: {generation.replicas: 2}}"
BALANCE = "performance/generation_replica_max_over_mean"


def verdicts(run_dir: Path) -> dict[str, dict]:
    return {v["name"]: v for v in json.loads((run_dir / "result.json").read_text())["verdicts"]}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_replicas_give_one_replicas_tokens_rewards_and_metrics_bit_for_bit(tmp_path: Path) -> None:
    out = tmp_path / "replicas"
    code = main(["run", PARITY, f"algorithm.num_steps={STEPS}", "algorithm.warm_start.steps=20", REPLICAS,
                 "--no-progress", "--out", str(out)])
    got = verdicts(out)
    for name in ("one:run_completed", "two:run_completed", "parity:metric_set", "parity:metrics",
                 "parity:logprob_digest", "two:invariant:generation_row_order"):
        assert got[name]["ok"], (name, got[name]["message"])
    assert code == 0
    assert "tolerance 0" in got["parity:metrics"]["message"]
    one, two = lines(out / "one" / "metrics.jsonl"), lines(out / "two" / "metrics.jsonl")
    assert [r["train/reward"] for r in one] == [r["train/reward"] for r in two]
    assert [r[BALANCE] for r in one] == [1.0] * STEPS  # one replica: even by definition
    assert all(1.0 <= r[BALANCE] < 1.5 for r in two) and all(r["timing/train/generation"] > 0 for r in two)
    order = [r for r in lines(out / "two" / "invariants.jsonl") if r["check"] == "generation_row_order"]
    # every step: 16 prompts x 4 samples, 8 whole groups on each replica
    assert [(r["step"], r["ok"], r["replicas"], r["replica_rows"]) for r in order] == [
        (step, True, 2, [32, 32]) for step in range(1, STEPS + 1)]
    assert not any(r["check"] == "generation_row_order" for r in lines(out / "one" / "invariants.jsonl"))
    workers = {w["name"] for w in json.loads((out / "two" / "env.json").read_text())["workers"]}
    assert workers == {"policy-0", "policy-1", "generation-0", "generation-1"}


def test_a_restore_that_keeps_replica_order_fails_the_row_order_check(tmp_path: Path) -> None:
    out = tmp_path / "scrambled"
    code = main(["run", FAULTS, "++env.RL_FAULTS=generation_replica_order_kept", "generation.replicas=2",
                 "--no-progress", "--out", str(out)])
    assert code == 1
    row_order = verdicts(out)["invariant:generation_row_order"]
    # 4 groups of 4 rows: replica 0 holds groups 0 and 2, replica 1 groups 1 and 3
    assert not row_order["ok"] and "8 of 16 rows out of place" in row_order["message"], row_order["message"]
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "failed" and "generation_row_order: " in status["error"]
