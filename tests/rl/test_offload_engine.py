"""`generation.offload_training` through the real engine: real Ray, two gloo policy ranks.

`harness run` of the CPU parity recipe with the training state resident and with it sent to host
memory around every generation, from the same seed, with a KL term so the reference copy's pass
runs after each reload too: every deterministic metric and the log-prob digest must agree bit
for bit (tolerance 0), and the offloaded run must time its offload and reload each step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=240)]  # the file, 2 shared cores

REPO = Path(__file__).resolve().parents[2]
PARITY = str(REPO / "recipes" / "arith_grpo_cpu_parity.yaml")
STEPS = 3
VARIANTS = ("checks.parity.variants={resident: {generation.offload_training: false}, "
            "offloaded: {generation.offload_training: true}}")


def verdicts(run_dir: Path) -> dict[str, dict]:
    return {v["name"]: v for v in json.loads((run_dir / "result.json").read_text())["verdicts"]}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_offloading_around_generation_gives_the_resident_runs_metrics_bit_for_bit(tmp_path: Path) -> None:
    out = tmp_path / "offload"
    code = main(["run", PARITY, f"algorithm.num_steps={STEPS}", "algorithm.warm_start.steps=20",
                 "algorithm.loss.kl_beta=0.01", VARIANTS, "--no-progress", "--out", str(out)])
    got = verdicts(out)
    for name in ("resident:run_completed", "offloaded:run_completed", "parity:metric_set", "parity:metrics",
                 "parity:logprob_digest"):
        assert got[name]["ok"], (name, got[name]["message"])
    assert code == 0
    assert "tolerance 0" in got["parity:metrics"]["message"]
    resident, offloaded = lines(out / "resident" / "metrics.jsonl"), lines(out / "offloaded" / "metrics.jsonl")
    assert [r["train/ref_kl"] for r in resident] == [r["train/ref_kl"] for r in offloaded]
    assert all(r["timing/train/offload"] > 0 and r["timing/train/reload"] > 0 for r in offloaded)
    assert all(r["timing/train/offload"] == 0 and r["timing/train/reload"] == 0 for r in resident)
    gib = [r["performance/offloaded_gib"] for r in offloaded]
    assert all(g > 0 for g in gib) and gib[1] > gib[0]  # from step 2 on, the grads and AdamW's state travel too
    assert not any("performance/offloaded_gib" in r for r in resident)
