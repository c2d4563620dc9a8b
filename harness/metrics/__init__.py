"""Metric readers: a run's metrics.jsonl, TensorBoard event files or reference JSON as step series."""

from harness.metrics.reader import FORMATS, read_metrics
from harness.metrics.series import Metrics, MetricsError

__all__ = ["FORMATS", "Metrics", "MetricsError", "read_metrics"]
