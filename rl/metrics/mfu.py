"""Peak throughput per device and model-FLOPs utilisation (MFU).

`theoretical_tflops` sums the device peak over ranks, as the reference does; MFU is
`(total_flops / train_seconds) / (theoretical_tflops * 1e12)`.

Peaks are dense BF16 tensor-core figures from the vendors' data sheets (no sparsity):
H100 and H200 SXM 989.5 TFLOP/s, A100 312 TFLOP/s. One named peak per device class, for the
engine and every bench (`device_class` names a CUDA device's class): a matrix product of random
bf16 data reached about 790 TFLOP/s on our H200s, so a measured MFU near 0.8 is the practical top.
bench/megatron_gpu.py's MFU in results dated up to 2026-12-01 divided by that measured 790 instead.

`cpu` is a NOMINAL 0.1 TFLOP/s (100 GFLOP/s) per rank, not a measurement: roughly an fp32 GEMM
on a few AVX2/AVX-512 cores. CPU ranks of our tiny twins share cores, so a measured peak would
move with machine load; a fixed figure keeps CPU MFU comparable between runs of one machine
class. Read CPU MFU as a relative number, never as a utilisation of the silicon.
"""

from __future__ import annotations

__all__ = ["PEAK_HBM_TBPS", "PEAK_TFLOPS", "device_class", "mfu", "performance_metrics", "theoretical_tflops"]

PEAK_TFLOPS: dict[str, float] = {
    "h100": 989.5,
    "h200": 989.5,
    "a100": 312.0,
    "cpu": 0.1,
}

# Memory bandwidth per device class, TB/s, from the same data sheets (not measured; a copy kernel
# reaches about 4.3 of the H200's 4.8). `cpu` is nominal, like its TFLOP/s.
PEAK_HBM_TBPS: dict[str, float] = {
    "h100": 3.35,
    "h200": 4.8,
    "a100": 2.0,
    "cpu": 0.1,
}


def device_class(device_name: str) -> str:
    """The PEAK_TFLOPS key of a device as torch names it ("NVIDIA H200" -> "h200", "cpu" -> "cpu").

    Raises:
        ValueError: a device of no known class (the message lists the known ones).
    """
    name = device_name.lower()
    matches = [key for key in PEAK_TFLOPS if key in name.replace("-", " ").split() or key == name]
    if len(matches) != 1:
        raise ValueError(f"no peak TFLOP/s for device {device_name!r}; known classes: {sorted(PEAK_TFLOPS)}")
    return matches[0]


def theoretical_tflops(device: str, num_ranks: int) -> float:
    """Sum over `num_ranks` ranks of the device's peak, in TFLOP/s.

    Raises:
        ValueError: unknown device (the message lists the known ones), or num_ranks < 1.
    """
    key = device.lower()
    if key not in PEAK_TFLOPS:
        raise ValueError(f"cluster.device: no peak TFLOP/s for {device!r}; known: {sorted(PEAK_TFLOPS)}")
    if num_ranks < 1:
        raise ValueError(f"num_ranks must be >= 1, got {num_ranks}")
    return PEAK_TFLOPS[key] * num_ranks


def mfu(total_flops: float, seconds: float, theoretical_tflops: float) -> float:
    """Achieved FLOP/s over peak FLOP/s, a fraction (0.4 means 40%)."""
    if seconds <= 0:
        raise ValueError(f"mfu: seconds must be positive, got {seconds}")
    if theoretical_tflops <= 0:
        raise ValueError(f"mfu: theoretical_tflops must be positive, got {theoretical_tflops}")
    return total_flops / seconds / (theoretical_tflops * 1e12)


def performance_metrics(
    *,
    tokens: int,
    total_flops: float,
    theoretical_tflops: float,
    num_ranks: int,
    step_seconds: float,
    train_seconds: float,
    generated_tokens: float | None = None,
    generation_seconds: float | None = None,
) -> dict[str, float]:
    """The per-step `performance/*` metrics, for both drivers (GRPO and distillation).

    Args:
        tokens: unpadded tokens (prompt + response) of the step's rows, all ranks together.
        total_flops, theoretical_tflops, num_ranks: the train step's FLOPs fields
            (rl/workers/group.py `PolicyGroup.step_flops`).
        step_seconds: wall time of the whole step; train_seconds: of its training phase.
        generated_tokens, generation_seconds: response tokens and the generation phase's time
            (GRPO: `performance/generation_tokens_per_sec`); None where nothing is generated.
    """
    out = {
        "performance/tokens_per_sec_per_gpu": tokens / max(step_seconds, 1e-9) / num_ranks,
        "performance/mfu": mfu(total_flops, train_seconds, theoretical_tflops),
    }
    if generated_tokens is not None and generation_seconds is not None:
        # Per phase: what the generator and the trainer each sustain (the whole batch, all GPUs).
        out["performance/generation_tokens_per_sec"] = generated_tokens / max(generation_seconds, 1e-9)
    out["performance/train_tokens_per_sec"] = tokens / max(train_seconds, 1e-9)
    return out
