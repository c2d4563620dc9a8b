"""The decode projection kernel equals F.linear under every tile bench/decode_kernels.py times,
edges included (rows, columns and K not multiples of the tile). Needs Triton: a GPU, or the CPU
under TRITON_INTERPRET=1; elsewhere (CI) it skips."""

from __future__ import annotations

import pytest
import torch

from rl.generation.decode_linear import Tile, decode_linear


@pytest.fixture
def device(triton_device: str) -> str:
    return triton_device


@pytest.mark.parametrize("tile", [Tile(), Tile(block_m=16, block_n=32, block_k=64, stages=3),
                                  Tile(block_m=64, block_n=128, block_k=256, warps=8)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_equals_f_linear(device: str, tile: Tile, dtype) -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(37, 300, generator=g).to(device, dtype)
    weight = torch.randn(150, 300, generator=g).to(device, dtype)
    got = decode_linear(x, weight, tile)
    assert got.shape == (37, 150) and got.dtype == dtype
    want = x.float() @ weight.float().T
    torch.testing.assert_close(got.float(), want, rtol=2e-2 if dtype == torch.bfloat16 else 1e-3,
                               atol=2e-1 if dtype == torch.bfloat16 else 1e-2)


def test_a_strided_input(device: str) -> None:
    """A column slice of a wider activation, as a fused product's output is split."""
    wide = torch.randn(8, 200, generator=torch.Generator().manual_seed(6)).to(device)
    weight = torch.randn(40, 100, generator=torch.Generator().manual_seed(7)).to(device)
    x = wide[:, 50:150]
    torch.testing.assert_close(decode_linear(x, weight, Tile(block_m=16, block_n=16, block_k=32)),
                               x @ weight.T, rtol=1e-3, atol=1e-2)
