"""Step metrics that are not algorithm math: wall-clock timers and MFU."""

from rl.metrics.mfu import PEAK_TFLOPS, device_class, mfu, performance_metrics, theoretical_tflops
from rl.metrics.timers import Timer

__all__ = ["PEAK_TFLOPS", "Timer", "device_class", "mfu", "performance_metrics", "theoretical_tflops"]
