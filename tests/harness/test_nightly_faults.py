"""Fault entries of a suite: the `expect`/`signal`/`resume` keys, verdict matching, lost data,
leftover processes and the reliability table. A few lines of Python stand in for `harness run`,
so these stay fast; tests/harness/test_faults_suite.py runs real faults end to end."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.nightly.faults import StepWatch, data_problems, metric_steps, verdict_problems
from harness.nightly.runner import run_entry
from harness.nightly.summary import reliability
from harness.suites import Entry, Expect, SignalAt, SuiteError, load_suite

HEAD = "name: fx\nhardware: cpu\nbudget_gpu_hours: 0\nentries:\n"


def _suite(tmp_path: Path, entry: str) -> Path:
    (tmp_path / "suites").mkdir(exist_ok=True)
    path = tmp_path / "suites" / "fx.yaml"
    path.write_text(HEAD + textwrap.indent(entry, "  "))
    return path


def test_expect_signal_and_resume_are_read_strictly(tmp_path):
    suite = load_suite(_suite(tmp_path, textwrap.dedent("""\
        - id: kill
          recipe: ../r.yaml
          signal: {name: SIGTERM, at_step: 2}
          resume: true
          expect: {exit: 1, state: failed, engine_exit: 3, dead_worker: policy-1, failed_checks: [run_completed],
                   error_contains: died}
        - id: plain
          recipe: ../r.yaml
        """)))
    kill, plain = suite.entries
    assert kill.expect == Expect(exit=1, state="failed", engine_exit=3, dead_worker="policy-1",
                                 failed_checks=("run_completed",), error_contains="died")
    assert kill.signal == SignalAt(name="SIGTERM", at_step=2) and kill.resume
    assert kill.fault == "SIGTERM at step 2, then --resume"
    assert plain.expect is None and plain.signal is None and not plain.resume


@pytest.mark.parametrize("entry, message", [
    ("expect: {exit: 1, stat: failed}", r"fx.yaml:\d+: entries\[0\].expect.stat: unknown key.*did you mean 'state'"),
    ("expect: {state: failed}", r"entries\[0\].expect: missing required key 'exit'"),
    ("expect: {exit: '1'}", r"entries\[0\].expect.exit: must be an integer"),
    ("expect: {exit: 1, state: done}", r"entries\[0\].expect.state: 'done' is not one of completed"),
    ("signal: {name: SIGKILL, at_step: 2}\nexpect: {exit: 1}", r"entries\[0\].signal.name: 'SIGKILL' is not one of"),
    ("signal: {name: SIGINT, at_step: 0}\nexpect: {exit: 1}", r"entries\[0\].signal.at_step: must be an integer >= 1"),
    ("signal: {name: SIGINT, at_step: 2}", r"entries\[0\]: 'signal' and 'resume' plant a fault: .*'expect'"),
    ("resume: yes\nexpect: {exit: 0}", None),
    ("resume: 1\nexpect: {exit: 0}", r"entries\[0\].resume: must be true or false"),
])
def test_a_bad_fault_entry_names_the_key(tmp_path, entry, message):
    path = _suite(tmp_path, "- id: e\n  recipe: ../r.yaml\n" + textwrap.indent(entry, "  ") + "\n")
    if message is None:
        assert load_suite(path).entries[0].resume is True
        return
    with pytest.raises(SuiteError, match=message):
        load_suite(path)


SEEN = {"exit": 1, "state": "failed", "engine_exit": 3, "dead_worker": "policy-1",
        "failed_checks": ["run_completed"], "error": "worker policy-1 died: RayActorError"}


def test_an_expected_failure_that_happens_is_right_and_anything_else_is_wrong():
    assert verdict_problems(Expect(exit=1, state="failed", engine_exit=3, dead_worker="policy-1",
                                   failed_checks=("run_completed",), error_contains="policy-1 died"), SEEN) == []
    assert verdict_problems(Expect(exit=1), SEEN) == []  # only what is given is compared
    wrong = verdict_problems(Expect(exit=0, failed_checks=(), error_contains="timeout"), SEEN)
    assert wrong == ["exit: expected 0, got 1", "failed_checks: expected [], got ['run_completed']",
                     "error: expected it to contain 'timeout', got 'worker policy-1 died: RayActorError'"]
    assert verdict_problems(Expect(exit=1, failed_checks=("loss_finite",)), {**SEEN, "failed_checks": None})


def test_lost_duplicate_and_torn_steps(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "train/lo')
    assert metric_steps(path) == [1, 2]  # the torn line is not a step yet
    assert data_problems({1, 2}, [1, 2]) == ([], [])
    lost, problems = data_problems({1, 2, 3}, [1, 2])
    assert lost == [3] and "data lost: steps [3]" in problems[0]
    assert "exactly once" in data_problems({1, 2}, [1, 2, 2])[1][0]


FAKE = textwrap.dedent("""\
    import json, os, signal, subprocess, sys, time
    from pathlib import Path
    args = sys.argv[1:]
    out = Path(args[args.index("--out") + 1])
    mode = Path(args[1]).stem
    resume = "--resume" in args
    out.mkdir(parents=True, exist_ok=True)
    metrics = out / "metrics.jsonl"
    def status(state, code, error=None):
        (out / "status.json").write_text(json.dumps({"state": state, "exit_code": code, "error": error,
                                                     "dead_worker": None}))
    def result(failed):
        (out / "result.json").write_text(json.dumps({"verdicts": [{"name": "run_completed", "ok": not failed}]}))
    if mode == "lose" and not resume:
        metrics.write_text('{"step": 1}\\n{"step": 2}\\n')
        deadline = time.monotonic() + 120  # an upper bound: the runner says when it has seen step 2
        while "2" not in ((out / "watched").read_text() if (out / "watched").exists() else ""):
            assert time.monotonic() < deadline; time.sleep(0.05)
        metrics.write_text('{"step": 1}\\n'); status("failed", 1); result(True); sys.exit(1)
    if mode == "lose":
        status("completed", 0); result(False); sys.exit(0)
    if mode == "infra" and not out.name.endswith(".retry1"):
        (out / "engine.log").write_text("Exception: The current node timed out during startup.\\n")
        status("failed", 1); result(True); sys.exit(1)
    if mode == "infra":
        status("completed", 0); result(False); sys.exit(0)
    if mode == "plain":  # fails at once, for a reason of its own (no infrastructure signature)
        (out / "engine.log").write_text("ValueError: a bug of the recipe's own\\n")
        metrics.write_text('{"step": 1}\\n'); status("failed", 1); result(True); sys.exit(1)
    if mode == "leave":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        metrics.write_text('{"step": 1}\\n'); status("completed", 0); result(False); sys.exit(0)
    if mode == "term":
        def stop(*_):
            status("interrupted", 143); result(True); sys.exit(130)
        signal.signal(signal.SIGTERM, stop)
        for step in range(1, 100):
            with metrics.open("a") as f: f.write(json.dumps({"step": step}) + "\\n")
            time.sleep(0.2)
        status("completed", 0); result(False); sys.exit(0)
""")


def _play(tmp_path: Path, mode: str, expect: Expect, **fields) -> dict:
    fake = tmp_path / "fake_harness.py"
    fake.write_text(FAKE)
    entry = Entry(id=mode, recipe=tmp_path / f"{mode}.yaml", hardware="cpu", expect=expect, **fields)
    run = run_entry(entry, out_dir=tmp_path / "out", max_retries=3, timeout_s=60,
                    harness=(sys.executable, str(fake)))
    return run.to_json() | {"verdict": run.verdict}


def test_a_signal_at_a_step_and_the_expected_interruption_pass(tmp_path):
    run = _play(tmp_path, "term", Expect(exit=130, state="interrupted", engine_exit=143,
                                         failed_checks=("run_completed",)), signal=SignalAt(name="SIGTERM", at_step=3))
    assert run["verdict"] == "pass", run["problems"]
    assert 3 <= run["observed"]["steps_seen"] < 99 and run["observed"]["steps_lost"] == []
    assert "sending SIGTERM to harness run" in (tmp_path / "out" / "term" / "harness.log").read_text()


def test_a_line_lost_before_a_resume_fails_even_when_the_verdict_is_right(tmp_path, monkeypatch):
    polled = StepWatch.poll

    def poll_and_tell(watch: StepWatch) -> int:  # the fake cuts its line only once the runner saw it
        top = polled(watch)
        if watch.seen:  # (the run dir exists by then)
            (watch.path.parent / "watched").write_text(" ".join(map(str, sorted(watch.seen))))
        return top

    monkeypatch.setattr(StepWatch, "poll", poll_and_tell)
    run = _play(tmp_path, "lose", Expect(exit=0, state="completed"), resume=True)
    assert run["observed"]["first_exit"] == 1 and run["observed"]["exit"] == 0
    assert run["verdict"] == "fail" and any(p.startswith("data lost: steps [2]") for p in run["problems"])
    row = {"entry": "lose", "outcome": {"run": run}}
    table = "\n".join(reliability([row]))
    assert "Faults tried: **1**; verdicts right: **0 of 1**; data lost: **1 step line(s)**" in table
    assert "| lose | then --resume | exit 0; state completed |" in table


def test_a_process_left_behind_is_named_killed_and_fails_the_entry(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.nightly.faults.LEFTOVER_WAIT_S", 1.0)
    run = _play(tmp_path, "leave", Expect(exit=0))
    assert run["verdict"] == "fail"
    assert "1 process(es) outlived harness run" in run["problems"][-1] and "time.sleep(60)" in run["problems"][-1]
    pid = int(run["observed"]["leftovers"][0].split()[0])
    deadline = time.monotonic() + 10
    while not _dead(pid):
        assert time.monotonic() < deadline, f"leftover {pid} was not killed"
        time.sleep(0.05)


def _dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_a_wrong_verdict_is_retried_only_for_an_infrastructure_failure(tmp_path):
    run = _play(tmp_path, "infra", Expect(exit=0, state="completed"))
    assert [a["infra"] for a in run["attempts"]] == ["ray_node_start", None]
    assert run["verdict"] == "pass" and run["attempts"][0]["retried"]
    (tmp_path / "b").mkdir()
    once = _play(tmp_path / "b", "plain", Expect(exit=0))  # wrong for a reason of its own: one attempt
    assert len(once["attempts"]) == 1 and once["verdict"] == "fail"
