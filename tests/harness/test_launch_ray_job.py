"""harness/launch/ray_job.py and `harness run --ray-address`'s choices, with a fake job client.

The real cluster (a 2-node Ray with its job server) is tests/integration/test_scaleout_run.py.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.commands.run import jobs_address
from harness.engines import ray_job_command
from harness.errors import UsageError
from harness.launch import ray_job


class Status(str):
    def is_terminal(self) -> bool:
        return self in ("SUCCEEDED", "FAILED", "STOPPED")


class FakeClient:
    """A job that logs one line per poll and ends with `code` after `polls` polls."""

    def __init__(self, *, polls: int = 2, code: int | None = 0, interrupt_at: int | None = None) -> None:
        self.polls, self.code, self.interrupt_at = polls, code, interrupt_at
        self.seen = 0
        self.submitted: dict = {}
        self.stopped = False

    def submit_job(self, **kwargs):
        self.submitted = kwargs
        return kwargs["submission_id"] or "raysubmit_1"

    def get_job_status(self, job_id):
        if self.stopped:
            return Status("STOPPED")
        self.seen += 1
        if self.interrupt_at is not None and self.seen == self.interrupt_at:
            raise ray_job.Stop(signal.SIGINT)
        return Status("SUCCEEDED" if self.seen > self.polls and self.code == 0 else
                      "FAILED" if self.seen > self.polls else "RUNNING")

    def get_job_logs(self, job_id):
        return "".join(f"line {i}\n" for i in range(min(self.seen, self.polls)))

    def get_job_info(self, job_id):
        return SimpleNamespace(status=self.get_job_status(job_id), driver_exit_code=self.code,
                               message="runtime_env setup failed")

    def stop_job(self, job_id):
        self.stopped = True


@pytest.fixture(autouse=True)
def no_wait(monkeypatch):
    monkeypatch.setattr(ray_job, "POLL_S", 0.0)


def follow(client, **kw):
    return ray_job.submit_and_follow(client, argv=[sys.executable, "-m", "rl.run", "r.yaml", "--out", "/shared/d"],
                                     working_dir="/repo", env_vars={"A": "1"}, submission_id="harness-x", **kw)


def test_the_job_runs_the_clusters_python_with_the_project_and_env_and_its_log_streams_once(capsys):
    client = FakeClient(polls=3, code=0)
    assert follow(client) == 0
    assert client.submitted["entrypoint"] == "python -m rl.run r.yaml --out /shared/d"
    assert client.submitted["runtime_env"]["working_dir"] == "/repo"
    assert client.submitted["runtime_env"]["env_vars"] == {"A": "1"}
    assert ".git" in client.submitted["runtime_env"]["excludes"]
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("line")] == ["line 0", "line 1", "line 2"]
    assert "ended: SUCCEEDED, exit code 0" in out


def test_the_engines_exit_code_is_the_submitters_and_no_code_is_a_failure(capsys):
    assert follow(FakeClient(code=3)) == 3
    assert follow(FakeClient(code=None)) == 1
    assert "runtime_env setup failed" in capsys.readouterr().out


def test_ctrl_c_stops_the_job_and_waits_until_ray_says_it_ended(capsys):
    client = FakeClient(polls=10, interrupt_at=2)
    assert follow(client) == 130
    assert client.stopped
    assert "SIGINT: stopping harness-x" in capsys.readouterr().out


def test_the_submitter_names_an_unreachable_cluster_in_one_line(capsys, monkeypatch):
    def unreachable(address):
        raise ConnectionError(f"Failed to connect to Ray at address: {address}.")

    monkeypatch.setattr(ray_job, "job_client", unreachable)
    assert ray_job.main(["--address", "http://127.0.0.1:1", "--working-dir", ".", "--", "true"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[ray job] cannot run the job at http://127.0.0.1:1")


def test_ray_address_picks_jobs_only_for_a_dashboard_url(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert jobs_address(None) is None
    assert jobs_address("http://head:8265") == "http://head:8265"
    monkeypatch.setenv("RAY_ADDRESS", "https://head:8265")
    assert jobs_address(None) == "https://head:8265"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # a GCS address: the engine joins it as a driver
    assert jobs_address(None) is None
    with pytest.raises(UsageError, match="--ray-address: '10.0.0.1:6379' is not the dashboard's URL"):
        jobs_address("10.0.0.1:6379")


def test_the_submitter_command_names_env_variables_never_their_values():
    cmd = ray_job_command(["python", "-m", "rl.run"], address="http://h:8265", working_dir=Path("/repo"),
                          env_names=["HF_TOKEN"], submission_id="harness-x", env_file=Path("/shared/d/.job-env.json"))
    assert cmd[1:3] == ["-m", "harness.launch.ray_job"]
    assert cmd[cmd.index("--env-file") + 1] == "/shared/d/.job-env.json"
    assert cmd[cmd.index("--env") + 1] == "HF_TOKEN" and cmd[cmd.index("--") + 1:] == ["python", "-m", "rl.run"]


class AgentNotUpYet(FakeClient):
    """A head just started: the first `fails` submissions get Ray's 'no available agent' 500."""

    def __init__(self, *, fails: int, error: str = ray_job.AGENT_NOT_UP + ", please try again later..") -> None:
        super().__init__(polls=1, code=0)
        self.fails, self.error, self.tries = fails, error, 0

    def submit_job(self, **kwargs):
        self.tries += 1
        if self.tries <= self.fails:
            raise RuntimeError(f"Request failed with status code 500: {self.error}")
        return super().submit_job(**kwargs)


def test_a_head_whose_job_agent_is_not_up_yet_is_asked_again(monkeypatch, capsys):
    monkeypatch.setattr(ray_job.time, "sleep", lambda s: None)
    client = AgentNotUpYet(fails=3)
    assert follow(client) == 0 and client.tries == 4
    assert capsys.readouterr().out.count("job agent is not up yet") == 3


def test_any_other_refusal_and_a_head_that_never_gets_its_agent_are_final(monkeypatch):
    monkeypatch.setattr(ray_job.time, "sleep", lambda s: None)
    other = AgentNotUpYet(fails=1, error="runtime_env: working_dir too large")
    with pytest.raises(RuntimeError, match="too large"):
        follow(other)
    assert other.tries == 1
    monkeypatch.setattr(ray_job, "AGENT_WAIT_S", 0.0)
    never = AgentNotUpYet(fails=10**6)
    with pytest.raises(RuntimeError, match="No available agent"):
        follow(never)
    assert never.tries == 1


def test_env_values_reach_the_job_through_a_0600_file_never_its_runtime_env(tmp_path, monkeypatch):
    """A runtime_env's variables are in Ray's logs and its workers' command lines: the secret goes
    into the run dir's hand-over file, the runtime_env names that file alone; the engine's driver
    takes the values and deletes the file (rl.recipe.secret_env.take_env_file)."""
    from rl.recipe import secret_env  # the engine's side of the same contract (a test may import both)

    client, env_file = FakeClient(), tmp_path / ".job-env.json"
    seen: dict = {}

    def submit(**kwargs):
        seen["mode"] = env_file.stat().st_mode & 0o777
        seen["environ"] = dict(kwargs["runtime_env"]["env_vars"])
        secret_env.take_env_file(seen["environ"])
        return FakeClient.submit_job(client, **kwargs)

    client.submit_job = submit
    monkeypatch.setattr(ray_job, "job_client", lambda address: client)
    monkeypatch.setenv("HF_TOKEN", "hf_zzsecret9")
    code = ray_job.main(["--address", "http://h:8265", "--working-dir", ".", "--env-file", str(env_file),
                         "--env", "HF_TOKEN", "--", "python", "-m", "rl.run"])
    assert code == 0
    assert client.submitted["runtime_env"]["env_vars"] == {"RL_ENV_FILE": str(env_file)}
    assert "zzsecret" not in repr(client.submitted)
    assert seen == {"mode": 0o600, "environ": {"HF_TOKEN": "hf_zzsecret9"}}
    assert not env_file.exists()


def test_env_values_without_a_hand_over_file_are_refused(monkeypatch, capsys):
    monkeypatch.setattr(ray_job, "job_client", lambda address: FakeClient())
    monkeypatch.setenv("HF_TOKEN", "hf_zzsecret9")
    assert ray_job.main(["--address", "http://h:8265", "--working-dir", ".", "--env", "HF_TOKEN", "--", "true"]) == 1
    assert "need --env-file" in capsys.readouterr().err
