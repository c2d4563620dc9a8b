"""Known infrastructure failures: the only failures a nightly run retries.

A retry hides a bug when the bug is ours, so the rule is narrow: a failed entry is retried only
when its run did not complete (a completed run that fails a check is a real result) and its
engine.log matches one of these signatures, each a failure of the machine or the cluster
software rather than of the recipe or the engine. The summary report names the signature and
the matching line of every retry. Add a row here only with an example line in the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_LOG_BYTES = 1 << 20  # scan the last MiB: the failure is at the end of the log


@dataclass(frozen=True, kw_only=True)
class Signature:
    name: str
    pattern: re.Pattern[str]
    why: str


def _sig(name: str, pattern: str, why: str) -> Signature:
    return Signature(name=name, pattern=re.compile(pattern, re.IGNORECASE), why=why)


SIGNATURES: tuple[Signature, ...] = (
    _sig("ray_gcs_start", r"(failed to (start|connect to) (the )?GCS|GCS (server )?(failed|did not start|"
         r"exited)|timed out while waiting for (the )?GCS|RaySystemError.*GCS)",
         "Ray's control store did not come up: a slow or crowded node, not the recipe"),
    _sig("ray_node_start", r"The current node timed out during startup",
         "Ray's local node did not come up in time on an overloaded machine, before any step ran"),
    _sig("ray_node_died", r"(RayletDiedError|raylet (has )?died|node .* (has been )?marked (as )?dead|"
         r"The node with node id \S+ .*has been marked dead)",
         "a Ray node or raylet was lost (preemption, host failure)"),
    _sig("port_in_use", r"(address already in use|EADDRINUSE|errno 98\b|port \d+ is (already )?in use)",
         "a port another process holds; a later start picks another"),
    _sig("nccl_timeout", r"(watchdog caught collective operation timeout|NCCL (communicator|operation).*"
         r"time(d)? ?out|ProcessGroupNCCL.*timed? ?out)",
         "a collective stalled on the fabric (a sick link or GPU), not a wrong program"),
    _sig("nccl_system_error", r"(ncclSystemError|ncclRemoteError|NCCL error.*unhandled system error)",
         "NCCL lost a peer or the network"),
    _sig("gloo_connect", r"(gloo.*(connectFullMesh|Connection (reset|refused|closed) by peer)|"
         r"Gloo connectFullMesh failed)",
         "the CPU collectives could not connect their peers"),
    _sig("cuda_unavailable", r"(CUDA-capable device\(s\) (is|are)(/are)? busy or unavailable|"
         r"uncorrectable ECC error|\bNVRM: Xid\b)",
         "a GPU was busy, lost or reported a hardware fault"),
)


@dataclass(frozen=True, kw_only=True)
class Match:
    signature: Signature
    line: str


def match_text(text: str, signatures: Iterable[Signature] = SIGNATURES) -> Match | None:
    """The first signature (in table order) found in `text`, with the line it matched."""
    for signature in signatures:
        found = signature.pattern.search(text)
        if found:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            line = text[start:end if end >= 0 else len(text)].strip()
            return Match(signature=signature, line=line[:300])
    return None


def match_log(path: Path, signatures: Iterable[Signature] = SIGNATURES) -> Match | None:
    """Like match_text on the end of the log file at `path`; None when it does not exist."""
    path = Path(path)
    if not path.is_file():
        return None
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - MAX_LOG_BYTES))
        text = f.read().decode("utf-8", errors="replace")
    return match_text(text, signatures)
