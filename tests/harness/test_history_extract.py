"""What history keeps of a parity run: its first (baseline) variant's metrics."""

from __future__ import annotations

import json

from harness.history import key_metrics
from harness.history.extract import metrics_path


def test_parity_run_dir_is_read_through_its_first_variant(tmp_path):
    run = tmp_path / "parity"
    for variant, step_time in (("legacy", 0.5), ("tq", 0.9)):
        (run / variant).mkdir(parents=True)
        lines = [{"step": s, "timing/train/total": step_time, "train/reward": 0.1 * s} for s in (1, 2, 3)]
        (run / variant / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "status.json").write_text(json.dumps({"state": "completed", "wall_s": 12.0,
                                                 "variants": {"legacy": "completed", "tq": "completed"}}))
    assert metrics_path(run) == run / "legacy" / "metrics.jsonl"
    numbers = key_metrics(run)
    assert numbers.step_time_s == 0.5 and numbers.final_reward == 0.30000000000000004 and numbers.wall_s == 12.0


def test_a_run_dir_without_metrics_has_none(tmp_path):
    assert metrics_path(tmp_path) is None
    assert key_metrics(tmp_path).step_time_s is None
