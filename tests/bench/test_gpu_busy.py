"""bench/gpu_busy.py: NVML utilization averaged over exactly the timed steps, and fail-closed reading."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("gpu_busy", ROOT / "bench" / "gpu_busy.py")
gpu_busy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_busy)

T0 = 1_800_000_000.0  # a whole second, so the CSV's local-time stamps round-trip exactly


def _run(tmp_path: Path, ends: list[float]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": i + 1, "train/loss": 0.0, gpu_busy.STEP_END: end} for i, end in enumerate(ends)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _csv(tmp_path: Path, points: list[tuple[float, float]]) -> Path:
    lines = []
    for when, util in points:
        whole = int(when)
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(whole)) + f".{round((when - whole) * 1000):03d}"
        lines.append(f"{stamp}, {util:g}")
    path = tmp_path / "util.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_mean_is_over_the_steps_after_the_warm_up_only(tmp_path: Path) -> None:
    run = _run(tmp_path, [T0 + 10, T0 + 12, T0 + 14, T0 + 16])  # warm-up ends at T0 + 12
    points = [(T0 + 10 + i * 0.1, 0.0) for i in range(20)]  # warm-up: idle (compiling)
    points += [(T0 + 12 + i * 0.1, 90.0 if i % 2 else 70.0) for i in range(41)]  # timed: 80% on average
    points += [(T0 + 16.5 + i * 0.1, 0.0) for i in range(10)]  # teardown
    got = gpu_busy.busy(run, _csv(tmp_path, points), warmup=2)
    assert got["samples"] == 41 and got["window_s"] == pytest.approx(4.0)
    assert got["gpu_busy"] == pytest.approx((20 * 90 + 21 * 70) / 41 / 100)
    assert got["host_overhead"] == pytest.approx(1 - got["gpu_busy"])


def test_too_few_samples_bad_lines_and_missing_steps_are_no_figure(tmp_path: Path) -> None:
    run = _run(tmp_path, [T0, T0 + 1, T0 + 2])
    sparse = _csv(tmp_path, [(T0 + 1.5, 50.0)])
    with pytest.raises(gpu_busy.MetricsError, match="1 samples in the timed steps"):
        gpu_busy.busy(run, sparse, warmup=1)
    bad = tmp_path / "bad.csv"
    bad.write_text("2026/12/02 14:00:00.100, 50\nnot a line\n")
    with pytest.raises(gpu_busy.MetricsError, match="bad.csv:2: not"):
        gpu_busy.busy(run, bad, warmup=1)
    with pytest.raises(gpu_busy.MetricsError, match="need more than the 3 warm-up"):
        gpu_busy.busy(run, sparse, warmup=3)
    with pytest.raises(gpu_busy.MetricsError, match="at least 1"):
        gpu_busy.busy(run, sparse, warmup=0)


def test_the_command_line_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, [T0, T0 + 1])
    assert gpu_busy.main([str(run), str(tmp_path / "absent.csv"), "--warmup", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_busy: ") and err.count("\n") == 1


def test_traced_steps_at_the_end_stay_out_of_the_window(tmp_path: Path) -> None:
    run = _run(tmp_path, [T0 + 10, T0 + 12, T0 + 14, T0 + 16])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rows[3][gpu_busy.TRACED] = 0.9  # step 4 traced its kernels: the window ends with step 3
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    points = [(T0 + 12 + i * 0.1, 80.0) for i in range(21)] + [(T0 + 14.05 + i * 0.1, 10.0) for i in range(19)]
    got = gpu_busy.busy(run, _csv(tmp_path, points), warmup=2)
    assert got["window_s"] == pytest.approx(2.0) and got["gpu_busy"] == pytest.approx(0.8)
