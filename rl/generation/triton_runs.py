"""Where this project's Triton kernels run: on a CUDA tensor with Triton importable, or on any tensor
under `TRITON_INTERPRET=1` (Triton's interpreter, how CPU tests run them).

Triton is not a dependency of the project (CI and CPU machines lack it): each kernel module keeps
its torch path for where `triton_runs` says no.
"""

from __future__ import annotations

import os

import torch

__all__ = ["INTERPRET", "triton_runs"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # read once, as Triton reads it


def triton_runs(tensor: torch.Tensor) -> bool:
    """Whether a Triton kernel can run on `tensor`'s device."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return tensor.is_cuda or INTERPRET
