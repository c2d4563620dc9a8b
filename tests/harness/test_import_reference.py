"""`harness import reference PATH`: the reference's test suites as our recipes, thresholds, suites.

The input is tests/data/reference_checkout/, a synthetic checkout written for these tests in the
reference's formats (suite lists, bash drivers calling check_metrics.py, OmegaConf recipes with
`defaults:` and `${...}`). It is copied to a temporary folder first, so paths in the output are
known and no git repository surrounds it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.importer import import_reference
from harness.importer.checks import Untranslatable, flags_of, translate
from harness.importer.mapping import Refused, torch_schedule, unsupported_reason
from harness.importer.reference_yaml import ReferenceError_, load_reference_recipe
from harness.importer.report import markdown
from harness.importer.shell import read_script
from harness.metrics import read_metrics
from harness.plan import make_plan
from harness.recipe.load import load_recipe
from harness.thresholds import evaluate, load_thresholds

pytestmark = pytest.mark.timeout(60)

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "reference_checkout"
TODAY = dt.date(2026, 12, 1)
MAIN = "tests/test_suites/llm/grpo-qwen3.5-tiny-1n2g.sh"


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "ref"
    shutil.copytree(FIXTURE, root)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))  # an empty Hugging Face cache unless a test fills it
    return root


# ---------------------------------------------------------------- one check


@pytest.mark.parametrize(("reference", "ours"), [
    ('mean(data["train/gen_kl_error"]) < 0.002', "mean(train/gen_kl_error) < 0.002"),
    ('mean(data["train/loss"], -6, -1) < 0.07', "mean(train/loss, -6, -1) < 0.07"),
    ('median(data["x"], 1, 10) < 1.1', "median(x, 1, 10) < 1.1"),
    ('mean(data["x"], ignore_top_p=0.05) < 1.05', "mean(x, trim=0.05) < 1.05"),
    ('mean(data["x"], range_start=2, range_end=0) > 0.1', "mean(x, start=2, end=0) > 0.1"),
    ('ratio_above(data["x"], 1.1) < 0.1', "ratio_above(x, 1.1, 0) < 0.1"),
    ('ratio_above(data["x"], threshold=1.1) < 0.1', "ratio_above(x, x=1.1, start=0) < 0.1"),
    ('max(data["ray/node.0.gpu.0.mem_gb"]) < 70', "max(ray/node.0.gpu.0.mem_gb, 0) < 70"),
    ('data["train/loss"]["500"] < 0.3', "first(train/loss, 500, 501) < 0.3"),
    ('data["validation/kl_loss"]["100"] < 0.65 * data["validation/kl_loss"]["0"]',
     "first(validation/kl_loss, 100, 101) < 0.65 * first(validation/kl_loss, 0, 1)"),
    ('(data["l"]["1"] - mean(data["l"], -6, -1)) / data["l"]["1"] > 0.20',
     "(first(l, 1, 2) - mean(l, -6, -1)) / first(l, 1, 2) > 0.2"),
    ('0.2 < mean(data["r"]) < 0.8', "0.2 < mean(r) < 0.8"),
    ('data["r"]["20"] > -0.45', "first(r, 20, 21) > -0.45"),
    ('mean(data["a"]) > 1 and not max(data["b"]) > 2', "mean(a) > 1 and not max(b, 0) > 2"),
    ("data['train/reward']['1'] >= 0.4", "first(train/reward, 1, 2) >= 0.4"),
    ('max(data["val/pass@1"]) > 0.5', 'max("val/pass@1", 0) > 0.5'),
])
def test_translates(reference: str, ours: str) -> None:
    assert translate(reference) == ours


@pytest.mark.parametrize(("reference", "category", "says"), [
    ('abs(median(data["train/loss"])) < 0.05', "function", "abs()"),
    ('data["score"] >= 0.25', "no_step", "no step"),
    ('data["m"]["last"] < 1', "no_step", "not a step number"),
    ('mean(data["m"]) ** 2 < 1', "no_counterpart", "no counterpart"),
    ('__import__("os").system("x")', "function", "__import__"),
    ('mean(data["m"] < 1', "syntax", "not a Python expression"),
    ('mean(data["m"]) in [1, 2]', "no_counterpart", "not a numeric comparison"),
    ('min(data["m"], 1) > 0', "no_counterpart", "series only"),
    ('median(data["m"], 1, 0, 0.05) > 0', "no_counterpart", "at most range_start, range_end"),
    ('median(data["m"], ignore_top_p=0.05) > 0', "no_counterpart", "not a parameter"),
    ('mean(data["m"], 2, range_start=3) > 0', "no_counterpart", "not a parameter"),
    ('ratio_above(data["m"]) > 0', "no_counterpart", "needs its threshold"),
    ('mean(x) > 1', "not_a_series", "reads a series"),
    ('mean(data["m"], 1, 1e400) > 1', "no_counterpart", "finite"),
])
def test_refuses(reference: str, category: str, says: str) -> None:
    with pytest.raises(Untranslatable) as error:
        translate(reference)
    assert error.value.category == category and says in str(error.value)


@pytest.mark.parametrize(("expr", "kinds"), [
    ("min(train/grad_norm) >= 0.0", ["cannot_fail"]),
    ("min(train/grad_norm) > 0.0", []),                    # a run logging 0 fails it
    ("0 <= min(train/gen_kl_error)", ["cannot_fail"]),
    ("min(train/token_mult_prob_error) >= 1", ["cannot_fail"]),
    ("ratio_above(x, 1.1) <= 1", ["cannot_fail"]),
    ("min(train/reward) >= 0", []),                       # reference rewards can be negative
    ("max(train/loss) < 1000000.0", ["nan_guard"]),
    ("min(train/loss) > -1000000.0", ["nan_guard"]),
    ("max(train/loss) < 1000", []),
    ("mean(train/loss) < 1000000.0", []),
])
def test_flags(expr: str, kinds: list[str]) -> None:
    assert [f.kind for f in flags_of(expr)] == kinds


def test_min_max_read_step_0_as_the_reference_does() -> None:
    """The reference's max() sees every logged step; a validation logged at step 0 counts."""
    metrics = {"validation/accuracy": {0: 0.9, 10: 0.1, 20: 0.2}}
    expr = translate('max(data["validation/accuracy"]) > 0.5')
    assert evaluate(expr, metrics, expected_steps=20).ok
    assert not evaluate(translate('ratio_above(data["validation/accuracy"], 0.5) > 0.5'), metrics,
                        expected_steps=20).ok  # 1 of 3 values, as the reference counts them
    assert evaluate(translate('ratio_above(data["validation/accuracy"], 0.5) > 0.3'), metrics,
                    expected_steps=20).ok


def test_script_words() -> None:
    script = read_script(
        'MAX_STEPS=20\nif [[ $(jq x $J) -ge $MAX_STEPS ]]; then\n'
        "  uv run tests/check_metrics.py $J \\\n"
        "    'mean(data[\"a\"]) < 1' \\\n"
        '    "data[\\"b\\"][\\"$MAX_STEPS\\"] < 2" \\\n'
        "    \"data['c']['${MAX_STEPS}'] < \\$X\"\nfi\n"
        "# uv run tests/check_metrics.py $J 'max(data[\"z\"]) > 0'\n"
        "uv run tests/check_metrics.py $J 'max(data[\"d\"]) > 0' 2>&1 | tee log\n")
    first, second = script.checks
    assert [(w.text, w.line, w.unresolved) for w in first.words] == [
        ('mean(data["a"]) < 1', 4, ()), ('data["b"]["20"] < 2', 5, ()), ("data['c']['20'] < $X", 6, ())]
    assert first.guard_line == 2 and second.guard_line is None
    assert [(w.text, w.line) for w in second.words] == [('max(data["d"]) > 0', 9)]


def test_reference_recipe_resolution(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "policy:\n  max_total_sequence_length: 512\n  generation:\n    max_new_tokens: ${..max_total_sequence_length}\n"
        "    stop: ${.max_new_tokens}\n  optimizer: {kwargs: {eps: 1e-8, lr: 5.0e-6, betas: [0.9, 0.999]}}\n"
        "  name: ${policy.model}-x\n  model: q\n  odd: ${oc.env:HOME}\n")
    (tmp_path / "child.yaml").write_text("defaults: base.yaml\npolicy:\n  max_total_sequence_length: 1024\n"
                                         "  optimizer: {kwargs: {betas: [0.8]}}\n")
    flat, files = load_reference_recipe(tmp_path / "child.yaml")
    assert flat == {
        "policy.max_total_sequence_length": 1024, "policy.generation.max_new_tokens": 1024,
        "policy.generation.stop": 1024, "policy.optimizer.kwargs.eps": 1e-8, "policy.optimizer.kwargs.lr": 5e-6,
        "policy.optimizer.kwargs.betas": [0.8], "policy.name": "q-x", "policy.model": "q",
        "policy.odd": "${oc.env:HOME}"}
    assert [f.name for f in files] == ["base.yaml", "child.yaml"]
    flat, _ = load_reference_recipe(tmp_path / "child.yaml", {"policy.max_total_sequence_length": 64,
                                                              "policy.optimizer": {"lr": 1e-3}})
    assert flat["policy.generation.max_new_tokens"] == 64  # an override reaches what refers to it
    assert flat["policy.optimizer.lr"] == 1e-3 and "policy.optimizer.kwargs.eps" not in flat
    (tmp_path / "base.yaml").write_text("defaults: child.yaml\n")
    with pytest.raises(ReferenceError_, match="defaults cycle"):
        load_reference_recipe(tmp_path / "child.yaml")


# ---------------------------------------------------------------- the whole import


def test_report_counts(checkout: Path) -> None:
    report = import_reference(checkout, today=TODAY).report
    assert report["reference"] == {"path": str(checkout.resolve()), "commit": None, "imported": "2026-12-01",
                                   "hf_hub_cache": str(checkout.parent / "hf")}
    assert report["counts"] == {
        "scripts_read": 4, "scripts_with_checks": 4, "recipes_written": 2,
        "recipes_not_written": {"model_family": 1, "value_refused": 1},
        "thresholds_files_written": 4, "checks_read": 15, "checks_translated": 12,
        "checks_not_translated": {"function": 1, "no_step": 1, "shell_variable": 1},
        "checks_flagged": {"cannot_fail": 1, "nan_guard": 1},
        "guards_dropped": 1, "scripts_with_guard": 1, "unsupported_reference_keys": 1, "unknown_reference_keys": 3,
        "values_refused": 1,
        "suites_written": 3,
    }
    assert report["recipes_not_written"] == [
        {"script": "tests/test_suites/llm/grpo-llama3.2-1b-1n8g.sh", "category": "model_family",
         "reason": "meta-llama/Llama-3.2-1B-Instruct: not a family our schema holds (qwen3_5, qwen3_5_moe)"},
        {"script": "tests/test_suites/llm/grpo-qwen3.5-tiny-1n2g-fp16.sh", "category": "value_refused",
         "reason": "policy.precision: precision 'float16': ours are fp32 and bf16"},
    ]
    assert [(x["script"], x["line"], x["check"], x["category"]) for x in report["checks_not_translated"]] == [
        (MAIN, 39, 'abs(median(data["train/loss"])) < 0.05', "function"),
        (MAIN, 40, 'data["score"] >= 0.25', "no_step"),
        (MAIN, 41, "data['train/reward']['$FINAL_STEP'] > 0.5", "shell_variable"),
    ]
    assert [(x["line"], x["kind"]) for x in report["checks_flagged"]] == [(37, "cannot_fail"), (38, "nan_guard")]
    assert report["unsupported_keys"] == {"policy.generation.vllm_cfg.gpu_memory_utilization": {
        "recipes": 4, "reason": unsupported_reason("policy.generation.vllm_cfg.gpu_memory_utilization")}}
    assert report["unknown_keys"] == {
        "env.math.num_workers": 4, "grpo.val_period": 4, "policy.optimizer.name": 4}
    assert [(s["list"], s["entries"], s["imported"], s["disabled"], s["written"]) for s in report["suites"]] == [
        ("disabled.txt", 1, 1, 1, True), ("nightly.txt", 3, 1, 0, True),
        ("nightly_gb200.txt", 1, 1, 0, False), ("release.txt", 1, 1, 1, True)]


def test_thresholds_file(checkout: Path, tmp_path: Path) -> None:
    files = import_reference(checkout, today=TODAY).files
    path = tmp_path / "t.yaml"
    path.write_text(files["thresholds/grpo_qwen3_5_tiny_1n2g.yaml"])
    checks = load_thresholds(path, hardware="h100", recipe="grpo_qwen3_5_tiny_1n2g")
    assert [(c.name, c.expr, c.why.split(": ", 1)[0], str(c.since)) for c in checks] == [
        ("train_gen_kl_error", "mean(train/gen_kl_error) < 0.002", f"imported from {MAIN}:30", "2026-12-01"),
        ("train_token_mult_prob_error", "median(train/token_mult_prob_error, 1, 10) < 1.1",
         f"imported from {MAIN}:31", "2026-12-01"),
        ("train_token_mult_prob_error_2", "first(train/token_mult_prob_error, 20, 21) < 1.1",
         f"imported from {MAIN}:32", "2026-12-01"),
        ("train_loss", "mean(train/loss, -5, -1) < 0.7 * first(train/loss, 1, 2)",
         f"imported from {MAIN}:33", "2026-12-01"),
        ("train_reward", "0.2 < mean(train/reward, -6, -1) < 0.9", f"imported from {MAIN}:34", "2026-12-01"),
        ("train_token_mult_prob_error_3", "ratio_above(train/token_mult_prob_error, 1.05, 0) < 0.1",
         f"imported from {MAIN}:35", "2026-12-01"),
        ("timing_train_total_step_time", "mean(timing/train/total_step_time, 2, trim=0.05) < 30",
         f"imported from {MAIN}:36", "2026-12-01"),
        ("train_grad_norm", "min(train/grad_norm, 0) >= 0.0", f"imported from {MAIN}:37", "2026-12-01"),
        ("train_loss_2", "max(train/loss, 0) < 1000000.0", f"imported from {MAIN}:38", "2026-12-01"),
    ]
    assert checks[2].why == f'imported from {MAIN}:32: data["train/token_mult_prob_error"]["20"] < 1.1'
    text = files["thresholds/grpo_qwen3_5_tiny_1n2g.yaml"]
    assert "jq" not in text.split("checks:")[1] and "# import: cannot_fail: min(train/grad_norm, 0) >= 0" in text


def test_recipes_share_a_base(checkout: Path) -> None:
    files = import_reference(checkout, today=TODAY).files
    ref = checkout.resolve()
    assert files["recipes/grpo_qwen3_5_tiny_1n2g.yaml"].split("\n", 2)[2] == f"""\
defaults: "_base/grpo_base.yaml"
name: grpo_qwen3_5_tiny_1n2g
description: imported from {MAIN}
engine:
  command: [bash, {ref}/{MAIN}]
  metrics: reference_json
  metrics_path: {ref}/tests/test_suites/llm/grpo-qwen3.5-tiny-1n2g/metrics.json
policy:
  max_seq_len: 512
  sequence_packing:
    enabled: true
generation:
  max_new_tokens: 512
  temperature: 0.8
algorithm:
  num_steps: 20
checks:
  thresholds: ../thresholds/grpo_qwen3_5_tiny_1n2g.yaml
limits:
  timeout_s: 1800
"""
    base = files["recipes/_base/grpo_base.yaml"]
    assert base.split("\n", 2)[2] == f"""\
model:
  family: qwen3_5
  path: {ref}/models/Qwen3.5-tiny
  tokenizer: null
cluster:
  nodes: 1
  devices_per_node: 2
  device: h100
policy:
  micro_batch_size: 4
  logprob_batch_size: 4
  precision: bf16
  optimizer:
    lr: 5.0e-06
    weight_decay: 0.01
    grad_clip: 1.0
generation:
  backend: vllm
  tp: 1
algorithm:
  name: grpo
  seed: 42
  prompts_per_step: 8
  generations_per_prompt: 4
  baseline: leave_one_out
  normalize_rewards: true
  loss:
    clip_low: 0.2
    clip_high: 0.28
    kl_beta: 0.01
task:
  name: math
checkpoint:
  every_steps: 10
checks:
  invariants: false
"""
    # the long run's recipe differs in what its own reference recipe and script set
    long = files["recipes/grpo_qwen3_5_tiny_1n2g_long.yaml"]
    assert "  max_seq_len: 1024\n" in long and "  num_steps: 100\n" in long and "  timeout_s: 7200\n" in long


def test_suites(checkout: Path) -> None:
    files = import_reference(checkout, today=TODAY).files
    assert files["recipes/suites/release.yaml"] == """\
# Imported from tests/test_suites/release.txt by `harness import reference`.
# budget_gpu_hours: the sum of the enabled entries' nodes x GPUs x time limit.
name: release
description: "imported from tests/test_suites/release.txt"
hardware: h100
budget_gpu_hours: 0
entries:
  - id: "grpo-qwen3.5-tiny-1n2g-long"
    recipe: ../grpo_qwen3_5_tiny_1n2g_long.yaml
    disabled:
      reason: "disabled in the reference (disabled.txt:4): Hangs in generation after step 40; see the tracking issue."
      owner: unassigned  # FILL: who re-enables it (placeholder written by harness import)
      until: "2026-12-15"  # FILL: a placeholder, 14 days after the import; set the real date
"""
    nightly = files["recipes/suites/nightly.yaml"]
    assert "budget_gpu_hours: 1\n" in nightly and '  - id: "grpo-qwen3.5-tiny-1n2g"\n' in nightly
    assert ("  # not imported: tests/test_suites/llm/grpo-llama3.2-1b-1n8g.sh (line 7): no recipe (model_family: "
            in nightly)
    assert "recipes/suites/nightly_gb200.yaml" not in files


def test_cli_dry_run_then_write_then_validate(checkout: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "imported"
    assert main(["import", "reference", str(checkout), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert not out.exists()
    would = sorted(line.split()[2] for line in printed.splitlines() if line.startswith("would write "))
    assert would == sorted(str(out / rel) for rel in (
        "import-report.json", "import-report.md", "recipes/_base/grpo_base.yaml",
        "recipes/grpo_qwen3_5_tiny_1n2g.yaml", "recipes/grpo_qwen3_5_tiny_1n2g_long.yaml",
        "recipes/suites/disabled.yaml", "recipes/suites/nightly.yaml", "recipes/suites/release.yaml",
        "thresholds/grpo_llama3_2_1b_1n8g.yaml", "thresholds/grpo_qwen3_5_tiny_1n2g.yaml",
        "thresholds/grpo_qwen3_5_tiny_1n2g_fp16.yaml", "thresholds/grpo_qwen3_5_tiny_1n2g_long.yaml"))
    assert "| checks translated | 12 |" in printed and "dry run: nothing written" in printed

    assert main(["import", "reference", str(checkout), "--out", str(out), "--write"]) == 0
    capsys.readouterr()
    assert json.loads((out / "import-report.json").read_text())["counts"]["recipes_written"] == 2
    assert main(["validate", str(out / "recipes")]) == 0
    printed = capsys.readouterr().out
    assert "2 of 2 recipes valid" in printed
    assert printed.count("ok   ") == 2 + 3  # two recipes, three suites


# ---------------------------------------------------------------- the lr schedule

LINEAR = {"name": "torch.optim.lr_scheduler.LinearLR", "kwargs": {"start_factor": 0.1, "end_factor": 1.0,
                                                                   "total_iters": 50}}
CONSTANT = {"name": "torch.optim.lr_scheduler.ConstantLR", "kwargs": {"factor": 1.0, "total_iters": 10000000000}}
DTENSOR_SCHEDULE = [LINEAR, CONSTANT, {"milestones": [50]}]  # grpo_math_1B's policy.scheduler


@pytest.mark.parametrize("schedule", [DTENSOR_SCHEDULE, [LINEAR], [LINEAR, CONSTANT, {"milestones": [60]}]])
def test_a_linear_warmup_maps_onto_ours(schedule: list) -> None:
    ours = torch_schedule(schedule, {"policy.optimizer.kwargs.lr": 5.0e-6})
    assert ours == {"policy.optimizer.warmup_steps": 50, "policy.optimizer.warmup_init_lr": 0.1 * 5.0e-6,
                    "policy.optimizer.decay": "constant"}


@pytest.mark.parametrize(("schedule", "says"), [
    ([{**LINEAR, "kwargs": {**LINEAR["kwargs"], "end_factor": 0.5}}], "LinearLR end_factor 0.5"),
    ([LINEAR, CONSTANT, {"milestones": [20]}], "from milestones [20]"),  # the warm-up cut short
    ([LINEAR, {**CONSTANT, "kwargs": {"factor": 0.5}}, {"milestones": [50]}], "ConstantLR factor 0.5"),
    ([{"name": "torch.optim.lr_scheduler.CosineAnnealingLR", "kwargs": {"T_max": 10}}], "CosineAnnealingLR"),
    ([LINEAR, CONSTANT], "schedulers"),  # two schedulers and no milestones
    ("LinearLR", "not a list of schedulers"),
])
def test_other_schedules_are_refused(schedule: object, says: str) -> None:
    with pytest.raises(Refused, match=re.escape(says)):
        torch_schedule(schedule, {"policy.optimizer.kwargs.lr": 5.0e-6})


def test_both_reference_schedulers_reach_the_written_recipes(checkout: Path, tmp_path: Path) -> None:
    """The DTensor path's scheduler list, and megatron's scheduler keys when megatron is enabled
    (its own optimizer's lr and min_lr with them; the DTensor list, which megatron does not
    read, is then unknown); the written recipes resolve with them."""
    recipes = checkout / "examples/configs/recipes/llm"
    for name in ("grpo-qwen3.5-tiny-1n2g.yaml", "grpo-qwen3.5-tiny-1n2g-long.yaml"):
        with (recipes / name).open("a") as fh:
            fh.write(f"  scheduler: {json.dumps(DTENSOR_SCHEDULE)}\n")
    with (recipes / "grpo-qwen3.5-tiny-1n2g-long.yaml").open("a") as fh:
        fh.write("  megatron_cfg:\n    enabled: true\n    optimizer: {lr: 1.0e-6, min_lr: 1.0e-7}\n"
                 "    scheduler: {lr_decay_style: cosine, lr_decay_iters: 80, lr_warmup_iters: 10,"
                 " lr_warmup_init: 1.0e-8}\n")
    result = import_reference(checkout, today=TODAY)
    assert result.report["counts"]["recipes_written"] == 2
    assert result.report["unknown_keys"]["policy.scheduler"] == 1
    for rel, text in result.files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    dtensor = load_recipe(tmp_path / "recipes/grpo_qwen3_5_tiny_1n2g.yaml").data["policy"]["optimizer"]
    megatron = load_recipe(tmp_path / "recipes/grpo_qwen3_5_tiny_1n2g_long.yaml").data["policy"]["optimizer"]
    schedule = ("lr", "warmup_steps", "warmup_init_lr", "decay", "decay_steps", "min_lr")
    assert [dtensor[k] for k in schedule] == [5.0e-6, 50, 0.1 * 5.0e-6, "constant", None, 0.0]
    assert [megatron[k] for k in schedule] == [1.0e-6, 10, 1.0e-8, "cosine", 80, 1.0e-7]


def test_a_constant_megatron_decay_leaves_its_unread_keys_out(checkout: Path, tmp_path: Path) -> None:
    """min_lr and lr_decay_iters do nothing under megatron's constant decay; ours refuses them
    there, so they are never written, and the recipe resolves without them."""
    with (checkout / "examples/configs/recipes/llm/grpo-qwen3.5-tiny-1n2g-long.yaml").open("a") as fh:
        fh.write("  megatron_cfg:\n    enabled: true\n    optimizer: {lr: 1.0e-6, min_lr: 1.0e-7}\n"
                 "    scheduler: {lr_decay_style: constant, lr_decay_iters: 80, lr_warmup_iters: 10,"
                 " lr_warmup_init: 1.0e-8}\n")
    result = import_reference(checkout, today=TODAY)
    assert result.report["counts"]["recipes_written"] == 2
    for rel, text in result.files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    optimizer = load_recipe(tmp_path / "recipes/grpo_qwen3_5_tiny_1n2g_long.yaml").data["policy"]["optimizer"]
    assert {k: optimizer.get(k) for k in ("decay", "warmup_steps", "decay_steps", "min_lr")} == {
        "decay": "constant", "warmup_steps": 10, "decay_steps": None, "min_lr": 0.0}


# ---------------------------------------------------------------- a Hub checkpoint


def test_a_hub_checkpoint_plans_from_the_hugging_face_cache(checkout: Path, tmp_path: Path, capsys) -> None:
    """A reference recipe naming a Hub id is planned from that checkpoint's config.json in the
    local Hugging Face cache (a vision-language one nests the language model's shape under
    text_config); without it the report says where the file goes."""
    base = checkout / "examples/configs/grpo_base.yaml"
    base.write_text(base.read_text().replace('"./models/Qwen3.5-tiny"', "Qwen/Qwen3.5-tiny"))
    repo = tmp_path / "hf" / "models--Qwen--Qwen3.5-tiny"  # the fixture's HF_HUB_CACHE
    report = import_reference(checkout, today=TODAY).report
    assert report["counts"]["recipes_written"] == 0
    assert {"script": MAIN, "category": "plan", "reason": (
        "grpo_qwen3_5_tiny_1n2g: model.config.hidden_size is needed to plan a sharded or GPU run: add it to the "
        f"recipe, or put Qwen/Qwen3.5-tiny's config.json in the Hugging Face cache, under {repo} (refs/main and the "
        "snapshot it names)")} in report["recipes_not_written"]

    text = json.loads((FIXTURE / "models/Qwen3.5-tiny/config.json").read_text())
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    config = repo / "snapshots" / "0123abc" / "config.json"
    config.write_text(json.dumps({"model_type": "qwen3_5", "text_config": text}))
    out = tmp_path / "out"
    assert main(["import", "reference", str(checkout), "--out", str(out), "--write"]) == 0
    assert f"planned from the Hugging Face cache `{tmp_path / 'hf'}`" in capsys.readouterr().out
    assert json.loads((out / "import-report.json").read_text())["counts"]["recipes_written"] == 2
    recipe = load_recipe(out / "recipes/grpo_qwen3_5_tiny_1n2g.yaml").data
    assert recipe["model"]["path"] == "Qwen/Qwen3.5-tiny" and recipe["model"]["config"] == {}  # the shape: the cache's
    plan = make_plan(recipe)
    assert plan.model["config_file"] == str(config) and plan.model["hidden_size"] == text["hidden_size"]
    assert main(["validate", str(out / "recipes")]) == 0
    assert "2 of 2 recipes valid" in capsys.readouterr().out


# ---------------------------------------------------------------- backend, MoE and generation keys

TINY_RECIPE = "examples/configs/recipes/llm/grpo-qwen3.5-tiny-1n2g.yaml"
MEGATRON = "  megatron_cfg:\n    enabled: true\n"


def _import_tiny(checkout: Path, tmp_path: Path, policy: str) -> tuple[dict, dict | None]:
    """The import with the tiny script's reference recipe set to the base's plus `policy` (the
    text under `policy:`): the report, and that script's written recipe resolved (None if none)."""
    head = "defaults: ../../grpo_base.yaml\ngrpo:\n  max_num_steps: 20\npolicy:\n"
    (checkout / TINY_RECIPE).write_text(head + policy)
    result = import_reference(checkout, today=TODAY)
    out = tmp_path / "out"
    for rel, text in result.files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    recipe = out / "recipes/grpo_qwen3_5_tiny_1n2g.yaml"
    return result.report, load_recipe(recipe).data if recipe.exists() else None


def _leaf(data: dict, dotted: str) -> object:
    for part in dotted.split("."):
        data = data[part]
    return data


@pytest.mark.parametrize(("policy", "ours"), [
    (MEGATRON + "    activation_checkpointing: true\n    recompute_granularity: full\n",
     {"policy.backend": "megatron", "policy.activation_checkpointing": True}),
    ("  dtensor_cfg:\n    enabled: true\n    activation_checkpointing: true\n    tensor_parallel_size: 1\n"
     "    context_parallel_size: 1\n    sequence_parallel: false\n",
     {"policy.backend": "torch", "policy.activation_checkpointing": True, "policy.parallel.tp": 1}),
    (MEGATRON + "  dtensor_cfg:\n    activation_checkpointing: true\n    tensor_parallel_size: 4\n",
     {"policy.backend": "megatron", "policy.activation_checkpointing": False}),  # megatron reads its own
    ("  sequence_packing:\n    enabled: true\n    train_mb_tokens: 4096\n",
     {"policy.sequence_packing.enabled": True, "policy.sequence_packing.max_tokens_per_row": None}),
    (MEGATRON + "  sequence_packing:\n    enabled: true\n",
     {"policy.backend": "megatron", "policy.sequence_packing.enabled": True}),
    (MEGATRON + "    context_parallel_size: 2\n  sequence_packing:\n    enabled: true\n",
     {"policy.backend": "megatron", "policy.parallel.cp": 2, "policy.sequence_packing.enabled": True}),
    (MEGATRON + "    moe_router_load_balancing_type: none\n", {"model.config.router_aux_loss_coef": 0.0}),
    ("  hf_config_overrides:\n    text_config:\n      router_aux_loss_coef: 0.0\n",
     {"model.config.router_aux_loss_coef": 0.0}),
], ids=["megatron_recompute", "dtensor_recompute", "megatron_reads_its_own", "packing", "megatron_packing",
        "megatron_cp_packing", "no_balancing", "hf_override"])
def test_backend_keys_map_onto_ours(checkout: Path, tmp_path: Path, policy: str, ours: dict) -> None:
    report, recipe = _import_tiny(checkout, tmp_path, policy)
    assert recipe is not None, report["recipes_not_written"]
    assert {key: _leaf(recipe, key) for key in ours} == ours


DATA_PARALLEL = "our torch backend is data parallel only (policy.parallel shards the megatron backend's model)"


@pytest.mark.parametrize(("policy", "reason"), [
    (MEGATRON + "    activation_checkpointing: true\n    recompute_granularity: selective\n",
     "policy.megatron_cfg.activation_checkpointing: policy.megatron_cfg.recompute_granularity 'selective': ours "
     "recomputes whole layers, one at a time (megatron's 'full')"),
    ("  dtensor_cfg:\n    tensor_parallel_size: 2\n", f"policy.dtensor_cfg.tensor_parallel_size: 2: {DATA_PARALLEL}"),
    ("  dtensor_cfg:\n    expert_parallel_size: 16\n", f"policy.dtensor_cfg.expert_parallel_size: 16: {DATA_PARALLEL}"),
    ("  dtensor_cfg:\n    sequence_parallel: true\n", f"policy.dtensor_cfg.sequence_parallel: sequence parallel: "
     f"{DATA_PARALLEL}"),
    (MEGATRON + "    fp8_cfg:\n      enabled: true\n",
     "policy.precision: with policy.megatron_cfg.fp8_cfg.enabled: megatron fp8 training; ours are fp32 and bf16"),
    (MEGATRON + "    moe_router_load_balancing_type: aux_loss\n",
     "policy.megatron_cfg.moe_router_load_balancing_type: moe_router_load_balancing_type 'aux_loss': ours maps "
     "'none' only (onto model.config.router_aux_loss_coef 0.0); another type's coefficient is not in the recipe"),
], ids=["selective_recompute", "dtensor_tp", "dtensor_ep", "dtensor_sp", "fp8", "aux_loss"])
def test_backend_values_ours_cannot_hold_are_refused(checkout: Path, tmp_path: Path, policy: str,
                                                     reason: str) -> None:
    report, recipe = _import_tiny(checkout, tmp_path, policy)
    assert recipe is None
    assert {"script": MAIN, "category": "value_refused", "reason": reason} in report["recipes_not_written"]


def test_settings_ours_has_no_key_for_are_reported_with_why(checkout: Path, tmp_path: Path) -> None:
    """The recipe is still written (the reference's driver runs it); each setting is listed with
    the reason, never among the unknown keys."""
    report, recipe = _import_tiny(checkout, tmp_path, MEGATRON + (
        "    moe_token_dispatcher_type: allgather\n    moe_router_dtype: fp64\n    moe_router_bias_update_rate: 0.0\n"
        "    freeze_moe_router: true\n    cuda_graph_impl: none\n"
        "  sequence_packing:\n    enabled: false\n    train_mb_tokens: 4096\n    logprob_mb_tokens: 8192\n"
        "  generation:\n    vllm_cfg:\n      enforce_eager: true\n"))
    assert recipe is not None and recipe["policy"]["sequence_packing"] == {"enabled": False, "max_tokens_per_row": None}
    keys = ["policy.megatron_cfg.moe_token_dispatcher_type", "policy.megatron_cfg.moe_router_dtype",
            "policy.megatron_cfg.moe_router_bias_update_rate", "policy.megatron_cfg.freeze_moe_router",
            "policy.megatron_cfg.cuda_graph_impl", "policy.sequence_packing.train_mb_tokens",
            "policy.sequence_packing.logprob_mb_tokens", "policy.generation.vllm_cfg.enforce_eager"]
    unsupported = report["unsupported_keys"]
    assert {k: unsupported[k] for k in keys} == {k: {"recipes": 1, "reason": unsupported_reason(k)} for k in keys}
    assert "alltoall" in unsupported[keys[0]]["reason"] and "budget per row" in unsupported[keys[5]]["reason"]
    assert not set(keys) & set(report["unknown_keys"])
    md = markdown(report)
    assert (f"| policy.megatron_cfg.moe_router_dtype | 1 | {unsupported_reason(keys[1])} |" in md.split(
        "## Reference keys ours does not support (9; recipes holding each, and why)")[1])


def _metrics(path: Path, steps: int, **overrides: dict[int, float]) -> None:
    """A reference-format metrics JSON ({metric: {"step": value}}) that passes every translated check."""
    series = {
        "train/gen_kl_error": {s: 0.001 for s in range(1, steps + 1)},
        "train/token_mult_prob_error": {s: 1.01 for s in range(1, steps + 1)},
        "train/loss": {s: 1.0 if s == 1 else 0.5 for s in range(1, steps + 1)},
        "train/reward": {s: 0.5 for s in range(1, steps + 1)},
        "timing/train/total_step_time": {s: 10.0 for s in range(1, steps + 1)},
        "train/grad_norm": {s: 0.3 for s in range(1, steps + 1)},
    }
    for name, values in overrides.items():
        series[name.replace("__", "/")].update(values)
    path.write_text(json.dumps({m: {str(s): v for s, v in vals.items()} for m, vals in series.items()}))


def test_translated_checks_judge_a_reference_run(checkout: Path, tmp_path: Path) -> None:
    """The imported thresholds pass a reference run that meets them, and fail one that does not."""
    path = tmp_path / "t.yaml"
    path.write_text(import_reference(checkout, today=TODAY).files["thresholds/grpo_qwen3_5_tiny_1n2g.yaml"])
    checks = load_thresholds(path, hardware="h100")

    def failing(run: Path) -> list[str]:
        metrics = read_metrics(run, format="reference_json")
        return [c.name for c in checks if not evaluate(c.tree, metrics, expected_steps=20).ok]

    _metrics(tmp_path / "good.json", 20)
    assert failing(tmp_path / "good.json") == []
    _metrics(tmp_path / "bad.json", 20, train__token_mult_prob_error={19: 1.2, 20: 1.2})
    assert failing(tmp_path / "bad.json") == ["train_token_mult_prob_error_2", "train_token_mult_prob_error_3"]
    _metrics(tmp_path / "short.json", 12)  # the run the reference's jq guard would have skipped
    assert len(failing(tmp_path / "short.json")) == len(checks)


# ---------------------------------------------------------------- hostile input


def _exit_2_one_line(argv: list[str], capsys, expect: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and expect in err, err
    assert "Traceback" not in err


def test_script_not_utf8(checkout: Path, tmp_path: Path, capsys) -> None:
    bad = checkout / "tests/test_suites/llm/grpo-qwen3.5-tiny-1n2g.sh"
    bad.write_bytes(bad.read_bytes().replace(b"NUM_NODES=1", b"NUM_NODES=1 # caf\xe9"))
    _exit_2_one_line(["import", "reference", str(checkout), "--out", str(tmp_path / "o")], capsys,
                     "grpo-qwen3.5-tiny-1n2g.sh:6: not valid UTF-8 (byte 0xe9)")
    assert not (tmp_path / "o").exists()


def test_script_huge(checkout: Path, tmp_path: Path, capsys) -> None:
    huge = checkout / "tests/test_suites/llm/grpo-qwen3.5-tiny-1n2g-long.sh"
    with huge.open("a") as f:
        f.write("#" * (2 << 20) + "\n")
    _exit_2_one_line(["import", "reference", str(checkout), "--write", "--out", str(tmp_path / "o")], capsys,
                     "larger than the 1048576 byte cap")
    assert not (tmp_path / "o").exists()


def test_not_a_checkout(tmp_path: Path, capsys) -> None:
    _exit_2_one_line(["import", "reference", str(tmp_path)], capsys, "no tests/test_suites folder")
    _exit_2_one_line(["import", "reference", str(tmp_path / "nope")], capsys, "not a folder")


def test_recipe_not_yaml(checkout: Path, capsys) -> None:
    (checkout / "examples/configs/grpo_base.yaml").write_text("grpo: [unclosed\n")
    _exit_2_one_line(["import", "reference", str(checkout)], capsys, "grpo_base.yaml:2: YAML syntax error")
