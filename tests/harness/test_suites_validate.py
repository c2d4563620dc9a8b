"""Suite validation: expired disables, over-budget suites, wrong hardware, entries the engine refuses,
and `harness validate`. Tests about dates and budgets leave the engine out (`engine=False`: each
ask is an engine process)."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

from harness.cli import main
from harness.suites import load_suite, validate_suite

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "recipes" / "qwen3_5_35b.yaml"          # 2 x 8 H200, limits.timeout_s 14400: 64 GPU-hours
EXTERNAL = REPO / "tests" / "data" / "external" / "external_grpo.yaml"
TODAY = dt.date(2026, 11, 30)


def suite_file(tmp_path: Path, body: str, name: str = "gpu") -> Path:
    folder = tmp_path / "suites"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(body).replace("QWEN", str(QWEN)).replace("EXTERNAL", str(EXTERNAL)))
    return path


def test_gpu_hours_are_world_times_timeout_or_estimated_hours(tmp_path):
    check = validate_suite(load_suite(suite_file(tmp_path, """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 100
        entries:
          - {id: full, recipe: QWEN}
          - {id: short, recipe: QWEN, overrides: [limits.timeout_s=3600]}
          - {id: guessed, recipe: QWEN, estimated_hours: 0.5}
    """)), today=TODAY, engine=False)
    assert check.ok, check.problems
    est = check.estimates
    assert (est["full"].world, est["full"].gpu_hours, est["full"].source) == (16, 64.0, "limits.timeout_s")
    assert est["short"].gpu_hours == 16.0 and est["short"].hours == 1.0
    assert (est["guessed"].gpu_hours, est["guessed"].source) == (8.0, "estimated_hours")
    assert est["full"].recipe == "qwen3_5_35b"
    assert check.gpu_hours == 88.0


def test_over_budget_suite_fails_with_the_sum_and_each_entry(tmp_path):
    check = validate_suite(load_suite(suite_file(tmp_path, """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 100
        entries:
          - {id: a, recipe: QWEN}
          - {id: b, recipe: QWEN, overrides: [data_plane.backend=tq]}
    """)), today=TODAY, engine=False)
    assert check.problems == [
        "budget_gpu_hours: the enabled entries may spend 128.0 GPU-hours (a 64.0, b 64.0), over the suite's "
        "budget of 100; raise the budget, set estimated_hours, or disable entries"]


def test_disabled_entries_do_not_count_against_the_budget(tmp_path):
    check = validate_suite(load_suite(suite_file(tmp_path, """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 64
        entries:
          - {id: a, recipe: QWEN}
          - id: b
            recipe: QWEN
            disabled: {reason: waiting for nodes, owner: bob, until: "2026-12-31"}
    """)), today=TODAY, engine=False)
    assert check.ok, check.problems
    assert check.gpu_hours == 64.0


def test_expired_disabled_entry_fails_naming_owner_reason_and_date(tmp_path):
    suite = load_suite(suite_file(tmp_path, """\
        name: gpu
        hardware: cpu
        budget_gpu_hours: 0
        entries:
          - id: parked
            recipe: EXTERNAL
            disabled: {reason: port clash on runner 3, owner: alice, until: "2026-11-29"}
    """))
    assert validate_suite(suite, today=dt.date(2026, 11, 29), engine=False).ok  # the last day is still fine
    check = validate_suite(suite, today=TODAY, engine=False)
    assert check.problems == [
        "entry parked: disabled.until = 2026-11-29 has expired (today is 2026-11-30; owner alice, reason: "
        "port clash on runner 3): fix and re-enable it, or renew the date"]


def test_disable_far_in_the_future_is_refused(tmp_path):
    check = validate_suite(load_suite(suite_file(tmp_path, """\
        name: gpu
        hardware: cpu
        budget_gpu_hours: 0
        entries:
          - {id: p, recipe: EXTERNAL, disabled: {reason: later, owner: o, until: "2099-01-01"}}
    """)), today=TODAY, engine=False)
    assert len(check.problems) == 1 and "more than 183 days away" in check.problems[0]


def test_entry_hardware_must_match_the_recipe_device_and_recipes_must_resolve(tmp_path):
    check = validate_suite(load_suite(suite_file(tmp_path, """\
        name: gpu
        budget_gpu_hours: 1000
        entries:
          - {id: twin, recipe: QWEN, scale: tiny, hardware: h200}
          - {id: typo, recipe: QWEN, hardware: h200, overrides: [algorithm.num_stepz=3]}
          - {id: gone, recipe: nowhere.yaml, hardware: cpu}
    """)), today=TODAY, engine=False)
    twin, typo, gone = check.problems
    assert twin == "entry twin: hardware: the entry says 'h200' but the recipe runs on cluster.device = 'cpu'"
    assert typo.startswith("entry typo: ") and "did you mean 'num_steps'" in typo
    assert gone.startswith("entry gone: ") and "recipe file not found" in gone
    assert set(check.estimates) == set()


def test_an_entry_the_engine_refuses_everywhere_cannot_be_enabled(tmp_path):
    body = """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 200
        entries:
          - {id: ok, recipe: QWEN}
          - {id: vllm, recipe: QWEN, overrides: [generation.backend=vllm]STATE}
    """
    check = validate_suite(load_suite(suite_file(tmp_path, body.replace("STATE", ""))), today=TODAY)
    assert check.problems == [
        "entry vllm: the engine refuses it on every machine: generation.backend: vllm is not implemented by this "
        "engine (vLLM cannot run on our GPU machines; the torch generator is the engine's); use "
        "generation.backend: torch; fix the recipe or disable the entry"]
    off = ', disabled: {reason: no vLLM, owner: o, until: "2026-12-31"}'
    assert validate_suite(load_suite(suite_file(tmp_path, body.replace("STATE", off))), today=TODAY).ok


def test_harness_validate_reports_bad_suites_and_exits_2(tmp_path, capsys):
    suite_file(tmp_path, """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 10
        entries: [{id: a, recipe: QWEN}]
    """)
    suite_file(tmp_path, """\
        name: old
        hardware: cpu
        budget_gpu_hours: 0
        entries:
          - {id: p, recipe: EXTERNAL, disabled: {reason: r, owner: o, until: "2020-01-01"}}
    """, name="old")
    assert main(["validate", str(tmp_path / "suites")]) == 2
    err = capsys.readouterr().err
    assert "gpu.yaml: budget_gpu_hours: the enabled entries may spend 64.0 GPU-hours" in err
    assert "old.yaml: entry p: disabled.until = 2020-01-01 has expired" in err


def test_harness_validate_accepts_a_good_suite_file_alone(tmp_path, capsys):
    path = suite_file(tmp_path, """\
        name: gpu
        hardware: h200
        budget_gpu_hours: 64
        entries: [{id: a, recipe: QWEN}]
    """)
    assert main(["validate", str(path)]) == 0
    assert "suite gpu: 1 enabled entries, 64.0 of 64 GPU-hours" in capsys.readouterr().out
