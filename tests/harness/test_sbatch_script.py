"""`harness sbatch`: the batch script's directives, and its control flow run by bash with fake
Slurm commands (no Slurm controller here: see docs/scale-out.md, "Slurm")."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from harness.cli import main
from harness.commands.sbatch import batch_script, slurm_time
from harness.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "qwen3_5_35b.yaml"


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_directives_follow_the_recipe():
    recipe = load_recipe(RECIPE, []).data
    script = batch_script(recipe, harness_args=[str(RECIPE)], partition="gpu", run_dir="/shared/run")
    head = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=2" in head and "#SBATCH --gpus-per-node=8" in head
    assert "#SBATCH --partition=gpu" in head and "#SBATCH --ntasks-per-node=1" in head
    assert f"#SBATCH --time={slurm_time(recipe['limits']['timeout_s'] + 600)}" in head
    assert "harness.cli run " + str(RECIPE) + ' --no-progress --out /shared/run "${resume[@]}"' in script
    tiny = batch_script(load_recipe(RECIPE, [], scale="tiny").data, harness_args=["r.yaml"], partition=None,
                        run_dir=None)
    assert "--gpus-per-node" not in tiny and "--partition" not in tiny
    assert slurm_time(3600 + 1) == "0-01:01:00" and slurm_time(86400 * 2) == "2-00:00:00"
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_the_script_starts_ray_on_every_node_runs_the_harness_on_the_head_and_exits_with_its_code(tmp_path):
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake(bin_dir, "scontrol", 'echo node-a; echo node-b\n')
    fake(bin_dir, "srun", f'echo "srun $*" >> {calls}\n[[ "$*" == *"hostname --ip-address"* ]] && echo 10.1.2.3\n'
                          'exit 0\n')
    fake(bin_dir, "python", f'if [ "$1" = -c ]; then echo tok; exit 0; fi\nif [ "$1" = - ]; then cat >/dev/null; '
                            f'exit 0; fi\necho "python $* RAY_ADDRESS=$RAY_ADDRESS AUTH=$RAY_AUTH_MODE" >> {calls}\n'
                            'exit 7\n')
    script = tmp_path / "job.sh"
    code = main(["sbatch", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), "algorithm.num_steps=2",
                 "--script", str(script), "--out", str(tmp_path / "run")])
    assert code == 0
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node-[a-b]",
           "SLURM_JOB_ID": "42"}
    done = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr  # the harness's exit code is the job's
    log = calls.read_text().splitlines()
    assert any("-w node-a ray start --head --node-ip-address=10.1.2.3 --port=6379" in line for line in log)
    assert any("-w node-b ray start --address=10.1.2.3:6379" in line for line in log)
    run = [line for line in log if line.startswith("python -m harness.cli run")]
    assert run == [f"python -m harness.cli run {REPO / 'recipes' / 'arith_grpo_cpu.yaml'} algorithm.num_steps=2 "
                   f"--no-progress --out {tmp_path / 'run'} RAY_ADDRESS=10.1.2.3:6379 AUTH=token"]
    after_run = log[log.index(run[0]) + 1:]  # the workers' `ray start --block &` may log at any point
    assert any("ray stop" in line for line in after_run)  # torn down after the run

    (tmp_path / "run" / "recipe.yaml").parent.mkdir(exist_ok=True)
    (tmp_path / "run" / "recipe.yaml").write_text("name: x\n")  # a requeued job finds its run
    calls.unlink()
    subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert [line for line in calls.read_text().splitlines() if line.startswith("python -m")][0].endswith(
        f"--out {tmp_path / 'run'} --resume RAY_ADDRESS=10.1.2.3:6379 AUTH=token")
