"""`generation.decode`: which decoding loop a run uses, resolved once for the engine and the preflight.

Torch-free, so the preflight can ask without importing a model stack.
"""

from __future__ import annotations

DECODE_MODES = ("graphs", "static", "eager")


def fp32_experts(family: str, precision: str) -> bool:
    """Whether the generator's model has routed experts in fp32 (it samples in `policy.precision`).

    Under `torch.compile` Hugging Face's experts run `torch._grouped_mm` in bf16 only; in fp32 they
    take its fallback, which reads the expert offsets on the host (`offs.tolist()`), and a CUDA
    graph cannot capture a host read, so the graphs loop dies at its first capture."""
    return family == "qwen3_5_moe" and precision == "fp32"


def resolve_decode(decode: str, *, gpu: bool, fp32_experts: bool = False) -> str:
    """`generation.decode` as run: "auto" is graphs on a GPU, eager otherwise; on a GPU with fp32
    experts (`fp32_experts`) "auto" is static, the fastest loop that runs there.

    A vision model too: CPU tests prove its static loop equals the eager one token for token, and
    on one H200 the h200x2 VLM twin's graphs made 98,718 tokens/s against the eager loop's 7,135
    (64 rows x 256 tokens, bench/bench_generation.py --model vlm_twin, docs/benchmarks.md).

    Returns one of DECODE_MODES; raises ValueError (one line naming the key) for a mode the
    machine cannot honour, which the preflight reports before launch.
    """
    if decode == "auto":
        return ("static" if fp32_experts else "graphs") if gpu else "eager"
    if decode not in DECODE_MODES:
        raise ValueError(f"generation.decode: {decode!r} is not one of {['auto', *DECODE_MODES]}")
    if decode == "graphs" and not gpu:
        raise ValueError("generation.decode: graphs needs a GPU (cluster.device is cpu); use auto, static or eager")
    if decode == "graphs" and fp32_experts:
        raise ValueError("generation.decode: graphs cannot capture the model's fp32 experts (Hugging Face's fp32 "
                         "grouped-GEMM fallback reads expert offsets on the host); use policy.precision: bf16, "
                         "or generation.decode: static or auto")
    return decode
