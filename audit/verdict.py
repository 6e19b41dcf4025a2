"""Estimates, verdicts and the decision rules that produce them.

A verdict is always about the REVIEWER's claim (CONFIRMED: the criticism holds on our
runs; REFUTED: it does not; INCONCLUSIVE: the data cannot decide at this scale and seed
count). A claim is made of parts (a structural fact and its consequence, a proof and an
experiment); each part is decided by its own :class:`Rule`, and the claim's verdict is
combined from the parts by a :class:`Combination` whose text is printed too.

Rules are code objects that live next to their claim (``audit/papers/<paper>/``); the text a
report prints is the ``text`` attribute of the very object that decided, so the printed
rule cannot drift from the applied one.
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from audit.stats import Interval  # the shared (low, high) named tuple


class Outcome(str, enum.Enum):
    """The three verdicts on a reviewer's claim."""

    CONFIRMED = "CONFIRMED"
    REFUTED = "REFUTED"
    INCONCLUSIVE = "INCONCLUSIVE"
    # the single word of a claim whose questions went different ways
    # (audit.questions); never the outcome of a part's rule
    SPLIT = "SPLIT"

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


#: What a part is. An ``experiment`` is decided from runs over seeds (its verdict can
#: move with the data); a ``derivation`` is mathematics (a theorem, an identity, an exact
#: count: its verdict is a proof, not an experiment); a ``measurement`` reports a number
#: for which no threshold independent of the results exists, so it carries no verdict of
#: its own (always INCONCLUSIVE) and never enters a claim's verdict.
KINDS = ("experiment", "derivation", "measurement")
ALL_OUTCOMES = ("CONFIRMED", "REFUTED", "INCONCLUSIVE")


#: The id of the one part a run whose units diverged (NaN) is decided by
#: (:func:`audit.runner.diverged_analysis`); :func:`audit.questions.answers` reads it to
#: answer every question INCONCLUSIVE rather than from parts that were never computed.
DIVERGED_PART = "diverged"


@dataclass(frozen=True)
class Part:
    """The decision on one part of a reviewer's claim.

    ``reachable``: the verdicts the part's rule can return (declared with the rule and
    tested by driving the rule to each). ``flip``: for an experiment decided by a paired
    comparison, the smallest change of one seed's metric that would change the decisive
    test (in ``unit``); ``resolution``: the metric's smallest step (one test example).
    ``gated``: the part explains the paper's effect and went through
    :func:`premise_gate` (it can be decided only where the premise is reproduced);
    ``ungated``: the verdict its own comparison gave where the gate held it INCONCLUSIVE
    (shown beside the question's word, never as it). ``held``: why the gate holds the
    part, "" where it does not: ``"not reproduced"`` (the premise is shown absent at
    this scale) or ``"not shown"`` (undecided, where the part's own comparison had
    decided); a question with such a part asks for its declared decider first.
    ``alpha_share``: the share of the claim's alpha the part's rule was applied at (1/k
    for a Bonferroni share of k); None when not declared. A union path of
    :func:`all_of` / :func:`any_of` counts a part only at a share of at most 1/k
    (docs/STATISTICS.md, "Claims of several parts"). ``basis``: where a decided word
    was reached through one of several criteria, or in a setting that allowed it alone,
    a short phrase saying how ("on the middle-layer cosine: ..."); it travels with the
    word, also the ``ungated`` one; "" otherwise.
    """

    id: str
    verdict: Outcome
    rule: str
    reason: str
    needs: str = ""  # when INCONCLUSIVE: what would decide it (seeds, scale, setting)
    kind: str = "experiment"
    reachable: tuple[str, ...] = ALL_OUTCOMES
    flip: float | None = None
    resolution: float | None = None
    unit: str = ""
    gated: bool = False
    alpha_share: float | None = None
    # what the part's own comparison said where premise_gate overrode it to INCONCLUSIVE
    # (the premise not reproduced, or undecided); "" where nothing was overridden
    ungated: str = ""
    held: str = ""  # one of HELD_BY_PREMISE, or ""
    basis: str = ""

    @property
    def fragile(self) -> bool:
        """Decided, and one seed moved by at most three steps of the metric flips it."""
        return (self.verdict != Outcome.INCONCLUSIVE and self.flip is not None
                and self.resolution is not None and self.flip <= 3 * self.resolution)

    def to_dict(self) -> dict:
        return {"id": self.id, "verdict": self.verdict.value, "rule": self.rule,
                "reason": self.reason, "needs": self.needs, "kind": self.kind,
                "reachable": list(self.reachable), "flip": _clean(self.flip),
                "resolution": _clean(self.resolution), "unit": self.unit,
                "fragile": self.fragile, "gated": self.gated,
                "alpha_share": _clean(self.alpha_share),
                **({"ungated": self.ungated} if self.ungated else {}),
                **({"basis": self.basis} if self.basis else {}),
                "held": self.held}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Part":
        return cls(id=d["id"], verdict=Outcome(d["verdict"]), rule=d["rule"],
                   reason=d.get("reason", ""), needs=d.get("needs", ""),
                   kind=d.get("kind", "experiment"),
                   reachable=tuple(d.get("reachable", ALL_OUTCOMES)),
                   flip=d.get("flip"), resolution=d.get("resolution"), unit=d.get("unit", ""),
                   gated=bool(d.get("gated", False)), alpha_share=d.get("alpha_share"),
                   ungated=str(d.get("ungated") or ""), held=held_of(d),
                   basis=str(d.get("basis") or ""))


PREMISE_STATUSES = ("reproduced", "not reproduced", "undecided")

#: where an undecided premise's point estimate lies (``Premise.leans``): on the paper's
#: side of the rule's margin ("toward"), on the other side ("against"), or not known ("")
PREMISE_LEANS = ("toward", "against", "")

#: why :func:`premise_gate` holds a part (``Part.held``): its premise shown absent, or
#: undecided where the part's own comparison had decided
HELD_BY_PREMISE = ("not reproduced", "not shown")


def held_of(part: Mapping | Part) -> str:
    """``Part.held`` of a part or its stored JSON. A part stored before the field existed
    (an older report) is read from the gate's reason, which began "premise <held> at this
    scale" whenever it held the part."""
    if isinstance(part, Part):
        return part.held
    held = part.get("held")
    if held is not None:
        return held if held in HELD_BY_PREMISE else ""
    if part.get("gated") is not True:
        return ""
    reason = str(part.get("reason") or "")
    return next((h for h in HELD_BY_PREMISE if reason.startswith(f"premise {h} at this "
                                                                   f"scale")), "")


@dataclass(frozen=True)
class Premise:
    """The paper's own effect that the reviewer's claim is about, measured first.

    ``status``: ``reproduced`` (the effect shows at this scale), ``not reproduced`` (it
    is absent or reversed) or ``undecided``. A part that explains the effect can be
    CONFIRMED or REFUTED only where the premise is reproduced (:func:`premise_gate`).
    ``leans``: where an undecided premise's point estimate lies against its rule's margin
    (:data:`PREMISE_LEANS`); "against" tells a reader that more seeds are likelier to
    show the effect absent than reproduced, so the parts it gates are unlikely to be
    decided by seeds alone. "" where decided or not known.
    """

    effect: str  # e.g. "LIPS beats FedBN (personalised accuracy, points)"
    status: str
    reason: str
    estimate: Estimate | None = None
    leans: str = ""

    def __post_init__(self):
        if self.status not in PREMISE_STATUSES:
            raise ValueError(f"premise status must be one of {PREMISE_STATUSES}; "
                             f"got {self.status!r}")
        if self.leans not in PREMISE_LEANS:
            raise ValueError(f"premise leans must be one of {PREMISE_LEANS}; "
                             f"got {self.leans!r}")
        if self.leans and self.status != "undecided":
            raise ValueError(f"only an undecided premise leans; this one is {self.status}")

    @property
    def reproduced(self) -> bool:
        return self.status == "reproduced"

    def to_dict(self) -> dict:
        return {"effect": self.effect, "status": self.status, "reason": self.reason,
                "estimate": self.estimate.to_dict() if self.estimate else None,
                "leans": self.leans}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Premise":
        est = d.get("estimate")
        leans = d.get("leans", "")
        return cls(effect=d["effect"], status=d["status"], reason=d.get("reason", ""),
                   estimate=Estimate.from_dict(est) if est else None,
                   leans=leans if leans in PREMISE_LEANS and d["status"] == "undecided"
                   else "")


#: what the gate's ``needs`` adds where the undecided premise leans against the effect
PREMISE_AGAINST = (", its estimate on the other side of the rule's margin: more seeds are "
                   "likelier to show it absent than reproduced")


def premise_gate(part: Part, premise: Premise | None) -> Part:
    """A part that explains the paper's effect is INCONCLUSIVE where the effect is not
    reproduced at the run's scale, whatever its own comparison says (docs/STATISTICS.md,
    "Premise first"). The comparison's outcome stays in the reason. The part is marked
    ``gated`` whatever the premise says, so the sequential plan knows that a premise shown
    not reproduced leaves it nothing to decide (``audit.runner.execute_sequential``).
    Where the effect is not reproduced, ``needs`` names it first, never a seed count
    alone, and the part has no flip distance (one seed cannot move it). ``held`` says
    why the gate holds it (:data:`HELD_BY_PREMISE`)."""
    if premise is None:
        return part
    part = replace(part, gated=True)
    if premise.reproduced:
        return part
    # the gate holds the part INCONCLUSIVE whatever its comparison says, so moving one
    # seed cannot flip it: no flip distance (and no "fragile") is read from it
    part = replace(part, flip=None)
    absent = premise.status == "not reproduced"
    # what would decide the part starts with the premise, never with a seed count alone
    # (more seeds cannot decide a part whose premise is shown absent, and they decide it
    # only once the premise is shown where it is undecided)
    against = premise.leans == "against"
    needs = ("a scale or setting where the paper's effect reproduces" if absent else
             f"a scale or setting where the paper's effect reproduces ({premise.effect}: "
             f"{premise.status} at this scale{PREMISE_AGAINST})" if against else
             f"the paper's effect shown first ({premise.effect}: {premise.status} at this "
             f"scale)")
    if part.verdict == Outcome.INCONCLUSIVE and not absent:
        # undecided on its own and its premise undecided: the gate holds nothing the
        # comparison decided, and its reason stays the comparison's. Where the premise
        # leans against the effect, its own seed count is no path to a decision (the
        # seeds that decide the premise are likelier to show it absent): not offered
        then = f"; then {part.needs}" if part.needs and not against else ""
        return replace(part, needs=needs + then)
    held = "not reproduced" if absent else "not shown"
    return replace(part, verdict=Outcome.INCONCLUSIVE, held=held,
                   ungated=(part.ungated if part.verdict == Outcome.INCONCLUSIVE
                            else part.verdict.value),
                   reason=(f"premise {held} at this scale ({premise.effect}: "
                           f"{premise.status}); the comparison alone said "
                           f"{part.verdict.value}: {part.reason}"),
                   needs=needs)


def on_reviewer(outcome: str, *, holds_when: str) -> Outcome:
    """Map a statistical outcome (``audit.stats.three_way``: SUPPORTED / FALSIFIED /
    INCONCLUSIVE, about "A beats B by at least m") onto the REVIEWER's claim.

    ``holds_when`` names the statistical outcome under which the reviewer is right:
    ``"SUPPORTED"`` (the reviewer says A beats B) or ``"FALSIFIED"`` (the reviewer says
    A does not). The other decided outcome refutes the reviewer; INCONCLUSIVE stays. The
    one place where the two vocabularies meet: no claim writes this map by hand.
    """
    if holds_when not in ("SUPPORTED", "FALSIFIED"):
        raise ValueError(f"holds_when must be 'SUPPORTED' or 'FALSIFIED'; got {holds_when!r}")
    if outcome == "INCONCLUSIVE":
        return Outcome.INCONCLUSIVE
    if outcome not in ("SUPPORTED", "FALSIFIED"):
        raise ValueError(f"unknown statistical outcome {outcome!r}")
    return Outcome.CONFIRMED if outcome == holds_when else Outcome.REFUTED


@dataclass(frozen=True)
class Verdict:
    """The decision on a reviewer's claim, with everything behind it.

    ``premise``: the paper's own effect, measured first (None for claims that are
    mathematics). ``looks``: the sequential looks taken (n, verdict, alpha share), empty
    for a fixed-seed run. ``stability``: leave-one-seed-out agreement and the flip
    distance of the decisive parts (filled by the runner).
    """

    claim_id: str
    verdict: Outcome
    rule: str
    reason: str
    parts: tuple[Part, ...] = ()
    estimates: tuple[Estimate, ...] = ()
    needs: str = ""
    premise: Premise | None = None
    looks: tuple[Mapping, ...] = ()
    stability: Mapping | None = None

    @property
    def fragile(self) -> bool:
        if self.stability is not None and self.stability.get("fragile"):
            return True
        return False

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
    of estimates or per-seed arrays) and returns ``(outcome, reason, needs)`` or
    ``(outcome, reason, needs, info)`` with ``info`` a mapping that may hold ``flip``,
    ``resolution``, ``unit``, ``alpha_share`` and ``basis`` (see :class:`Part`; a basis
    is kept only with a decided outcome).

    ``text`` is the printed rule. It may hold ``{name}`` fields: call the rule with
    ``params={...}`` (the very values the decision used: margins, alpha, n) and the
    printed text is filled from them, so it cannot drift from the rule applied; the
    claim's static listing shows the fields by name. ``kind`` and ``reachable``: see
    :data:`KINDS` and :class:`Part`.
    """

    part: str
    text: str
    decide: Callable[..., tuple] = field(repr=False)
    kind: str = "experiment"
    reachable: tuple[str, ...] = ALL_OUTCOMES

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"rule kind must be one of {KINDS}; got {self.kind!r}")
        bad = [o for o in self.reachable if o not in ALL_OUTCOMES]
        if bad or not self.reachable:
            raise ValueError(f"reachable must name outcomes from {ALL_OUTCOMES}; "
                             f"got {self.reachable!r}")
        if self.kind == "measurement" and tuple(self.reachable) != ("INCONCLUSIVE",):
            raise ValueError("a measurement carries no verdict: reachable must be "
                             "('INCONCLUSIVE',)")

    def render(self, params: Mapping | None = None) -> str:
        if not params:
            return self.text
        try:
            return self.text.format(**params)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"rule {self.part!r}: its text needs a parameter that was not "
                             f"given ({exc})") from None

    def __call__(self, *args, params: Mapping | None = None, **kwargs) -> Part:
        got = self.decide(*args, **kwargs)
        outcome, reason, needs = got[:3]
        info = dict(got[3]) if len(got) > 3 and got[3] else {}
        outcome = Outcome(outcome)
        if outcome.value not in self.reachable:
            raise RuntimeError(f"rule {self.part!r} returned {outcome.value}, which it does "
                               f"not declare reachable {self.reachable}")
        return Part(id=self.part, verdict=outcome, rule=self.render(params), reason=reason,
                    needs=needs if outcome == Outcome.INCONCLUSIVE else "", kind=self.kind,
                    reachable=tuple(self.reachable), flip=info.get("flip"),
                    resolution=info.get("resolution"), unit=info.get("unit", ""),
                    alpha_share=info.get("alpha_share"),
                    basis=str(info.get("basis") or "") if outcome != Outcome.INCONCLUSIVE
                    else "")


@dataclass(frozen=True)
class Combination:
    """How a claim's verdict follows from its parts' verdicts (text printed in reports).

    ``parts``: the ids of the parts that enter the verdict (None: every part). The
    sequential runner stops at the first look where all of them are decided.
    ``union``: the outcome that ANY one part can carry to the claim (REFUTED for
    :func:`all_of`, CONFIRMED for :func:`any_of`), None where no path is a union. On that
    path the family's error is controlled by Bonferroni: with k named parts able to reach
    it (:meth:`union_size`), a part's union outcome counts only where the part declares
    an ``alpha_share`` of at most 1/k (docs/STATISTICS.md, "Claims of several parts").
    """

    text: str
    combine: Callable[[Sequence[Part]], Outcome] = field(repr=False)
    parts: tuple[str, ...] | None = None
    union: str | None = None

    def entering(self, parts: Sequence[Part]) -> list[Part]:
        if self.parts is None:
            return [p for p in parts if p.kind != "measurement"]
        return [p for p in parts if p.id in self.parts]

    def union_size(self, parts: Sequence[Part]) -> int:
        """k: the entering experiments that can reach the union outcome (their
        ``reachable``). A derivation's word is a computation, with no error rate to
        split: it is not one of the k and always counts (as in
        :func:`audit.questions.answer`)."""
        if self.union is None:
            return 0
        return sum(1 for p in self.entering(parts)
                   if p.kind == "experiment" and self.union in p.reachable)

    def uncounted(self, parts: Sequence[Part]) -> list[Part]:
        """Entering experiments whose union outcome does not count: decided at an alpha
        share that is not in (0, 1/k] (above it, undeclared, or not a share at all: NaN,
        0, negative) while k > 1 experiments can reach the union outcome."""
        k = self.union_size(parts)
        if self.union is None or k <= 1:
            return []
        return [p for p in self.entering(parts) if p.kind == "experiment"
                and p.verdict.value == self.union and not share_counts(p.alpha_share, k)]

    def __call__(self, parts: Sequence[Part]) -> Outcome:
        drop = {p.id for p in self.uncounted(parts)}
        if drop:
            parts = [replace(p, verdict=Outcome.INCONCLUSIVE) if p.id in drop else p
                     for p in parts]
        return Outcome(self.combine(parts))


def share_counts(share: Any, k: int) -> bool:
    """True when ``share`` is a declared alpha share in (0, 1/k] (Bonferroni over k parts
    that can each carry a union outcome alone); None, NaN, 0, a negative number or a
    non-number do not count. One test for the claim's combination and the questions'."""
    if not isinstance(share, numbers.Real) or isinstance(share, bool):
        return False  # None, a string ("0.1" from a report), a bool: no share
    x = float(share)
    return math.isfinite(x) and 0.0 < x <= 1.0 / k + 1e-12


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
        if part_ids is None:  # every part but the measurements, which never vote
            return how([p.verdict for p in parts if p.kind != "measurement"])
        by_id = {p.id: p.verdict for p in parts}
        missing = [i for i in part_ids if i not in by_id]
        if missing:
            raise KeyError(f"the combination needs the parts {missing}, which were not decided")
        return how([by_id[i] for i in part_ids])

    return combine


_UNION_NOTE = ("with k of the named parts able to {verb}, a part's {word} counts only where "
               "its rule ran at a share of at most 1/k of the claim's alpha (Bonferroni over "
               "the parts that can decide that way; a part with no declared share counts "
               "when it alone can {verb})")


def all_of(part_ids: Sequence[str], note: str = "") -> Combination:
    """CONFIRMED when every named part is, REFUTED when any is REFUTED (a union: each
    REFUTED part must have been decided at a share of at most 1/k of alpha, k the named
    parts that can be REFUTED); the other parts are reported beside the verdict."""
    names = ", ".join(f"`{i}`" for i in part_ids)
    text = (f"The claim is CONFIRMED when every one of {names} is CONFIRMED, REFUTED when "
            f"any of them is REFUTED, and INCONCLUSIVE otherwise; "
            + _UNION_NOTE.format(verb="be REFUTED", word="REFUTED"))
    return Combination(text + (f"; {note}" if note else "."), _over(tuple(part_ids), _all_of),
                       tuple(part_ids), union="REFUTED")


def any_of(part_ids: Sequence[str], note: str = "") -> Combination:
    """CONFIRMED when any named part is (a union: each CONFIRMED part must have been
    decided at a share of at most 1/k of alpha, k the named parts that can be CONFIRMED),
    REFUTED when all are REFUTED."""
    names = ", ".join(f"`{i}`" for i in part_ids)
    text = (f"The claim is CONFIRMED when any of {names} is CONFIRMED, REFUTED when all of "
            f"them are REFUTED, and INCONCLUSIVE otherwise; "
            + _UNION_NOTE.format(verb="be CONFIRMED", word="CONFIRMED"))
    return Combination(text + (f"; {note}" if note else "."), _over(tuple(part_ids), _any_of),
                       tuple(part_ids), union="CONFIRMED")


ALL_PARTS = Combination(
    "The claim is CONFIRMED when every part is CONFIRMED, REFUTED when any part is "
    "REFUTED, and INCONCLUSIVE otherwise; "
    + _UNION_NOTE.format(verb="be REFUTED", word="REFUTED") + ".",
    _over(None, _all_of), union="REFUTED",
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
    return Combination(text, combine, (part_id,))


def verdict_from_parts(claim_id: str, combination: Combination, parts: Iterable[Part],
                       estimates: Iterable[Estimate], premise: Premise | None = None) -> Verdict:
    parts = tuple(parts)
    outcome = combination(parts)
    k = combination.union_size(parts)
    dropped = {p.id for p in combination.uncounted(parts)}

    def word(p: Part) -> str:
        if p.id not in dropped:
            return f"{p.id}: {p.verdict.value}"
        share = "undeclared" if p.alpha_share is None else f"{p.alpha_share:.3g}"
        return (f"{p.id}: {p.verdict.value} (not counted toward {combination.union}: its "
                f"alpha share is {share}, above 1/{k})")

    reason = "; ".join(word(p) for p in parts)
    needs = "; ".join(f"{p.id}: {p.needs}" for p in parts
                      if p.verdict == Outcome.INCONCLUSIVE and p.needs)
    return Verdict(claim_id=claim_id, verdict=outcome, rule=combination.text, reason=reason,
                   parts=parts, estimates=tuple(estimates),
                   needs=needs if outcome == Outcome.INCONCLUSIVE else "", premise=premise)
