"""report.md and its plots: header, tables, embedded PNGs that are real PNGs."""

from __future__ import annotations

import struct

import pytest

from harness.checks.verdict import Verdict
from harness.report import PlotSpec, plot_metric, write_report_md
from harness.report.markdown import cell

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RECIPE = {"name": "arith_grpo_cpu", "description": "tiny GRPO",
          "cluster": {"nodes": 1, "devices_per_node": 2, "device": "cpu"}}
STATUS = {"state": "completed", "wall_s": 83.21, "last_step": 20, "num_steps": 20, "error": None}
PLAN = {"world_size": 2, "policy": {"dp": 2, "tp": 1}, "gpu_hours": 0.0}
METRICS = {
    "train/reward": {s: s / 20 for s in range(1, 21)},
    "train/loss": {s: 1.0 / s for s in range(1, 21)},
    "perf/tokens_per_s": {20: 1234.5},
}
VERDICTS = [
    Verdict(name="reward_rises", kind="threshold", ok=True, message="mean 0.9 >= 0.5", value=0.9,
            metrics=("train/reward",), why="GRPO must learn arithmetic"),
    Verdict(name="loss | bounded", kind="threshold", ok=False, message="max 1.0 >\n0.5", value=1.0,
            metrics=("train/loss",)),
    Verdict(name="completed", kind="completion", ok=True, message="20/20 steps"),
    Verdict(name="kl_small", kind="threshold", ok=True, message="no data", metrics=("train/kl",)),
]  # fmt: skip
SPECS = [PlotSpec(metric="train/reward", threshold=0.5, label="mean(last 5) >= 0.5")]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    path = write_report_md(run_dir, recipe=RECIPE, plan=PLAN, status=STATUS, verdicts=VERDICTS, metrics=METRICS,
                           thresholds=SPECS)
    return run_dir, path.read_text().splitlines()


def section(lines, title):
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start + 1 : end] if line.startswith("|")]


def test_header(report):
    _, lines = report
    assert lines[0] == "# arith_grpo_cpu: FAIL"
    header = lines[2 : lines.index("## Checks")]
    assert "| state | completed |" in header
    assert "| verdict | **FAIL** (1 of 4 checks failed: loss \\| bounded) |" in header
    assert "| wall time | 83.2 s (1:23) |" in header
    assert "| steps | 20/20 |" in header and "| cluster | 1 x 2 cpu |" in header


def test_checks_table(report):
    rows = section(report[1], "Checks")
    assert rows[0] == "| name | kind | ok | value | message | why |"
    assert rows[2] == "| reward_rises | threshold | PASS | 0.9 | mean 0.9 >= 0.5 | GRPO must learn arithmetic |"
    assert rows[3] == "| loss \\| bounded | threshold | FAIL | 1 | max 1.0 ><br>0.5 |  |"
    assert len(rows) == 2 + len(VERDICTS)


def test_plan_and_final_metrics_tables(report):
    _, lines = report
    assert section(lines, "Plan")[2:] == [
        "| world_size | 2 |", "| policy.dp | 2 |", "| policy.tp | 1 |", "| gpu_hours | 0 |"]
    metrics = section(lines, "Final metrics")
    assert metrics[2] == "| train/reward | 20 | 1 | 0.05 | 1 |"  # checked metrics first
    assert metrics[3] == "| train/loss | 20 | 0.05 | 0.05 | 1 |"
    assert metrics[4] == "| perf/tokens_per_s | 20 | 1234.5 | 1234.5 | 1234.5 |"


def test_plots_are_embedded_relative_and_valid(report):
    run_dir, lines = report
    assert "![train/reward](plots/train_reward.png)" in lines
    assert "![train/loss](plots/train_loss.png)" in lines
    assert "- `train/kl`: no data recorded, nothing to plot" in lines
    assert sorted(p.name for p in (run_dir / "plots").iterdir()) == ["train_loss.png", "train_reward.png"]
    assert png_size(run_dir / "plots" / "train_reward.png") == (640, 360)


def test_threshold_line_changes_the_picture(tmp_path):
    series = {s: float(s) for s in range(1, 11)}
    bare = plot_metric(tmp_path / "a.png", name="m", series=series, threshold=None, title="m")
    lined = plot_metric(tmp_path / "b.png", name="m", series=series, threshold=5.0, title="m")
    assert png_size(bare) == png_size(lined) and bare.read_bytes() != lined.read_bytes()
    with pytest.raises(ValueError, match="series"):
        plot_metric(tmp_path / "c.png", name="m", series={}, threshold=None, title="m")


def test_empty_run_report(tmp_path):
    lines = write_report_md(tmp_path, recipe={"name": "x"}, plan=None, status={}, verdicts=[], metrics={}).read_text()
    assert lines.startswith("# x: FAIL")
    for needle in ("**FAIL** (no check produced a verdict)", "No checks ran.", "No plan recorded.",
                   "No metrics recorded.", "No checked metric to plot.", "| wall time | unknown |"):  # fmt: skip
        assert needle in lines


def test_cell_formatting():
    assert [cell(v) for v in (None, True, 0.123456789, float("nan"), "a|b\nc", [1, 2])] == [
        "", "yes", "0.123457", "nan", "a\\|b<br>c", "[1, 2]"
    ]  # fmt: skip


def test_report_shows_the_step_phases_leaving_out_step_one(tmp_path):
    from harness.report.phases import phase_rows

    metrics = {"timing/train/total": {1: 60.0, 2: 10.0, 3: 12.0, 4: 10.0},
               "timing/train/generation": {1: 50.0, 2: 6.0, 3: 7.0, 4: 6.0},
               "timing/train/training": {1: 10.0, 2: 4.0, 3: 5.0, 4: 4.0},
               "train/loss": {1: 0.1, 2: 0.1, 3: 0.1, 4: 0.1}}
    assert phase_rows(metrics) == [["generation", 6.0, "60.0%"], ["training", 4.0, "40.0%"],
                                   ["total", 10.0, "100.0%"]]
    assert phase_rows({"train/loss": {1: 0.1}}) == []
    path = write_report_md(tmp_path, recipe={"name": "r"}, plan=None, status={}, verdicts=[], metrics=metrics)
    text = path.read_text()
    assert "## Step phases" in text and "| generation | 6 | 60.0% |" in text


def test_report_gives_the_traced_steps_gpu_busy_fraction(tmp_path):
    from harness.report.phases import gpu_busy_line

    metrics = {"timing/train/total": {1: 60.0, 2: 10.0, 3: 12.0, 4: 10.0},
               "timing/train/training": {1: 10.0, 2: 4.0, 3: 5.0, 4: 4.0},
               "performance/gpu_busy_fraction": {3: 0.95, 4: 0.93},
               "performance/gpu_busy_fraction/training": {3: 0.9, 4: 0.88},
               "performance/gpu_busy_fraction/generation": {3: 0.99, 4: 0.99}}
    line = ("GPU busy 94.0% of the wall time of steps 3-4 (kernels traced, `profile.kernel_steps`; generation "
            "99.0%, training 89.0%): host overhead 6.0%.")
    assert gpu_busy_line(metrics) == line
    one = gpu_busy_line({"performance/gpu_busy_fraction": {2: 0.5}})
    assert one.startswith("GPU busy 50.0% of the wall time of step 2 ")
    assert gpu_busy_line({"timing/train/total": {1: 1.0}}) is None
    path = write_report_md(tmp_path, recipe={"name": "r"}, plan=None, status={}, verdicts=[], metrics=metrics)
    text = path.read_text()
    assert line in text.split("## Step phases")[1]
