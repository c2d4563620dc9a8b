"""A tiny stand-in for the engine, for the launcher's tests: it speaks the run-dir contract.

    python tests/data/fake_engine.py --out RUN_DIR --steps 5 --sleep 0.05 [--crash-at 3] [--hang]
        [--ignore-sigterm] [--spawn-child [--child-own-group]] [--no-status] [--exit-code N] [--torn-tail]
        [--start-delay S]

It appends one metrics.jsonl line per step, keeps status.json current, prints to stdout and stderr,
and writes "interrupted" to status.json when it gets SIGINT (as a well-behaved engine does).

Readiness (issue 38): once its signal handlers are installed and its steps written (before it
hangs or exits) it writes `ready` (JSON: the signals that were pending, i.e. sent before it was
ready) and unblocks SIGTERM and SIGINT. A test that starts it with those signals blocked (`held_signals` in
tests/harness/test_launch_runner.py; a blocked mask is inherited through fork and exec) gets every
early signal delivered after the handlers are in place, however slowly it started; a test that
signals it waits for `ready` first. `--start-delay S` sleeps S seconds before the handlers, to
show that a slow start changes no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def write_status(out: Path, **fields: object) -> None:
    tmp = out / "status.json.tmp"
    tmp.write_text(json.dumps({"engine": "fake", "num_steps": ARGS.steps, "dead_worker": None, **fields}))
    os.replace(tmp, out / "status.json")


def spawn_child(out: Path) -> None:
    """A helper process that ignores SIGTERM and would live forever."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
    child = subprocess.Popen([sys.executable, "-c", code], process_group=0 if ARGS.child_own_group else None)
    (out / "child.pid").write_text(str(child.pid))


def announce_ready(out: Path, early: set[int]) -> None:
    """Handlers are in place: write `ready` (the signals held so far), then take them."""
    held = (early | signal.sigpending()) & {signal.SIGTERM, signal.SIGINT}
    pending = sorted(signal.Signals(s).name for s in held)
    tmp = out / "ready.tmp"
    tmp.write_text(json.dumps({"pending": pending}))
    os.replace(tmp, out / "ready")
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})  # an ignored one is dropped


def main() -> int:
    out = ARGS.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine.pid").write_text(str(os.getpid()))
    time.sleep(ARGS.start_delay)  # a slow start: imports on a loaded machine
    early = signal.sigpending()  # (setting SIG_IGN drops a pending SIGTERM: look before)
    if ARGS.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ARGS.spawn_child:
        spawn_child(out)
    status = not ARGS.no_status
    if status:
        write_status(out, state="running", last_step=0, exit_code=None, error=None)
    print(f"fake engine: {ARGS.steps} steps, env FAKE_MARK={os.environ.get('FAKE_MARK')}", flush=True)
    start = time.monotonic()
    step = 0
    try:
        with open(out / "metrics.jsonl", "a") as metrics:
            for step in range(1, ARGS.steps + 1):
                time.sleep(ARGS.sleep)
                if step == ARGS.crash_at:
                    raise RuntimeError(f"boom at step {step}")
                record = {"step": step, "train/reward": round(step / ARGS.steps, 4), "train/loss": 1.0 / step}
                metrics.write(json.dumps(record) + "\n")
                metrics.flush()
                print(f"step {step} reward {record['train/reward']}", flush=True)
                print(f"stderr line {step}", file=sys.stderr, flush=True)
                if status:
                    write_status(out, state="running", last_step=step, exit_code=None, error=None)
            if ARGS.torn_tail:
                metrics.write('{"step": 999, "train/rew')
                metrics.flush()
        announce_ready(out, early)
        while ARGS.hang:
            time.sleep(0.05)
    except KeyboardInterrupt:
        if status:
            write_status(out, state="interrupted", last_step=step - 1, exit_code=130, error="SIGINT")
        print("fake engine: interrupted", flush=True)
        return 130
    if status:
        wall = time.monotonic() - start
        write_status(out, state="completed", last_step=ARGS.steps, exit_code=0, error=None, wall_s=wall)
    print("fake engine: done", flush=True)
    return ARGS.exit_code


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--sleep", type=float, default=0.02)
    p.add_argument("--crash-at", type=int, default=0)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--spawn-child", action="store_true")
    p.add_argument("--child-own-group", action="store_true", help="the child moves to a process group of its own")
    p.add_argument("--no-status", action="store_true")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--torn-tail", action="store_true")
    p.add_argument("--start-delay", type=float, default=0.0, help="seconds before the signal handlers are set")
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    sys.exit(main())
