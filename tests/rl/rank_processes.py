"""Run a test's body in freshly spawned processes, one per rank, and collect what each returned.

Why spawned: megatron-core's CPU shims patch torch.cuda for the whole process, and
torch.distributed allows one default group per process; a pytest worker must keep neither.
`fn(rank, port)` runs in each process (a module-level function, so it pickles); `port` is free
on 127.0.0.1 for its process group or store. Its return value comes back through a file.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as mp


def _child(rank: int, fn: Callable[[int, int], Any], port: int, out: str) -> None:
    torch.save(fn(rank, port), os.path.join(out, f"rank{rank}.pt"))


def run_ranks(fn: Callable[[int, int], Any], nprocs: int = 1) -> list[Any]:
    """What `fn(rank, port)` returned in each of `nprocs` spawned processes, in rank order."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_child, args=(fn, port, out), nprocs=nprocs, join=True)
        return [torch.load(os.path.join(out, f"rank{r}.pt"), weights_only=False) for r in range(nprocs)]


def one_gloo_rank(port: int) -> None:
    """This process as the only rank of a gloo group (what a one-rank backend test needs)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
