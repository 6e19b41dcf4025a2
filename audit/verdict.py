"""Estimates, verdicts and the decision rules that produce them.

A verdict is always about the REVIEWER's claim (CONFIRMED: the criticism holds on our
runs; REFUTED: it does not; INCONCLUSIVE: the data cannot decide at this scale and seed
count). A claim is made of parts (a structural fact and its consequence, a proof and an
experiment); each part is decided by its own :class:`Rule`, and the claim's verdict is
combined from the parts by a :class:`Combination` whose text is printed too.

Rules are code objects that live next to their claim (``audit/experiments/``); the text a
report prints is the ``text`` attribute of the very object that decided, so the printed
rule cannot drift from the applied one.
"""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from audit.stats import Interval  # the shared (low, high) named tuple


class Outcome(str, enum.Enum):
    """The three verdicts on a reviewer's claim."""

    CONFIRMED = "CONFIRMED"
    REFUTED = "REFUTED"
    INCONCLUSIVE = "INCONCLUSIVE"

    def __str__(self) -> str:  # so f-strings print the bare word
        return self.value


def _clean(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Estimate:
    """One reported quantity.

    Attributes:
        name: stable identifier, used by the JSON contract and by tests.
        value: the point value (a mean over seeds, an exact count, a closed form).
        low, high: interval bounds; ``None`` for exact quantities.
        level: confidence level of ``(low, high)``; ``None`` for exact quantities.
        n: number of independent units (seeds) behind the value; ``None`` if exact.
        method: how it was computed ("exact", "t", "bca", "mean", ...).
        unit: a unit for display ("bytes", "accuracy", "pp", ...).
        description: one line saying what the number is.
    """

    name: str
    value: float
    low: float | None = None
    high: float | None = None
    level: float | None = None
    n: int | None = None
    method: str = "exact"
    unit: str = ""
    description: str = ""

    @classmethod
    def of(cls, name: str, result, unit: str = "", description: str = "") -> "Estimate":
        """From an ``audit.stats`` result (PairedDifference, MeanEstimate,
        BootstrapEstimate): its point value, interval, level, n and method, so a report
        never labels an interval with another method or level than the one computed.
        An interval that is not finite is dropped (method "mean (no spread)")."""
        value = float(getattr(result, "mean", getattr(result, "value", math.nan)))
        low, high = float(result.low), float(result.high)
        if not (math.isfinite(low) and math.isfinite(high)):
            return cls(name, value, None, None, None, int(result.n), "mean (no spread)",
                       unit, description)
        return cls(name, value, low, high, float(result.level), int(result.n),
                   str(result.method), unit, description)

    @property
    def exact(self) -> bool:
        return self.low is None and self.high is None

    def confidence_interval(self) -> Interval:
        if self.exact:
            raise ValueError(f"estimate {self.name!r} is exact and has no interval")
        return Interval(self.low, self.high)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = float(self.value) if self.value is not None else None
        for k in ("low", "high", "level"):
            d[k] = _clean(d[k])
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "Estimate":
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in keys})


@dataclass(frozen=True)
class Part:
    """The decision on one part of a reviewer's claim."""

    id: str
    verdict: Outcome
    rule: str
    reason: str
    needs: str = ""  # when INCONCLUSIVE: what would decide it (seeds, scale, setting)

    def to_dict(self) -> dict:
        return {"id": self.id, "verdict": self.verdict.value, "rule": self.rule,
                "reason": self.reason, "needs": self.needs}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Part":
        return cls(id=d["id"], verdict=Outcome(d["verdict"]), rule=d["rule"],
                   reason=d.get("reason", ""), needs=d.get("needs", ""))


@dataclass(frozen=True)
class Verdict:
    """The decision on a reviewer's claim, with everything behind it."""

    claim_id: str
    verdict: Outcome
    rule: str
    reason: str
    parts: tuple[Part, ...] = ()
    estimates: tuple[Estimate, ...] = ()
    needs: str = ""

    def part(self, part_id: str) -> Part:
        for p in self.parts:
            if p.id == part_id:
                return p
        raise KeyError(f"claim {self.claim_id!r} has no part {part_id!r}; "
                       f"parts: {[p.id for p in self.parts]}")

    def estimate(self, name: str) -> Estimate:
        for e in self.estimates:
            if e.name == name:
                return e
        raise KeyError(f"claim {self.claim_id!r} has no estimate {name!r}")


# --------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Rule:
    """A decision rule for one part of a claim, fixed in code before the run.

    ``decide`` takes the evidence (whatever the claim's analysis passes, usually a mapping
    of estimates or per-seed arrays) and returns ``(outcome, reason, needs)``; ``text`` is
    printed in the report verbatim.
    """

    part: str
    text: str
    decide: Callable[..., tuple[Outcome, str, str]] = field(repr=False)

    def __call__(self, *args, **kwargs) -> Part:
        outcome, reason, needs = self.decide(*args, **kwargs)
        return Part(id=self.part, verdict=Outcome(outcome), rule=self.text, reason=reason,
                    needs=needs if outcome == Outcome.INCONCLUSIVE else "")


@dataclass(frozen=True)
class Combination:
    """How a claim's verdict follows from its parts' verdicts (text printed in reports)."""

    text: str
    combine: Callable[[Sequence[Part]], Outcome] = field(repr=False)

    def __call__(self, parts: Sequence[Part]) -> Outcome:
        return Outcome(self.combine(parts))


def _all_of(verdicts: Sequence[Outcome]) -> Outcome:
    if verdicts and all(v == Outcome.CONFIRMED for v in verdicts):
        return Outcome.CONFIRMED
    if any(v == Outcome.REFUTED for v in verdicts):
        return Outcome.REFUTED
    return Outcome.INCONCLUSIVE


def _any_of(verdicts: Sequence[Outcome]) -> Outcome:
    if any(v == Outcome.CONFIRMED for v in verdicts):
        return Outcome.CONFIRMED
    if verdicts and all(v == Outcome.REFUTED for v in verdicts):
        return Outcome.REFUTED
    return Outcome.INCONCLUSIVE


def _over(part_ids: Sequence[str] | None, how: Callable[[Sequence[Outcome]], Outcome]):
    def combine(parts: Sequence[Part]) -> Outcome:
        if part_ids is None:
            return how([p.verdict for p in parts])
        by_id = {p.id: p.verdict for p in parts}
        missing = [i for i in part_ids if i not in by_id]
        if missing:
            raise KeyError(f"the combination needs the parts {missing}, which were not decided")
        return how([by_id[i] for i in part_ids])

    return combine


def all_of(part_ids: Sequence[str], note: str = "") -> Combination:
    """CONFIRMED when every named part is, REFUTED when any is REFUTED; the other parts
    are reported beside the verdict."""
    names = ", ".join(f"`{i}`" for i in part_ids)
    text = (f"The claim is CONFIRMED when every one of {names} is CONFIRMED, REFUTED when "
            f"any of them is REFUTED, and INCONCLUSIVE otherwise")
    return Combination(text + (f"; {note}" if note else "."), _over(tuple(part_ids), _all_of))


def any_of(part_ids: Sequence[str], note: str = "") -> Combination:
    """CONFIRMED when any named part is, REFUTED when all are REFUTED."""
    names = ", ".join(f"`{i}`" for i in part_ids)
    text = (f"The claim is CONFIRMED when any of {names} is CONFIRMED, REFUTED when all of "
            f"them are REFUTED, and INCONCLUSIVE otherwise")
    return Combination(text + (f"; {note}" if note else "."), _over(tuple(part_ids), _any_of))


ALL_PARTS = Combination(
    "The claim is CONFIRMED when every part is CONFIRMED, REFUTED when any part is "
    "REFUTED, and INCONCLUSIVE otherwise.",
    _over(None, _all_of),
)


def primary(part_id: str, why: str = "") -> Combination:
    """The claim's verdict is that of one load-bearing part; the others are reported."""

    def combine(parts: Sequence[Part]) -> Outcome:
        for p in parts:
            if p.id == part_id:
                return p.verdict
        raise KeyError(f"primary part {part_id!r} was not decided")

    text = f"The claim's verdict is the verdict of its load-bearing part `{part_id}`"
    text += f" ({why})." if why else "; the other parts are reported beside it."
    return Combination(text, combine)


def verdict_from_parts(claim_id: str, combination: Combination, parts: Iterable[Part],
                       estimates: Iterable[Estimate]) -> Verdict:
    parts = tuple(parts)
    outcome = combination(parts)
    reason = "; ".join(f"{p.id}: {p.verdict.value}" for p in parts)
    needs = "; ".join(f"{p.id}: {p.needs}" for p in parts
                      if p.verdict == Outcome.INCONCLUSIVE and p.needs)
    return Verdict(claim_id=claim_id, verdict=outcome, rule=combination.text, reason=reason,
                   parts=parts, estimates=tuple(estimates),
                   needs=needs if outcome == Outcome.INCONCLUSIVE else "")
