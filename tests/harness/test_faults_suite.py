"""The fault matrix end to end: `harness nightly faults` on two of its entries, the real engine.

A worker SIGKILLed mid-step (the engine names it and exits 3) and an engine killed while
writing a metrics line, then resumed (the torn line is cut, steps 1-4 once each). Both must
get their expected verdict, lose no metrics step and leave no process behind.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=250)]  # the file: 164 s alone on 2 cores


def test_two_faults_get_their_verdicts_with_no_data_lost(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    out = tmp_path / "out"
    code = main(["nightly", "faults", "--entry", "worker-sigkill", "--entry", "torn-line-resume",
                 "-n", "2", "--out", str(out), "--no-history"])
    summary = (out / "summary.md").read_text()
    assert code == 0, summary
    assert "Faults tried: **2**; verdicts right: **2 of 2**; data lost: **none**" in summary
    assert "leftover processes: **0**" in summary
    kill = json.loads((out / "worker-sigkill" / "status.json").read_text())
    assert kill["dead_worker"] == "policy-1" and kill["exit_code"] == 3
    torn = out / "torn-line-resume"
    steps = [json.loads(line)["step"] for line in (torn / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert "--resume" in (torn / "engine.log").read_text()
