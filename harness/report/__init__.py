"""Reports of a run: result.json (machine), junit.xml (CI), report.md with plots (people)."""

from harness.report.junit import write_junit
from harness.report.markdown import write_report_md
from harness.report.plots import PlotSpec, plot_metric
from harness.report.result_json import overall_ok, write_result_json

__all__ = ["PlotSpec", "overall_ok", "plot_metric", "write_junit", "write_report_md", "write_result_json"]
