"""One MFU: the named peak of a device's class, for the engine and every bench."""

from __future__ import annotations

import pytest

from rl.metrics.mfu import PEAK_TFLOPS, device_class, mfu, theoretical_tflops


@pytest.mark.parametrize(("name", "key"), [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
                                           ("NVIDIA A100-SXM4-80GB", "a100"), ("cpu", "cpu"), ("h200", "h200")])
def test_a_cuda_device_name_gives_its_class(name: str, key: str) -> None:
    assert device_class(name) == key


def test_a_device_of_no_known_class_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no peak TFLOP/s for device 'NVIDIA B200'; known classes: \['a100'"):
        device_class("NVIDIA B200")


def test_mfu_divides_by_the_named_peak_of_every_rank() -> None:
    peak = theoretical_tflops(device_class("NVIDIA H200"), 2)
    assert peak == 2 * PEAK_TFLOPS["h200"] == 1979.0
    assert mfu(0.5 * peak * 1e12 * 3.0, 3.0, peak) == pytest.approx(0.5)
