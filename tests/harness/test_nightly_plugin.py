"""`harness nightly` end to end on a fixture suite of external-engine recipes (no torch, no Ray):
one JUnit case per entry, retries only for infrastructure failures, the summary, the history and
the performance gate."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from harness.history import HistoryRow, append, query

ENGINE = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    run_dir, mode, step_time = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    if mode == "flaky":
        marker = run_dir.parent / ".flaky-failed-once"
        if not marker.exists():
            marker.write_text("1")
            print("OSError: [Errno 98] Address already in use", flush=True)
            sys.exit(1)
    steps = range(1, 5)
    reward = 0.1 if mode == "low" else 0.9
    metrics = {"train/reward": {str(s): reward for s in steps},
               "timing/train/total": {str(s): step_time for s in steps},
               "performance/tokens_per_sec_per_gpu": {str(s): 1000.0 / step_time for s in steps}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    print("done")
""")

RECIPE = textwrap.dedent("""\
    name: fx
    engine:
      command: ["{python}", "ENGINE", "{run_dir}", "good", "1.0"]
      metrics: reference_json
      metrics_path: metrics.json
    model: {family: qwen3_5, tokenizer: arith, config: {hidden_size: 64, num_hidden_layers: 2,
            num_attention_heads: 4, num_key_value_heads: 2}}
    cluster: {nodes: 1, devices_per_node: 1, device: cpu}
    algorithm: {num_steps: 4, prompts_per_step: 4, generations_per_prompt: 2}
    policy: {micro_batch_size: 8}
    task: {name: arith}
    checks: {thresholds: thresholds.yaml, invariants: false}
    limits: {timeout_s: 60}
""")

THRESHOLDS = textwrap.dedent("""\
    recipe: fx
    checks:
      - name: reward_reached
        expr: "max(train/reward) > 0.5"
        why: the fixture's bound
        since: 2026-11-30
""")


def command(mode: str, step_time: float = 1.0) -> str:
    return f"engine.command=['{{python}}', 'ENGINE', '{{run_dir}}', '{mode}', '{step_time}']"


@pytest.fixture()
def fixture_suite(tmp_path):
    """Writes the engine, recipe, thresholds and returns a function that writes a suite."""
    engine = tmp_path / "engine.py"
    engine.write_text(ENGINE)
    (tmp_path / "fx.yaml").write_text(RECIPE.replace("ENGINE", str(engine)))
    (tmp_path / "thresholds.yaml").write_text(THRESHOLDS)
    (tmp_path / "suites").mkdir()

    def write(name: str, entries: list[dict], gate: str = "{mode: warn}") -> Path:
        lines = [f"name: {name}", "hardware: cpu", "budget_gpu_hours: 0", f"gate: {gate}", "entries:"]
        for e in entries:
            lines.append(f"  - {json.dumps({'recipe': '../fx.yaml', **e}).replace('ENGINE', str(engine))}")
        path = tmp_path / "suites" / f"{name}.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path

    return write


def cases(junit: Path) -> dict[str, str]:
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        result[case.get("name")] = kinds[0] if kinds else "passed"
    return result


def test_nightly_runs_each_entry_once_and_retries_only_infrastructure(tmp_path, fixture_suite, capsys):
    suite = fixture_suite("mixed", [
        {"id": "good"},
        {"id": "low", "overrides": [command("low")]},
        {"id": "flaky", "overrides": [command("flaky")]},
        {"id": "parked", "disabled": {"reason": "runner 3 is down", "owner": "ops", "until": "2027-01-15"}},
    ])
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    code = main(["nightly", str(suite), "--out", str(out), "--history", str(db)])
    assert code == 1
    assert cases(out / "junit.xml") == {"good": "passed", "low": "failure", "flaky": "passed", "parked": "skipped"}
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["flaky", "flaky.retry1", "good", "low",
                                                                   "outcomes", "plots"]
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Nightly `mixed`: FAIL")
    assert "2 passed, 1 failed, 1 disabled" in summary
    assert "`flaky` attempt 1 ([run dir](flaky)) failed with infrastructure signature `port_in_use`" in summary
    assert "retried. Matched line: `OSError: [Errno 98] Address already in use`" in summary
    assert "- `low`: harness exit 1, state completed; failed: `reward_reached` ([report.md](low/report.md)" in summary
    assert "| parked | 2027-01-15 | ops | runner 3 is down |" in summary
    assert (out / "plots" / "wall_time.png").stat().st_size > 0 and (out / "plots" / "train_reward.png").exists()
    data = json.loads((out / "summary.json").read_text())
    assert data["counts"] == {"passed": 2, "failed": 1, "error": 0, "disabled": 1, "not run": 0}
    rows = {r.entry: r for r in query(db)}
    assert set(rows) == {"good", "low", "flaky"}
    assert rows["flaky"].attempts == 2 and rows["flaky"].verdict == "pass"
    assert rows["low"].verdicts == {"reward_reached": False, "run_completed": True}
    assert rows["good"].step_time_s == 1.0 and rows["good"].tokens_per_s == 1000.0
    assert rows["good"].final_reward == 0.9 and rows["good"].hardware == "cpu" and rows["good"].suite == "mixed"


def test_planted_step_time_regression_fails_a_gated_entry(tmp_path, fixture_suite, capsys):
    db = tmp_path / "history.sqlite"
    for i, step_time in enumerate([1.00, 1.02, 0.99, 1.01, 0.98, 1.00]):
        append(db, HistoryRow(time=f"t{i}", suite="perf", entry="fast", recipe="fx", recipe_path="fx.yaml",
                              commit_sha=None, hardware="cpu", verdict="pass", step_time_s=step_time,
                              tokens_per_s=1000.0 / step_time))
        append(db, HistoryRow(time=f"t{i}", suite="perf", entry="steady", recipe="fx", recipe_path="fx.yaml",
                              commit_sha=None, hardware="cpu", verdict="pass", step_time_s=step_time,
                              tokens_per_s=1000.0 / step_time))
    suite = fixture_suite("perf", [{"id": "fast", "overrides": [command("good", 1.5)]},
                                   {"id": "steady", "overrides": [command("good", 1.01)]}],
                          gate="{mode: fail, min_runs: 5}")
    out = tmp_path / "out"
    assert main(["nightly", str(suite), "--out", str(out), "--history", str(db), "-n", "2"]) == 1
    assert cases(out / "junit.xml") == {"fast": "failure", "steady": "passed"}
    junit = (out / "junit.xml").read_text()
    assert "performance gate (fail): step_time_s = 1.5 is outside the noise band" in junit
    summary = (out / "summary.md").read_text()
    assert "| fast | step_time_s | 1.5 |" in summary and "| regression |" in summary
    assert "| steady | step_time_s | 1.01 |" in summary
    assert len(query(db, entry="fast")) == 7  # the regressed run is recorded too


def test_an_invalid_suite_runs_nothing(tmp_path, fixture_suite, capsys):
    suite = fixture_suite("old", [{"id": "p", "disabled": {"reason": "r", "owner": "o", "until": "2020-01-01"}}])
    assert main(["nightly", str(suite), "--out", str(tmp_path / "out"), "--no-history"]) == 2
    assert "entry p: disabled.until = 2020-01-01 has expired" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_selection_and_a_used_out_dir(tmp_path, fixture_suite, capsys):
    suite = fixture_suite("sel", [{"id": "a", "tags": ["smoke"]}, {"id": "b"}])
    out = tmp_path / "out"
    assert main(["nightly", str(suite), "--out", str(out), "--no-history", "--tag", "smoke"]) == 0
    assert cases(out / "junit.xml") == {"a": "passed"}
    assert "1 passed" in (out / "summary.md").read_text()
    assert main(["nightly", str(suite), "--out", str(out), "--no-history"]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
