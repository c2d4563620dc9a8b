"""The progress line: its text, in-place on a TTY, throttled in a log."""

from __future__ import annotations

import io
from pathlib import Path

from harness.launch.phase_tail import PhaseTail
from harness.launch.progress import ProgressBar, format_duration, format_progress

REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_format_duration():
    assert [format_duration(s) for s in (0, 7.4, 754, 10929, -3)] == ["0:00", "0:07", "12:34", "3:02:09", "0:00"]


def test_format_progress_fields():
    line = format_progress(step=5, total=20, metric=("reward", 0.3125), elapsed_s=12, eta_s=36, width=10)
    assert line == "step 5/20 [##--------]  25% | reward 0.3125 | elapsed 0:12 | ETA 0:36"
    assert format_progress(step=0, total=0, metric=None, elapsed_s=0, eta_s=None) == \
        "step 0/0 [--------------------]   0% | elapsed 0:00 | ETA ?"  # nothing logged yet: no placeholder
    assert "ETA ?" in format_progress(step=0, total=3, metric=None, elapsed_s=0, eta_s=None)
    assert "[##########] 100%" in format_progress(step=30, total=20, metric=None, elapsed_s=0, eta_s=0, width=10)


def test_eta_uses_the_pace_since_the_first_step_seen():
    clock = Clock()
    bar = ProgressBar(total_steps=10, stream=io.StringIO(), is_tty=False, clock=clock)
    clock.now += 50  # startup
    assert bar.eta(1, clock.now) is None  # one point: no pace yet (its time holds the start-up's)
    clock.now += 20
    assert bar.eta(3, clock.now) == 7 * 10  # 2 steps in 20 s


def test_tty_rewrites_one_line_and_ends_it():
    out = io.StringIO()
    bar = ProgressBar(total_steps=4, stream=out, is_tty=True, clock=Clock())
    for step in range(1, 5):
        bar.update(step=step, metric=("reward", 0.5))
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1 and text.endswith("\n")
    assert "step 4/4" in text


def test_non_tty_prints_at_most_every_interval_and_the_final_state():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar(total_steps=100, stream=out, is_tty=False, interval_s=10, clock=clock)
    for step in range(1, 101):
        clock.now += 0.5
        bar.update(step=step, metric=None)
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert 5 <= len(lines) <= 7  # 50 s of updates: one line per 10 s, plus the final one
    assert lines[0].startswith("step 1/100") and lines[-1].startswith("step 100/100")


def test_before_the_first_step_the_line_names_the_engines_start_up_phase():
    line = format_progress(step=0, total=40, metric=None, elapsed_s=65, eta_s=None, phase="warm start", phase_s=41)
    assert line == "starting: warm start 0:41 | elapsed 1:05 | ETA ?"
    line = format_progress(step=1, total=40, metric=("reward", 0.5), elapsed_s=65, eta_s=None, phase="x")
    assert line.startswith("step 1/40")


def test_the_phase_tail_keeps_the_newest_complete_phase_line(tmp_path):
    log, clock = tmp_path / "engine.log", Clock()
    tail = PhaseTail(log, clock=clock)
    assert tail.poll() is None  # no log yet
    log.write_bytes(b"[harness] launching\nrl.run: phase: starting Ray\nnoise\nrl.run: phase: warm st")
    assert tail.poll() == "starting Ray" and tail.since == 100.0
    clock.now = 130.0
    with log.open("ab") as f:
        f.write(b"art (up to 120 steps)\n\x1b[36m(PolicyWorker pid=1)\x1b[0m rl.run: phase: not ours? it is\n")
    assert tail.poll() == "not ours? it is"  # a phase line anywhere on a line counts; the newest wins
    assert tail.since == 130.0
    log.write_bytes(b"rl.run: phase: " + b"x" * 70 + b"\n")  # rewritten (shorter: read anew), a long name cut
    assert tail.poll() == "x" * 60


def test_a_labelled_line_says_which_run_it_is():
    line = format_progress(step=5, total=20, metric=None, elapsed_s=12, eta_s=None, width=10, label="tq (2 of 2)")
    assert line == "tq (2 of 2): step 5/20 [##--------]  25% | elapsed 0:12 | ETA ?"
    out = io.StringIO()
    bar = ProgressBar(total_steps=4, stream=out, is_tty=False, clock=Clock(), label="legacy (1 of 2)")
    bar.update(step=0, metric=None, phase="starting Ray")
    bar.close()
    assert out.getvalue().startswith("legacy (1 of 2): starting: starting Ray")


def test_each_parity_variant_gets_its_own_label(tmp_path, monkeypatch):
    import harness.commands.run as run_command
    from harness.launch import LaunchResult
    from harness.recipe import load_recipe

    labels = []

    def fake_launch(recipe, run_dir, **kwargs):
        labels.append(kwargs["label"])
        return LaunchResult(state="completed", exit_code=0, wall_s=0.1, last_step=0, error=None)

    monkeypatch.setattr(run_command, "launch_engine", fake_launch)
    recipe = load_recipe(REPO / "recipes" / "arith_grpo_cpu_parity.yaml", [], scale=None).data
    run_command.run_parity(recipe, tmp_path, {}, progress=True)
    names = list(recipe["checks"]["parity"]["variants"])
    assert labels == [f"{names[0]} (1 of 2)", f"{names[1]} (2 of 2)"]


def test_a_distillation_run_shows_its_kl_loss_not_a_reward_it_has_none(tmp_path):
    """Issue 35: distillation's progress read "reward -" throughout."""
    import json

    from harness.launch.tail import MetricsTail

    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "train/loss": 2.5, "train/kl_loss": 0.4242, "train/accuracy": 0.1}) + "\n")
    tail = MetricsTail(path)
    tail.poll()
    assert tail.headline == ("kl_loss", 0.4242)
    out = io.StringIO()
    bar = ProgressBar(total_steps=8, stream=out, is_tty=False, clock=Clock())
    bar.update(step=tail.last_step, metric=tail.headline)
    bar.close()
    assert out.getvalue() == "step 1/8 [##------------------]  12% | kl_loss 0.4242 | elapsed 0:00 | ETA ?\n"


def test_the_headline_is_the_reward_when_there_is_one_then_the_loss(tmp_path):
    import json

    from harness.launch.tail import MetricsTail

    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "train/loss": 0.1, "train/kl_loss": 0.2, "train/reward": 0.75}) + "\n"
                    + json.dumps({"step": 2, "train/loss": 0.3}) + "\n")
    grpo, other = MetricsTail(path), MetricsTail(tmp_path / "none.jsonl")
    grpo.poll()
    assert grpo.headline == ("reward", 0.75)  # the latest value of each key: step 2 logged only a loss
    assert other.headline is None
    path.write_text(json.dumps({"step": 1, "train/loss": 0.3, "train/reward": True}) + "\n")
    loss_only = MetricsTail(path)
    loss_only.poll()
    assert loss_only.headline == ("loss", 0.3)  # a bool is no value to show
