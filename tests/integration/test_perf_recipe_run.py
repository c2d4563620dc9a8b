"""The performance recipe's tiny twin, run by our engine and by TRL's GRPOTrainer through the
harness (the same recipe, two engines), each passing its checks; then the ratio bench on both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=110)]  # the file: 53 s alone on 2 cores, x2 in CI

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("train/loss", "train/reward", "train/mean_response_length", "total_flops", "theoretical_tflops",
          "performance/tokens_per_sec_per_gpu", "performance/mfu", "timing/train/total",
          *(f"timing/train/{p}" for p in ("generation", "old_logprobs", "ref_logprobs", "training", "refit",
                                          "data_plane", "other")))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for engine, recipe in (("ours", "perf_grpo_dense_1b.yaml"), ("trl", "perf_grpo_dense_1b_trl.yaml")):
        run_dir = tmp_path_factory.mktemp("perf") / engine
        code = main(["run", str(ROOT / "recipes" / recipe), "--scale", "tiny", "--out", str(run_dir), "--no-progress"])
        assert code == 0, (run_dir / "engine.log").read_text()[-4000:]
        out[engine] = run_dir
    return out


@pytest.mark.parametrize("engine", ["ours", "trl"])
def test_each_engine_writes_the_same_per_step_fields(runs: dict[str, Path], engine: str) -> None:
    rows = [json.loads(line) for line in (runs[engine] / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for field in FIELDS:
        assert all(field in r for r in rows), field
    assert all(r["train/mean_response_length"] == 16 for r in rows)  # generation.ignore_eos in both
    status = json.loads((runs[engine] / "status.json").read_text())
    assert status["state"] == "completed" and status["last_step"] == 3
    assert not (runs[engine] / "checkpoints").exists()  # checkpoint.at_end: false, a throughput run
    assert "## Step phases" in (runs[engine] / "report.md").read_text()
    # algorithm.loss.prev_logprobs: training (TRL's way too): no log-prob pass before training
    assert all(r["timing/train/old_logprobs"] == 0.0 for r in rows)


def test_the_ratio_bench_reads_both_runs(runs: dict[str, Path]) -> None:
    result = subprocess.run([sys.executable, "bench/e2e_ratio.py", str(runs["ours"]), str(runs["trl"]),
                             "--warmup", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tokens/s/GPU  ours ") and "| generation |" in result.stdout
