"""The spawn helper retries a rendezvous whose port was taken, and only that."""

from __future__ import annotations

import os

import pytest
import torch.multiprocessing as mp
from rank_processes import spawn_on_free_port

from rl.cluster.ports import ephemeral_start, free_port


def _taken_once(rank: int, port: int, marker: str, ports: str) -> None:
    with open(ports, "a") as f:
        f.write(f"{port}\n")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError(f"port: {port}, code: -98, name: EADDRINUSE, message: address already in use")


def _broken(rank: int, port: int) -> None:
    raise ValueError("a test's own failure")


def test_a_taken_port_is_retried_on_a_fresh_one(tmp_path) -> None:
    marker, ports = str(tmp_path / "marker"), str(tmp_path / "ports")
    spawn_on_free_port(_taken_once, lambda port: (port, marker, ports), 1)
    tried = [int(p) for p in open(ports).read().split()]
    assert len(tried) == 2


def test_any_other_failure_is_raised_at_once() -> None:
    with pytest.raises(mp.ProcessRaisedException, match="own failure"):
        spawn_on_free_port(_broken, lambda port: (port,), 1)


def test_free_ports_lie_below_the_ephemeral_range() -> None:
    assert all(1024 <= free_port() < ephemeral_start() for _ in range(50))
