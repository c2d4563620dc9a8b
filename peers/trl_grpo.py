"""TRL's GRPOTrainer as a peer engine, run from one of our recipes:

    python peers/trl_grpo.py RUN_DIR/recipe.yaml --out RUN_DIR     # what the harness runs
    harness run recipes/perf_grpo_dense_1b_trl.yaml [--scale tiny]  # the usual way

Why: every speed claim is a ratio measured side by side (docs/benchmarks.md), and the peer a user
would pick for GRPO on one GPU without vLLM is TRL. This launcher maps the resolved recipe to a
`GRPOConfig` and writes the run dir as our engine does (rl/runlog.py: metrics.jsonl with the same
per-step fields, status.json, env.json), so the same thresholds judge it and bench/e2e_ratio.py
divides the two runs' tokens/s/GPU.

The same work as our engine: the model `rl.models.build_model` builds from the recipe (same
weights for the same seed), the recipe's tokenizer, the task's prompts in our driver's order and
its `score` as the reward, prompts_per_step x generations_per_prompt rows a step, one optimizer
step a batch. TRL's fastest setting without vLLM (measured, ../shared/anchors/trl_grpo_anchor.py):
Hugging Face `generate` with the static cache, gradient checkpointing off. `generation.ignore_eos`
becomes `min_new_tokens = max_new_tokens` (every row as long as ours).

What the peer cannot do the same way is refused before it starts (exit 2, status.json says which
key). The keys that say how our engine runs, not what it computes, are not TRL's to read:
policy.backend, policy.parallel, policy.compile, policy.logprob_batch_size,
policy.distributed_optimizer, generation.backend / tp / colocated / decode, data_plane.

Phases per step (`timing/train/*`): generation is TRL's `_generate` (HF generate and decoding);
old_logprobs / ref_logprobs its no-grad log-prob passes (none at beta 0 with one generation a
step); other the rest of its rollout (rewards, advantages); training the rest of the step
(forward, backward, optimizer); refit and data_plane are 0 (one process, no copy of the weights).
"""

from __future__ import annotations

import argparse
import functools
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repository

from rl.config import RunConfig, load_config  # noqa: E402
from rl.runlog import RunLog  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
PHASES = ("generation", "old_logprobs", "ref_logprobs", "training", "refit", "data_plane", "other")


def refusals(cfg: RunConfig) -> list[str]:
    """One line per recipe key TRL's GRPOTrainer cannot honour as our engine does."""
    alg, loss, opt = cfg.algorithm, cfg.algorithm.loss, cfg.policy.optimizer
    rules = [
        (cfg.world_size != 1, "cluster: the TRL peer is one process on one device; set devices_per_node: 1"),
        (alg.name != "grpo", f"algorithm.name: the TRL peer runs grpo, not {alg.name!r}"),
        (alg.baseline != "mean", "algorithm.baseline: TRL subtracts the group mean; leave_one_out has no "
                                 "GRPOConfig counterpart (use mean)"),
        (loss.is_correction, "algorithm.loss.is_correction: TRL corrects only vLLM's rollouts; set it false"),
        (loss.truncation is not None, "algorithm.loss.truncation: no GRPOConfig counterpart; set it null"),
        (loss.prev_logprobs != "training", "algorithm.loss.prev_logprobs: TRL takes the pre-update log-probs from "
                                           "its training forward (one generation a step); set training"),
        (alg.dynamic_sampling, "algorithm.dynamic_sampling: no GRPOConfig counterpart"),
        (alg.warm_start.steps > 0, "algorithm.warm_start.steps: the TRL peer runs no warm start; set 0"),
        (cfg.model.modality != "text", "model.modality: the TRL peer runs text models only"),
        (opt.decay != "constant", "policy.optimizer.decay: the TRL peer maps the constant schedule only"),
        (opt.warmup_steps > 0 and opt.warmup_init_lr != 0.0,
         "policy.optimizer.warmup_init_lr: TRL's warm-up starts at 0; set 0.0"),
        (cfg.policy.sequence_packing.enabled, "policy.sequence_packing.enabled: the TRL peer pads"),
        (cfg.data.val_every_steps > 0, "data.val_every_steps: the TRL peer runs no validation pass"),
        (cfg.checkpoint.every_steps > 0 or cfg.checkpoint.at_end or cfg.checkpoint.hf_format,
         "checkpoint: the TRL peer writes none; set every_steps: 0, at_end: false"),
        (bool(cfg.policy.env or cfg.generation.env), "policy.env, generation.env: the TRL peer is one process; "
                                                     "use the top-level env"),
        (cfg.profile.kernel_steps is not None, "profile.kernel_steps: the TRL peer traces no kernels; set null"),
        (cfg.batch_rows % cfg.policy.micro_batch_size != 0,
         "policy.micro_batch_size: must divide prompts_per_step x generations_per_prompt"),
    ]
    return [line for refused, line in rules if refused]


def grpo_config(cfg: RunConfig, *, output_dir: Path, cuda: bool) -> Any:
    """The recipe as TRL's GRPOConfig: one generation batch of all the step's rows, one optimizer step."""
    from trl import GRPOConfig

    alg, gen, opt = cfg.algorithm, cfg.generation, cfg.policy.optimizer
    mbs = cfg.policy.micro_batch_size
    return GRPOConfig(
        output_dir=str(output_dir), report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
        use_cpu=not cuda, bf16=cuda and cfg.policy.precision == "bf16", seed=alg.seed, max_steps=alg.num_steps,
        per_device_train_batch_size=mbs, gradient_accumulation_steps=cfg.batch_rows // mbs,
        num_generations=alg.generations_per_prompt, shuffle_dataset=False, dataloader_num_workers=0,
        max_completion_length=gen.max_new_tokens, temperature=gen.temperature, cache_implementation="static",
        generation_kwargs={"min_new_tokens": gen.max_new_tokens} if gen.ignore_eos else {},
        gradient_checkpointing=cfg.policy.activation_checkpointing,
        learning_rate=opt.lr, weight_decay=opt.weight_decay, adam_beta1=opt.betas[0], adam_beta2=opt.betas[1],
        adam_epsilon=opt.eps, max_grad_norm=opt.grad_clip or 0.0, warmup_steps=opt.warmup_steps,
        lr_scheduler_type="constant_with_warmup" if opt.warmup_steps else "constant",
        beta=alg.loss.kl_beta, epsilon=alg.loss.clip_low, epsilon_high=alg.loss.clip_high,
        scale_rewards="group" if alg.normalize_rewards else "none", loss_type="dapo",
        mask_truncated_completions=alg.overlong_filtering,
    )


def prompt_dataset(cfg: RunConfig, env: Any) -> Any:
    """The prompts our driver draws, in its order (cursor 0, 1, ...), one row each."""
    from datasets import Dataset
    from datasets.table import InMemoryTable

    problems = [p for cursor in range(cfg.algorithm.num_steps)
                for p in env.sample(cfg.algorithm.prompts_per_step, seed=cfg.algorithm.seed, step=cursor)]
    table = InMemoryTable.from_pydict({"prompt": [p.prompt for p in problems], "answer": [p.answer for p in problems]})
    # an explicit fingerprint: datasets' hashing of an in-memory table failed under Python 3.11 + pyarrow 26
    return Dataset(table, fingerprint=f"peer-{cfg.name}-{cfg.algorithm.seed}")


def reward_function(env: Any) -> Any:
    """The task's score as a TRL reward function (TRL passes the dataset's other columns by name)."""
    from rl.envs import Problem

    def reward(prompts: list[str], completions: list[str], answer: list[str], **_: Any) -> list[float]:
        return [env.score(Problem(prompt=p, answer=a), c) for p, a, c in zip(prompts, answer, completions)]

    reward.__name__ = f"{env.name}_score"
    return reward


class PhaseClock:
    """Seconds spent in the trainer's rollout methods this step, and the rows' token counts."""

    def __init__(self, sync: Any) -> None:
        self.sync = sync
        self.seconds: dict[str, float] = {}
        self.lengths: list[int] = []
        self.completion_tokens = 0

    def timed(self, name: str, fn: Any, *, when: Any = None) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(*args):
                return fn(*args, **kwargs)
            self.sync()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        return call

    def count(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            prompt, completion = out["prompt_mask"].sum(1), out["completion_mask"].sum(1)
            self.lengths += (prompt + completion).tolist()
            self.completion_tokens += int(completion.sum())
            return out
        return call

    def take(self) -> tuple[dict[str, float], list[int], int]:
        out = (self.seconds, self.lengths, self.completion_tokens)
        self.seconds, self.lengths, self.completion_tokens = {}, [], 0
        return out


def instrument(trainer: Any, clock: PhaseClock) -> None:
    """Wrap the trainer's rollout methods (TRL 1.16 names) so each phase is timed."""
    import torch

    trainer._generate = clock.timed("generation", trainer._generate)
    model = trainer.model
    trainer._get_per_token_logps_and_entropies = clock.timed(
        "old_logprobs", trainer._get_per_token_logps_and_entropies,
        when=lambda m, *a: not torch.is_grad_enabled() and m is model)
    trainer._get_per_token_logps_and_entropies = clock.timed(
        "ref_logprobs", trainer._get_per_token_logps_and_entropies,
        when=lambda m, *a: not torch.is_grad_enabled() and m is not model)
    trainer._generate_and_score_completions = clock.count(
        clock.timed("rollout", trainer._generate_and_score_completions))


def step_metrics(logs: dict, seconds: dict[str, float], total: float, lengths: list[int], completion_tokens: int,
                 *, flops_cfg: Any, device: str) -> dict[str, Any]:
    """Our engine's per-step fields from TRL's logs and the step's clock."""
    from rl.metrics.mfu import performance_metrics, theoretical_tflops
    from rl.models.flops import total_flops

    rollout = seconds.get("rollout", 0.0)
    timing = {name: seconds.get(name, 0.0) for name in ("generation", "old_logprobs", "ref_logprobs")}
    timing.update(refit=0.0, data_plane=0.0, other=max(rollout - sum(timing.values()), 0.0),
                  training=max(total - rollout, 1e-9))
    flops, peak = total_flops(flops_cfg, lengths), theoretical_tflops(device, 1)
    out: dict[str, Any] = {
        "train/reward": float(logs["reward"]), "train/loss": float(logs["loss"]),
        "train/grad_norm": float(logs.get("grad_norm", float("nan"))), "train/lr": float(logs["learning_rate"]),
        "train/mean_response_length": float(logs["completions/mean_length"]),
        "train/truncated_fraction": float(logs.get("completions/clipped_ratio", float("nan"))),
        "train/num_tokens": completion_tokens, "total_flops": flops, "num_ranks": 1, "theoretical_tflops": peak,
        "timing/train/total": total, **{f"timing/train/{k}": timing[k] for k in PHASES},
    }
    out.update(performance_metrics(tokens=sum(lengths), total_flops=flops, theoretical_tflops=peak, num_ranks=1,
                                   step_seconds=total, train_seconds=timing["training"],
                                   generated_tokens=float(completion_tokens), generation_seconds=timing["generation"]))
    return out


def train(cfg: RunConfig, runlog: RunLog) -> None:
    import torch
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from rl.envs import make_env
    from rl.models import build_model
    from rl.tokenizer import load_tokenizer

    cuda = cfg.cluster.device != "cpu"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError(f"cluster.device: {cfg.cluster.device}, but torch sees no CUDA device")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    tokenizer = load_tokenizer(cfg.model.tokenizer, model_path=cfg.model.path)
    env = make_env(cfg.task, data=cfg.data, tokenizer=tokenizer)
    model = build_model(cfg.model, vocab_size=len(tokenizer), seed=cfg.algorithm.seed)
    if cuda and cfg.policy.precision == "bf16":
        model = model.to(torch.bfloat16)  # bf16 weights: fp32 + autocast fails in HF's static cache
    clock = PhaseClock(sync)

    class Steps(TrainerCallback):
        """Step wall time between optimizer steps; one metrics line per logged step."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync()
            self.last = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync()
            now = time.perf_counter()
            self.step = (now - self.last, *clock.take())
            self.last = now

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
            if not logs or "loss" not in logs:
                return  # the end-of-training summary
            total, seconds, lengths, completion_tokens = self.step
            metrics = step_metrics(logs, seconds, total, lengths, completion_tokens, flops_cfg=model.config,
                                   device=cfg.cluster.device)
            if cuda:
                metrics["performance/peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
            runlog.log_metrics(state.global_step, metrics)
            runlog.write_status("running")
            print(f"step {state.global_step}/{cfg.algorithm.num_steps} reward={metrics['train/reward']:.3f} "
                  f"t={total:.2f}s tokens/s/gpu={metrics['performance/tokens_per_sec_per_gpu']:.0f}", flush=True)

    trainer = GRPOTrainer(model=model, reward_funcs=[reward_function(env)], processing_class=tokenizer,
                          args=grpo_config(cfg, output_dir=runlog.run_dir / "trl", cuda=cuda),
                          train_dataset=prompt_dataset(cfg, env), callbacks=[Steps()])
    instrument(trainer, clock)
    runlog.write_env([{"name": "trl-0", "role": "policy", "rank": 0, "host": socket.gethostname(),
                       "device": torch.cuda.get_device_name() if cuda else "cpu", "env": {}}])
    trainer.train()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="resolved recipe YAML (the run dir's recipe.yaml)")
    parser.add_argument("--out", required=True, help="run dir to write")
    args = parser.parse_args(argv)
    run_dir = Path(args.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        cfg = load_config(args.recipe)
    except (ValueError, OSError) as exc:
        cfg, refused = None, [f"bad recipe {args.recipe}: {exc}"]
    else:
        refused = refusals(cfg)
    runlog = RunLog(run_dir, num_steps=cfg.algorithm.num_steps if cfg else 0)
    if refused:
        print("trl peer: refused: " + "; ".join(refused), file=sys.stderr)
        runlog.write_status("failed", error="refused: " + "; ".join(refused), exit_code=EXIT_CONFIG)
        runlog.close()
        return EXIT_CONFIG
    code, state, error = EXIT_OK, "completed", None
    try:
        train(cfg, runlog)
    except Exception as exc:  # noqa: BLE001 - reported in status.json, traceback to stderr
        traceback.print_exc()
        code, state, error = EXIT_FAILED, "failed", f"{type(exc).__name__}: {exc}"
    runlog.write_status(state, error=error, exit_code=code)
    runlog.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
