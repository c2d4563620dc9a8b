"""A private Ray that misses Ray's fixed 30 s raylet registration on a loaded machine is started
again (issue 38: "The current node timed out during startup" failed a parity run under load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cluster import ray_cluster as cluster

TIMED_OUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                      "failed to startup or the GCS has become overloaded.")


def _fake_ray(monkeypatch, outcomes: list) -> list[str]:
    dirs: list[str] = []

    def init(**kwargs):
        dirs.append(kwargs["_temp_dir"])
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(cluster.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(cluster.ray, "init", init)
    monkeypatch.setattr(cluster.ray, "shutdown", lambda: None)
    return dirs


def test_a_start_up_timeout_is_retried_in_a_fresh_temp_dir(monkeypatch):
    dirs = _fake_ray(monkeypatch, [TIMED_OUT, TIMED_OUT, None])
    got = cluster.start_ray(num_cpus=2)
    assert got == dirs[-1] and len(set(dirs)) == 3
    assert [Path(d).exists() for d in dirs] == [False, False, True]  # the failed attempts' dirs removed
    Path(got).rmdir()


def test_the_last_timeout_and_any_other_error_are_raised(monkeypatch):
    dirs = _fake_ray(monkeypatch, [TIMED_OUT] * cluster.RAY_START_ATTEMPTS)
    with pytest.raises(Exception, match="timed out during startup"):
        cluster.start_ray(num_cpus=2)
    other = _fake_ray(monkeypatch, [ValueError("bad num_cpus")])
    with pytest.raises(ValueError, match="bad num_cpus"):
        cluster.start_ray(num_cpus=2)
    assert len(dirs) == cluster.RAY_START_ATTEMPTS and len(other) == 1
    assert not any(Path(d).exists() for d in dirs + other)  # no attempt leaves its temp dir
