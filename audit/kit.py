"""The idioms every claim repeats, named once: a claim names them, it does not rewrite them.

- ``look_alpha(alpha, ctx)``: the share of ``alpha`` that this look of a sequential plan
  may spend (``alpha x ctx.alpha_fraction``; the whole alpha at a fixed-n run).
- ``premise(effect, tw, ...)``: the paper's own effect as a :class:`~audit.verdict.Premise`
  from a three-way result (SUPPORTED -> reproduced, FALSIFIED -> not reproduced,
  INCONCLUSIVE -> undecided).
- ``pair_rule(part, text, a=..., b=..., metric=..., holds_when=...)``: the rule of a compared
  pair (A against B on one metric, paired over seeds) mapped onto the reviewer, with its
  reason, what would decide it and its flip distance; ``decide_pair(rule, a, b, ...)``
  applies it: the three-way rule, then the rule, then (for a part that explains the
  paper's effect, and only then) the premise gate. ``sensitive`` has no default: a caller
  says whether it showed assay sensitivity (an equivalence counts only where it did).
- ``planted_accuracy(correct, drop, rng)`` and ``planted_assay(a, planted, ...)``: assay
  sensitivity from a planted handicap: the accuracy of arm A's own predictions with
  correct ones marked wrong at random (expected drop ``drop``), and whether the same
  rule sees A beat that handicapped copy.
- ``arm_means(table, arms, ...)`` and ``per_seed_table(title, table, arms, seeds)``: the
  standard estimates (mean over seeds, Student-t 95 %) and the per-seed table.
- ``staged(evidence, present)``: a claim's ``analyse`` and ``decide`` from its
  ``evidence(results, ctx)`` (every comparison and decided part, with ``parts`` and
  ``premise``) and its presentation's ``present(ev, results, ctx)`` (the report, deciding
  nothing); ``gather(names, found)`` picks the evidence the presentation lists.
- ``family_outcome(match, beaten, needed, ...)`` and ``family_flip(tws, outcome, ...)``:
  a part decided over a family of comparisons (CONFIRMED where one matches, REFUTED
  where every one is beaten) and its flip distance.
- ``misbehaving_seeds(table, arms, seeds, ...)`` and ``misbehaviour_table(...)``: every
  seed where an arm diverged (a value that is not finite), collapsed (at or below the
  chance level the claim names) or fell far below its other seeds (a robust outlier), and
  the rate per arm. A collapse makes per-seed differences skewed, and no test of a sample
  holds its level on a sample that happens to hold none, so the report lists them.

The three-way rule itself, its intervals and error rates are :mod:`audit.stats`'s;
docs/STATISTICS.md says why each piece is as it is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from audit import stats
from audit.analysis import mean_estimate
from audit.claims import Analysis, RunContext, Table
from audit.errors import AuditError
from audit.verdict import (ALL_OUTCOMES, Estimate, Outcome, Part, Premise, Rule,
                           on_reviewer, premise_gate)

__all__ = ["PREMISE_STATUS", "Assay", "arm_means", "decide_pair", "family_flip",
           "family_outcome", "gather", "look_alpha", "misbehaving_seeds",
           "misbehaviour_table", "pair_rule", "per_seed_table", "planted_accuracy",
           "planted_assay", "premise", "staged"]

#: a seed is a robust outlier when it lies this many scaled MADs (1.4826 x the median
#: absolute deviation, the SD of normal data) on the bad side of its arm's median. Fixed
#: before any run, from the calibration matrix: its collapsed seeds sit 10 SDs from the
#: ordinary ones (``audit.calibration.COLLAPSE_JUMP``), which 5 catches with room to
#: spare, while an ordinary normal seed lies beyond 5 SDs about once in 3.5 million.
OUTLIER_MADS = 5.0

#: How the three-way outcome of "the paper's method beats its baseline" reads as a premise.
PREMISE_STATUS = {"SUPPORTED": "reproduced", "FALSIFIED": "not reproduced",
                  "INCONCLUSIVE": "undecided"}


def look_alpha(alpha: float, ctx: RunContext) -> float:
    """The alpha this look may spend: ``alpha`` times the look's share of the plan."""
    return float(alpha) * float(ctx.alpha_fraction)


def premise(effect: str, tw: stats.ThreeWay, *, rule: str | None = None,
            estimate: Estimate | None = None, note: str = "") -> Premise:
    """The paper's effect decided by the three-way outcome ``tw`` of "method beats baseline".

    The reason reads ``"<rule>: <tw.reason>"`` followed by ``note``; ``rule`` defaults to
    the rule as applied (``tw.text()``). Where the undecided reason says which way more
    seeds would decide it, the premise's word for that outcome follows the reason."""
    reads = (f' As a premise, {tw.seeds_decide} reads "{PREMISE_STATUS[tw.seeds_decide]}".'
             if tw.seeds_decide else "")
    return Premise(effect, PREMISE_STATUS[tw.outcome],
                   f"{tw.text() if rule is None else rule}: {tw.reason}{reads}{note}",
                   estimate, leans=premise_leans(tw))


def premise_leans(*tws: stats.ThreeWay) -> str:
    """Where an undecided premise decided by ``tws`` (one three-way, or several settings
    of which one reproducing is enough) lies (:data:`audit.verdict.PREMISE_LEANS`):
    "against" when every undecided point estimate is below its margin, "toward" when
    some is above, "" when decided (some SUPPORTED, or all FALSIFIED) or unknown."""
    outs = [tw.outcome for tw in tws]
    if not tws or "SUPPORTED" in outs or all(o == "FALSIFIED" for o in outs):
        return ""
    open_ = [tw for tw in tws if tw.outcome == "INCONCLUSIVE"]
    gaps = [float(tw.difference.mean) - float(tw.margin) for tw in open_]
    if any(not math.isfinite(g) for g in gaps):
        return ""
    if any(g > 0 for g in gaps):
        return "toward"
    return "against" if all(g < 0 for g in gaps) else ""


def pair_rule(part: str, text: str, *, a: str, b: str, metric: str, holds_when: str,
              kind: str = "experiment", reachable: Sequence[str] = ALL_OUTCOMES) -> Rule:
    """The rule of one compared pair: ``a`` against ``b`` on ``metric``, decided by the
    three-way rule about "a beats b by at least m" and mapped onto the reviewer by
    ``holds_when`` (the statistical outcome under which the reviewer is right, see
    :func:`audit.verdict.on_reviewer`).

    ``text`` is the printed rule; it may use ``{rule}`` (the three-way rule as applied)
    and ``{margin}``, which :func:`decide_pair` fills, and any field its caller passes in
    ``params``."""
    on_reviewer("INCONCLUSIVE", holds_when=holds_when)  # refuses a bad holds_when now

    def decide(tw: stats.ThreeWay, resolution: float | None = None, unit: str = ""):
        out = on_reviewer(tw.outcome, holds_when=holds_when)
        needs = ""
        if out == Outcome.INCONCLUSIVE:
            needs = (f"about {tw.seeds_phrase()}" if tw.seeds_needed else
                     "a larger scale or another setting: no seed count this rule reaches "
                     "decides the observed effect")
        return out, f"{a} vs {b}, {metric}: {tw.reason}", needs, {
            "flip": tw.flip, "resolution": resolution, "unit": unit}

    return Rule(part, text, decide, kind=kind, reachable=tuple(reachable))


def decide_pair(rule: Rule, a_values, b_values, *, margin: float, equivalence_margin: float,
                alpha: float, sensitive: bool, resolution: float | None = None,
                unit: str = "", params: Mapping[str, Any] | None = None,
                gate: Premise | None = None) -> tuple[stats.ThreeWay, Part]:
    """Decide a :func:`pair_rule` on per-seed values (position i of both is one seed).

    ``sensitive``: whether the caller showed assay sensitivity at the margin's scale (for
    example with :func:`planted_assay`); without it no equivalence is decided. ``gate``:
    the premise, for a part that explains the paper's effect only (a hypothesis of a
    proof, an exact count or a byte count is never gated)."""
    tw = stats.three_way(a_values, b_values, margin=float(margin),
                         equivalence_margin=float(equivalence_margin), alpha=float(alpha),
                         sensitive=bool(sensitive))
    filled = {"rule": tw.text(), "margin": f"{float(margin):g}", **dict(params or {})}
    part = rule(tw, resolution, unit, params=filled)
    return tw, (premise_gate(part, gate) if gate is not None else part)


def gather(names: Sequence[str], found: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence a presentation reads (its ``EVIDENCE`` names), picked from what an
    ``evidence`` function computed: ``return kit.gather(P.EVIDENCE, locals())``. A name
    it never assigned is one error naming it, not a KeyError deep in the report."""
    missing = [k for k in names if k not in found]
    if missing:
        raise AuditError(f"evidence assigns no {', '.join(map(repr, missing))}: the "
                         "presentation's EVIDENCE names what evidence must compute")
    return {k: found[k] for k in names}


def staged(evidence: Callable[[Any, RunContext], Mapping[str, Any]],
           present: Callable[[Mapping[str, Any], Any, RunContext], Analysis]
           ) -> tuple[Callable[[Any, RunContext], Analysis], Callable[[Any, RunContext], tuple]]:
    """``(analyse, decide)`` of a claim that decides apart from presenting.

    ``evidence(results, ctx)`` computes every comparison and decides every part; what it
    returns holds ``parts`` and ``premise`` (None for a claim without one).
    ``present(ev, results, ctx)`` builds the report from it and decides nothing.
    ``analyse`` is the two in turn. ``decide`` returns ``(parts, premise)`` without
    presenting: it is ``Claim.decide``, what the leave-one-seed-out stability check
    re-decides per seed.

    The two functions' code is here, but their ``__module__`` is ``evidence``'s and
    their names are ``analyse`` and ``decide``: errors, reports and tests that name a
    claim's ``analyse`` name the claim's module, and pickling finds them there (the
    claim module binds them under those names)."""
    def analyse(results, ctx: RunContext) -> Analysis:
        return present(evidence(results, ctx), results, ctx)

    def decide(results, ctx: RunContext) -> tuple:
        ev = evidence(results, ctx)
        return ev["parts"], ev["premise"]

    for f in (analyse, decide):
        f.__module__, f.__qualname__ = evidence.__module__, f.__name__
    decide.staged = True  # its decisions are analyse's by construction: an interim look
    return analyse, decide  # of --until-decided may trust it alone (audit.runner)


def family_outcome(match: Sequence[bool], beaten: Sequence[bool], needed: Sequence[str], *,
                   needs_seeds: str, needs_other: str) -> tuple[Outcome, str]:
    """A part decided over a family of comparisons with the reviewer: CONFIRMED where some
    comparison matches (``match``), REFUTED where every one is beaten (``beaten``), else
    INCONCLUSIVE with what would decide it: ``needs_seeds`` followed by ``needed`` (one
    "<comparison>: <n> pairs" each) where a seed count would, else ``needs_other``. Its
    error rates are those of ``any_of`` (docs/STATISTICS.md): the caller splits alpha
    over the family."""
    match, beaten = list(match), list(beaten)
    if not match or len(match) != len(beaten):
        raise ValueError(f"family_outcome needs one match and one beaten flag per "
                         f"comparison, at least one; got {len(match)} and {len(beaten)}")
    if any(match):
        return Outcome.CONFIRMED, ""
    if all(beaten):
        return Outcome.REFUTED, ""
    return Outcome.INCONCLUSIVE, (needs_seeds + ", ".join(needed) if needed else needs_other)


def family_flip(tws: Mapping[str, stats.ThreeWay], outcome: Outcome, *,
                resolution: float | None = None, unit: str = "") -> dict:
    """The flip distance of a :func:`family_outcome` part: CONFIRMED rests on its
    FALSIFIED comparisons (all must flip: the largest of their flips), REFUTED on every
    SUPPORTED one (any flip breaks it: the smallest); INCONCLUSIVE: the smallest flip of
    any comparison."""
    flips = {k: tw.flip for k, tw in tws.items() if tw.flip is not None}
    if outcome == Outcome.CONFIRMED:
        f = [flips[k] for k, tw in tws.items() if tw.outcome == "FALSIFIED" and k in flips]
        flip = max(f) if f else None
    else:
        flip = min(flips.values()) if flips else None
    return {"flip": flip, "resolution": resolution, "unit": unit}


@dataclass(frozen=True)
class Assay:
    """Assay sensitivity from a planted handicap: ``sensitive`` when the three-way rule
    sees arm A beat its own handicapped copy by more than ``detect_above``."""

    sensitive: bool
    tw: stats.ThreeWay
    text: str


def planted_accuracy(correct, drop: float, rng: np.random.Generator) -> float:
    """The accuracy of predictions whose per-example correctness is ``correct`` once each
    correct one is marked wrong with probability min(1, drop / accuracy): a handicap of
    expected size ``drop`` (the whole accuracy when it is below ``drop``), random, so the
    planted copy varies over seeds as a real effect would. Draw ``rng`` from the seed."""
    if isinstance(drop, bool) or not math.isfinite(float(drop)) or float(drop) < 0:
        raise ValueError(f"the planted drop must be a finite number >= 0; got {drop!r}")
    ok = np.asarray(correct, dtype=bool).ravel()
    if ok.size == 0:
        return float("nan")
    acc = float(ok.mean())
    q = min(1.0, float(drop) / acc) if acc > 0 else 0.0
    return float((ok & ~(rng.random(ok.size) < q)).mean())


def _bracketed(interval: str) -> str:
    """``[low, high]`` as it is; the no-spread text in parentheses."""
    return interval if interval.startswith("[") else f"({interval})"


def planted_assay(a, planted, *, detect_above: float, equivalence_margin: float,
                  alpha: float, label: str = "the planted handicap") -> Assay:
    """Does the rule see ``label``? ``a``: arm A per seed; ``planted``: the same runs with
    a handicap of known size planted (e.g. a fixed share of test examples marked wrong).
    Detected when the three-way rule decides "A beats the planted copy by more than
    ``detect_above``" at ``alpha``. The flip distance is not computed (it is not read)."""
    with stats.without_flip():
        tw = stats.three_way(a, planted, margin=float(detect_above),
                             equivalence_margin=float(equivalence_margin), alpha=float(alpha))
    d = tw.difference
    seen = tw.outcome == "SUPPORTED"
    return Assay(seen, tw, f"{label}: measured {d.mean:.4g} {_bracketed(stats.interval_text(d))} -> "
                           f"{'detected' if seen else 'NOT detected'} above "
                           f"{float(detect_above):g} at alpha {float(alpha):.3g}")


def arm_means(table: Mapping[str, Any], arms: Sequence[str], key: str, unit: str,
              what: str) -> tuple[Estimate, ...]:
    """One estimate per arm: ``<key>_<arm>``, the mean of ``table[arm]`` over seeds with
    its Student-t 95 % interval, described as "<arm>: <what>, mean over seeds"."""
    return tuple(mean_estimate(f"{key}_{arm}", table[arm], unit,
                               f"{arm}: {what}, mean over seeds") for arm in arms)


def per_seed_table(title: str, table: Mapping[str, Any], arms: Sequence[str],
                   seeds: Sequence[int], digits: int = 4, note: str = "") -> Table:
    """A table with a row per seed and a column per arm (values rounded to ``digits``)."""
    wrong = [a for a in arms if len(table[a]) != len(seeds)]
    if wrong:
        raise ValueError(f"per_seed_table {title!r}: arm {wrong[0]!r} has "
                         f"{len(table[wrong[0]])} values for {len(seeds)} seeds")
    return Table(title, ("seed", *arms),
                 tuple((s, *(round(float(table[arm][i]), digits) for arm in arms))
                       for i, s in enumerate(seeds)), note)


def misbehaving_seeds(table: Mapping[str, Any], arms: Sequence[str], seeds: Sequence[int], *,
                      chance: float | None = None, higher_is_better: bool = True,
                      outlier_mads: float = OUTLIER_MADS) -> dict[str, list[tuple[int, str]]]:
    """Per arm, the seeds that misbehaved and how: ``diverged`` (not finite),
    ``collapsed`` (at or below ``chance``, on the bad side, where the claim names one) or
    ``outlier`` (more than ``outlier_mads`` scaled MADs on the bad side of the arm's
    median over its finite seeds; none when the MAD is 0 or fewer than 5 seeds are
    finite). ``table[arm][i]`` is seed ``seeds[i]``'s value."""
    sign = 1.0 if higher_is_better else -1.0
    out: dict[str, list[tuple[int, str]]] = {}
    for arm in arms:
        x = np.asarray(table[arm], dtype=float)
        if x.shape != (len(seeds),):
            raise ValueError(f"arm {arm!r}: {x.size} values for {len(seeds)} seeds")
        fin = np.isfinite(x)
        med = float(np.median(x[fin])) if fin.any() else math.nan
        mad = float(1.4826 * np.median(np.abs(x[fin] - med))) if fin.sum() >= 5 else 0.0
        flags = []
        for i, s in enumerate(seeds):
            if not fin[i]:
                flags.append((int(s), "diverged"))
            elif chance is not None and sign * (x[i] - chance) <= 0:
                flags.append((int(s), "collapsed"))
            elif mad > 0 and sign * (med - x[i]) > outlier_mads * mad:
                flags.append((int(s), "outlier"))
        out[arm] = flags
    return out


def misbehaviour_table(flags: Mapping[str, list[tuple[int, str]]], n_seeds: int,
                       metric: str, chance: float | None = None,
                       outlier_mads: float = OUTLIER_MADS) -> Table:
    """The table of :func:`misbehaving_seeds`: per arm, how many of the ``n_seeds`` seeds
    misbehaved (the arm's own rate) and which, with how (``outlier_mads``: the threshold
    the flags were made with, for the note)."""
    rows = tuple((arm, f"{len(f)}/{n_seeds}", round(len(f) / max(n_seeds, 1), 4),
                  ", ".join(f"{s} ({how})" for s, how in f) or "none")
                 for arm, f in flags.items())
    floor = "" if chance is None else f", collapsed: at or below chance ({chance:g})"
    return Table(f"Collapsed, diverged or outlying seeds ({metric})",
                 ("arm", "seeds", "rate", "which"), rows,
                 f"diverged: not finite{floor}; outlier: more than {outlier_mads:g} scaled "
                 "MADs on the bad side of the arm's median. Per-seed differences are "
                 "skewed where an arm misbehaves on some seeds: the three-way rule holds "
                 "its error rates where none does, and with 5-15 % of seeds collapsed "
                 "they rise to about 0.05-0.15 against 0.025 (docs/STATISTICS.md), so "
                 "read a decided verdict beside this table.")
