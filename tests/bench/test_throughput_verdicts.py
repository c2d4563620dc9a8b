"""bench/throughput.py's acceptance rows: ratios and verdicts from the runs' JSON lines, and a
missing run or figure never reads as a pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"
SPEC = importlib.util.spec_from_file_location("throughput", SCRIPT)
throughput = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(throughput)

# The MFU figures below were recorded against the measured 790 TFLOP/s; rl.metrics.mfu's named H200
# peak, which bench/megatron_gpu.py now divides by, is 989.5.
ON_NAMED_PEAK = 790 / 989.5

# One H200, 2026-12-01 at f1341d2 (bench/results/train.jsonl): the anchor at micro-batch 4, our all
# attention and hybrid at micro-batch 16.
MBS16 = {"anchor": {"tokens_per_s": 64844, "mfu": 0.4321 * ON_NAMED_PEAK},
          "dense": {"tokens_per_s": 69596, "mfu": 0.4638 * ON_NAMED_PEAK, "logprobs_tokens_per_s": 176082},
          "hybrid": {"tokens_per_s": 66236, "mfu": 0.4319 * ON_NAMED_PEAK, "logprobs_tokens_per_s": 224645}}


def by_row(results: dict) -> dict[str, dict]:
    return {row["row"]: row for row in throughput.verdicts(results)}


def test_the_micro_batch_16_runs_pass_the_one_gpu_rows_and_has_no_figure_for_the_two_gpu_ones() -> None:
    rows = by_row(MBS16)
    assert rows["dense_1b, 1 GPU"]["ratio"] == 1.073 and rows["dense_1b, 1 GPU"]["ok"] is True
    assert rows["hybrid layout, 1 GPU"]["ratio"] == 0.952 and rows["hybrid layout, 1 GPU"]["ok"] is True
    assert rows["dense_1b, DP2"]["ok"] is None and rows["moe_1b, EP2"]["ok"] is None
    assert "no figure" in throughput.table(MBS16, list(rows.values()))


def test_each_target_fails_below_its_bound() -> None:
    slow = {"anchor": {"tokens_per_s": 64844}, "dense": {"tokens_per_s": 66510, "mfu": 0.4432 * ON_NAMED_PEAK},
            "hybrid": {"tokens_per_s": 37759, "mfu": 0.2462 * ON_NAMED_PEAK},
            "dense_dp2": {"tokens_per_s": 120000, "mfu": 0.4 * ON_NAMED_PEAK},
            "moe_ep2": {"tokens_per_s": 76787, "mfu": 0.072 * ON_NAMED_PEAK}}
    rows = by_row(slow)
    assert rows["dense_1b, 1 GPU"]["ok"] is False  # 1.026x the anchor, but MFU 35.4% < 36%
    assert rows["hybrid layout, 1 GPU"]["ok"] is False  # 0.568x
    assert rows["dense_1b, DP2"]["ratio"] == 1.804 and rows["dense_1b, DP2"]["ok"] is False
    assert rows["moe_1b, EP2"]["ok"] is False


def test_a_failed_run_is_no_figure_not_a_pass() -> None:
    rows = by_row({"anchor": {}, "dense": {"tokens_per_s": 69596, "mfu": 0.46}, "hybrid": {"tokens_per_s": "nan"}})
    assert rows["dense_1b, 1 GPU"]["ok"] is None
    assert rows["hybrid layout, 1 GPU"]["ok"] is None


def test_the_runs_this_machine_can_hold() -> None:
    assert set(throughput.runs(1, 16)) == {"dense", "hybrid"}
    assert set(throughput.runs(2, 16)) == {"dense", "hybrid", "dense_dp2", "moe_ep2"}
    assert throughput.last_json("warning\n{\"a\": 1}\nnoise\n{\"b\": 2}\n") == {"b": 2}


def test_a_run_without_a_figure_says_why_and_leaves_its_log(tmp_path: Path) -> None:
    import sys

    said = [sys.executable, "-c", "import sys; print('{\"tokens_per_s\": 5}'); sys.exit(0)"]
    assert throughput.run_one(said, 30, tmp_path / "ok.log") == ({"tokens_per_s": 5}, None)
    died = [sys.executable, "-c", "import sys; print('{\"tokens_per_s\": 5}'); sys.exit('CUDA out of memory')"]
    assert throughput.run_one(died, 30, tmp_path / "died.log") == ({}, "exit 1: CUDA out of memory")
    assert "CUDA out of memory" in (tmp_path / "died.log").read_text()
    slow = [sys.executable, "-c", "import time; print('compiling', flush=True); time.sleep(60)"]
    assert throughput.run_one(slow, 1, None) == ({}, "over its 1 s: compiling")
