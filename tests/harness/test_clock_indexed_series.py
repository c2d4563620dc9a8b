"""Series indexed by seconds, not steps (the reference's `ray/...` GPU monitors), never stretch a
run's step span: a run cut at step 3 of 40 fails as cut, a whole run passes."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.metrics import read_metrics
from harness.metrics.series import step_indexed

THRESHOLDS = """\
recipe: monitored
checks:
  - name: reward_final
    expr: "mean(train/reward, -3) > 0.1"
    why: a floor for this test
    since: 2026-12-01
"""


def reference_json(tmp: Path, train_steps: int) -> Path:
    data = {"train/reward": {str(s): 0.5 for s in range(1, train_steps + 1)},
            "ray/node.0.gpu.0.util": {str(t): 0.9 for t in range(0, 3001, 15)}}
    path = tmp / "metrics.json"
    path.write_text(json.dumps(data))
    (tmp / "t.yaml").write_text(THRESHOLDS)
    return path


def test_the_step_span_comes_from_step_indexed_series(tmp_path):
    metrics = read_metrics(reference_json(tmp_path, 3))
    assert not step_indexed("ray/node.0.gpu.0.util") and step_indexed("train/reward")
    assert (metrics.first_step, metrics.last_step) == (1, 3)
    assert set(metrics.logged_steps()) == {1, 2, 3}
    assert max(metrics["ray/node.0.gpu.0.util"]) == 3000  # the monitor series itself is kept


def test_a_run_cut_at_step_3_of_40_fails_as_cut(tmp_path, capsys):
    path = reference_json(tmp_path, 3)
    assert main(["check", str(path), "--steps", "40", "--thresholds", str(tmp_path / "t.yaml"), "--no-report"]) == 1
    assert "run stopped at step 3 of 40" in capsys.readouterr().out


def test_a_whole_run_passes_beside_a_monitor_logged_to_second_3000(tmp_path):
    path = reference_json(tmp_path, 40)
    assert main(["check", str(path), "--steps", "40", "--thresholds", str(tmp_path / "t.yaml"), "--no-report"]) == 0
