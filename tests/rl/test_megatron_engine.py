"""The real engine (`python -m rl.run`, Ray, gloo) on the Qwen3.5-35B-A3B tiny twin with megatron.

The recipe is `recipes/qwen3_5_35b.yaml --scale tiny` as the harness resolves it (megatron-core,
EP=2 over 2 CPU ranks, Qwen3.5's hybrid layers), shrunk to a few small steps: the full-scale
recipe's loading code on the shipped tiny checkpoint (`model.path`, its chat-template tokenizer)
and the shipped math JSONL graded by math-verify. Checked:
* EP=2 (every rank a DP rank): the run completes, every invariant holds, the FLOPs fields count
  the world (2 ranks), the generator is in sync after every refit (gen_kl_error ~1e-9: the
  HF-format weights gathered from the experts' ranks are the trained ones), and the final
  checkpoint holds HF weights that load strictly into the generation model, plus one optimizer
  state per rank; its HF-format copy (`checkpoint.hf_format`) loads back with `from_pretrained`
  (no engine code) and gives the checkpoint's log-probs bit for bit; the validation pass logs
  `val/accuracy` at the last step;
* TP=2 with sequence parallel (one DP replica; both ranks get every row, rank 0 answers): same
  checks, and its step-1 log-probs equal EP=2's on the same batch;
* PP=2 (two pipeline stages, the last one answers): same checks, step-1 log-probs equal EP=2's;
* the torch backend (HF model) on the same warm-started weights: step 1 draws the same batch, and
  its log-probs match megatron's within the backend's measured tolerance (docs/megatron.md); its
  HF-format checkpoint loads back the same way.
CP=2 reaches the engine as TP=2 does (one DP replica, every rank gets every row); its numerics
are the backend's, tested without the engine (tests/rl/test_megatron_parallel.py, cp2 and cp2-ep2).
The warm start is cached (~/.cache/rl or $RL_CACHE_DIR) and shared with the shipped recipe.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from harness.recipe.load import load_recipe

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=190)]  # the file: 96 s alone on 2 cores, x2 in CI

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "qwen3_5_35b.yaml"
STEPS = 3
SMALL = ("algorithm.num_steps=3", "algorithm.prompts_per_step=4", "policy.micro_batch_size=8",
         "checkpoint.every_steps=0", "data.val_max_samples=8",
         "algorithm.loss.kl_beta=0.01")  # a KL term: the reference pass runs on megatron too
# Per-token log-probs agree to 5e-7 between backends (docs/megatron.md); the digest is a weighted
# sum over ~40 response tokens, so its relative difference stays far below this bound.
DIGEST_RTOL = 1e-5


def _run(tmp: Path, name: str, *overrides: str, timeout: float = 600) -> Path:
    data = load_recipe(RECIPE, [*SMALL, *overrides], scale="tiny").data
    out = tmp / name
    out.mkdir()
    recipe = out / "recipe.yaml"  # where the harness puts it
    recipe.write_text(yaml.safe_dump(data))
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)  # always a private local Ray
    result = subprocess.run([sys.executable, "-m", "rl.run", str(recipe), "--out", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-4000:]
    return out


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _check_run(run_dir: Path, steps: int) -> list[dict]:
    """Completion, invariants, FLOPs fields and generator sync; returns the metrics rows."""
    from rl.metrics.mfu import theoretical_tflops

    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "completed" and status["last_step"] == steps, status
    rows = _metrics(run_dir)
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    invariants = [json.loads(x) for x in (run_dir / "invariants.jsonl").read_text().splitlines()]
    assert invariants and all(r["ok"] for r in invariants), [r for r in invariants if not r["ok"]]
    assert sum(r["check"] == "flops_fields" for r in invariants) == steps
    workers = {w["name"] for w in json.loads((run_dir / "env.json").read_text())["workers"]}
    assert workers == {"policy-0", "policy-1", "generation-0"}
    for r in rows:
        assert r["num_ranks"] == 2 and r["total_flops"] > 0
        assert r["theoretical_tflops"] == theoretical_tflops("cpu", 2)  # the world, not the DP size
        assert r["train/num_valid_samples"] == 16
        assert r["train/gen_kl_error"] < 1e-6, r["train/gen_kl_error"]  # refit carried the trained weights
    assert rows[0]["train/ref_kl"] == 0.0  # policy == reference before the first update
    assert rows[-1]["train/ref_kl"] > 0.0  # and training moved it
    return rows


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("megatron_engine")


@pytest.fixture(scope="module")
def ep2(work: Path) -> Path:
    return _run(work, "ep2", "checkpoint.hf_format=true")


def _check_hf_copy(run_dir: Path, step: int) -> None:
    """step_N/hf loads with plain `from_pretrained` and scores like the checkpoint's weights."""
    # PreTrainedTokenizerFast, not AutoTokenizer: AutoTokenizer maps this model type to Qwen's BPE
    # tokenizer class, which re-derives the pre-tokenizer and splits the tiny character tokenizer
    # differently (a released Qwen checkpoint's tokenizer is that class, so it loads either way).
    from transformers import PreTrainedTokenizerFast, Qwen3_5MoeForCausalLM

    from rl.config import ModelConfig
    from rl.models import build_model, token_logprobs
    from rl.tokenizer import load_tokenizer

    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    ckpt = run_dir / "checkpoints" / f"step_{step}"
    policy = torch.load(ckpt / "weights.pt", weights_only=False)["policy"]
    tok = load_tokenizer(recipe["model"]["tokenizer"], model_path=recipe["model"]["path"])
    engine_model = build_model(ModelConfig(**recipe["model"]), vocab_size=len(tok), seed=0)
    engine_model.load_state_dict(policy)  # strict: the gathered weights are a full HF state dict
    loaded = Qwen3_5MoeForCausalLM.from_pretrained(str(ckpt / "hf"), local_files_only=True).eval()
    hf_tok = PreTrainedTokenizerFast.from_pretrained(str(ckpt / "hf"), local_files_only=True)
    text = hf_tok.apply_chat_template([{"role": "user", "content": "3+4"}], add_generation_prompt=True,
                                      tokenize=False) + "\\boxed{7}"
    ids = torch.tensor([hf_tok(text, add_special_tokens=False)["input_ids"]])
    assert ids.tolist() == [tok(text, add_special_tokens=False)["input_ids"]]
    mask = torch.ones_like(ids)
    with torch.no_grad():
        assert torch.equal(token_logprobs(loaded, ids, mask), token_logprobs(engine_model.eval(), ids, mask))


def test_ep2_runs_and_refits(ep2: Path) -> None:
    rows = _check_run(ep2, STEPS)
    assert "val/accuracy" in rows[-1] and rows[-1]["val/num_samples"] == 8  # the pass at the last step
    assert all("val/accuracy" not in r for r in rows[:-1])
    recipe = yaml.safe_load((ep2 / "recipe.yaml").read_text())
    assert recipe["policy"]["backend"] == "megatron" and recipe["policy"]["parallel"]["ep"] == 2
    assert recipe["model"]["path"] == "tiny_qwen3_5_moe" and recipe["task"]["name"] == "math"
    ckpt = ep2 / "checkpoints" / f"step_{STEPS}"
    assert {p.name for p in ckpt.glob("optimizer.rank*.pt")} == {"optimizer.rank0.pt", "optimizer.rank1.pt"}
    tensors = torch.load(ckpt / "weights.pt", weights_only=False)
    _check_hf_copy(ep2, STEPS)
    moved = [k for k in tensors["policy"] if not torch.equal(tensors["policy"][k], tensors["reference"][k])]
    assert any(".mlp.experts." in k for k in moved), "no expert weight changed in training"


def test_tp2_sequence_parallel_on_tq_matches_ep2(ep2: Path, work: Path) -> None:
    tp2 = _run(work, "tp2", "policy.parallel.tp=2", "policy.parallel.ep=1", "policy.parallel.sp=true",
               "algorithm.num_steps=2", "data_plane.backend=tq")
    rows = _check_run(tp2, 2)
    invariants = [json.loads(x) for x in (tp2 / "invariants.jsonl").read_text().splitlines()]
    # per step: policy and reference log-probs, and train, each through the meta-path dispatch
    assert sum(r["check"] == "dispatch_row_order" for r in invariants) == 3 * 2
    first = _metrics(ep2)[0]
    assert rows[0]["train/reward"] == first["train/reward"]  # same weights, same seed: same batch
    assert rows[0]["total_flops"] == first["total_flops"]  # FLOPs count the model, not its layout
    assert rows[0]["train/logprob_digest"] == pytest.approx(first["train/logprob_digest"], rel=DIGEST_RTOL)


def test_pp2_pipeline_matches_ep2(ep2: Path, work: Path) -> None:
    pp2 = _run(work, "pp2", "policy.parallel.pp=2", "policy.parallel.ep=1", "algorithm.num_steps=2",
               "checkpoint.every_steps=2")
    rows = _check_run(pp2, 2)
    first = _metrics(ep2)[0]
    assert rows[0]["train/reward"] == first["train/reward"]
    assert rows[0]["train/logprob_digest"] == pytest.approx(first["train/logprob_digest"], rel=DIGEST_RTOL)
    assert rows[0]["train/loss"] == pytest.approx(first["train/loss"], rel=1e-4, abs=1e-6)
    ckpt = pp2 / "checkpoints" / "step_2"
    assert len(list(ckpt.glob("optimizer.rank*.pt"))) == 2  # one per stage
    tensors = torch.load(ckpt / "weights.pt", weights_only=False)
    assert {f"model.layers.{i}.input_layernorm.weight" for i in range(4)} <= set(tensors["policy"])


def test_torch_backend_logprobs_match_megatron(ep2: Path, work: Path) -> None:
    out = _run(work, "torch", "policy.backend=torch", "policy.parallel.ep=1", "algorithm.num_steps=1",
               "checkpoint.hf_format=true")
    _check_hf_copy(out, 1)
    torch_row, megatron_row = _metrics(out)[0], _metrics(ep2)[0]
    assert torch_row["train/reward"] == megatron_row["train/reward"]
    assert torch_row["train/logprob_digest"] == pytest.approx(megatron_row["train/logprob_digest"],
                                                              rel=DIGEST_RTOL)
    assert torch_row["train/loss"] == pytest.approx(megatron_row["train/loss"], rel=1e-4, abs=1e-6)
