"""`harness calibrate --diff`: the proposed checks against the current file's, check by check.

Each check is `same`, `moved` (each bound that moved: old -> new, by how much, its scope when
its hardware classes changed, and the evidence, the proposed `why`), `removed` (in the current
file, not proven: why not), `new` (a default check for a file that had none for the hardware) or
`not added` (a default that could not be proven).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.calibrate.bounds import bound_part
from harness.calibrate.margin import fmt
from harness.calibrate.propose import PartChange, Proposal
from harness.thresholds import parse


def bound_moves(change: PartChange) -> str:
    """`0.55 -> 0.512 (-0.038, -6.9%)` for each bound that moved, or the part's old -> new text."""
    old, new = bound_part(parse(change.old)), bound_part(parse(change.new))
    same_shape = (old.statistic == new.statistic and len(old.bounds) == len(new.bounds)
                  and all(a.side == b.side for a, b in zip(old.bounds, new.bounds)))
    if not same_shape:
        return f"{change.old}  ->  {change.new}" + (" (exact, tolerance 0)" if change.rule == "exact" else "")
    moves = []
    for a, b in zip(old.bounds, new.bounds):
        if a.value != b.value:
            rel = f", {(b.value - a.value) / abs(a.value):+.1%}" if a.value else ""
            moves.append(f"{fmt(a.value)} -> {fmt(b.value)} ({b.value - a.value:+.3g}{rel})")
    return f"{change.new}: bound {'; '.join(moves)}"


def _entry(proposal: Proposal, scope: str | None) -> list[str]:
    name, source = proposal.name, proposal.source
    scoped = [f"          scope: {scope}"] if scope else []
    if proposal.check is None:
        word = "not added" if proposal.default else "removed"
        tried = proposal.unproven if proposal.unproven not in (None, source.expr) else None
        return [f"{word:<9} {name}: {source.expr}", *([f"          proposed: {tried}"] if tried else []),
                f"          why not: {proposal.problem}", *scoped]
    if proposal.default:
        return [f"new       {name}: {proposal.check.expr}", f"          evidence: {proposal.check.why}"]
    if not proposal.changed:
        return [f"same      {name}: {source.expr}"]
    lines = [f"moved     {name}"]
    lines += [f"          {bound_moves(change)}" for change in proposal.parts if change.old != change.new]
    return lines + scoped + [f"          evidence: {proposal.check.why}"]


def diff_lines(proposals: Sequence[Proposal], *, current: str | None, proposed: str,
               scopes: Mapping[str, str]) -> list[str]:
    """The diff, one block per check, headed by the two files compared; scopes: how a check's
    hardware classes changed, by name (harness/calibrate/output.py)."""
    defaults = all(p.default for p in proposals)
    lines = [f"--- {current or 'no thresholds file'}" + (" (no checks for this hardware: the default set is "
                                                         "proposed)" if defaults else ""), f"+++ {proposed}"]
    for proposal in proposals:
        if not proposal.not_applicable:
            lines += _entry(proposal, scopes.get(proposal.name))
    return lines
