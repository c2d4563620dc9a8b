"""Ours / the peer's end-to-end GRPO throughput, from two finished run dirs of one recipe:

    python bench/e2e_ratio.py runs/OURS runs/TRL [--warmup 2] [--json out.json]

Prints tokens/s/GPU of each (prompt + completion tokens of a step / step wall s / GPUs, averaged
over the steps after `--warmup`), the ratio, and each phase's median seconds side by side
(`timing/train/*`: generation, old and reference log-probs, training, refit, data plane, other).
Both runs must hold every step after the warm-up of both metrics read; anything else is exit 2
with the reason (a ratio of a truncated run is no figure). bench/gpu_e2e.sh runs it on the GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.metrics import MetricsError, read_metrics  # noqa: E402

TOKENS = "performance/tokens_per_sec_per_gpu"
TOTAL = "timing/train/total"
PHASES = ("generation", "old_logprobs", "ref_logprobs", "training", "refit", "data_plane", "other")


def steady(run: Path, name: str, warmup: int) -> list[float]:
    """The metric's values of the steps after `warmup`; MetricsError unless there is one and none is missing."""
    series = read_metrics(run).get(name)
    if not series:
        raise MetricsError(f"{run}: no {name} recorded")
    steps = sorted(series)
    kept = [s for s in steps if s > warmup]
    if not kept or kept != list(range(warmup + 1, steps[-1] + 1)):
        raise MetricsError(f"{run}: {name} has steps {steps}, need every step after the {warmup} warm-up")
    return [float(series[s]) for s in kept]


def summary(run: Path, warmup: int) -> dict:
    phases = {p: statistics.median(steady(run, f"timing/train/{p}", warmup))
              for p in PHASES if f"timing/train/{p}" in read_metrics(run)}
    return {"run": str(run), "tokens_per_sec_per_gpu": statistics.mean(steady(run, TOKENS, warmup)),
            "step_s": statistics.median(steady(run, TOTAL, warmup)), "phases_s": phases}


def table(ours: dict, peer: dict) -> str:
    ratio = ours["tokens_per_sec_per_gpu"] / peer["tokens_per_sec_per_gpu"]
    lines = [f"tokens/s/GPU  ours {ours['tokens_per_sec_per_gpu']:,.0f}  peer {peer['tokens_per_sec_per_gpu']:,.0f}  "
             f"ratio {ratio:.2f}x", "", "| phase (median s) | ours | peer |", "|---|---|---|"]
    for phase in PHASES:
        a, b = ours["phases_s"].get(phase), peer["phases_s"].get(phase)
        lines.append(f"| {phase} | {'-' if a is None else f'{a:.3f}'} | {'-' if b is None else f'{b:.3f}'} |")
    lines.append(f"| step | {ours['step_s']:.3f} | {peer['step_s']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ours", type=Path)
    parser.add_argument("peer", type=Path)
    parser.add_argument("--warmup", type=int, default=2, help="leading steps left out (compilation, graph capture)")
    parser.add_argument("--json", type=Path, default=None, help="also write both summaries and the ratio here")
    args = parser.parse_args(argv)
    try:
        ours, peer = summary(args.ours, args.warmup), summary(args.peer, args.warmup)
    except MetricsError as error:
        print(f"e2e_ratio: {str(error)[:300]}", file=sys.stderr)
        return 2
    print(table(ours, peer))
    if args.json:
        ratio = ours["tokens_per_sec_per_gpu"] / peer["tokens_per_sec_per_gpu"]
        args.json.write_text(json.dumps({"ours": ours, "peer": peer, "ratio": ratio, "warmup": args.warmup},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
