"""`harness calibrate`: thresholds derived from seeded runs, with their evidence, proven able to
fail (docs/thresholds.md, "Calibrating thresholds")."""

from harness.calibrate.defaults import default_checks
from harness.calibrate.diff import diff_lines
from harness.calibrate.output import file_checks
from harness.calibrate.parity import parity_summary
from harness.calibrate.propose import Proposal, propose
from harness.calibrate.prove import RunProof, prove
from harness.calibrate.render import render
from harness.calibrate.runs import CalibrationRun, Variant, read_runs, run_seeds, shown

__all__ = ["CalibrationRun", "Proposal", "RunProof", "Variant", "default_checks", "diff_lines", "file_checks",
           "parity_summary", "propose", "prove", "read_runs", "render", "run_seeds", "shown"]
