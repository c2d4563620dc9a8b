"""Runs the engine as a Ray job on a cluster the user already has (`harness run --ray-address`).

    python -m harness.launch.ray_job --address http://HEAD:8265 --working-dir DIR
        [--env NAME ...] [--submission-id ID] -- ENGINE ARGV...

The launcher (harness/launch/runner.py) starts this submitter in place of the engine, so
engine.log, the progress bar (metrics.jsonl in the run dir), the time limit and Ctrl-C work as
for a local engine: the submitter submits ENGINE ARGV through Ray's JobSubmissionClient with a
runtime_env of the working dir (the project's code), prints the job's log
as it grows, and exits with the engine's exit code. SIGINT or SIGTERM stops the job
(`stop_job`) and waits until Ray reports it ended, so a stopped harness leaves no job running.

The named env variables (the recipe's env, secrets among them; values from this process's
environment, never on a command line) travel in no runtime_env, which Ray writes into its logs and
its workers' command lines: they go into `--env-file`, created 0600 in the run dir, whose path
alone the job's env names (RL_ENV_FILE); the engine's driver reads and deletes it at start
(rl/recipe/secret_env.py), and the submitter deletes it when the job ends if the engine never did.

The run dir travels by path: the engine writes it where the harness reads it, so it must be on
a filesystem the head node shares (the harness fails the run, fail closed, when nothing came
back). The entrypoint runs the cluster's `python`, which needs the engine's dependencies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["entrypoint", "main", "submit_and_follow"]

POLL_S = 0.5
STOP_WAIT_S = 15.0  # within the launcher's 20 s grace after our SIGINT; Ray kills the entrypoint after 3 s
EXCLUDES = [".git", ".venv", "runs", "**/__pycache__"]
EXIT_STOPPED = {signal.SIGINT: 130, signal.SIGTERM: 143}
# A head just started (`ray start --head`) answers job submissions before its job agent is up:
# Ray says so in this message (HTTP 500) and asks to try again; anything else is final.
AGENT_NOT_UP = "No available agent to submit job"
AGENT_WAIT_S = 60.0
ENV_FILE = "RL_ENV_FILE"  # the engine's name for it (rl/recipe/secret_env.py; the two packages share no code)


class Stop(BaseException):
    """SIGINT/SIGTERM reached the submitter: stop the job, then exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, _frame: Any) -> None:
    raise Stop(signum)


def entrypoint(argv: Sequence[str]) -> str:
    """The job's shell command: this interpreter's path means nothing on the cluster, its `python` runs."""
    return shlex.join(["python" if arg == sys.executable else arg for arg in argv])


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _submit(client: Any, **job: Any) -> str:
    """submit_job, again every second while the head's job agent is not up yet (AGENT_WAIT_S)."""
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as error:
            if AGENT_NOT_UP not in str(error) or time.monotonic() >= deadline:
                raise
            _print("[ray job] the head's job agent is not up yet; submitting again in 1 s\n")
            time.sleep(1.0)


def submit_and_follow(client: Any, *, argv: Sequence[str], working_dir: str, env_vars: dict[str, str],
                      submission_id: str | None) -> int:
    """Submit, stream the log, return the engine's exit code; a Stop stops the job first."""
    job_id = _submit(client, entrypoint=entrypoint(argv), submission_id=submission_id,
                     runtime_env={"working_dir": working_dir, "excludes": EXCLUDES, "env_vars": env_vars})
    shown = 0
    try:
        _print(f"[ray job] submitted {job_id}\n")  # said in the try: from here on a Stop stops the job
        while True:
            status = client.get_job_status(job_id)
            logs = client.get_job_logs(job_id)
            _print(logs[shown:])
            shown = len(logs)
            if status.is_terminal():
                break
            time.sleep(POLL_S)
    except Stop as stop:
        _print(f"[ray job] {stop}: stopping {job_id}\n")
        client.stop_job(job_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while not client.get_job_status(job_id).is_terminal() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        logs = client.get_job_logs(job_id)
        _print(logs[shown:])
        _print(f"[ray job] {job_id} ended: {client.get_job_status(job_id)}\n")
        return EXIT_STOPPED[stop.signum]
    info = client.get_job_info(job_id)
    code = info.driver_exit_code
    _print(f"[ray job] {job_id} ended: {info.status}, exit code {code}\n")
    if code is None:  # the entrypoint never ran (a runtime_env that failed to set up): a failure
        _print(f"[ray job] {info.message}\n")
        return 1
    return int(code)


def hand_over(values: dict[str, str], env_file: str | None) -> dict[str, str]:
    """The job's runtime_env variables: with `env_file`, only its path (the values written there,
    0600, created afresh); without one, none (a job of no recipe env)."""
    if not values:
        return {}
    if not env_file:
        raise ValueError("env values for a Ray job need --env-file (they never travel in its runtime_env)")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(values, f)
    return {ENV_FILE: env_file}


def job_client(address: str) -> Any:
    """Ray's JobSubmissionClient (imported here: the harness needs Ray only for a Ray job)."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.launch.ray_job", description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the Ray dashboard's address, http://HEAD:8265")
    parser.add_argument("--working-dir", required=True, help="the project's code, shipped as the job's runtime_env")
    parser.add_argument("--env", action="append", default=[], metavar="NAME",
                        help="an env variable of this process to set in the job")
    parser.add_argument("--env-file", help="where to hand the --env values over (0600; a path the cluster shares)")
    parser.add_argument("--submission-id", help="the job's id (default: Ray's)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the engine's argv")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no engine command after --")
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        client = job_client(args.address)
        values = {name: os.environ[name] for name in args.env if name in os.environ}
        env_vars = hand_over(values, args.env_file)
        return submit_and_follow(client, argv=command, working_dir=args.working_dir, env_vars=env_vars,
                                 submission_id=args.submission_id)
    except Stop as stop:  # before the job existed
        return EXIT_STOPPED[stop.signum]
    except Exception as error:  # noqa: BLE001 - the cluster unreachable, a refused submission: one line
        print(f"[ray job] cannot run the job at {args.address}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if args.env_file:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(args.env_file)


if __name__ == "__main__":
    sys.exit(main())
