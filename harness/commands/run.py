"""`harness run [RECIPE] [overrides] [--scale tiny] [--out DIR] [--dry-run] [--resume]`.

Resolve, validate and plan before anything starts; ask the engine whether it can run the recipe
on this machine (harness/preflight.py: a refusal is exit 2, one line per key, before any run dir
exists; a dry run only reports this machine's refusals, prints the plan and writes nothing, no run
dir either); make a unique run dir; launch the engine
(once, or once per parity variant); then judge the run and write result.json, junit.xml and
report.md. Without a recipe it runs the embedded default, the CPU GRPO tiny twin.
`--resume --out DIR` continues the run in DIR from its newest checkpoint (`rl.run --resume`):
the recipe must resolve to the one DIR was run with, engine.log is appended to, and the run
is judged whole, as if it had never stopped.
The run dir is locked while its run lives (harness/run_lock.py): a dir held by a live
harness or engine is refused, for `--resume` too, and a resume settles a `running` status.json
that a dead run left.
`--ray-address http://HEAD:8265` (or RAY_ADDRESS set to such a URL) runs the engine as a Ray job
on that cluster (harness/launch/ray_job.py); the run dir must be on a path the head shares.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sqlite3
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from harness.checks.judge import Judgement, judge_run
from harness.checks.parity import compare_metrics
from harness.checks.verdict import Verdict
from harness.commands.check import write_outputs
from harness.commands.plan import format_plan
from harness.console import format_verdicts
from harness.dir_path import dir_problem
from harness.engines import engine_command, import_metrics, ray_job_command
from harness.errors import UsageError, shown
from harness.launch import LaunchResult, launch
from harness.launch.status import write_status
from harness.plan import Plan, make_plan
from harness.plan.checkpoint_size import disk_refusal
from harness.preflight import ask_before_launch, format_answer
from harness.recipe import apply_overrides, dump_recipe, load_recipe
from harness.recipe.secret_env import launch_env, redact_recipe, scrub, secret_values
from harness.report.atomic import write_json_atomic, write_text_atomic
from harness.run_lock import LOCK_FILE, RunDirLocked, hold, is_locked, settle_orphan
from harness.thresholds.of_recipe import recipe_thresholds
from harness.yamlsafe import RECIPE, load_text

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RECIPE = REPO_ROOT / "recipes" / "arith_grpo_cpu.yaml"
EXIT_INTERRUPTED = 130


def run_dir_path(out: str | None, name: str, root: str | None = None) -> Path:
    """Where a fresh run dir goes, made by nobody yet: --out if given (it must not hold a run already),
    else ROOT/<name>-<time>-<id>, ROOT being the recipe's `run_dir` (a shared path on a cluster) or runs/."""
    if out:
        path = Path(out)
        if path.exists() and any(path.iterdir()):
            raise UsageError(f"{path}: run dir exists and is not empty (choose another --out)")
        return path
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root or "runs").expanduser() / f"{name}-{stamp}-{secrets.token_hex(2)}"


def make_run_dir(out: str | None, name: str, root: str | None = None) -> Path:
    """A fresh run dir at run_dir_path, made."""
    path = run_dir_path(out, name, root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # checked before (check_out), but a folder can change meanwhile
        raise UsageError(f"{shown(str(path))}: cannot make the run dir ({error.strerror or error})") from None
    return path


def check_out(out: str | None) -> None:
    """--out must be a directory this user can write, or one that can be made: before anything runs."""
    problem = None if out is None else dir_problem(out)
    if problem is not None:
        raise UsageError(f"--out {problem}")


def resume_dir(out: str | None, recipe: Mapping) -> Path:
    """The run dir to resume: it must hold a run of exactly this resolved recipe, by our engine."""
    if not out:
        raise UsageError("--resume needs --out RUN_DIR, the run to continue")
    path = Path(out)
    if recipe.get("engine", "rl") != "rl" or recipe["checks"].get("parity"):
        raise UsageError("--resume: only a single run of the rl engine can be resumed (not an external "
                         "engine, not a parity recipe)")
    try:
        before = (path / "recipe.yaml").read_text(encoding="utf-8")
    except OSError:
        raise UsageError(f"{path}: holds no run to resume (no recipe.yaml)") from None
    now = dump_recipe(redact_recipe(recipe))
    if before != now:
        raise UsageError(f"{path}: was run with another recipe ({recipe_difference(before, now)}); resume it with "
                         f"`{resume_command(path)}` (the recipe as it ran)")
    return path


def newest_checkpoint(run_dir: Path, recipe: Mapping) -> int | None:
    """The step of the newest `step_N` in the engine's checkpoint folder (checkpoint.dir, else
    RUN_DIR/checkpoints: rl/checkpoint.py's layout, the run-dir contract); None when it holds none."""
    folder = Path((recipe.get("checkpoint") or {}).get("dir") or run_dir / "checkpoints")
    try:
        steps = [int(p.name[5:]) for p in folder.iterdir()
                 if p.name.startswith("step_") and p.name[5:].isdigit() and p.is_dir()]
    except OSError:
        return None
    return max(steps, default=None)


def check_checkpoint_disk(recipe: Mapping, plan: Plan, run_dir: Path, *, resume: bool) -> None:
    """Refuse, before launch, a run whose checkpoints cannot fit where they go (checkpoint.dir, or
    the run dir's checkpoints/; each parity variant saves its own). A resume needs only the saves
    after its newest checkpoint."""
    if plan.checkpoints is None:
        return
    variants = len((recipe["checks"].get("parity") or {}).get("variants") or {}) or 1
    where = Path((recipe.get("checkpoint") or {}).get("dir") or run_dir / "checkpoints")
    after = (newest_checkpoint(run_dir, recipe) or 0) if resume else 0
    size = plan.checkpoints
    if variants > 1:
        size = replace(size, weights=size.weights * variants, optimizer=size.optimizer * variants)
    refusal = disk_refusal(size, where, after_step=after)
    if refusal:
        raise UsageError(refusal)


def checkpoint_policy(recipe: Mapping) -> str:
    """When this recipe saves a checkpoint, in words: why a resume found none."""
    ckpt = recipe.get("checkpoint") or {}
    every, at_end = int(ckpt.get("every_steps") or 0), ckpt.get("at_end", True)
    if every:
        return ("it saves one after every step" if every == 1 else
                f"it saves one every {every} steps" + (" and after its last" if at_end else ""))
    return "it saves one only after its last step" if at_end else "it saves none (checkpoint.at_end: false)"


def resume_command(run_dir: Path) -> str:
    """What continues the run in `run_dir`: its own resolved recipe (the one `--resume` compares)."""
    return f"harness run {run_dir / 'recipe.yaml'} --resume --out {run_dir}"


def recipe_difference(before: str, now: str, *, most: int = 3) -> str:
    """The dotted keys whose values differ between two dumped recipes, the first `most` with both
    values (capped), e.g. `algorithm.num_steps: 8 there, 10 here`."""
    def flat(node: object, prefix: str = "") -> dict[str, object]:
        if isinstance(node, Mapping):
            out: dict[str, object] = {}
            for key, value in node.items():
                out.update(flat(value, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: node}

    def value(v: object) -> str:
        text = "absent" if v is _ABSENT else repr(v)
        return text if len(text) <= 40 else text[:39] + "…"

    old, new = (flat(load_text(text, name="recipe.yaml", dialect=RECIPE)[0]) for text in (before, now))
    keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k, _ABSENT) != new.get(k, _ABSENT)]
    said = [f"{k}: {value(old.get(k, _ABSENT))} there, {value(new.get(k, _ABSENT))} here" for k in keys[:most]]
    more = f", and {len(keys) - most} more" if len(keys) > most else ""
    return "; ".join(said) + more if said else "the same values, written differently"


_ABSENT = object()


def write_inputs(run_dir: Path, recipe: Mapping, plan: dict) -> Path:
    recipe_path = run_dir / "recipe.yaml"
    write_text_atomic(recipe_path, dump_recipe(redact_recipe(recipe)))
    write_json_atomic(run_dir / "plan.json", plan)
    return recipe_path


def jobs_address(cli_address: str | None) -> str | None:
    """The Ray Jobs address to submit to: --ray-address, else RAY_ADDRESS when it is a dashboard
    URL (a GCS address, host:port, is one the engine joins as a driver: rl/cluster/ray_cluster.py)."""
    address = cli_address or os.environ.get("RAY_ADDRESS", "")
    if not address:
        return None
    if not address.startswith(("http://", "https://")):
        if cli_address:
            raise UsageError(f"--ray-address: {address!r} is not the dashboard's URL (http://HEAD:8265)")
        return None
    return address


def launch_engine(recipe: Mapping, run_dir: Path, *, progress: bool, resume: bool = False,
                  ray_address: str | None = None, lock_fd: int | None = None, label: str | None = None) -> LaunchResult:
    env = launch_env(recipe, os.environ)  # secrets reach the engine here; its recipe.yaml says <redacted>
    names = sorted(env)  # what a Ray job is given: the engine process's recipe env
    env.setdefault("RAY_AUTH_MODE", os.environ.get("RAY_AUTH_MODE", "disabled"))
    command = engine_command(recipe, run_dir) + (["--resume"] if resume else [])
    if ray_address:
        run_dir = run_dir.resolve()  # the job runs elsewhere: only an absolute path means the same dir
        command = ray_job_command(engine_command(recipe, run_dir) + (["--resume"] if resume else []),
                                  address=ray_address, working_dir=REPO_ROOT, env_names=names,
                                  env_file=run_dir / ".job-env.json",
                                  submission_id=f"harness-{recipe['name']}-{time.strftime('%Y%m%d-%H%M%S')}-"
                                                f"{secrets.token_hex(3)}")
    result = launch(
        command,
        run_dir=run_dir,
        env=env,
        timeout_s=float(recipe["limits"]["timeout_s"]),
        total_steps=int(recipe["algorithm"]["num_steps"]),
        progress=progress,
        cwd=REPO_ROOT,
        keep_fds=() if lock_fd is None else (lock_fd,),  # the engine holds the run dir too (run_lock.py)
        label=label,
    )
    scrub_logs(run_dir, secret_values(recipe, os.environ))
    import_metrics(recipe, run_dir)
    return result


def scrub_logs(run_dir: Path, values: list[str]) -> None:
    """Replace secret values in what the engine's output reached: engine.log and status.json's tail."""
    escaped = [json.dumps(v)[1:-1] for v in values]  # status.json holds them JSON-escaped
    for name in ("engine.log", "status.json"):
        path = run_dir / name
        if values and path.exists():
            text = path.read_text(encoding="utf-8", errors="replace")
            cleaned = scrub(scrub(text, values), escaped)
            if cleaned != text:
                write_text_atomic(path, cleaned)


def run_single(recipe: Mapping, run_dir: Path, *, progress: bool, resume: bool = False,
               ray_address: str | None = None, lock_fd: int | None = None) -> tuple[Judgement, LaunchResult]:
    result = launch_engine(recipe, run_dir, progress=progress, resume=resume, ray_address=ray_address,
                           lock_fd=lock_fd)
    return judge_run(run_dir), result


def run_parity(recipe: Mapping, run_dir: Path, plan: dict, *, progress: bool,
               ray_address: str | None = None, lock_fd: int | None = None) -> tuple[Judgement, LaunchResult]:
    """Run each parity variant from the same seed in its own sub-dir, judge each, compare them."""
    parity = recipe["checks"]["parity"]
    names = list(parity["variants"])
    verdicts: list[Verdict] = []
    judged: list[Judgement] = []
    last: LaunchResult | None = None
    for name in names:
        variant = apply_overrides(dict(recipe), parity["variants"][name])
        variant.setdefault("checks", {}).pop("parity", None)
        sub = run_dir / name
        sub.mkdir()
        write_inputs(sub, variant, plan)
        print(f"variant {name}: {sub}")
        last = launch_engine(variant, sub, progress=progress, ray_address=ray_address, lock_fd=lock_fd,
                             label=f"{name} ({len(judged) + 1} of {len(names)})")
        judgement = judge_run(sub)
        write_outputs(sub, judgement, name=f"{recipe['name']}:{name}", plan=plan)
        judged.append(judgement)
        verdicts.extend(Verdict(**{**v.__dict__, "name": f"{name}:{v.name}"}) for v in judgement.verdicts)
        if last.state == "interrupted":
            break
    if len(judged) == len(names) == 2:
        verdicts.extend(compare_metrics(judged[0].metrics, judged[1].metrics, names=tuple(names),
                                        tolerance=float(parity.get("tolerance", 0.0))))
    else:
        verdicts.append(Verdict(name="parity", kind="parity", ok=False,
                                message=f"parity needs 2 finished variants, have {len(judged)} of {len(names)}"))
    states = [j.status.get("state") if j.status else None for j in judged]
    steps = {name: {key: (j.status or {}).get(key) for key in ("last_step", "num_steps")}
             for name, j in zip(names, judged)}
    status = {"state": "completed" if states and all(s == "completed" for s in states) else "failed",
              "variants": dict(zip(names, states)), "wall_s": sum((j.status or {}).get("wall_s") or 0 for j in judged),
              "variant_steps": {name: steps.get(name) for name in names}}  # report.md's `legacy 20/20, tq 20/20`
    write_status(run_dir / "status.json", status)
    top = Judgement(verdicts=verdicts, metrics=judged[0].metrics, recipe=redact_recipe(recipe), status=status,
                    thresholds=judged[0].thresholds, variants={name: j.metrics for name, j in zip(names, judged)})
    assert last is not None
    return top, last


def main(args: argparse.Namespace) -> int:
    recipe_arg, overrides = args.recipe, list(args.overrides)  # an override given first is moved (cli.py)
    resuming_own = getattr(args, "resume", False) and not recipe_arg and not overrides and args.out
    # `harness run --resume --out DIR`: the run's own recipe, as it ran (DIR/recipe.yaml)
    recipe_path = Path(args.out) / "recipe.yaml" if resuming_own else Path(recipe_arg) if recipe_arg else DEFAULT_RECIPE
    check_out(args.out)
    if args.out and is_locked(Path(args.out)):  # before the seconds the preflight takes; `hold` below decides
        raise RunDirLocked(f"{args.out}: in use by a live run (it holds {LOCK_FILE}); wait for it to end")
    resolved = load_recipe(recipe_path, overrides, scale=args.scale)
    recipe = resolved.data
    recipe_thresholds(recipe)  # a thresholds file that cannot judge this run: exit 2 before any run dir
    launch_env(recipe, os.environ)  # a pass-through secret missing here: exit 2 before any run dir
    plan = make_plan(redact_recipe(recipe))
    resume = getattr(args, "resume", False)
    ray_address = jobs_address(getattr(args, "ray_address", None))
    refused_here = ask_before_launch(recipe, launching=not args.dry_run, machine_here=not ray_address)
    if resume and args.dry_run:
        raise UsageError("--resume and --dry-run: choose one")
    if args.dry_run:
        return dry_run(args, recipe, recipe_path, plan, run_dir_path(args.out, recipe["name"], recipe.get("run_dir")),
                       refused_here=refused_here, ray_address=ray_address)
    resumed = resume_dir(args.out, recipe) if resume else None
    check_checkpoint_disk(recipe, plan, resumed or run_dir_path(args.out, recipe["name"], recipe.get("run_dir")),
                          resume=resume)
    run_dir = resumed or make_run_dir(args.out, recipe["name"], recipe.get("run_dir"))
    if resume and newest_checkpoint(run_dir, recipe) is None:
        print(f"warning: --resume: {run_dir} holds no checkpoint ({checkpoint_policy(recipe)}, "
              "checkpoint.every_steps): the engine starts again at step 1", file=sys.stderr)
    with hold(run_dir) as lock_fd:  # refused while a live run holds it (harness/run_lock.py)
        if resume:
            settle_orphan(run_dir)
        elif args.out:
            fresh_or_refuse(run_dir)
        return _run_locked(args, recipe, recipe_path, plan, run_dir, lock_fd=lock_fd,
                           refused_here=refused_here, ray_address=ray_address)


def _record_history(db: Path, recipe: Mapping, recipe_path: Path, judgement: Judgement, result: LaunchResult,
                    run_dir: Path) -> None:
    """The run's row in the history database (harness/history/hand_run.py); a database that cannot
    be written is a warning: the run and its verdict stand."""
    from harness.history import current_commit  # noqa: PLC0415
    from harness.history.hand_run import record_hand_run  # noqa: PLC0415

    try:
        row_id = record_hand_run(db, recipe_name=recipe["name"], recipe_path=recipe_path, hardware=judgement.hardware,
                                 ok=judgement.ok, state=result.state, run_dir=run_dir, commit=current_commit())
    except (OSError, ValueError, sqlite3.Error) as exc:
        print(f"warning: history {db}: not recorded: {shown(exc)}", file=sys.stderr)
        return
    print(f"history {db} (row {row_id}; `harness history {recipe['name']} --db {db}`)")


def fresh_or_refuse(run_dir: Path) -> None:
    """--out, checked again under the lock: a run that started between make_run_dir's look and our
    lock (and has ended since, freeing it) must not be written over."""
    if any(p.name != LOCK_FILE for p in run_dir.iterdir()):
        raise UsageError(f"{run_dir}: run dir exists and is not empty (choose another --out)")


def print_preamble(args: argparse.Namespace, recipe_path: Path, plan_obj: Plan, run_dir: Path, *,
                   refused_here: list[str] | None, ray_address: str | None, note: str = "") -> None:
    """The recipe, run dir, plan and the engine's answer, printed before a run starts (or instead of one)."""
    print(f"recipe  {recipe_path}{f' ({args.scale} twin)' if args.scale else ''}\nrun dir {run_dir}{note}")
    print(format_plan(plan_obj), end="")
    print(format_answer(refused_here) if not ray_address else
          f"engine     a Ray job at {ray_address}: the engine checks the cluster there before its run\n", end="")


def dry_run(args: argparse.Namespace, recipe: Mapping, recipe_path: Path, plan_obj: Plan, run_dir: Path, *,
            refused_here: list[str] | None, ray_address: str | None) -> int:
    """Print what a run would do and write nothing: a run dir a dry run left looked like a real run's.
    The resolved recipe is `harness show`'s output, the plan as JSON `harness plan --out FILE`."""
    print_preamble(args, recipe_path, plan_obj, run_dir, refused_here=refused_here, ray_address=ray_address,
                   note=" (not made: dry run)")
    print("dry run: would launch " + " ".join(engine_command(recipe, run_dir)))
    print("dry run: nothing written (the resolved recipe: `harness show`; the plan as JSON: `harness plan --out`)")
    return 0


def _run_locked(args: argparse.Namespace, recipe: Mapping, recipe_path: Path, plan_obj: Plan, run_dir: Path, *,
                lock_fd: int, refused_here: list[str] | None, ray_address: str | None) -> int:
    """main's part that runs while this process holds the run dir's lock."""
    resume = getattr(args, "resume", False)
    plan = plan_obj.to_json()
    if not resume:
        write_inputs(run_dir, recipe, plan)
    print_preamble(args, recipe_path, plan_obj, run_dir, refused_here=refused_here, ray_address=ray_address)
    progress = not args.no_progress
    if recipe["checks"].get("parity"):
        judgement, result = run_parity(recipe, run_dir, plan, progress=progress, ray_address=ray_address,
                                       lock_fd=lock_fd)
    else:
        judgement, result = run_single(recipe, run_dir, progress=progress, resume=resume, ray_address=ray_address,
                                       lock_fd=lock_fd)
    write_outputs(run_dir, judgement, name=recipe["name"], plan=plan)
    print(format_verdicts(judgement.verdicts), end="")
    print(f"report  {run_dir / 'report.md'}")
    if args.history:
        _record_history(Path(args.history), recipe, recipe_path, judgement, result, run_dir)
    if result.state == "interrupted":
        print("interrupted: the engine was stopped; what it wrote is kept", file=sys.stderr)
        if not recipe["checks"].get("parity") and recipe.get("engine", "rl") == "rl":
            step = newest_checkpoint(run_dir, recipe)
            note = (f" (from its checkpoint at step {step})" if step is not None else
                    f" (no checkpoint yet: {checkpoint_policy(recipe)}; it would start again at step 1)")
            print(f"resume it: {resume_command(run_dir)}{note}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if judgement.ok else 1
