"""Reports of a run: result.json (machine), junit.xml (CI), report.md with plots (people).

Each name is imported from its module on first use (PEP 562), so importing one writer, or
harness.report.atomic, does not load the others: `harness check` writes result.json and
junit.xml before report.md's modules are even imported.
"""

from __future__ import annotations

from harness.lazy import lazy_exports

_HOME = {
    "PlotSpec": "plots",
    "plot_metric": "plots",
    "write_junit": "junit",
    "write_report_md": "markdown",
    "overall_ok": "result_json",
    "write_result_json": "result_json",
}

__all__ = sorted(_HOME)


__getattr__ = lazy_exports(__name__, _HOME, globals())
