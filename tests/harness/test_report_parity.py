"""A parity run's top-level report (issue 35): its steps are each variant's (it said `steps ?/?`),
and each plot draws every variant as its own curve, named with the data path it ran on."""

from __future__ import annotations

import json
from pathlib import Path

from harness.commands.check import write_outputs
from harness.launch import LaunchResult
from harness.report.markdown import steps_cell, variant_label
from harness.report.plots import metric_figure

REPO = Path(__file__).resolve().parents[2]


def fake_engine(recipe, run_dir, **kwargs):
    """What a finished variant leaves: its metrics, invariants and status.json (3 steps of 3)."""
    backend = recipe["data_plane"]["backend"]
    with (run_dir / "metrics.jsonl").open("w") as f:
        for s in (1, 2, 3):
            f.write(json.dumps({"step": s, "train/loss": 1.0 / s, "train/grad_norm": 1.0, "train/gen_kl_error": 1e-9,
                                "train/reward": 0.1 * s + (0.05 if backend == "tq" else 0.0)}) + "\n")
    (run_dir / "invariants.jsonl").write_text(json.dumps({"check": "flops_fields", "ok": True, "step": 1}) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"state": "completed", "exit_code": 0, "last_step": 3,
                                                     "num_steps": 3, "wall_s": 1.0}))
    return LaunchResult(state="completed", exit_code=0, wall_s=1.0, last_step=3, error=None)


def parity_report(tmp_path, monkeypatch):
    import harness.commands.run as run_command
    import harness.report.markdown as markdown
    from harness.recipe import load_recipe

    drawn = []
    monkeypatch.setattr(run_command, "launch_engine", fake_engine)
    top = tmp_path / "plots"  # the top-level plots, not each variant's
    monkeypatch.setattr(markdown, "draw_metric", lambda path, **kw: drawn.append(kw) if path.parent == top else None)
    recipe = load_recipe(REPO / "recipes" / "arith_grpo_cpu_parity.yaml", ["algorithm.num_steps=3"]).data
    judgement, _ = run_command.run_parity(recipe, tmp_path, {}, progress=False)
    write_outputs(tmp_path, judgement, name=recipe["name"], plan={})
    return (tmp_path / "report.md").read_text(), json.loads((tmp_path / "status.json").read_text()), drawn


def test_the_report_gives_each_variants_steps(tmp_path, monkeypatch):
    report, status, _ = parity_report(tmp_path, monkeypatch)
    assert status["variant_steps"] == {"legacy": {"last_step": 3, "num_steps": 3},
                                       "tq": {"last_step": 3, "num_steps": 3}}
    assert "| steps | legacy 3/3, tq 3/3 |" in report and "?/?" not in report
    assert "Of the first variant, legacy; each variant's own report: [legacy](legacy/report.md), [tq](tq/report.md)." \
        in report


def test_each_plot_draws_every_variant_named_by_its_data_path(tmp_path, monkeypatch):
    _, _, drawn = parity_report(tmp_path, monkeypatch)
    kl = next(kw for kw in drawn if kw["name"] == "train/gen_kl_error")
    assert kl["title"] == "arith_grpo_cpu_parity: train/gen_kl_error (legacy vs tq)"
    assert [label for label, _ in kl["curves"]] == ["legacy (data_plane.backend=legacy)", "tq (data_plane.backend=tq)"]
    assert all(len(points) == 3 for _, points in kl["curves"])
    assert drawn and all(kw["title"].endswith("(legacy vs tq)") for kw in drawn)


def test_a_variant_that_did_not_run_is_said_so():
    assert steps_cell({"variant_steps": {"legacy": {"last_step": 7, "num_steps": 20}, "tq": None}}) == \
        "legacy 7/20, tq not run"
    assert steps_cell({"last_step": 5, "num_steps": 9}) == "5/9"
    assert variant_label({"checks": {}}, "legacy") == "legacy"


def test_the_figure_has_a_legend_entry_per_variant_and_keeps_dashes_for_thresholds():
    curves = [("legacy (data_plane.backend=legacy)", {1: 0.1, 2: 0.2}),
              ("tq (data_plane.backend=tq)", {1: 0.1, 2: 0.2})]
    fig = metric_figure(name="train/reward", thresholds=[(0.15, "reward_final: 0.15")], title="t", curves=curves)
    (ax,) = fig.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [label for label, _ in curves] + ["reward_final: 0.15"]
    assert [line.get_linestyle() for line in ax.get_lines()] == ["-", ":", "--"]
