"""Prove the proposed checks on the calibration runs: each must pass on every run (each variant of a
parity run) and be able to fail on every one (the self-test's perturbations, harness/selftest/),
or it is not written.

The proposed checks are rendered, loaded back and judged exactly as `harness check` would judge
each run with the file (judge_run), then self-tested. A run whose own checks fail (it did not
complete, an invariant broke, its metrics are not a clean series) is no evidence: calibrate stops.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.calibrate.propose import Proposal
from harness.calibrate.render import render
from harness.calibrate.runs import CalibrationRun, shown
from harness.checks.judge import judge_run
from harness.errors import UsageError
from harness.selftest import FAILS_AS_IS, PROBLEMS, self_test


@dataclass(frozen=True, kw_only=True)
class RunProof:
    """One check on one run: its verdict, and what the self-test found could fail it."""

    label: str
    passed: bool
    message: str
    status: str
    summary: str

    @property
    def proven(self) -> bool:
        return self.passed and self.status not in (*PROBLEMS, FAILS_AS_IS)


def _judged(run: CalibrationRun, path: Path, hardware: str) -> list[dict[str, RunProof]]:
    """Each variant of the run judged with the proposed file, as `harness check VARIANT_DIR` would."""
    out = []
    for variant in run.variants:
        label = run.label_of(variant)
        judgement = judge_run(variant.run_dir, thresholds=path, hardware=hardware)
        bad = [v for v in judgement.verdicts if v.kind != "threshold" and not v.ok]
        if bad:
            raise UsageError(f"{shown(variant.run_dir)} ({label}) is no evidence to calibrate on: "
                             f"{bad[0].name}: {bad[0].message}")
        tests = {test.name: test for test in self_test(judgement)}
        out.append({v.name: RunProof(label=label, passed=v.ok, message=v.message, status=tests[v.name].status,
                                     summary=tests[v.name].summary())
                    for v in judgement.verdicts if v.kind == "threshold"})
    return out


def prove(proposals: Sequence[Proposal], runs: Sequence[CalibrationRun], *, recipe: str,
          hardware: str) -> tuple[list[Proposal], dict[str, list[RunProof]]]:
    """The proposals with each unproven check turned into a problem, and each check's proof per run."""
    written = [p.check for p in proposals if p.check is not None]
    if not written:
        return list(proposals), {}
    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        path = Path(tmp) / "thresholds.yaml"
        path.write_text(render(recipe, written), encoding="utf-8")
        judged = [per_variant for run in runs for per_variant in _judged(run, path, hardware)]
    proofs = {check.name: [per_variant[check.name] for per_variant in judged] for check in written}
    out = []
    for proposal in proposals:
        failing = next((p for p in proofs.get(proposal.name, []) if not p.proven), None)
        if proposal.check is None or failing is None:
            out.append(proposal)
        elif not failing.passed:
            out.append(proposal.rejected(f"fails on {failing.label}: {failing.message}"))
        else:
            out.append(proposal.rejected(f"self-test on {failing.label}: {failing.status}: {failing.summary}"))
    return out, proofs


__all__ = ["RunProof", "prove"]
