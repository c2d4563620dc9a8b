"""`generation.decode`: which decoding loop a run uses, resolved once for the engine and the preflight.

Torch-free, so the preflight can ask without importing a model stack.
"""

from __future__ import annotations

DECODE_MODES = ("graphs", "static", "eager")


def resolve_decode(decode: str, *, gpu: bool) -> str:
    """`generation.decode` as run: "auto" is graphs on a GPU, eager otherwise.

    A vision model too: CPU tests prove its static loop equals the eager one token for token, and
    on one H200 the h200x2 VLM twin's graphs made 98,718 tokens/s against the eager loop's 7,135
    (64 rows x 256 tokens, bench/bench_generation.py --model vlm_twin, docs/benchmarks.md).

    Returns one of DECODE_MODES; raises ValueError (one line naming the key) for a mode the
    machine cannot honour, which the preflight reports before launch.
    """
    if decode == "auto":
        return "graphs" if gpu else "eager"
    if decode not in DECODE_MODES:
        raise ValueError(f"generation.decode: {decode!r} is not one of {['auto', *DECODE_MODES]}")
    if decode == "graphs" and not gpu:
        raise ValueError("generation.decode: graphs needs a GPU (cluster.device is cpu); use auto, static or eager")
    return decode
