"""`generation.decode`: which decoding loop a run uses, resolved once for the engine and the preflight.

Torch-free, so the preflight can ask without importing a model stack.
"""

from __future__ import annotations

DECODE_MODES = ("graphs", "static", "eager")


def resolve_decode(decode: str, *, gpu: bool, vision: bool = False) -> str:
    """`generation.decode` as run: "auto" is graphs on a GPU for a text model, eager otherwise.

    A vision model decodes static or with graphs when the recipe asks (CPU tests prove static
    equals the eager loop for the VLM twin), but "auto" keeps it on the eager loop until its
    graphs have been measured on a GPU; the h200x2 VLM thresholds were derived from eager runs.

    Returns one of DECODE_MODES; raises ValueError (one line naming the key) for a mode the
    machine cannot honour, which the preflight reports before launch.
    """
    if decode == "auto":
        return "graphs" if gpu and not vision else "eager"
    if decode not in DECODE_MODES:
        raise ValueError(f"generation.decode: {decode!r} is not one of {['auto', *DECODE_MODES]}")
    if decode == "graphs" and not gpu:
        raise ValueError("generation.decode: graphs needs a GPU (cluster.device is cpu); use auto, static or eager")
    return decode
