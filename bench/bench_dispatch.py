"""Driver-side dispatch cost per step and driver memory against batch size (issue 15).

    python bench/bench_dispatch.py                     # memory + tq, 4k / 16k / 64k rows, DP 64
    python bench/bench_dispatch.py --stores memory --rows 16384 --steps 3

One step of the meta path of `get_logprobs`, through the real code (`rl.data.dp_dispatch`,
`shard_keys_by_seqlen`, the real stores):

1. rollout put: the driver puts the step's rollout (input_ids, attention_mask, response_mask
   int64 `[N, T]`, gen_logprobs fp32 `[N, T]`, advantages fp32 `[N]`; lognormal lengths) under
   minted keys, as `TQPlane.put_rollout` does, and drops its own tensors;
2. dispatch: `group.get_logprobs(meta)` on a policy group of DP 64 simulated ranks: the decorator
   shards by sequence length, fans the shards out, each rank reads `input_ids` and
   `attention_mask` of its shard from the store, writes `prev_logprobs` and returns its receipt;
   the driver concatenates the receipts, restores the caller's row order and checks it;
3. clear: the step's partition is dropped.

Ranks: with the memory store they are in-process objects (the store lives in the driver); with
TransferQueue they are hosted by 2 Ray actors (32 ranks each, one TQ client per actor), so no
payload ever enters the driver during the dispatch: exactly the TQ path's claim.

Phases of the dispatch are timed by wrapping the module functions the decorator calls (the code
under test is not changed): shard (`assign_balanced`), subset (the rest of
`shard_keys_by_seqlen`: building the shard receipts), key check (`_refuse_duplicate_keys`),
fan-out (`_run_on_ranks`: the ranks' work, not driver overhead), concat (`_concat_rows`),
gather (`caller_order_gather` + `_take`), order check (`_check_rows`), other (the rest).
Driver overhead = dispatch wall - fan-out wall (and the same in the driver thread's CPU time,
since the 2-core box is shared).

Memory of the driver process, per N: RSS before the first step, RSS at the start of the
dispatch (after the rollout put), the peak RSS during the dispatch over its start (the kernel's
high-water mark, reset through /proc/self/clear_refs) and the tracemalloc peak of a separate
dispatch (Python heap only; tensor storage is not traced, RSS covers it). Each (store, N) runs
in a fresh process. Results: bench/results/dispatch_<UTC date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rl.data.dispatch as dispatch_mod  # noqa: E402
import rl.data.sharding as sharding_mod  # noqa: E402
from rl.data import BatchedDataDict, KVBatchMeta, MemoryStore, dp_dispatch, make_key  # noqa: E402

GROUP = 8  # generations per prompt (key minting)
HOSTS = 2  # Ray actors hosting the simulated ranks on the TQ path
PHASES = ("shard", "subset", "key_check", "fan_out", "concat", "gather", "order_check")


# --- the step's data ------------------------------------------------------------------------


def lengths_for(rows: int, seq: int, seed: int) -> list[int]:
    """Lognormal token counts (median 0.6 T), clipped to [8, T]."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=np.log(0.6 * seq), sigma=0.5, size=rows)
    return np.clip(raw.astype(np.int64), 8, seq).tolist()


def rollout_columns(lengths: list[int], seq: int, seed: int) -> dict[str, torch.Tensor]:
    rows = len(lengths)
    gen = torch.Generator().manual_seed(seed)
    lens = torch.tensor(lengths)
    mask = (torch.arange(seq)[None, :] < lens[:, None]).long()
    prompt = max(1, seq // 8)
    response = mask.clone()
    response[:, :prompt] = 0
    ids = torch.randint(1, 32000, (rows, seq), generator=gen) * mask
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "response_mask": response,
        "gen_logprobs": -torch.rand(rows, seq, generator=gen) * response,
        "advantages": torch.randn(rows, generator=gen),
    }


def logprobs_of(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The lightweight ranks' 'model': a cheap, exactly reproducible function of the inputs."""
    return (ids.float() * -1e-3) * mask


# --- ranks ----------------------------------------------------------------------------------


def rank_logprobs(store: Any, shard: KVBatchMeta) -> tuple[KVBatchMeta, float, float]:
    """One rank's get_logprobs on its shard: (receipt, get seconds, put seconds)."""
    t0 = time.perf_counter()
    cols = store.get(shard, ["input_ids", "attention_mask"])
    t1 = time.perf_counter()
    lp = logprobs_of(cols["input_ids"], cols["attention_mask"])
    t2 = time.perf_counter()
    out = store.put(shard, columns={"prev_logprobs": lp})
    return out, t1 - t0, time.perf_counter() - t2


class InProcessGroup:
    """DP `dp` ranks as in-process objects sharing the driver's store (memory backend)."""

    def __init__(self, store: Any, dp: int) -> None:
        self.store, self.dp_size = store, dp
        self.records: list[dict] = []
        self.rank_get_s = self.rank_put_s = 0.0

    def _run_on_ranks(self, method: str, shards: list[KVBatchMeta]) -> list[KVBatchMeta]:
        out = []
        for shard in shards:
            meta, g, p = rank_logprobs(self.store, shard)
            self.rank_get_s += g
            self.rank_put_s += p
            out.append(meta)
        return out

    def _record_invariant(self, record: dict) -> None:
        self.records.append(record)

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict) -> None:
        raise RuntimeError("the legacy body must not run on the meta path")


class ActorGroup(InProcessGroup):
    """DP `dp` ranks hosted round-robin by `HOSTS` Ray actors, each with its own TQ client."""

    def __init__(self, store: Any, dp: int) -> None:
        import ray

        super().__init__(store, dp)

        @ray.remote(num_cpus=0)
        class RankHost:
            def __init__(self, client: Any) -> None:
                self.client = client  # an attached, non-owner TQStore

            def run(self, shards: list[KVBatchMeta]) -> list[tuple[KVBatchMeta, float, float]]:
                return [rank_logprobs(self.client, s) for s in shards]

            def ping(self) -> int:
                self.client.partitions()  # attach now, not inside the first timed step
                return os.getpid()

        self._ray = ray
        self.hosts = [RankHost.remote(store) for _ in range(HOSTS)]
        ray.get([h.ping.remote() for h in self.hosts])

    def _run_on_ranks(self, method: str, shards: list[KVBatchMeta]) -> list[KVBatchMeta]:
        refs = [h.run.remote(shards[i :: len(self.hosts)]) for i, h in enumerate(self.hosts)]
        answers = self._ray.get(refs)
        out: list[Any] = [None] * len(shards)
        for i, answer in enumerate(answers):
            for j, (meta, g, p) in enumerate(answer):
                out[i + j * len(self.hosts)] = meta
                self.rank_get_s += g
                self.rank_put_s += p
        return out


# --- phase timers -----------------------------------------------------------------------------


class PhaseTimers:
    """Wrap the functions the decorator calls; accumulate their wall time per phase."""

    TARGETS = (
        (sharding_mod, "assign_balanced", "shard"),
        (dispatch_mod, "shard_keys_by_seqlen", "shard_total"),
        (dispatch_mod, "_refuse_duplicate_keys", "key_check"),
        (dispatch_mod, "_concat_rows", "concat"),
        (dispatch_mod, "caller_order_gather", "gather"),
        (dispatch_mod, "_take", "gather"),
        (dispatch_mod, "_check_rows", "order_check"),
    )

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Any, phase: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.acc[phase] = self.acc.get(phase, 0.0) + time.perf_counter() - t0
                cpu = phase + "_cpu"
                self.acc[cpu] = self.acc.get(cpu, 0.0) + time.thread_time() - c0

        return timed

    def install(self, group: Any) -> None:
        for module, name, phase in self.TARGETS:
            fn = getattr(module, name)
            self._saved.append((module, name, fn))
            setattr(module, name, self._wrap(fn, phase))
        run = group._run_on_ranks
        self._saved.append((group, "_run_on_ranks", None))
        group._run_on_ranks = self._wrap(run, "fan_out")

    def uninstall(self) -> None:
        for owner, name, fn in reversed(self._saved):
            if fn is None:
                delattr(owner, name)  # the instance attribute; the class method shows again
            else:
                setattr(owner, name, fn)
        self._saved.clear()


# --- memory ---------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# --- one (store, N) -------------------------------------------------------------------------


def make_store(kind: str) -> tuple[Any, Any]:
    if kind == "memory":
        store = MemoryStore()
        return store, InProcessGroup
    import ray

    from rl.config import DataPlaneConfig
    from rl.data import make_client

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    return make_client(DataPlaneConfig(backend="tq")), ActorGroup


def verify(store: Any, meta: KVBatchMeta, out: KVBatchMeta, lengths: list[int], seq: int,
           seed: int) -> None:
    """Spot-check 64 rows read back against a recomputation (the bench must measure real work)."""
    if out.keys != meta.keys or "prev_logprobs" not in out.fields:
        raise RuntimeError("dispatch returned the wrong rows")
    pick = sorted(set(np.linspace(0, len(meta) - 1, 64).astype(int).tolist()))
    got = store.get(out.subset(pick), ["prev_logprobs"])["prev_logprobs"]
    ref = rollout_columns(lengths, seq, seed)
    want = logprobs_of(ref["input_ids"][pick], ref["attention_mask"][pick])
    if not torch.equal(got, want):
        raise RuntimeError("prev_logprobs read back differ from the recomputation")


def one(kind: str, rows: int, dp: int, seq: int, steps: int) -> dict[str, Any]:
    rss_start = rss_bytes()
    store, group_cls = make_store(kind)
    group = group_cls(store, dp)
    lengths = lengths_for(rows, seq, seed=rows)
    keys_of = [f"u{i // GROUP}" for i in range(rows)]
    result: dict[str, Any] = {"store": kind, "rows": rows, "dp": dp, "seq": seq, "steps": steps}
    samples: list[dict[str, float]] = []
    gc.collect()
    rss_ready = rss_bytes()
    for step in range(steps + 2):  # step 0 warms up, the last step runs under tracemalloc
        traced = step == steps + 1
        keys = [make_key(f"s{step}{u}", i % GROUP) for i, u in enumerate(keys_of)]
        cols = rollout_columns(lengths, seq, seed=step)
        t0 = time.perf_counter()
        meta = store.put(keys, f"step_{step}", cols, sequence_lengths=lengths)
        put_s = time.perf_counter() - t0
        payload = sum(c.nbytes for c in cols.values())
        del cols
        gc.collect()
        rss_before = rss_bytes()
        has_hwm = reset_peak_rss()
        timers = PhaseTimers()
        timers.install(group)
        group.rank_get_s = group.rank_put_s = 0.0
        if traced:
            tracemalloc.start()
        t0, c0 = time.perf_counter(), time.thread_time()
        out = group.get_logprobs(meta)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        if traced:
            _, heap_peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        peak = peak_rss_bytes() if has_hwm else None
        timers.uninstall()
        if not group.records or not group.records[-1]["ok"]:
            raise RuntimeError(f"row-order invariant: {group.records[-1:]}")
        verify(store, meta, out, lengths, seq, seed=step)
        t0 = time.perf_counter()
        store.clear(f"step_{step}")
        clear_s = time.perf_counter() - t0
        del meta, out
        gc.collect()
        if traced:
            result["memory"] = {
                "rss_start_mib": rss_start / 2**20,
                "rss_after_store_start_mib": rss_ready / 2**20,
                "rss_dispatch_start_mib": rss_before / 2**20,
                "rss_dispatch_peak_over_start_mib": None if peak is None else (peak - rss_before) / 2**20,
                "tracemalloc_dispatch_peak_mib": heap_peak / 2**20,
                "rss_after_steps_mib": rss_bytes() / 2**20,
                "payload_put_mib": payload / 2**20,
            }
            continue
        acc = timers.acc
        sample = {p: acc.get(p, 0.0) for p in PHASES if p != "subset"}
        sample["subset"] = acc.get("shard_total", 0.0) - acc.get("shard", 0.0)
        sample["dispatch_wall"] = wall
        sample["other"] = wall - sum(sample[p] for p in PHASES)
        sample["driver_overhead"] = wall - sample["fan_out"]
        sample["driver_overhead_cpu"] = cpu - acc.get("fan_out_cpu", 0.0)
        sample["rank_get_sum"] = group.rank_get_s
        sample["rank_put_sum"] = group.rank_put_s
        sample["rollout_put"] = put_s
        sample["clear"] = clear_s
        sample["rss_dispatch_peak_over_start_mib"] = (
            None if peak is None else (peak - rss_before) / 2**20)
        if step > 0:
            samples.append(sample)
    result["ms_median"] = {
        k: statistics.median(s[k] for s in samples) * 1e3
        for k in samples[0] if not k.endswith("_mib")
    }
    result["ms_min"] = {
        k: min(s[k] for s in samples) * 1e3 for k in samples[0] if not k.endswith("_mib")
    }
    result["rss_dispatch_peak_over_start_mib_per_step"] = [
        s["rss_dispatch_peak_over_start_mib"] for s in samples]
    store.close()
    if kind == "tq":
        import ray

        ray.shutdown()
    return result


# --- the whole bench ------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass  # no /proc/cpuinfo model name: keep platform.processor()
    try:
        import transfer_queue

        tq_version = getattr(transfer_queue, "__version__", None)
        if tq_version is None:
            from importlib.metadata import version

            tq_version = version("transferqueue")
    except Exception:  # noqa: BLE001  (version metadata only)
        tq_version = None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "rl"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    return {
        "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
        "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "python": platform.python_version(), "torch": torch.__version__,
        "numpy": np.__version__, "transferqueue": tq_version,
        "git_commit": commit, "rl_dirty": dirty,
    }


def table(results: list[dict[str, Any]]) -> str:
    head = ("| store | rows | driver overhead ms (CPU ms) | shard | subset | key check | concat | gather "
            "| order check | other | fan-out ms (ranks) | rollout put ms | driver RSS at dispatch MiB "
            "| dispatch RSS peak +MiB | tracemalloc peak MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        m, mem = r["ms_median"], r["memory"]
        peak = mem["rss_dispatch_peak_over_start_mib"]
        lines.append(
            f"| {r['store']} | {r['rows']} | {m['driver_overhead']:.1f} ({m['driver_overhead_cpu']:.1f}) "
            f"| {m['shard']:.1f} "
            f"| {m['subset']:.1f} | {m['key_check']:.1f} | {m['concat']:.1f} | {m['gather']:.1f} "
            f"| {m['order_check']:.1f} | {m['other']:.1f} | {m['fan_out']:.0f} "
            f"| {m['rollout_put']:.0f} | {mem['rss_dispatch_start_mib']:.0f} "
            f"| {'-' if peak is None else f'{peak:.1f}'} | {mem['tracemalloc_dispatch_peak_mib']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=["memory", "tq"], choices=["memory", "tq"])
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--dp", type=int, default=64)
    parser.add_argument("--seq", type=int, default=256, help="padded tokens per row")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (plus a warm-up and a traced one)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default bench/results/dispatch_<UTC date>.json)")
    parser.add_argument("--one", nargs=2, metavar=("STORE", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        res = one(args.one[0], int(args.one[1]), args.dp, args.seq, args.steps)
        print("RESULT " + json.dumps(res), flush=True)
        return
    now = dt.datetime.now(dt.timezone.utc)
    load_before = os.getloadavg()
    results = []
    for kind in args.stores:
        for rows in args.rows:
            cmd = [sys.executable, __file__, "--one", kind, str(rows), "--dp", str(args.dp),
                   "--seq", str(args.seq), "--steps", str(args.steps)]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
                raise SystemExit(f"bench_dispatch: {kind} x {rows} rows failed (rc {proc.returncode})")
            results.append(json.loads(lines[-1][len("RESULT "):]))
            m = results[-1]["ms_median"]
            print(f"{kind:6s} {rows:6d} rows: driver overhead {m['driver_overhead']:.1f} ms "
                  f"(fan-out {m['fan_out']:.0f} ms)", flush=True)
    doc = {
        "bench": "bench/bench_dispatch.py",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "date_utc": now.isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before_after": [load_before, os.getloadavg()],
        "results": results,
    }
    out = args.out or ROOT / "bench" / "results" / f"dispatch_{now.date().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
