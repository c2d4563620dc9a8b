"""peers/trl_grpo.py: what it refuses before it starts, and bench/e2e_ratio.py's fail-closed reading."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import yaml

from rl.config import parse_config

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer = _load("trl_grpo", ROOT / "peers" / "trl_grpo.py")
ratio = _load("e2e_ratio", ROOT / "bench" / "e2e_ratio.py")


def _perf_recipe() -> dict:
    data = yaml.safe_load((ROOT / "recipes" / "perf_grpo_dense_1b.yaml").read_text())
    data.pop("tiny")
    return data


def test_the_perf_recipe_maps_to_trl_without_a_refusal() -> None:
    assert peer.refusals(parse_config(_perf_recipe())) == []


def test_what_trl_cannot_do_as_our_engine_does_is_refused_by_key() -> None:
    data = copy.deepcopy(_perf_recipe())
    data["algorithm"]["baseline"] = "leave_one_out"
    data["algorithm"]["loss"]["is_correction"] = True
    data["cluster"]["devices_per_node"] = 2
    data["checkpoint"]["at_end"] = True  # a final checkpoint TRL would not write
    data["profile"] = {"kernel_steps": [2, 3]}
    lines = peer.refusals(parse_config(data))
    assert [line.split(":")[0] for line in lines] == ["cluster", "algorithm.baseline", "algorithm.loss.is_correction",
                                                      "checkpoint", "profile.kernel_steps"]


def test_a_refused_recipe_exits_2_with_status_saying_why(tmp_path: Path) -> None:
    data = _perf_recipe()
    data["algorithm"]["warm_start"] = {"steps": 5}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    assert peer.main([str(recipe), "--out", str(tmp_path / "run")]) == 2
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed" and status["exit_code"] == 2
    assert "algorithm.warm_start.steps: the TRL peer runs no warm start" in status["error"]


def _write_run(path: Path, steps: list[int], tokens: float, **phases: float) -> Path:
    path.mkdir()
    phases = {"generation": 1.5, "training": 0.5, **phases}
    rows = [{"step": s, "performance/tokens_per_sec_per_gpu": tokens, "timing/train/total": 2.0,
             **{f"timing/train/{p}": v for p, v in phases.items()}} for s in steps]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_ratio_of_the_steady_steps(tmp_path: Path, capsys) -> None:
    ours = _write_run(tmp_path / "ours", [1, 2, 3, 4], 300.0, generation=0.25, training=0.4, refit=0.02)
    trl = _write_run(tmp_path / "trl", [1, 2, 3, 4], 100.0)
    assert ratio.main([str(ours), str(trl), "--warmup", "2", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "ratio 3.00x" in out
    assert "| generation | 0.250 | 1.500 | 6.00x |" in out and "| training | 0.400 | 0.500 | 1.25x |" in out
    assert "| refit | 0.020 | - | - |" in out  # TRL has no refit: no ratio
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["ratio"] == 3.0
    assert saved["peer_over_ours_s"] == {"generation": 6.0, "training": 1.25, "step": 1.0}


def test_a_run_missing_a_step_after_warm_up_is_no_figure(tmp_path: Path, capsys) -> None:
    ours, trl = _write_run(tmp_path / "ours", [1, 2, 3, 5], 300.0), _write_run(tmp_path / "trl", [1, 2], 100.0)
    assert ratio.main([str(ours), str(trl), "--warmup", "2"]) == 2
    assert "need every step after the 2 warm-up" in capsys.readouterr().err


def test_traced_steps_stay_out_of_the_ratio_and_give_the_kernels_busy_fraction(tmp_path: Path, capsys) -> None:
    ours = _write_run(tmp_path / "ours", [1, 2, 3, 4], 300.0)
    with (ours / "metrics.jsonl").open("a") as f:  # step 5 traced its kernels: slower, and its own figure
        f.write(json.dumps({"step": 5, "performance/tokens_per_sec_per_gpu": 1.0, "timing/train/total": 9.0,
                            "timing/train/generation": 7.0, "timing/train/training": 2.0,
                            "performance/gpu_busy_fraction": 0.93,
                            "performance/gpu_busy_fraction/training": 0.875}) + "\n")
    trl = _write_run(tmp_path / "trl", [1, 2, 3, 4], 100.0)
    assert ratio.main([str(ours), str(trl), "--warmup", "2", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "ratio 3.00x" in out and "| step | 2.000 | 2.000 | 1.00x |" in out
    assert "| GPU busy, kernels traced in steps 5-5 (host overhead) | 93.0% (7.0%, training 87.5%) | - | |" in out
    saved = json.loads((tmp_path / "r.json").read_text())["ours"]["traced"]
    assert saved["steps"] == [5] and saved["gpu_busy"] == 0.93 and saved["phases"] == {"training": 0.875}


def test_a_traced_step_among_the_timed_ones_is_no_figure(tmp_path: Path, capsys) -> None:
    ours = _write_run(tmp_path / "ours", [1, 2, 3, 4], 300.0)
    rows = [json.loads(line) for line in (ours / "metrics.jsonl").read_text().splitlines()]
    rows[2]["performance/gpu_busy_fraction"] = 0.9  # step 3 traced, 4 not
    (ours / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trl = _write_run(tmp_path / "trl", [1, 2, 3, 4], 100.0)
    assert ratio.main([str(ours), str(trl), "--warmup", "2"]) == 2
    assert "traced steps [3] must follow the timed ones" in capsys.readouterr().err
