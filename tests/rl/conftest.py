"""Fixtures shared by the rl tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def triton_device() -> str:
    """The device a Triton kernel test runs on: a GPU, or the CPU under TRITON_INTERPRET=1; the
    test skips where neither is (Triton is not a dependency: CI has none)."""
    from rl.generation.triton_runs import triton_runs

    pytest.importorskip("triton")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not triton_runs(torch.empty(0, device=device)):
        pytest.skip("Triton runs on a GPU, or on the CPU under TRITON_INTERPRET=1")
    return device
