"""Past one machine, on one machine: the tiny twin as a Ray job on a real 2-node Ray cluster.

The fixture starts a real Ray cluster of two nodes (two raylets, `ray.cluster_utils.Cluster`)
with its job server; the dashboard listens on loopback only. `harness run --ray-address`
submits the engine as a Ray job with `cluster.nodes: 2`: its ranks land on both nodes, its checks
pass and its metrics equal, bit for bit, those of the same recipe on one node (a private local
Ray, `cluster.nodes: 1`, 2 ranks). Then a second job is stopped by Ctrl-C (SIGINT to the
harness): the harness exits within 30 s and Ray lists no job still running.

One test, so that xdist does not start the cluster twice; the one-node run goes first, before
the cluster's processes load the box (on 2 busy cores a private Ray beside them once timed out
starting). The short runs are judged by the
shipped thresholds that hold at any length (the reward checks need 100 steps).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import main
from rl.cluster.ports import free_port
from rl.cluster.ray_cluster import RAY_START_ATTEMPTS, RAY_START_TIMED_OUT

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=235)]  # the file, measured on 2 shared cores

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "recipes" / "arith_grpo_cpu.yaml")
SHORT_RUN_CHECKS = ("loss_finite", "generator_in_sync", "grad_norm_bounded", "flops_recorded")
NOISY_PREFIXES = ("timing/", "performance/", "clock/")
TWO_NODES = ["cluster.nodes=2", "cluster.devices_per_node=1"]


NODES_UP_S = 300  # an upper bound for both nodes to register (Ray's own default, 30 s, is missed under load)


def start_two_nodes(node_dir: str) -> tuple[Any, Any]:
    """The head (dashboard, job server) and a second node, registered; (cluster, second node).
    Each Node waits a fixed 30 s for its raylet to register and raises RAY_START_TIMED_OUT when
    it misses that; every other wait here is NODES_UP_S."""
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    try:
        # Each node's dashboard agent gets a free port of its own: at Ray's default (52365) the head's
        # agent, the one that takes job submissions, lost the port to a private Ray of a test running
        # beside this one and every submission got "No available agent to submit job".
        cluster.add_node(wait=False, num_cpus=1, include_dashboard=True, dashboard_host="127.0.0.1",
                         dashboard_port=0, dashboard_agent_listen_port=free_port())
        # Its own temp dir: two nodes of one machine sharing one would share the job's unpacked
        # working dir, and one node's clean-up deletes it under the other's engine.
        worker = cluster.add_node(wait=False, num_cpus=1, temp_dir=node_dir, dashboard_agent_listen_port=free_port())
        cluster.wait_for_nodes(timeout=NODES_UP_S)
    except BaseException:
        cluster.shutdown()
        raise
    return cluster, worker


@contextlib.contextmanager
def two_node_ray_cluster():
    """A 2-node Ray cluster with a job server; yields (dashboard URL, node ids). A node that missed
    Ray's raylet registration is not a verdict: the cluster is started again, as rl/cluster/ray_cluster.py does
    (the processes of a node that raised in its start, which Ray gives no handle to, end with this
    process: Ray starts them fate-sharing)."""
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        node_dir = tempfile.mkdtemp(prefix="ray-node2-")  # short: Ray's socket paths must fit 107 bytes
        try:
            cluster, worker = start_two_nodes(node_dir)
            break
        except Exception as error:
            shutil.rmtree(node_dir, ignore_errors=True)
            if RAY_START_TIMED_OUT not in str(error) or attempt == RAY_START_ATTEMPTS:
                raise
    try:
        ids = {node.node_id for node in cluster.list_all_nodes()}
        yield f"http://{cluster.webui_url}", ids
    finally:
        cluster.remove_node(worker)  # first: a worker node outliving the head waits 30 s to drain
        cluster.shutdown()
        shutil.rmtree(node_dir, ignore_errors=True)


def short_thresholds(tmp: Path) -> Path:
    shipped = yaml.safe_load((REPO / "thresholds" / "arith_grpo_cpu.yaml").read_text())
    shipped["checks"] = [c for c in shipped["checks"] if c["name"] in SHORT_RUN_CHECKS]
    assert len(shipped["checks"]) == len(SHORT_RUN_CHECKS)
    path = tmp / "short.yaml"
    path.write_text(yaml.safe_dump(shipped))
    return path


def stable_metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(NOISY_PREFIXES)} for r in rows]


def live_jobs(url: str) -> list[str]:
    from ray.job_submission import JobSubmissionClient

    return [j.submission_id for j in JobSubmissionClient(url).list_jobs() if not j.status.is_terminal()]


def test_two_node_ray_job_matches_one_node_and_ctrl_c_stops_it(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    short = ["algorithm.num_steps=2", "algorithm.prompts_per_step=4", "policy.micro_batch_size=8",
             f"checks.thresholds={short_thresholds(tmp_path)}", "--no-progress"]
    one, two = tmp_path / "one-node", tmp_path / "two-nodes"
    assert main(["run", RECIPE, *short, "--out", str(one)]) == 0
    with two_node_ray_cluster() as (url, node_ids):
        monkeypatch.delenv("RAY_ADDRESS", raising=False)  # the cluster's helper sets it for this process
        two_nodes_then_ctrl_c(url, node_ids, short, one, two, tmp_path)


# `harness ...` with Ctrl-C as at a terminal: a test process started in the background by a
# non-interactive shell (`bash .ci/run &`) ignores SIGINT, an ignored signal stays ignored across
# exec, and Python then installs no KeyboardInterrupt handler: the harness would never see it.
AT_A_TERMINAL = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                 "runpy.run_module('harness.cli', run_name='__main__', alter_sys=True)")


def two_nodes_then_ctrl_c(url: str, node_ids: set[str], short: list[str], one: Path, two: Path, tmp_path: Path) -> None:
    assert main(["run", RECIPE, *short, *TWO_NODES, "--ray-address", url, "--out", str(two)]) == 0, \
        (two / "engine.log").read_text()[-3000:]
    assert "[ray job] submitted harness-arith_grpo_cpu-" in (two / "engine.log").read_text()
    workers = {w["name"]: w for w in json.loads((two / "env.json").read_text())["workers"]}
    ranks_at = {workers[f"policy-{r}"]["node_id"] for r in (0, 1)}
    assert ranks_at == node_ids, "the two ranks must run on the two nodes"
    assert workers["generation-0"]["node_id"] == workers["policy-0"]["node_id"]
    assert all(w["host_ip"] for w in workers.values())
    assert len(stable_metrics(two)) == 2 and stable_metrics(two) == stable_metrics(one)

    # Ctrl-C: the harness stops the job; nothing stays running on the cluster.
    stopped = tmp_path / "stopped"
    harness = subprocess.Popen(
        [sys.executable, "-c", AT_A_TERMINAL, "run", RECIPE, *short, "algorithm.num_steps=50", *TWO_NODES,
         "--ray-address", url, "--out", str(stopped)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Ready for Ctrl-C once the submitter says the job is submitted: it says so only where a stop
    # reaches the job (a job live on the cluster may not be known to its submitter yet).
    log, deadline = stopped / "engine.log", time.monotonic() + 120
    while "[ray job] submitted " not in (log.read_text() if log.exists() else ""):
        assert harness.poll() is None, harness.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.5)
    assert live_jobs(url)
    sent = time.monotonic()
    harness.send_signal(signal.SIGINT)
    code = harness.wait(timeout=120)  # upper bounds: the job's stop takes seconds, 30 s on a loaded box
    assert time.monotonic() - sent < 120
    assert code == 130, harness.stdout.read().decode()[-3000:]
    assert live_jobs(url) == []
    assert "stopping harness-arith_grpo_cpu-" in (stopped / "engine.log").read_text()
