"""`harness run` of the parity recipe on the real engine, real Ray and real TransferQueue.

The second test plants the reference's reorder bug (rows restored with the permutation instead
of its inverse) and shows that both the invariant and the parity checks catch it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=276)]  # the file, measured on 2 shared cores

REPO = Path(__file__).resolve().parents[2]
PARITY = str(REPO / "recipes" / "arith_grpo_cpu_parity.yaml")
SHORT = ["algorithm.num_steps=3", "--no-progress"]


def verdicts(run_dir: Path) -> dict[str, dict]:
    return {v["name"]: v for v in json.loads((run_dir / "result.json").read_text())["verdicts"]}


def test_parity_recipe_passes_with_legacy_and_tq_bitwise_equal(tmp_path):
    out = tmp_path / "parity"
    assert main(["run", PARITY, *SHORT, "--out", str(out)]) == 0
    got = verdicts(out)
    assert got["parity:metrics"]["ok"] and "tolerance 0" in got["parity:metrics"]["message"]
    assert got["parity:logprob_digest"]["ok"]
    assert got["tq:invariant:dispatch_row_order"]["ok"]
    order = [json.loads(line) for line in (out / "tq" / "invariants.jsonl").read_text().splitlines()]
    order = [r for r in order if r["check"] == "dispatch_row_order"]
    # per step: the policy's log-probs (one receipt, sharded) and train (one per rank); the recipe
    # has no KL term, so no reference pass
    assert len(order) == 3 * 2 and all(r["ok"] for r in order)
    report = (out / "report.md").read_text()
    assert "| steps | legacy 3/3, tq 3/3 |" in report and "(legacy/report.md)" in report  # it said `steps ?/?`


def test_planted_reorder_bug_fails_invariant_and_parity(tmp_path):
    out = tmp_path / "broken"
    code = main(["run", PARITY, *SHORT, "++env.RL_FAULTS=dispatch_inverse_reorder", "env_unsafe_allow=[RL_FAULTS]",
                 "--out", str(out)])
    assert code == 1
    got = verdicts(out)
    assert got["legacy:run_completed"]["ok"]  # the legacy path has no dispatch to break
    row_order = got["tq:invariant:dispatch_row_order"]
    assert not row_order["ok"] and "out of place" in row_order["message"]
    assert not got["parity:metrics"]["ok"] and "first divergence at step 1" in got["parity:metrics"]["message"]
    status = json.loads((out / "tq" / "status.json").read_text())
    assert status["state"] == "failed"
