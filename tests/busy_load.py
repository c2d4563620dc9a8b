"""Keep the machine loaded for a while: N busy-loop processes, each ending by itself after S seconds.

    python tests/busy_load.py --procs 4 --seconds 5400

The by-hand proof that CI cannot flake under load (issue 38, docs/architecture.md "CI under
load"): run `bash .ci/run` while this keeps the load average above 6 on the 2-core box. Every
worker checks the clock as it spins, so nothing outlives `--seconds` even if this parent is
killed; Ctrl-C or SIGTERM stops them all at once. It prints the 1-minute load average every 60 s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time


def spin(until: float) -> None:
    """Burn one CPU until the monotonic clock reaches `until`."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    x = 0
    while time.monotonic() < until:
        for _ in range(100_000):
            x ^= 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=4,
                        help="busy processes (4, beside the CI, hold a 2-core box above load 6)")
    parser.add_argument("--seconds", type=float, default=5400.0, help="when every process ends by itself")
    args = parser.parse_args(argv)
    if not 1 <= args.procs <= 256 or not 0 < args.seconds <= 86400:
        parser.error("--procs must be in 1..256 and --seconds in (0, 86400]")
    until = time.monotonic() + args.seconds
    workers = [multiprocessing.Process(target=spin, args=(until,), daemon=True) for _ in range(args.procs)]
    for worker in workers:
        worker.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        while any(w.is_alive() for w in workers):
            print(f"busy_load: {args.procs} procs, load average {os.getloadavg()[0]:.1f}, "
                  f"{max(until - time.monotonic(), 0):.0f} s left", flush=True)
            for worker in workers:
                worker.join(timeout=60 / len(workers))
    finally:
        for worker in workers:
            worker.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
