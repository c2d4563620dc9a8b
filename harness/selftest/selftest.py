"""Self-test a judged run's checks: can each of them fail, and by how small a change?

A check that no perturbation fails by its own comparison is `cannot fail`: it reads as coverage
and gives none. Failing closed (NaN, truncation, a missing metric) does not count, since the
evaluator's guards fail every check that way. One that only gross changes fail is `weak`. A
conjunction is as strong as its weakest part: each part is tested on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.checks.judge import Judgement
from harness.checks.verdict import Verdict
from harness.selftest.probes import CLOSED, targets_for
from harness.selftest.trials import Trial, trials_for

OK, WEAK, CANNOT_FAIL, FAILS_AS_IS, UNTESTED = "ok", "weak", "cannot fail", "fails as is", "untested"
PROBLEMS = (CANNOT_FAIL, UNTESTED)  # what makes `--self-test` exit 1


@dataclass(frozen=True, kw_only=True)
class CheckSelfTest:
    """What the perturbations did to one check; status is one of the five above.

    parts: for a conjunction, `expression: status` of each part that is not ok.
    """

    name: str
    kind: str
    status: str
    trials: tuple[Trial, ...] = ()
    parts: tuple[str, ...] = ()

    @property
    def kills(self) -> list[Trial]:
        return [t for t in self.trials if t.kills]

    def summary(self) -> str:
        """Which perturbations fail the check, own kills first; one line."""
        if self.status == FAILS_AS_IS:
            return "the check fails on the run as it is"
        if self.status == UNTESTED:
            return f"no perturbation applies to a {self.kind} check"
        closed = sorted({t.perturbation for t in self.trials if t.outcome == CLOSED})
        guards = f"fails closed: {', '.join(closed)}" if closed else "no guard fails it"
        parts = "".join(f"part {part}; " for part in self.parts)
        if not self.kills:
            return f"{parts}no perturbation fails it by its own comparison ({guards})"
        lead = "failed only grossly by " if self.status == WEAK else "failed by "
        return parts + lead + ", ".join(dict.fromkeys(t.label() for t in self.kills)) + f"; {guards}"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "status": self.status, "summary": self.summary(),
                "parts": list(self.parts), "trials": [t.to_json() for t in self.trials]}


def classify(trials: list[Trial]) -> str:
    kills = [t for t in trials if t.kills]
    if not kills:
        return CANNOT_FAIL
    return WEAK if all(t.gross for t in kills) else OK


_WORST = (CANNOT_FAIL, WEAK, OK)


def self_test_verdict(verdict: Verdict, judgement: Judgement, sd: Mapping[str, float]) -> CheckSelfTest:
    if not verdict.ok:
        return CheckSelfTest(name=verdict.name, kind=verdict.kind, status=FAILS_AS_IS)
    targets = targets_for(verdict, judgement)
    if not targets:
        return CheckSelfTest(name=verdict.name, kind=verdict.kind, status=UNTESTED)
    records = judgement.invariant_records or []
    trials: list[Trial] = []
    statuses = []
    for target in targets:
        tried = trials_for(target.probe, kind=verdict.kind, name=verdict.name, reads=target.reads,
                           metrics=judgement.metrics, records=records, sd=sd)
        trials += tried
        statuses.append((target.text, classify(tried)))
    status = min((status for _, status in statuses), key=_WORST.index)
    parts = tuple(f"{text}: {part}" for text, part in statuses if text is not None and part != OK)
    return CheckSelfTest(name=verdict.name, kind=verdict.kind, status=status, trials=tuple(trials), parts=parts)


def status_counts(tests: Sequence[CheckSelfTest]) -> str:
    """`9 ok, 1 weak`: how many checks have each status, in order of first appearance."""
    counts = Counter(test.status for test in tests)
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def self_test(judgement: Judgement, *, sd: Mapping[str, float] | None = None) -> list[CheckSelfTest]:
    """One self-test per verdict of the judgement, in its order.

    Args:
        sd: metric -> run-to-run standard deviation (noise.run_to_run_sd), to state shifts in it.
    """
    return [self_test_verdict(verdict, judgement, sd or {}) for verdict in judgement.verdicts]
