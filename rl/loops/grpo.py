"""The GRPO driver loop: one algorithm, with the data path (legacy or TQ) as a switch.

Per step: sample prompts (a pure function of seed and data cursor), repeat each G times,
generate, score, compute advantages, get previous and reference log-probs from the policy
ranks, train, refit the generator. The two data paths differ only in how rows reach the
workers (`rl/data/plane.py`); they give the same rows to the same ranks in the
same order for training and fixed-shape micro-batches everywhere, so their metrics are
bitwise identical (the parity test checks it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

import torch

from rl.algorithms.advantages import dynamic_sampling_keep, grpo_advantages
from rl.algorithms.kl import ref_kl
from rl.algorithms.loss import needs_reference, prev_from_training
from rl.config import RunConfig
from rl.generation import Generation, decode_responses, row_seeds
from rl.generation.length_buckets import decode_in_groups
from rl.metrics import Timer
from rl.metrics.digest import logprob_digest
from rl.metrics.mfu import performance_metrics
from rl.metrics.padding import SlotCount, decoded_slots, padding_fractions
from rl.models.image_inputs import ImageLayout, encode_prompts

__all__ = ["GRPODriver"]

MAX_SAMPLING_ROUNDS = 4  # dynamic sampling gives up filling the batch after this many rounds
# The step's phases (`timing/train/<phase>`, seconds): they and `other` add up to `total`.
# `data_plane` is the rows' way into, out of and off the store outside the phases' own calls;
# `offload` and `reload` the training state's trip to host memory and back around generation
# (`generation.offload_training`).
PHASES = ("offload", "generation", "reload", "old_logprobs", "ref_logprobs", "training", "refit", "data_plane")
TIMING_KEYS = ("total", *PHASES, "other")


@dataclass(kw_only=True)
class Rollout:
    """One step's rows, driver side (the bulk columns stay with the store on the TQ path)."""

    columns: dict[str, torch.Tensor]  # input_ids, attention_mask, response_mask, gen_logprobs
    rewards: torch.Tensor
    lengths: torch.Tensor
    truncated: torch.Tensor
    uids: list[str]
    decoded: SlotCount  # what the decoding loops carried for these rows (every round's, dynamic sampling)


class GRPODriver:
    """Runs GRPO steps against a policy group and a generation worker.

    Args:
        cfg: the run config.
        policy: driver-side policy group (`get_logprobs`, `train`, `dp_size`).
        generate: `prompt_ids, seeds, prompt_lengths, **images -> dict of Generation fields` (the
            generation replicas' call, rows in the caller's order: rl/generation/replicas.py;
            `images` are the row-aligned image columns of a vision task).
        refit: `version -> seconds spent loading weights into the generation replicas`.
        tokenizer, env: the recipe's tokenizer and task.
        store: the data path (legacy or TQ).
        flops_config: FLOPs shapes of the model.
        layout: how a vision-language model takes images (`ImageLayout.of(model)`); None for text.
        Image columns (`pixel_values`, `image_grid_thw`) then travel with their rows like any other.
        record_invariant: receives the `generation_row_order` record of each call decoded in
            groups (`generation.length_buckets` > 1).
    """

    def __init__(self, *, cfg: RunConfig, policy: Any, generate: Callable[..., dict],
                 refit: Callable[[int], float], tokenizer: Any, env: Any, store: Any,
                 record_invariant: Callable[[dict], None], layout: ImageLayout | None = None,
                 memory: Any = None) -> None:
        """`memory`: a rl.metrics.phase_memory.PhaseMemory on GPUs (each phase's peak per GPU), None
        on a CPU."""
        self.cfg = cfg
        self.alg = cfg.algorithm
        self.policy = policy
        self._generate = generate
        self._refit = refit
        self.tokenizer = tokenizer
        self.env = env
        self.store = store
        self.layout = layout
        self._record_invariant = record_invariant
        self.loss_cfg = cfg.algorithm.loss
        self.cursor = 0  # batches of prompts drawn so far (the data cursor)
        self.offloaded_bytes = 0  # the most one policy rank sent to host memory in the last generation
        self.memory = memory
        self.peaks: dict[str, float] = {}  # phase -> GiB, the last step's (GPU runs)
        self.phase_spans: list[tuple[str, int, int]] = []  # the last step's (rl.metrics.timers.Timer.spans)

    @contextmanager
    def _decoding(self, timer: Timer) -> Iterator[None]:
        """The span the generation replicas decode in: with `generation.offload_training` the
        policy ranks' training state waits in host memory meanwhile (timed `offload`, `reload`),
        so a replica colocated on a rank's GPU has the room training held."""
        offload = self.cfg.generation.offload_training
        if offload:
            with timer.time("offload"):
                self.offloaded_bytes = self.policy.offload()
        if self.memory is not None:
            self.memory.start()
        yield
        if self.memory is not None:
            self.peaks["generation"] = self.memory.peak()
        if offload:
            with timer.time("reload"):
                self.policy.reload()
        if self.memory is not None:
            self.memory.start()  # the training phase: log-probs, training and the refit

    # --- rollout -------------------------------------------------------------------------------

    def _decode(self, prompt_ids: torch.Tensor, *, seeds: torch.Tensor, prompt_lengths: torch.Tensor,
                images: dict[str, torch.Tensor], **options: Any) -> tuple[dict[str, torch.Tensor], SlotCount]:
        """The rollouts of one call (Generation columns, caller's order) and the slots they took:
        one block, or `generation.length_buckets` groups of similar prompt length."""
        groups = self.cfg.generation.length_buckets
        if groups == 1:
            out = self._generate(prompt_ids, seeds=seeds, prompt_lengths=prompt_lengths, **images, **options)
            return out, decoded_slots(out["lengths"], out["prompt_lengths"])
        decoded = decode_in_groups(self._generate, prompt_ids, seeds=seeds, prompt_lengths=prompt_lengths,
                                   images=images, num_groups=groups, pad_token_id=self.tokenizer.pad_token_id,
                                   record_invariant=self._record_invariant, **options)
        return decoded.columns, decoded.slots

    def _sample_round(self, step: int) -> Rollout:
        G = self.alg.generations_per_prompt
        cursor = self.cursor
        self.cursor += 1
        problems = self.env.sample(self.alg.prompts_per_step, seed=self.alg.seed, step=cursor)
        prompts = encode_prompts(self.tokenizer, problems, self.layout)
        images = {k: v.repeat_interleave(G, dim=0) for k, v in prompts.columns().items()}
        ids = prompts.input_ids.repeat_interleave(G, dim=0)
        out, decoded = self._decode(ids, seeds=row_seeds(self.alg.seed * 1_000_003 + cursor, len(ids)),
                                    prompt_lengths=prompts.lengths.repeat_interleave(G), images=images)
        gen = Generation.of(out)
        texts = decode_responses(self.tokenizer, gen)
        rewards = torch.tensor([self.env.score(problems[i // G], text) for i, text in enumerate(texts)],
                               dtype=torch.float32)
        uids = [f"c{cursor}p{j}" for j in range(len(problems)) for _ in range(G)]
        columns = {k: out[k] for k in ("input_ids", "attention_mask", "response_mask", "gen_logprobs")}
        columns.update(images)
        return Rollout(columns=columns, rewards=rewards, lengths=out["lengths"],
                       truncated=out["truncated"], uids=uids, decoded=decoded)

    def rollout(self, step: int) -> Rollout:
        """This step's rollouts; with dynamic sampling, groups with zero reward spread are
        replaced by fresh ones until the batch is full (or MAX_SAMPLING_ROUNDS is reached, after
        which dropped groups fill the rest: they carry zero advantage)."""
        first = self._sample_round(step)
        if not self.alg.dynamic_sampling:
            return first
        G = self.alg.generations_per_prompt
        kept: list[tuple[Rollout, int]] = []
        dropped: list[tuple[Rollout, int]] = []
        current = first
        decoded = first.decoded
        for round_ in range(MAX_SAMPLING_ROUNDS):
            keep = dynamic_sampling_keep(current.rewards, G)
            for g, ok in enumerate(keep.tolist()):
                (kept if ok else dropped).append((current, g))
            if len(kept) >= self.alg.prompts_per_step or round_ == MAX_SAMPLING_ROUNDS - 1:
                break
            current = self._sample_round(step)
            decoded = decoded + current.decoded
        chosen = (kept + dropped)[: self.alg.prompts_per_step]
        return _take_groups(chosen, G, decoded)

    # --- validation ----------------------------------------------------------------------------

    def validate(self, step: int) -> dict[str, float]:
        """`val/accuracy`: mean reward of one greedy completion per validation problem (the
        dataset task's validation split), with the weights the generator holds after `step`."""
        problems = self.env.validation_problems()
        prompts = encode_prompts(self.tokenizer, problems, self.layout)
        with self._decoding(Timer()):
            out, _ = self._decode(prompts.input_ids, seeds=row_seeds(self.alg.seed, len(problems)),
                                  prompt_lengths=prompts.lengths, images=prompts.columns(), temperature=0.0)
        gen = Generation.of(out)
        texts = decode_responses(self.tokenizer, gen)
        rewards = [self.env.score(p, t) for p, t in zip(problems, texts)]
        return {"val/accuracy": sum(rewards) / len(rewards), "val/num_samples": len(rewards)}

    # --- one step ------------------------------------------------------------------------------

    def step(self, step: int) -> dict[str, Any]:
        """One GRPO step; returns the step's metrics."""
        alg = self.alg
        timer = Timer(prefix="timing/train")
        with timer:
            with self._decoding(timer), timer.time("generation"):
                ro = self.rollout(step)
            advantages, _, _ = grpo_advantages(ro.rewards, group_size=alg.generations_per_prompt,
                                               baseline=alg.baseline, normalize=alg.normalize_rewards)
            sample_mask = torch.ones_like(ro.rewards)
            if alg.overlong_filtering:
                sample_mask = (~ro.truncated).to(torch.float32)
            with timer.time("data_plane"):
                handle = self.store.put_rollout(step=step, uids=ro.uids, columns=ro.columns,
                                                lengths=ro.lengths.tolist())
            from_training = prev_from_training(self.loss_cfg)  # else a pass of its own, before training
            if not from_training:
                with timer.time("old_logprobs"):
                    handle = self.store.logprobs(handle, self.policy, reference=False)
            reference = needs_reference(self.loss_cfg)
            if reference:
                with timer.time("ref_logprobs"):
                    handle = self.store.logprobs(handle, self.policy, reference=True)
            with timer.time("data_plane"):
                lp = self.store.read(handle, (*(() if from_training else ("prev_logprobs",)),
                                              *(("ref_logprobs",) if reference else ()),
                                              "gen_logprobs", "response_mask"))
            token_mask = lp["response_mask"].to(torch.float32) * sample_mask[:, None]
            num_tokens = int(token_mask.sum().item())
            with timer.time("training"):
                train = self.store.train(handle, self.policy, advantages=advantages,
                                         sample_mask=sample_mask, num_tokens=num_tokens,
                                         loss_cfg=self.loss_cfg, step=step)
            with timer.time("data_plane"):
                if from_training:  # the ranks answered them from their training forwards
                    lp.update(self.store.read(handle, ("prev_logprobs",)))
                self.store.finish(handle)
            with timer.time("refit"):
                self._refit(step)
        if self.memory is not None:
            self.peaks["training"] = self.memory.peak()
        self.phase_spans = timer.spans()  # the step's phases on the epoch clock (profile.kernel_steps)
        seconds = timer.metrics()
        return self._metrics(ro, lp, train, sample_mask, seconds)

    def _metrics(self, ro: Rollout, lp: dict[str, torch.Tensor], train: dict[str, float],
                 sample_mask: torch.Tensor, seconds: dict[str, float]) -> dict[str, Any]:
        mask = lp["response_mask"].to(torch.float32)
        response_lengths = mask.sum(dim=1)
        out: dict[str, Any] = {
            "train/reward": float(ro.rewards.mean()),
            "train/loss": train["loss"],
            "train/pg_loss": train["pg_loss"],
            "train/grad_norm": train["grad_norm"],
            "train/lr": train["lr"],
            "train/token_mult_prob_error": train["token_mult_prob_error"],
            "train/gen_kl_error": train["gen_kl_error"],
            "train/kl_penalty": train["kl_penalty"],
            "train/clip_fraction": train["clip_fraction"],
            "train/approx_kl": train["approx_kl"],
            "train/is_truncated_fraction": train["is_truncated_fraction"],
            "train/num_valid_samples": int(train["num_valid_samples"]),
            "train/num_tokens": int(train["num_tokens"]),
            "train/mean_response_length": float(response_lengths.mean()),
            "train/truncated_fraction": float(ro.truncated.float().mean()),
            **padding_fractions(ro.lengths, ro.decoded),
            "train/logprob_digest": logprob_digest(lp["prev_logprobs"], mask),
            "total_flops": train["total_flops"],
            "num_ranks": train["num_ranks"],
            "theoretical_tflops": train["theoretical_tflops"],
        }
        if "ref_logprobs" in lp:  # a KL term in the loss: the reference pass ran
            out["train/ref_kl"] = float(ref_kl(lp["prev_logprobs"], lp["ref_logprobs"], mask))
        out.update(phase_seconds(seconds))
        out.update(performance_metrics(
            tokens=int(ro.lengths.sum()), total_flops=out["total_flops"], theoretical_tflops=out["theoretical_tflops"],
            num_ranks=out["num_ranks"], step_seconds=out["timing/train/total"],
            train_seconds=out["timing/train/training"], generated_tokens=float(response_lengths.sum()),
            generation_seconds=out["timing/train/generation"]))
        if "peak_memory_gib" in train:  # GPU runs: the largest of any rank's peak
            out["performance/peak_memory_gib"] = train["peak_memory_gib"]
        if self.cfg.generation.offload_training:
            out["performance/offloaded_gib"] = self.offloaded_bytes / 2**30
        for phase, gib in self.peaks.items():  # GPU runs: per GPU, the largest (rl/metrics/phase_memory.py)
            out[f"performance/{phase}_peak_gib"] = gib
        return out


def phase_seconds(seconds: dict[str, float]) -> dict[str, float]:
    """Every `timing/train/*` key of TIMING_KEYS from the step timer's seconds: the phases (0.0
    where one did not run) and `other`, the rest of `total` (advantages, host work between the
    phases)."""
    get = {key: seconds.get(f"timing/train/{key}", 0.0) for key in ("total", *PHASES)}
    get["other"] = max(get["total"] - sum(get[k] for k in PHASES), 0.0)
    return {f"timing/train/{key}": get[key] for key in TIMING_KEYS}


def _take_groups(chosen: list[tuple[Rollout, int]], G: int, decoded: SlotCount) -> Rollout:
    """A rollout made of whole groups taken from several sampling rounds, in the given order
    (`decoded`: what every round's decoding carried)."""
    def rows(r: Rollout, g: int) -> slice:
        return slice(g * G, (g + 1) * G)

    columns = {k: torch.cat([r.columns[k][rows(r, g)] for r, g in chosen])
               for k in chosen[0][0].columns}
    return Rollout(
        columns=columns,
        rewards=torch.cat([r.rewards[rows(r, g)] for r, g in chosen]),
        lengths=torch.cat([r.lengths[rows(r, g)] for r, g in chosen]),
        truncated=torch.cat([r.truncated[rows(r, g)] for r, g in chosen]),
        uids=[u for r, g in chosen for u in r.uids[rows(r, g)]],
        decoded=decoded,
    )

