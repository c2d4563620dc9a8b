"""Engines the harness can launch: our `rl` engine, or any command (e.g. NeMo-RL's run_grpo.py).

The run dir is the contract, so an external engine needs only an adapter that turns its metrics
(TensorBoard events, the reference's metrics JSON) into our metrics.jsonl.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Mapping

from harness.bounded import read_json_object
from harness.errors import UsageError
from harness.metrics import MetricsError, read_metrics
from harness.report.atomic import write_json_atomic, write_text_atomic


def engine_command(recipe: Mapping, run_dir: Path) -> list[str]:
    """The command line that runs the recipe; `{recipe}` and `{run_dir}` are filled in for commands.
    The run dir is made absolute: the engine runs in the repository root, not where harness was started."""
    engine = recipe.get("engine", "rl")
    run_dir = Path(run_dir).absolute()
    recipe_file = run_dir / "recipe.yaml"
    if engine == "rl":
        return [sys.executable, "-m", "rl.run", str(recipe_file), "--out", str(run_dir)]
    if isinstance(engine, Mapping) and engine.get("command"):
        fill = {"recipe": str(recipe_file), "run_dir": str(run_dir), "python": sys.executable}
        try:
            return [str(part).format(**fill) for part in engine["command"]]
        except (KeyError, IndexError, ValueError) as error:
            raise UsageError(f"engine.command: bad placeholder {error} "
                             "(use {recipe}, {run_dir}, {python})") from None
    raise UsageError(f"engine: {engine!r} is neither 'rl' nor a mapping with a command")


def ray_job_command(engine_argv: list[str], *, address: str, working_dir: Path, env_names: list[str],
                    submission_id: str, env_file: Path) -> list[str]:
    """The submitter (harness/launch/ray_job.py) that runs `engine_argv` as a Ray job at `address`;
    the env variables are named here, their values reach it through its environment and the job
    through `env_file` (in the shared run dir), never its runtime_env."""
    names = [part for name in env_names for part in ("--env", name)]
    return [sys.executable, "-m", "harness.launch.ray_job", "--address", address, "--working-dir", str(working_dir),
            "--submission-id", submission_id, "--env-file", str(env_file), *names, "--", *engine_argv]


def preflight_command(recipe_files: list[str], *, machine: bool) -> list[str]:
    """The engine's preflight (rl/preflight.py), run with the interpreter that runs `rl.run`."""
    return [sys.executable, "-m", "rl.preflight", *recipe_files, "--json", *(["--machine"] if machine else [])]


def import_metrics(recipe: Mapping, run_dir: Path) -> Path | None:
    """For an external engine, convert its metrics into run_dir/metrics.jsonl; ours writes it itself."""
    engine = recipe.get("engine", "rl")
    if not isinstance(engine, Mapping):
        return None
    source = run_dir / (engine.get("metrics_path") or ".")  # null (the schema's default): the run dir
    try:
        metrics = read_metrics(source, format=engine.get("metrics"))
    except MetricsError as error:
        with (run_dir / "engine.log").open("a", encoding="utf-8") as log:
            log.write(f"[harness] no metrics imported: {error}\n")
        return None
    rows: dict[int, dict[str, float]] = {}
    for name, series in metrics.items():
        for step, value in series.items():
            rows.setdefault(step, {})[name] = value
    target = write_text_atomic(run_dir / "metrics.jsonl",
                               "".join(json.dumps({"step": step, **rows[step]}) + "\n" for step in sorted(rows)))
    status_path = run_dir / "status.json"
    status = read_json_object(status_path, kind="status") if rows else None
    if status is not None:  # the launcher saw no metrics.jsonl while the engine ran
        status["last_step"] = max(rows)
        write_json_atomic(status_path, status)
    return target
