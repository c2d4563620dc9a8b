"""Ours / the peer's end-to-end GRPO throughput, from two finished run dirs of one recipe:

    python bench/e2e_ratio.py runs/OURS runs/TRL [--warmup 2] [--json out.json] [--gpu-util OURS.csv TRL.csv]

Prints tokens/s/GPU of each (prompt + completion tokens of a step / step wall s / GPUs, averaged
over the steps after `--warmup`), the ratio, and each phase's median seconds side by side
(`timing/train/*`: generation, old and reference log-probs, training, refit, data plane, other)
with the peer's seconds over ours where both spent any: the generation and training components
of the ratio, measured in the same two runs.
Both runs must hold every step after the warm-up of both metrics read; anything else is exit 2
with the reason (a ratio of a truncated run is no figure). `--gpu-util` adds each run's GPU-busy
fraction and host overhead over the same steps (bench/gpu_busy.py, from NVML utilization sampled
beside each run). Steps whose kernels the engine traced (`profile.kernel_steps`: they pay the
tracing) follow the timed ones and are left out of them; their GPU-busy fraction, the kernels' own
account, is printed beside NVML's. bench/gpu_e2e.sh runs it on the GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from gpu_busy import TRACED, busy, untraced_steps  # noqa: E402

from harness.metrics import MetricsError, read_metrics  # noqa: E402

TOKENS = "performance/tokens_per_sec_per_gpu"
TOTAL = "timing/train/total"
PHASES = ("generation", "old_logprobs", "ref_logprobs", "training", "refit", "data_plane", "other")


def steady(run: Path, name: str, warmup: int) -> list[float]:
    """The metric's values of the untraced steps after `warmup`; MetricsError unless there is one and
    none is missing."""
    series = read_metrics(run).get(name)
    if not series:
        raise MetricsError(f"{run}: no {name} recorded")
    steps = untraced_steps(run, sorted(series))
    kept = [s for s in steps if s > warmup]
    if not kept or kept != list(range(warmup + 1, steps[-1] + 1)):
        raise MetricsError(f"{run}: {name} has steps {steps}, need every step after the {warmup} warm-up")
    return [float(series[s]) for s in kept]


def summary(run: Path, warmup: int, util: Path | None = None) -> dict:
    metrics = read_metrics(run)
    phases = {p: statistics.median(steady(run, f"timing/train/{p}", warmup))
              for p in PHASES if f"timing/train/{p}" in metrics}
    out = {"run": str(run), "tokens_per_sec_per_gpu": statistics.mean(steady(run, TOKENS, warmup)),
           "step_s": statistics.median(steady(run, TOTAL, warmup)), "phases_s": phases}
    if util is not None:
        out["gpu"] = busy(run, util, warmup)
    traced = metrics.get(TRACED)
    if traced:
        out["traced"] = {"steps": sorted(traced), "gpu_busy": statistics.mean(traced.values()),
                         "host_overhead": 1.0 - statistics.mean(traced.values()),
                         "phases": {name[len(TRACED) + 1:]: statistics.mean(values.values())
                                    for name, values in metrics.items() if name.startswith(TRACED + "/") and values}}
    return out


def speedups(ours: dict, peer: dict) -> dict[str, float]:
    """Each phase's peer seconds over ours, where both runs spent time in it (a phase one engine
    skips, as both skip the reference pass at kl_beta 0, has no ratio), and the whole step's."""
    out = {p: peer["phases_s"][p] / ours["phases_s"][p] for p in PHASES
           if ours["phases_s"].get(p, 0.0) > 0.0 and peer["phases_s"].get(p, 0.0) > 0.0}
    return {**out, "step": peer["step_s"] / ours["step_s"]}


def table(ours: dict, peer: dict) -> str:
    ratio = ours["tokens_per_sec_per_gpu"] / peer["tokens_per_sec_per_gpu"]
    faster = speedups(ours, peer)
    lines = [f"tokens/s/GPU  ours {ours['tokens_per_sec_per_gpu']:,.0f}  peer {peer['tokens_per_sec_per_gpu']:,.0f}  "
             f"ratio {ratio:.2f}x", "", "| phase (median s) | ours | peer | peer / ours |", "|---|---|---|---|"]
    for phase in PHASES:
        a, b = ours["phases_s"].get(phase), peer["phases_s"].get(phase)
        times = f"{faster[phase]:.2f}x" if phase in faster else "-"
        lines.append(f"| {phase} | {'-' if a is None else f'{a:.3f}'} | {'-' if b is None else f'{b:.3f}'} | {times} |")
    lines.append(f"| step | {ours['step_s']:.3f} | {peer['step_s']:.3f} | {faster['step']:.2f}x |")
    if "gpu" in ours and "gpu" in peer:
        lines.append(f"| GPU busy, NVML (host overhead) | {ours['gpu']['gpu_busy']:.1%} "
                     f"({ours['gpu']['host_overhead']:.1%}) | {peer['gpu']['gpu_busy']:.1%} "
                     f"({peer['gpu']['host_overhead']:.1%}) | |")
    for name, run in (("ours", ours), ("peer", peer)):
        if "traced" in run:
            t = run["traced"]
            within = "".join(f", {phase} {busy:.1%}" for phase, busy in sorted(t["phases"].items()))
            cells = [f"{t['gpu_busy']:.1%} ({t['host_overhead']:.1%}{within})", "-"]
            lines.append(f"| GPU busy, kernels traced in steps {t['steps'][0]}-{t['steps'][-1]} (host overhead) | "
                         f"{' | '.join(cells if name == 'ours' else cells[::-1])} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ours", type=Path)
    parser.add_argument("peer", type=Path)
    parser.add_argument("--warmup", type=int, default=2, help="leading steps left out (compilation, graph capture)")
    parser.add_argument("--json", type=Path, default=None, help="also write both summaries and the ratio here")
    parser.add_argument("--gpu-util", type=Path, nargs=2, default=None, metavar=("OURS_CSV", "PEER_CSV"),
                        help="nvidia-smi utilization sampled beside each run: adds its GPU-busy fraction")
    args = parser.parse_args(argv)
    utils = args.gpu_util or (None, None)
    try:
        ours, peer = summary(args.ours, args.warmup, utils[0]), summary(args.peer, args.warmup, utils[1])
    except (MetricsError, OSError) as error:
        print(f"e2e_ratio: {str(error)[:300]}", file=sys.stderr)
        return 2
    print(table(ours, peer))
    if args.json:
        ratio = ours["tokens_per_sec_per_gpu"] / peer["tokens_per_sec_per_gpu"]
        args.json.write_text(json.dumps({"ours": ours, "peer": peer, "ratio": ratio, "peer_over_ours_s":
                                         speedups(ours, peer), "warmup": args.warmup}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
