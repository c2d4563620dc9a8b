"""The infrastructure-failure table: each signature matches its real-world line, and ordinary
failures of ours match none (so they are never retried)."""

from __future__ import annotations

import pytest

from harness.nightly import SIGNATURES, match_log, match_text

EXAMPLES = {
    "ray_gcs_start": "RuntimeError: Failed to start the GCS server. Check /tmp/ray/session_latest/logs/gcs_server.err",
    "ray_node_start": "Exception: The current node timed out during startup. This could happen because some of "
                      "the raylet failed to startup or the GCS has become overloaded.",
    "ray_node_died": "ray.exceptions.RayletDiedError: The raylet of node 10.0.0.3 died unexpectedly",
    "port_in_use": "OSError: [Errno 98] Address already in use",
    "nccl_timeout": "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE)",
    "nccl_system_error": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                         "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "gloo_connect": "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/transport/tcp/pair.cc:144]",
    "cuda_unavailable": "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
}

OURS = [
    "Traceback (most recent call last):\nValueError: policy.parallel.tp = 3 does not divide 16",
    "AssertionError: dispatch_row_order: rows out of order at step 3",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "KeyError: 'train/reward'",
    "step 12: reward 0.41, loss nan",
    "INFO: GCS address is 10.0.0.1:6379; port 6379 configured",
]


def test_every_signature_has_an_example():
    assert {s.name for s in SIGNATURES} == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_signature_matches_its_example_inside_a_log(name):
    log = f"step 1 done\n{EXAMPLES[name]}\nshutting down\n"
    found = match_text(log)
    assert found is not None and found.signature.name == name
    assert found.line == EXAMPLES[name].strip()


@pytest.mark.parametrize("text", OURS)
def test_failures_of_our_own_match_nothing(text):
    assert match_text(text) is None


def test_match_log_reads_the_end_of_a_large_log(tmp_path):
    log = tmp_path / "engine.log"
    filler = "x" * (2 << 20)  # more than the scanned tail: the first line is not read
    log.write_text(f"Address already in use (an early, harmless line)\n{filler}\n"
                   "OSError: [Errno 98] Address already in use\n")
    found = match_log(log)
    assert found.signature.name == "port_in_use" and found.line == "OSError: [Errno 98] Address already in use"
    assert match_log(tmp_path / "missing.log") is None
