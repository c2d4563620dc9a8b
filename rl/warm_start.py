"""Warm start: a short supervised run on (prompt, answer<eos>) pairs before GRPO.

A randomly initialised tiny model never produces a correct answer, so every GRPO group would
have zero reward variance and nothing to learn from. A couple hundred supervised steps bring the
reward to a nonzero but improvable level. The result is cached on disk, keyed by everything
that determines it, so repeated runs and parity variants start from identical weights.

Calibration (measured 2026-11 on the 2-core dev machine; task `arith` {max_operand: 20,
ops: [+]}, tiny configs of `rl/models/tiny_configs.py`, lr 3e-3, batch 32, model seed = warm
start seed; accuracy on 256 held-out problems, greedy / sampled at temperature 1):

    family       seed  steps  greedy  sampled
    qwen3_5        42     60   0.105    0.070
    qwen3_5        42    150   0.285    0.148
    qwen3_5        42    175   0.371    0.223
    qwen3_5        42    250   0.746    0.535
    qwen3_5         1    200   0.500    0.297
    qwen3_5_moe    42    200   0.371    0.215
    qwen3_5_moe    42    300   0.711    0.551

Loss sits near 0.9 for ~100 steps and then falls, so accuracy rises
steeply after ~150 steps. {steps: 200, lr: 3e-3, batch_size: 32} lands both families at about
0.35-0.5 greedy and 0.2-0.3 sampled: nonzero, with room for GRPO. Cost on an idle machine with
2 threads: ~65 ms per dense step (100 steps in 6.6 s), so ~13 s for 200 steps (MoE somewhat
more); under the contention of a shared machine it was 3-10x slower. lr 1e-2 was worse
(0.11 greedy after 250 steps).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.config import WarmStartConfig
from rl.envs.registry import Env, Problem
from rl.models.image_inputs import ImageLayout, prompt_rows
from rl.models.logprobs import token_logprobs

CACHE_FORMAT = 1  # bump when the training procedure changes, to invalidate old entries
GRAD_CLIP = 1.0


def default_cache_dir() -> Path:
    """$RL_CACHE_DIR/warm_start when set, else ~/.cache/rl/warm_start."""
    root = os.environ.get("RL_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "rl") / "warm_start"


def supervised_inputs(
    tokenizer: PreTrainedTokenizerBase, problems: list[Problem], layout: ImageLayout | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Right-padded prompt+answer+eos ids, attention mask, a loss mask on answer+eos tokens, and
    the row-aligned image columns ({} for text problems).

    An image problem's prompt carries its image placeholder tokens (`prompt_rows`), so
    `layout` (the VL model's `ImageLayout`) is needed for image tasks.
    """
    prompts, images = prompt_rows(tokenizer, problems, layout)
    answers = tokenizer([p.target for p in problems], add_special_tokens=False)["input_ids"]
    rows = [prompt + answer + [tokenizer.eos_token_id] for prompt, answer in zip(prompts, answers)]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    loss_mask = torch.zeros(len(rows), width)
    for i, (row, prompt) in enumerate(zip(rows, prompts)):
        ids[i, : len(row)] = torch.tensor(row)
        attn[i, : len(row)] = 1
        loss_mask[i, len(prompt) : len(row)] = 1.0
    return ids, attn, loss_mask, dict(images or {})


def _fingerprint(model: PreTrainedModel) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def cache_key(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: Env, cfg: WarmStartConfig, seed: int,
              device: str = "cpu") -> str:
    """Hash of the model (config and initial weights), task, warm-start config, seed, vocabulary
    and the kind of device it trains on (GPU kernels give other bits than CPU ones)."""
    material = {
        "format": CACHE_FORMAT,
        "model_config": model.config.to_dict(),
        "initial_weights": _fingerprint(model),
        "task": env.spec,
        # stop_at_loss only when set: entries from before the field keep their keys
        "warm_start": {k: v for k, v in asdict(cfg).items() if not (k == "stop_at_loss" and v is None)},
        "seed": seed,
        "vocab": sorted(tokenizer.get_vocab().items()),
        **({"device": device} if device != "cpu" else {}),  # CPU keys stay as they were
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _train(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: Env, cfg: WarmStartConfig,
           seed: int) -> tuple[float, int]:
    """Returns (the last step's loss, the steps run)."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))
    layout = ImageLayout.of(model)
    recent: list[float] = []
    i = 0
    for i in range(cfg.steps):
        # Negative steps: a problem stream disjoint from GRPO's steps (1, 2, ...) under the same seed.
        problems = env.sample(cfg.batch_size, seed=seed, step=-1 - i)
        ids, attn, loss_mask, images = supervised_inputs(tokenizer, problems, layout)
        dev = next(model.parameters()).device
        ids, attn, loss_mask = ids.to(dev), attn.to(dev), loss_mask.to(dev)
        lp = token_logprobs(model, ids, attn, **{k: v.to(dev) for k, v in images.items()})
        loss = -(lp * loss_mask).sum() / loss_mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        if cfg.stop_at_loss is not None:
            recent = [*recent[1 - cfg.LOSS_WINDOW:], float(loss.detach())]
            if len(recent) == cfg.LOSS_WINDOW and sum(recent) / len(recent) <= cfg.stop_at_loss:
                break
    model.eval()
    return float(loss.detach()), (i + 1 if cfg.steps else 0)


@contextlib.contextmanager
def _deterministic(device: str) -> Iterator[None]:
    """Deterministic kernels while a GPU trains the warm start. Without them two warm starts of
    one seed differed (scatter/index backward kernels accumulate in any order): three at once on
    one H200 began GRPO at reward 0.62 / 0.72 / 0.91, and one of them later collapsed to chance
    (docs/benchmarks.md, 2026-12-01). The result is cached, so every later run reads the same."""
    if torch.device(device).type != "cuda":
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's condition; read at its first use
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    env: Env,
    cfg: WarmStartConfig,
    *,
    seed: int,
    cache_dir: Path | None = None,
    device: str = "cpu",
) -> dict:
    """Train `model` in place on supervised answers (`cfg`: `algorithm.warm_start` or
    `teacher.warm_start`), or load the cached result of the same run.

    `device`: where to train ("cuda" for a GPU run: the driver's own GPU 0, briefly; also where
    the Hugging Face model's fla kernels, when installed, can run). The model ends on the CPU.

    Returns:
        {"cached": bool, "loss": final training loss (None when steps == 0), "steps": steps
         trained (fewer than configured when stop_at_loss ended it), "seconds": wall time of
         this call, "path": the cache file or None}.
    """
    start = time.perf_counter()
    if cfg.steps == 0:
        return {"cached": False, "loss": None, "steps": 0, "seconds": 0.0, "path": None}
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / f"{cache_key(model, tokenizer, env, cfg, seed, device)}.pt"
    if path.is_file():
        entry = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(entry["state_dict"])
        model.eval()
        return {"cached": True, "loss": entry["loss"], "steps": entry.get("steps", cfg.steps),
                "seconds": time.perf_counter() - start, "path": str(path)}
    with _deterministic(device):
        loss, steps = _train(model.to(device), tokenizer, env, cfg, seed)
    model.to("cpu")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"state_dict": model.state_dict(), "loss": loss, "steps": steps}, tmp)
    os.replace(tmp, path)  # atomic: a concurrent reader sees no entry or a whole one
    return {"cached": False, "loss": loss, "steps": steps, "seconds": time.perf_counter() - start,
            "path": str(path)}
