"""Run a test's body in freshly spawned processes, one per rank, and collect what each returned.

Why fresh processes: megatron-core's CPU shims patch torch.cuda for the whole process, and
torch.distributed allows one default group per process; a pytest worker must keep neither. They
are forked from a fork server that has imported the heavy modules once (PRELOAD) and done nothing
else, so each starts clean without paying those imports again.
`fn(rank, port)` runs in each process (a module-level function, so it pickles); `port` is free
on 127.0.0.1 for its process group or store. Its return value comes back through a file.

Why a spawn is retried: a port found free here is bound by the child seconds later, after it
imports torch; `rl.cluster.ports.free_port` keeps clear of outgoing connections' ports, but another
listener may still win the race. A lost race (EADDRINUSE at rendezvous, before any test work)
is retried on a fresh port.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as mp

from rl.cluster.ports import free_port

ATTEMPTS = 3
# Rank processes come from a fork server that imported these once (per pytest worker): a spawned
# rank re-imported torch and transformers, seconds of a 2-core box per rank and test. Nothing is
# initialised before the fork (no process group, no shim, no thread pool in use). megatron.core is
# not among them: on a CPU machine it imports only after the shims are applied, which is each
# rank's business. On a GPU machine ranks are spawned instead: importing megatron.core or fla
# (through rl.models) initialises CUDA there, which a forked process cannot use.
PRELOAD = [name for name in ("torch", "torch.distributed", "transformers", "rl.models")
           if importlib.util.find_spec(name.split(".")[0]) is not None]
START_METHOD = "spawn" if torch.cuda.is_available() else "forkserver"
multiprocessing.set_forkserver_preload(PRELOAD)


def spawn_on_free_port(child: Callable[..., None], args: Callable[[int], tuple], nprocs: int) -> None:
    """`mp.spawn(child, args(port), nprocs)` (from the fork server on a CPU machine) on a fresh free
    port, again if the port was taken."""
    for attempt in range(ATTEMPTS):
        try:
            mp.start_processes(child, args=args(free_port()), nprocs=nprocs, join=True, start_method=START_METHOD)
            return
        except mp.ProcessRaisedException as e:
            if "EADDRINUSE" not in str(e) or attempt == ATTEMPTS - 1:
                raise


def _child(rank: int, fn: Callable[[int, int], Any], port: int, out: str) -> None:
    torch.save(fn(rank, port), os.path.join(out, f"rank{rank}.pt"))


def run_ranks(fn: Callable[[int, int], Any], nprocs: int = 1) -> list[Any]:
    """What `fn(rank, port)` returned in each of `nprocs` spawned processes, in rank order."""
    with tempfile.TemporaryDirectory() as out:
        spawn_on_free_port(_child, lambda port: (fn, port, out), nprocs)
        return [torch.load(os.path.join(out, f"rank{r}.pt"), weights_only=False) for r in range(nprocs)]


def one_gloo_rank(port: int) -> None:
    """This process as the only rank of a gloo group (what a one-rank backend test needs)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def one_rank(port: int) -> None:
    """This process as the only rank of a group that reduces what the backend's tensors hold: gloo on
    a CPU machine, NCCL for CUDA tensors (and gloo for CPU ones) on a GPU machine."""
    import torch.distributed as dist

    if not torch.cuda.is_available():
        one_gloo_rank(port)
        return
    torch.cuda.set_device(0)
    dist.init_process_group("cpu:gloo,cuda:nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
