"""Free TCP ports for process-group stores and the refit channel.

Why not simply bind port 0: the kernel hands out ports from its ephemeral range, the same range
it draws every outgoing connection's local port from. A port found free there and bound by a
store a moment later (after a Ray round trip, or a spawned process importing torch) may by then
be some connection's local port (Ray and gloo open many), and the store fails with EADDRINUSE.
Below the ephemeral range only listeners compete.
"""

from __future__ import annotations

import random
import socket

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
SPAN = 12000  # how far below the ephemeral range we look


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default where it cannot be read)."""
    try:
        with open(EPHEMERAL_RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now, below the ephemeral range; port 0's pick if none is found there."""
    top = ephemeral_start()
    for _ in range(200):
        port = random.randrange(max(1024, top - SPAN), top)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
