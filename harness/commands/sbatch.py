"""`harness sbatch RECIPE [overrides] [--scale S] [--partition P] [--out RUN_DIR] [--script FILE] [--submit]`.

Writes a Slurm batch script that runs the recipe on `cluster.nodes` allocated nodes: it starts a
Ray head on the first node and a Ray worker on each other one (`srun`), waits until Ray counts
every node, runs `harness run` on the first node with RAY_ADDRESS set to the head (the engine
joins it as a driver and spreads its ranks over the nodes, rl/cluster/placement.py), then stops Ray on
every node. The job's exit code is the harness's; a requeued job whose run dir already holds the
run resumes it (`harness run --resume`, from `checkpoint.dir` or RUN_DIR/checkpoints). The Ray
it starts has token auth with a fresh random token, like the engine's private Ray. The run dir
(default runs/NAME-JOBID in the checkout) and the checkout must be on a filesystem every node
shares. `--submit` runs `sbatch`.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from harness.errors import UsageError
from harness.recipe import load_recipe

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_PORT = 6379
STARTUP_MARGIN_S = 600  # Ray start-up, the engine's own start and the teardown, on top of limits.timeout_s
NODES_WAIT_S = 300


def slurm_time(seconds: float) -> str:
    """Slurm's --time as D-HH:MM:SS, rounded up to the minute."""
    minutes = -(-int(seconds) // 60)
    return f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00"


def batch_script(recipe: Mapping, *, harness_args: list[str], partition: str | None, run_dir: str | None,
                 python: str = "python") -> str:
    """The batch script for a resolved `recipe`; `harness_args` (the recipe file, overrides, --scale)
    are what `harness run` is given on the first node, so it resolves the same recipe there."""
    cluster = recipe["cluster"]
    nodes = int(cluster["nodes"])
    gpu = cluster["device"] != "cpu"
    out = shlex.quote(run_dir) if run_dir else f'"runs/{recipe["name"]}-$SLURM_JOB_ID"'
    directives = [
        f"--job-name=harness-{recipe['name']}",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        "--exclusive",
        f"--time={slurm_time(float(recipe['limits']['timeout_s']) + STARTUP_MARGIN_S)}",
        *([f"--gpus-per-node={int(cluster['devices_per_node'])}"] if gpu else []),
        *([f"--partition={partition}"] if partition else []),
        "--output=%x-%j.out",  # in the directory sbatch is run from
    ]
    run = shlex.join([python, "-m", "harness.cli", "run", *harness_args, "--no-progress"])
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), "", f"""\
# Written by `harness sbatch` for recipe {recipe['name']}: Ray on {nodes} node(s), then `harness run`.
set -uo pipefail
cd {shlex.quote(str(REPO_ROOT))}
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$({python} -c 'import secrets; print(secrets.token_hex(32))')
export RAY_AUTH_TOKEN
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node=${{nodes[0]}}
head_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')
export RAY_ADDRESS="$head_ip:{RAY_PORT}"

stop_ray() {{
  srun --nodes={nodes} --ntasks-per-node=1 --overlap ray stop --force >/dev/null 2>&1
  wait
}}
trap stop_ray EXIT

srun --nodes=1 --ntasks=1 --overlap -w "$head_node" \\
  ray start --head --node-ip-address="$head_ip" --port={RAY_PORT} --include-dashboard=false --block &
for node in "${{nodes[@]:1}}"; do
  srun --nodes=1 --ntasks=1 --overlap -w "$node" ray start --address="$RAY_ADDRESS" --block &
done

# Wait until Ray counts every node (fail the job, not the run, when it never does).
if ! {python} - <<'EOF'
import sys, time
import ray
deadline = time.monotonic() + {NODES_WAIT_S}
while time.monotonic() < deadline:
    try:
        ray.init(logging_level="ERROR")
        alive = sum(1 for n in ray.nodes() if n["Alive"])
        ray.shutdown()
        if alive >= {nodes}:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(5)
print("Ray did not count {nodes} node(s) in {NODES_WAIT_S} s", file=sys.stderr)
sys.exit(1)
EOF
then
  exit 3
fi

# A requeued job (same job id, same --out) continues its run from the newest checkpoint.
resume=()
if [ -f {out}/recipe.yaml ]; then resume=(--resume); fi
{run} --out {out} "${{resume[@]}}"
exit $?
"""]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    resolved = load_recipe(Path(args.recipe), list(args.overrides), scale=args.scale)
    recipe = resolved.data
    if recipe.get("engine", "rl") != "rl":
        raise UsageError("harness sbatch: only the rl engine runs on the Ray cluster the script starts")
    harness_args = [str(Path(args.recipe).resolve()), *args.overrides, *(["--scale", args.scale] if args.scale else [])]
    script = batch_script(recipe, harness_args=harness_args, partition=args.partition,
                          run_dir=str(Path(args.out).resolve()) if args.out else None)
    path = Path(args.script or f"sbatch-{recipe['name']}.sh")
    path.write_text(script, encoding="utf-8")
    path.chmod(0o755)
    print(f"wrote {path}")
    if not args.submit:
        print(f"submit it with: sbatch {shlex.quote(str(path))}")
        return 0
    try:
        done = subprocess.run(["sbatch", str(path)], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(f"--submit: cannot run sbatch: {error}") from None
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode
