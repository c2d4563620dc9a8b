"""bench/record.py stamps only JSON-object lines; bench/run_summary.py's figures from a run dir, and
a run dir without status.json says so instead of passing for a finished run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record, run_summary = _load("record"), _load("run_summary")
STAMPS = {"date": "2026-12-01 15:00 UTC", "machine": "1 x NVIDIA H200", "commit": "abc1234"}


def test_a_json_object_line_becomes_a_stamped_row_and_other_lines_do_not() -> None:
    row = record.stamp('{"tokens_per_s": 66236, "date": "bench-own"}', command="bash bench/gpu.sh train", stamps=STAMPS)
    assert row == {"date": "bench-own", "machine": "1 x NVIDIA H200", "commit": "abc1234",
                   "command": "bash bench/gpu.sh train", "tokens_per_s": 66236}
    for line in ("rc=0 megatron_gpu.py --model dense_1b", "{not json", "[1, 2]", ""):
        assert record.stamp(line, command="c", stamps=STAMPS) is None


def test_the_commit_comes_from_bench_commit_first(monkeypatch) -> None:
    monkeypatch.setenv("BENCH_COMMIT", "f1341d2")
    assert record.commit() == "f1341d2"
    monkeypatch.setenv("BENCH_MACHINE", "2 x NVIDIA H200")
    assert record.machine() == "2 x NVIDIA H200"


def _run(tmp_path: Path, *, status: bool) -> Path:
    run = tmp_path / "llm-42"
    run.mkdir()
    steps = [{"step": s, "timing/train/total": 9.0 if s == 1 else 2.0 + s / 100, "train/reward": s / 20,
              "performance/peak_memory_gib": 1.0 + s / 100, "timing/train/refit": 0.5 if s == 1 else 0.03}
             for s in range(1, 21)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    if status:
        (run / "status.json").write_text(json.dumps({"state": "completed", "last_step": 20, "num_steps": 20,
                                                     "exit_code": 0, "wall_s": 61.5}))
    (run / "result.json").write_text(json.dumps({"counts": {"total": 8, "passed": 7, "failed": 1},
                                                 "failed": ["reward_final"]}))
    return run


def test_the_summary_skips_the_first_step_and_reads_status_and_checks(tmp_path) -> None:
    out = run_summary.summary(_run(tmp_path, status=True))
    assert out["state"] == "completed" and out["exit_code"] == 0 and out["wall_s"] == 61.5
    assert out["checks"] == "7 of 8" and out["failed_checks"] == ["reward_final"]
    assert out["step_s"] == 2.11 and out["refit_s"] == 0.03 and out["refit_max_s"] == 0.03
    assert out["peak_gib"] == 1.2
    assert out["reward_first10"] == 0.275 and out["reward_last10"] == 0.775
    assert "error" not in out


def test_a_run_without_status_says_so(tmp_path) -> None:
    out = run_summary.summary(_run(tmp_path, status=False))
    assert out["error"] == "no readable status.json" and "state" not in out
