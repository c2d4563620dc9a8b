"""The engine process: `python -m rl.run RECIPE.yaml --out RUN_DIR [--resume]`.

Reads one resolved recipe, refuses it before Ray starts if the preflight does (rl/preflight.py:
what the harness asks before launch), runs GRPO or cross-tokenizer distillation on Ray, and writes
the run dir (docs/architecture.md):
metrics.jsonl, invariants.jsonl, env.json, status.json, checkpoints/. Exit codes: 0 done,
1 failed, 2 bad recipe, arguments or checkpoint (a corrupt checkpoint on --resume is refused in
one line), 3 a worker died, 4 workers stopped answering (`limits.worker_timeout_s`),
130/143 interrupted (SIGINT/SIGTERM). status.json always says why, and a refusal never touches
the metrics already in the run dir.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl import checkpoint, faults
from rl.cluster.worker_errors import DeadWorkerError, WorkerTimeoutError
from rl.config import ROLES, ModelConfig, RunConfig, read_recipe, resolved_config
from rl.preflight import check_config
from rl.recipe import secret_env
from rl.runlog import METRICS, STATUS, RunLog, read_jsonl, write_json_atomic

log = logging.getLogger("rl.run")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_DEAD_WORKER, EXIT_TIMEOUT = 0, 1, 2, 3, 4
SHUTDOWN_GRACE_S = 15.0
NO_TOKEN_ID = -1  # the eos id generation gets under generation.ignore_eos: no sampled token equals it


class Interrupted(BaseException):
    """SIGTERM/SIGINT arrived; a BaseException so no `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


_SIGNALLED: list[int] = []  # every SIGTERM/SIGINT received, even one a library swallowed


def _on_signal(signum: int, _frame: Any) -> None:
    _SIGNALLED.append(signum)
    raise Interrupted(signum)


def _catch_signals() -> None:
    """SIGTERM and SIGINT raise Interrupted. Set again after ray.init, which installs its own
    handlers: with Ray's, a SIGINT sent to the driver alone was ignored and the run went on to
    its last step (the fault suite's harness-sigint entry)."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


def _check_signalled() -> None:
    """Raise Interrupted for a signal whose exception a library caught and dropped."""
    if _SIGNALLED:
        raise Interrupted(_SIGNALLED[0])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rl.run", description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="resolved recipe YAML")
    parser.add_argument("--out", required=True, help="run dir to write")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in RUN_DIR/checkpoints (or checkpoint.dir)")
    return parser.parse_args(argv)


def interruption(exc: BaseException) -> int | None:
    """The exit code of a SIGTERM/SIGINT hidden inside `exc`, or None.

    A signal that lands while the driver waits in Ray's Cython code does not come out as our
    Interrupted: Cython re-raises it as `SystemError: <cyfunction CoreWorker.wait> returned a
    result with an exception set`, with the Interrupted as its cause. Reported as a failure, a
    cancelled run exited 1 instead of 143 (the fault suite's harness-sigterm entry, 1 run in 3).
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, Interrupted):
            return exc.exit_code
        if isinstance(exc, KeyboardInterrupt):
            return 130
        exc = exc.__cause__ or exc.__context__
    return None


def _failure(exc: Exception) -> tuple[int, str, str]:
    """(exit code, state, error) of an exception out of the engine: interrupted or failed."""
    stopped = interruption(exc) or (128 + _SIGNALLED[0] if _SIGNALLED else None)
    if stopped is not None:
        name = signal.Signals(stopped - 128).name
        return stopped, "interrupted", f"interrupted by {name} (surfaced as {type(exc).__name__})"
    traceback.print_exc()
    return EXIT_FAILED, "failed", f"{type(exc).__name__}: {exc}"


# Printed when the run enters each start-up phase; the harness shows the newest on its progress line
# until step 1 ends (harness/launch/phase_tail.py reads it from engine.log: the line is the contract).
PHASE_PREFIX = "rl.run: phase: "


def _phase(name: str) -> None:
    print(f"{PHASE_PREFIX}{name}", file=sys.stderr, flush=True)


def _config_error(run_dir: Path, message: str) -> int:
    """Refuse to run: status.json says why; metrics already in the run dir are left alone."""
    run_dir.mkdir(parents=True, exist_ok=True)
    steps = [int(r.get("step", 0)) for r in read_jsonl(run_dir / METRICS)]
    write_json_atomic(run_dir / STATUS, {
        "state": "failed", "exit_code": EXIT_CONFIG, "error": message, "last_step": max(steps, default=0),
        "num_steps": 0, "wall_s": 0.0, "dead_worker": None})
    print(f"rl.run: {message}", file=sys.stderr)
    return EXIT_CONFIG


def _without_faults(cfg: RunConfig) -> RunConfig:
    """A resumed run plants no fault (rl/faults.py): not here, and not in any worker's env."""
    os.environ.pop(faults.ENV, None)

    def drop(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k != faults.ENV}

    return replace(cfg, env=drop(cfg.env), policy=replace(cfg.policy, env=drop(cfg.policy.env)),
                   generation=replace(cfg.generation, env=drop(cfg.generation.env)))


def run(cfg: RunConfig, run_dir: Path, *, resume: bool, hidden_env: list[str] | tuple = ()) -> int:
    """Run the recipe into `run_dir`; returns the exit code (status.json is always written)."""
    ckpt_path = checkpoint.latest(run_dir, directory=cfg.checkpoint.dir) if resume else None
    if resume and ckpt_path is None:
        print("rl.run: --resume but no checkpoint in the run dir; starting from step 1", file=sys.stderr)
    try:
        ckpt = checkpoint.load(ckpt_path) if ckpt_path is not None else None
    except checkpoint.CheckpointError as exc:
        return _config_error(run_dir, f"cannot resume: {exc}")
    runlog = RunLog(run_dir, num_steps=cfg.algorithm.num_steps,
                    resume_step=ckpt.step if ckpt is not None else None)
    engine = None
    code, state, error = EXIT_OK, "completed", None
    try:
        engine = Engine(cfg, runlog, ckpt, hidden_env=hidden_env)
        engine.setup()
        engine.run()
        _check_signalled()
    except DeadWorkerError as exc:
        runlog.dead_worker = exc.worker
        code, state, error = EXIT_DEAD_WORKER, "failed", str(exc)
    except WorkerTimeoutError as exc:
        code, state, error = EXIT_TIMEOUT, "failed", str(exc)
    except Interrupted as exc:
        code, state, error = exc.exit_code, "interrupted", f"interrupted by {exc}"
    except KeyboardInterrupt:
        code, state, error = 130, "interrupted", "interrupted by SIGINT"
    except SystemExit as exc:  # a library's signal handler (Ray's) calling sys.exit
        code, state, error = EXIT_FAILED, "interrupted", f"exit requested ({exc.code})"
    except Exception as exc:  # noqa: BLE001 - reported in status.json, traceback to stderr
        code, state, error = _failure(exc)
    if error:
        print(f"rl.run: {state}: {error}", file=sys.stderr)
    runlog.write_status(state, error=error, exit_code=code)
    runlog.close()
    # A worker stuck in a broken collective must not keep us from exiting.
    watchdog = threading.Timer(SHUTDOWN_GRACE_S, os._exit, [code])
    watchdog.daemon = True
    watchdog.start()
    # The outcome is decided and recorded: a late SIGTERM just ends the shutdown early.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(code))
    signal.signal(signal.SIGINT, lambda *_: os._exit(code))
    if engine is not None:
        engine.shutdown()
    return code


class Engine:
    """The workers and driver of one run: set up, run the steps, shut down."""

    def __init__(self, cfg: RunConfig, runlog: RunLog, ckpt: checkpoint.Checkpoint | None, *,
                 hidden_env: list[str] | tuple = ()) -> None:
        self.cfg = cfg
        self.hidden_env = set(hidden_env)  # env names written <redacted> (rl/recipe/secret_env.py)
        self.runlog = runlog
        self.ckpt = ckpt
        self.cluster: Any = None
        self.plane: Any = None  # the data-plane backend (rl/data/plane.py)
        self.generation: Any = None  # GRPO's generate callable over the replicas (rl/generation/replicas.py)
        self.kernel_trace: Any = None  # profile.kernel_steps' StepTrace (rl/metrics/kernel_trace.py)
        self.ray_temp_dir: str | None = None  # the private Ray's, removed at shutdown
        self.step = runlog.last_step

    # --- set-up --------------------------------------------------------------------------

    def setup(self) -> None:
        import ray

        from rl.cluster.placement import plan_placement
        from rl.cluster.ray_cluster import Cluster, start_ray
        from rl.data.plane import plane_class
        from rl.envs import make_env
        from rl.generation.decode_mode import fp32_experts, resolve_decode
        from rl.loops.grpo import GRPODriver
        from rl.models import ImageLayout, build_model
        from rl.tokenizer import load_tokenizer
        from rl.warm_start import warm_start
        from rl.workers.build import (
            setup_generation_workers,
            setup_policy_workers,
            spawn_generation_workers,
            spawn_policy_workers,
        )
        from rl.workers.group import PolicyGroup

        cfg, alg = self.cfg, self.cfg.algorithm
        distill = alg.name == "distill"  # no generator: the responses come from the task's answers
        world = cfg.world_size
        placement = plan_placement(device=cfg.cluster.device, world_size=world,
                                   colocated=cfg.generation.colocated, nodes=cfg.cluster.nodes,
                                   replicas=cfg.generation.replicas)
        device = "cuda" if placement.gpu else "cpu"
        # Logical CPUs: our workers take fractions; a data plane's own actors may ask for whole
        # CPUs (TransferQueue's do), so those are reserved on top.
        plane = plane_class(cfg.data_plane.backend)
        _phase("starting Ray")
        self.ray_temp_dir = start_ray(num_cpus=max(placement.num_cpus, 2) + plane.ray_cpus(cfg.data_plane),
                                      num_gpus=placement.num_gpus, withhold=self.hidden_env)
        _catch_signals()  # ray.init installs its own handlers; ours win
        tokenizer = load_tokenizer(cfg.model.tokenizer, model_path=cfg.model.path)
        env = make_env(cfg.task, data=cfg.data, tokenizer=tokenizer)
        self.plane = plane.open(cfg.data_plane, group_size=alg.generations_per_prompt)
        self.cluster = cluster = Cluster(placement=placement, env_vars={r: cfg.worker_env(r) for r in ROLES},
                                         secret_names=frozenset(self.hidden_env))
        ranks = spawn_policy_workers(cluster, placement, world_size=world, data_plane=self.plane.worker_client,
                                     device=device)
        decode = resolve_decode(cfg.generation.decode, gpu=placement.gpu,
                                fp32_experts=fp32_experts(cfg.model.family, cfg.policy.precision))
        gens = [] if distill else spawn_generation_workers(cluster, placement, cfg.generation,
                                                            precision=cfg.policy.precision, decode=decode,
                                                            device=device)
        workers = [*ranks, *gens]

        # While the actors boot, build (and warm-start) the initial weights here, unless every
        # worker reads its own from model.path (`shard_reads`).
        vocab_size = len(tokenizer)
        shard_reads = self.shard_reads(cfg, resume=self.ckpt is not None)
        if shard_reads:
            model, config = None, _path_config(cfg.model, vocab_size)
            log.info("weights: every worker reads its own from model.path (megatron: its shards only)")
        else:
            model = build_model(cfg.model, vocab_size=vocab_size, seed=alg.seed)
            config = model.config
        # HF-format checkpoints (checkpoint.hf_format) save through the driver's model and tokenizer.
        self.model, self.tokenizer = (model if cfg.checkpoint.hf_format else None), tokenizer
        if shard_reads:
            weights = None
        elif self.ckpt is None:
            if alg.warm_start.steps:
                _phase(f"warm start (up to {alg.warm_start.steps} steps, or its cached result)")
            info = warm_start(model, tokenizer, env, alg.warm_start, seed=alg.seed, device=device)
            log.info("warm start: %s", info)
            weights = model.state_dict()
        else:
            weights = self.ckpt.weights()["policy"]
        weights_ref = ray.put(weights) if weights is not None else None
        teacher = self._teacher(tokenizer, env, device) if distill else None
        master = cluster.call([ranks[0]], "rendezvous_address")[0]
        teacher_ref = ray.put(teacher["spec"]) if teacher else None
        _phase("setting up the workers (model, optimizer, generator)")
        refs = setup_policy_workers(ranks, master=master, model=cfg.model, policy=cfg.policy, vocab_size=vocab_size,
                                    seed=alg.seed, weights=weights_ref, teacher=teacher_ref)
        refs += setup_generation_workers(gens, model=cfg.model, vocab_size=vocab_size, seed=alg.seed,
                                         weights=weights_ref)
        topology = cluster.get(refs, [h.name for h in workers], timeout_s=300)[:world]
        self.policy = PolicyGroup(cluster=cluster, ranks=ranks, flops_cfg=config,
                                  device=cfg.cluster.device, num_ranks=world,
                                  record_invariant=self._record_invariant, topology=topology,
                                  timeout_s=cfg.limits.worker_timeout_s,
                                  teacher_flops_cfg=teacher["flops_cfg"] if teacher else None)
        if self.ckpt is not None:
            self.policy.load_checkpoint(self.ckpt)
            checkpoint.restore_rng(self.ckpt.rng)
        self._report_env(workers)
        if cfg.profile.kernel_steps:  # the preflight refused it off the GPU
            from rl.metrics.kernel_trace import StepTrace

            self.kernel_trace = StepTrace(lambda handles, method: cluster.call(handles, method), ranks, gens,
                                          colocated=cfg.generation.colocated, steps=cfg.profile.kernel_steps)
        if distill:
            from rl.loops.distill import DistillDriver

            self.driver = DistillDriver(cfg=cfg, policy=self.policy, student=teacher["student_side"],
                                        teacher=teacher["teacher_side"], env=env, store=self.plane,
                                        record_invariant=self._record_invariant,
                                        projection_shape=teacher["spec"].projection.shape)
        else:
            self.generation = self._generate_fn(gens, tokenizer)
            memory = None
            if placement.gpu:  # each phase's peak per GPU, against the plan's two phases
                from rl.metrics.phase_memory import PhaseMemory

                memory = PhaseMemory(lambda handles, reset: cluster.call(handles, "device_memory", reset=reset),
                                     ranks, gens, colocated=cfg.generation.colocated)
            self.driver = GRPODriver(cfg=cfg, policy=self.policy, generate=self.generation,
                                     refit=self._refit_fn(gens, ranks), tokenizer=tokenizer, env=env,
                                     store=self.plane, layout=ImageLayout.of(config),
                                     record_invariant=self._record_invariant, memory=memory)
        if self.ckpt is not None:
            self.driver.cursor = self.ckpt.cursor

    @staticmethod
    def shard_reads(cfg: RunConfig, *, resume: bool) -> bool:
        """Whether the workers read their initial weights from `model.path` themselves instead of
        the driver loading the whole model and shipping its state dict to each.

        True for the megatron backend with `model.path` set, no warm start and no resume: each
        policy rank then reads only the tensors and slices it holds (rl/backends/megatron/load.py)
        and the generator, an HF model that needs every weight, loads the checkpoint itself. The
        driver keeps only the config (FLOPs, the image layout); it loads the whole model only
        to write an HF-format checkpoint (`checkpoint.hf_format`, at the first save: it writes
        every weight anyway). Otherwise the driver's weights are the initial ones and it still
        loads the model: a warm start trains it here (the weights are no longer the
        checkpoint's), a resume ships the checkpoint's policy, a random-init twin
        (`model.path: null`) is built here from its seed, and the torch backend holds whole
        weights on every rank anyway.
        """
        from rl.backends.rules import backend_rules

        return backend_rules(cfg.policy.backend).reads_own_weights and bool(cfg.model.path) and not resume \
            and cfg.algorithm.warm_start.steps == 0

    def _teacher(self, student_tokenizer: Any, env: Any, device: str) -> dict[str, Any]:
        """The frozen teacher (built, warm-started on the task) and the projection between the
        two tokenizers, sized from both configured vocabularies (rl/distill/projection.py)."""
        from rl.distill import build_projection, canonical_tokens
        from rl.distill.batch import Side
        from rl.distill.step import TeacherSpec
        from rl.models import build_model
        from rl.tokenizer import load_tokenizer
        from rl.warm_start import warm_start

        cfg, t = self.cfg, self.cfg.teacher
        tokenizer = load_tokenizer(t.tokenizer)
        model = build_model(t, vocab_size=len(tokenizer), seed=cfg.algorithm.seed)
        info = warm_start(model, tokenizer, env, t.warm_start, seed=cfg.algorithm.seed, device=device)
        log.info("teacher warm start: %s", info)
        projection = build_projection(student_tokenizer, tokenizer, topk=cfg.algorithm.distill.projection_topk)
        spec = TeacherSpec(model=t, vocab_size=len(tokenizer), weights=model.state_dict(),
                           projection=projection)
        return {"spec": spec, "flops_cfg": model.config,
                "student_side": Side(tokenizer=student_tokenizer, texts=canonical_tokens(student_tokenizer)),
                "teacher_side": Side(tokenizer=tokenizer, texts=canonical_tokens(tokenizer))}

    def _generate_fn(self, gens: list[Any], tokenizer: Any) -> Any:
        """The driver's `generate`: each call's prompt groups spread over the replicas, decoded
        concurrently, rows back in the caller's order (rl/generation/replicas.py)."""
        from rl.generation.replicas import ReplicaSpread

        cfg, cluster = self.cfg, self.cluster
        # generation.ignore_eos: an id no token has, so no row ends before max_new_tokens
        eos = NO_TOKEN_ID if cfg.generation.ignore_eos else tokenizer.eos_token_id
        gen_kwargs = {"max_new_tokens": cfg.generation.max_new_tokens,
                      "temperature": cfg.generation.temperature,
                      "eos_token_id": eos, "pad_token_id": tokenizer.pad_token_id}

        def submit(shares: list[tuple[int, dict]]) -> list[dict]:
            # a share: prompt_ids, seeds, prompt_lengths, a vision task's image columns; the
            # driver's options (`temperature`: validation is greedy) over the recipe's
            refs = [gens[r].actor.generate.remote(**{**gen_kwargs, **share}) for r, share in shares]
            return cluster.get(refs, [gens[r].name for r, _ in shares], timeout_s=cfg.limits.worker_timeout_s)

        return ReplicaSpread(submit, num_replicas=len(gens), new_tokens=cfg.generation.max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, record_invariant=self._record_invariant)

    def _refit_fn(self, gens: list[Any], ranks: list[Any]) -> Any:
        """`version -> seconds`: every replica gets the policy's new weights, the slowest's seconds."""
        cfg, cluster = self.cfg, self.cluster
        names = [*(h.name for h in ranks), *(g.name for g in gens)]
        timeout = cfg.limits.worker_timeout_s
        if not cfg.generation.colocated:  # a channel of its own: rank 0 broadcasts to the generator
            (gen,) = gens  # one: the channel is a group of two (rl/preflight.py refuses more)
            layout = cluster.call(ranks, "refit_layout", timeout_s=timeout)[0]  # a collective: all gather
            address = cluster.call([gen], "refit_address", timeout_s=timeout)[0]
            cluster.get([ranks[0].actor.open_refit_channel.remote(address, layout),
                         gen.actor.open_refit_channel.remote(address, layout)], [ranks[0].name, gen.name],
                        timeout_s=timeout)
        chunks = 0 if not cfg.generation.colocated else cluster.call(ranks[:1], "refit_chunks", timeout_s=timeout)[0]

        def refit(version: int) -> float:
            if not cfg.generation.colocated:
                every_rank = [h.actor.send_weights.remote() for h in ranks]  # a collective: all gather
                load = gens[0].actor.receive_weights.remote(version)
                return cluster.get([*every_rank, load], names, timeout_s=timeout)[-1]
            return self._streamed_refit(gens, ranks, version, chunks)

        return refit

    def _streamed_refit(self, gens: list[Any], ranks: list[Any], version: int, chunks: int) -> float:
        """Colocated refit, one chunk of whole layers at a time (rl/refit/buckets.py): every rank gathers
        the chunk from the training layout (a collective), ranks below the replica count pack and
        share it (on a GPU as CUDA IPC handles: replica i copies device to device out of rank i's
        buckets on their GPU; on a CPU as tensors, replica i from rank i mod ranks), the replicas
        copy it in, the ranks release it. Returns the seconds of the slowest copy, summed."""
        cluster, timeout = self.cluster, self.cfg.limits.worker_timeout_s
        names = [*(h.name for h in ranks), *(g.name for g in gens)]
        seconds = 0.0
        for index in range(chunks):
            every_rank = [h.actor.share_weight_chunk.remote(index, len(gens)) for h in ranks]
            loads = [g.actor.load_shared_chunk.remote(every_rank[i % len(ranks)], version, last=index == chunks - 1)
                     for i, g in enumerate(gens)]
            seconds += max(cluster.get([*every_rank, *loads], names, timeout_s=timeout)[len(ranks):])
            cluster.call(ranks[:len(gens)], "release_weights", timeout_s=timeout)
        return seconds

    def _record_invariant(self, record: dict[str, Any]) -> None:
        self.runlog.log_invariant({**record, "step": self.step})

    def _report_env(self, handles: list[Any]) -> None:
        """env.json and env_propagated: each worker holds its role's env (RunConfig.worker_env:
        null in env.json where the other role's env sets a variable, so it must be unset here);
        workers report salted hashes (salt per run), never values."""
        salt = secrets.token_hex(16)
        infos = self.cluster.call(handles, "info", salt=salt)
        for info in infos:
            expect = self.cfg.worker_env(info["role"])
            want = {k: secret_env.digest(salt, v) for k, v in expect.items()}
            seen = info.pop("env_digest")
            wrong = sorted(k for k in want if seen.get(k) != want[k])
            info["env"] = {k: "<differs>" if k in wrong else
                           secret_env.REDACTED if k in self.hidden_env and v is not None else v
                           for k, v in expect.items()}
            self.runlog.log_invariant({
                "check": "env_propagated", "step": self.step, "worker": info["name"], "ok": not wrong,
                "detail": f"{len(want)} vars as its role's env says (salted hash)" if not wrong
                else f"differs: {', '.join(wrong)}"})
        self.runlog.write_env(infos)

    # --- steps -----------------------------------------------------------------------------

    def run(self) -> None:
        cfg = self.cfg
        every = cfg.checkpoint.every_steps
        first = self.runlog.last_step + 1
        _phase(f"step {first} (compiles and captures on a GPU)")
        for step in range(first, cfg.algorithm.num_steps + 1):
            _check_signalled()
            self.step = step
            metrics = self._traced_step(step)
            if self.generation is not None:  # the replicas' balance over this step's rollouts
                metrics.update(self.generation.take_balance())
            flops_keys = ("total_flops", "num_ranks", "theoretical_tflops")
            bad = [k for k in flops_keys if not (isinstance(metrics.get(k), (int, float)) and metrics[k] > 0)]
            self.runlog.log_invariant({"check": "flops_fields", "step": step, "ok": not bad,
                                       "detail": "present and > 0" if not bad else f"missing or <= 0: {bad}"})
            val_every = cfg.data.val_every_steps
            if val_every and (step % val_every == 0 or step == cfg.algorithm.num_steps):
                metrics.update(self.driver.validate(step))
                if self.generation is not None:
                    self.generation.take_balance()  # validation's decoding is not the next step's
            self.runlog.log_metrics(step, metrics)
            if (every and step % every == 0) or (step == cfg.algorithm.num_steps and cfg.checkpoint.at_end):
                self._save(step)
            self.runlog.write_status("running")
            headline = "reward" if "train/reward" in metrics else "kl_loss"
            print(f"step {step}/{cfg.algorithm.num_steps} {headline}={metrics['train/' + headline]:.3f} "
                  f"loss={metrics['train/loss']:.4f} t={metrics['timing/train/total']:.2f}s", flush=True)

    def _traced_step(self, step: int) -> dict[str, Any]:
        """The driver's step; a step of `profile.kernel_steps` with its kernels traced on every GPU
        and `performance/gpu_busy_fraction` over the step's wall time (and over its generation and
        training phases: rl/metrics/kernel_trace.py)."""
        trace = self.kernel_trace
        if trace is None or not trace.traces(step):
            return self.driver.step(step)
        trace.start()
        start = time.time_ns()
        metrics = self.driver.step(step)
        stop = time.time_ns()
        metrics.update(trace.metrics(start, stop, self.driver.phase_spans))
        return metrics

    def _save(self, step: int) -> None:
        tmp = checkpoint.begin(self.runlog.run_dir, step, directory=self.cfg.checkpoint.dir)
        files = self.policy.save_checkpoint(tmp)
        path = checkpoint.commit(tmp, step=step, cursor=self.driver.cursor, rng=checkpoint.capture_rng(), files=files,
                                 ranks=len(self.policy.ranks))
        if self.cfg.checkpoint.hf_format:
            if self.model is None:  # shard_reads: the driver builds its HF model at the first HF save
                from rl.models import build_model

                self.model = build_model(self.cfg.model, vocab_size=len(self.tokenizer),
                                         seed=self.cfg.algorithm.seed)
            save_hf(self.model, self.tokenizer, checkpoint.read(path, checkpoint.WEIGHTS)["policy"], path / "hf")
        if faults.at("checkpoint_corrupt", step):
            faults.garble(path / checkpoint.WEIGHTS)
            faults.crash()

    def shutdown(self) -> None:
        import ray

        if self.cluster is not None:
            self.cluster.shutdown()
        if self.plane is not None:
            try:
                self.plane.close()
            except Exception:  # noqa: BLE001 - best effort on the way out
                log.exception("closing the data plane")
        if self.ray_temp_dir is not None:
            if ray.is_initialized():
                ray.shutdown()
            shutil.rmtree(self.ray_temp_dir, ignore_errors=True)


def _path_config(model: ModelConfig, vocab_size: int) -> Any:
    """The HF config of the model at `model.path` (what `build_model(...).config` would be),
    read from config.json alone: no weights."""
    if model.modality == "vision":
        from rl.models.vision import vl_config

        return vl_config(model, vocab_size)
    from rl.models.qwen3_5 import text_config

    return text_config(model, vocab_size)


def save_hf(model: Any, tokenizer: Any, weights: dict, out: Path) -> None:
    """The policy as a Hugging Face checkpoint (safetensors, config, tokenizer with its chat
    template) that `from_pretrained` loads without this engine."""
    model.load_state_dict(weights)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def arm_private_auth() -> None:
    """A private Ray gets token auth with a fresh random token, so no other local user can submit
    work to it while the run is up. Ray reads its auth settings when it is imported, so this runs
    first; a cluster we join (RAY_ADDRESS) keeps its own settings."""
    if "ray" in sys.modules or os.environ.get("RAY_ADDRESS"):
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def main(argv: list[str] | None = None) -> int:
    arm_private_auth()
    args = parse_args(argv)
    secret_env.take_env_file(os.environ)  # a Ray job's env values (harness/launch/ray_job.py), before any read
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    run_dir = Path(args.out)
    try:  # read and parsed once: the preflight asks of the RunConfig this run runs
        data = read_recipe(args.recipe)
        cfg = resolved_config(data)
        hidden_env = _hidden_env(data)
    except (ValueError, OSError) as exc:
        return _config_error(run_dir, f"bad recipe {args.recipe}: {exc}")
    except Exception as exc:  # noqa: BLE001 - e.g. a YAML syntax error
        return _config_error(run_dir, f"cannot read recipe {args.recipe}: {type(exc).__name__}: {exc}")
    answer = check_config(cfg, machine=True)  # the harness asked already; a run by hand asks here
    refused = answer["static"] + answer["machine"]
    if refused:
        return _config_error(run_dir, f"refused {args.recipe}: " + "; ".join(refused))
    try:
        faults.planted()
    except ValueError as exc:
        return _config_error(run_dir, str(exc))
    if args.resume:
        cfg = _without_faults(cfg)
    _catch_signals()
    return run(cfg, run_dir, resume=args.resume, hidden_env=hidden_env)


def _hidden_env(data: Any) -> list[str]:
    """The names env.json writes <redacted>: each env mapping's pass-through entries (rl/recipe/secret_env.py)."""
    scopes = secret_env.scopes(data) if isinstance(data, dict) else []
    return sorted({name for _, env in scopes for name in secret_env.hidden_names(env)})


if __name__ == "__main__":
    sys.exit(main())
