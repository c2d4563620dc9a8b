"""The outcome of one check: the unit that result.json, junit.xml and report.md are made of."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One check's outcome.

    kind is one of "completion", "threshold", "invariant", "parity".
    message always says why (for a pass too: the value that passed).
    """

    name: str
    kind: str
    ok: bool
    message: str
    value: float | None = None
    expr: str | None = None
    metrics: tuple[str, ...] = ()
    why: str | None = None
    since: str | None = None
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        data = asdict(self)
        data["metrics"] = list(self.metrics)
        return data
