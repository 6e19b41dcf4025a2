"""Generic checks that every claim must pass, in the manner of scikit-learn's estimator
checks: each is a function of a claim that returns the problems it finds (an empty list
when the claim passes), so one parametrised test runs all of them over every claim, a
plugin's and a newly scaffolded one included, and the per-claim copies of these tests
are not needed.

The checks here read declarations only (arms, pieces, rules, questions, record answers,
scales, seeds, searches, regime maps, locks): they run no unit, so they cost milliseconds. What needs a
run (each declared outcome reachable, declared estimates produced, a run JSON-able and
deterministic) stays in each claim's own tests, which drive the rules with made-up
evidence.

    from audit.checks import problems
    assert not problems(claim)            # every check
    for name, check in CHECKS: ...        # one at a time (the test suite's way)
"""
from __future__ import annotations

import json
import re
import string
import sys
from typing import Callable

from audit.claims import Claim
from audit.questions import Question
from audit.seeds import TUNING_SEED_START
from audit.stats import MIN_PAIRS
from audit.verdict import ALL_OUTCOMES

__all__ = ["CHECKS", "problems"]

# a review-record field path: ``falsifier``, ``referee_report.major_comments[1]``
_FIELD = re.compile(r"^[a-z_]+(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*$")


def _dupes(names) -> list[str]:
    seen, out = set(), []
    for n in names:
        if n in seen and n not in out:
            out.append(n)
        seen.add(n)
    return out


def check_arms(claim: Claim) -> list[str]:
    """Arm names are unique; where the claim's module declares ``PIECES`` (what each arm
    changes), they are the arms, in the same order."""
    names = [a.name for a in claim.arms]
    out = [f"arm {n!r} is declared twice" for n in _dupes(names)]
    if not names:
        out.append("the claim declares no arm")
    module = sys.modules.get(getattr(claim.run, "__module__", ""), None)
    pieces = getattr(module, "PIECES", None)
    if isinstance(pieces, dict) and tuple(pieces) != tuple(names):
        out.append(f"PIECES {list(pieces)} are not the arms {names}")
    return out


def check_rules(claim: Claim) -> list[str]:
    """Part ids are unique; a rule text's ``{fields}`` are names (filled from the
    decision's own parameters, never positional); the combination names real parts, and
    no measurement."""
    parts = [r.part for r in claim.rules]
    out = [f"part {p!r} has two rules" for p in _dupes(parts)]
    for r in claim.rules:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(r.text) if f is not None]
        except ValueError as exc:
            out.append(f"rule {r.part!r}: its text is not a format string ({exc})")
            continue
        bad = [f for f in fields if not f or f.isdigit() or not f.isidentifier()]
        if bad:
            out.append(f"rule {r.part!r}: text fields must be names, got {bad}")
        if not r.text.strip():
            out.append(f"rule {r.part!r} has no text")
    named = claim.combination.parts
    if named is not None:
        out += [f"the combination names part {p!r}, which has no rule"
                for p in named if p not in parts]
        # a measurement carries no verdict (it votes INCONCLUSIVE): all_of naming one
        # could never be CONFIRMED, any_of never REFUTED
        kinds = {r.part: r.kind for r in claim.rules}
        out += [f"the combination names part {p!r}, a measurement (it carries no verdict)"
                for p in named if kinds.get(p) == "measurement"]
    return out


def check_questions(claim: Claim) -> list[str]:
    """At least one question; ids unique; each decided by real parts of its kind (a proof
    by derivations only, a measurement by measurements only); record fields well formed
    (a question with a verdict names at least one; a measurement may be our own);
    the record answers (``Claim.answers``) name real parts."""
    qs: tuple[Question, ...] = tuple(claim.questions)
    if not qs:
        return ["the claim declares no reviewer question"]
    rules = {r.part: r for r in claim.rules}
    out = [f"question {q!r} is declared twice" for q in _dupes(q.id for q in qs)]
    for q in qs:
        missing = [p for p in q.parts if p not in rules]
        if missing or not q.parts:
            out.append(f"question {q.id!r} is decided by unknown parts {missing or '(none)'}")
            continue
        kinds = {rules[p].kind for p in q.parts}
        if q.kind == "proof" and kinds != {"derivation"}:
            out.append(f"question {q.id!r} is a proof but its parts are {sorted(kinds)}")
        if q.kind == "measurement" and kinds != {"measurement"}:
            out.append(f"question {q.id!r} is a measurement but its parts are "
                       f"{sorted(kinds)}")
        if q.kind != "measurement" and "measurement" in kinds:
            out.append(f"question {q.id!r} has a verdict but a measurement among its parts "
                       f"(a measurement carries none)")
        bad = [f for f in q.fields if not _FIELD.match(f)]
        # a measurement may be our own (no record item asked for it); a question with a
        # verdict answers the reviewer, so it names the item it answers
        if bad or (not q.fields and q.kind != "measurement"):
            out.append(f"question {q.id!r}: record fields {bad or '(none)'} are not field "
                       f"paths")
    out += [f"record answer {f!r} names part {p!r}, which has no rule"
            for f, p in dict(claim.answers).items() if p not in rules]
    return out


def check_scales(claim: Claim) -> list[str]:
    """A smoke scale (the one CI reruns); every scale's config a JSON-able mapping (the
    cache key and the report carry it)."""
    out = [] if "smoke" in claim.scales else ["no smoke scale (CI reruns every claim at it)"]
    for name, cfg in claim.scales.items():
        try:
            json.dumps(dict(cfg), sort_keys=True)
        except (TypeError, ValueError) as exc:
            out.append(f"scale {name!r}: config is not JSON-able ({exc})")
    return out


def check_seeds(claim: Claim) -> list[str]:
    """A stochastic claim's default seeds are distinct verdict seeds (below the tuning
    range), at least as many as the three-way rule needs to decide anything."""
    if not claim.stochastic:
        return []
    seeds = list(claim.default_seeds)
    out = [f"default seed {s} is given twice" for s in _dupes(seeds)]
    if len(set(seeds)) < MIN_PAIRS:
        out.append(f"{len(set(seeds))} default seeds: the three-way rule decides nothing "
                   f"below {MIN_PAIRS} pairs, so a plain `audit run` could not decide")
    out += [f"default seed {s} is not a verdict seed (0 <= s < {TUNING_SEED_START})"
            for s in seeds if not 0 <= int(s) < TUNING_SEED_START]
    return out


def check_searches(claim: Claim) -> list[str]:
    """Every search record names one of the claim's scales (its seeds are checked when
    the record is built, :class:`audit.tuning.Search`)."""
    return [f"search {s.question[:40]!r}... names scale {s.scale!r}, which the claim lacks"
            for s in getattr(claim, "searches", ()) if s.scale not in claim.scales]


def check_validation_metrics(claim: Claim) -> list[str]:
    """A stochastic claim that chooses settings (searches or regime maps) declares which
    keys of its results read validation data (``validation_metrics``): without them only a
    key's name is checked, and ``final_acc`` computed on the test set passes."""
    if not claim.stochastic or getattr(claim, "validation_metrics", None) is not None:
        return []
    if getattr(claim, "searches", ()) or getattr(claim, "regime_maps", ()):
        return ["it declares searches or regime maps but no validation_metrics (the keys of "
                "a unit's result that read validation data, never the test set)"]
    return []


def check_regime_maps(claim: Claim) -> list[str]:
    """Every regime map is at one of the claim's scales, compares real arms, reads only
    validation metrics (a map never reads the verdict's test data), and every cell's
    overrides pass the ``--set`` checks of that scale (a typo fails here, not an hour into
    the map)."""
    from audit.errors import AuditError
    from audit.runner import check_overrides
    from audit.tuning import map_problems

    out = []
    for m in getattr(claim, "regime_maps", ()):
        if m.scale not in claim.scales:
            out.append(f"regime map at unknown scale {m.scale!r}")
            continue
        out += [f"regime map at {m.scale!r}: {problem}" for problem in map_problems(claim, m)]
        for labels, over in m.points():
            try:
                check_overrides(claim, m.scale, over)
            except AuditError as exc:
                out.append(f"regime map at {m.scale!r}, cell {labels}: {exc}")
                break
    return out


def check_locks(claim: Claim) -> list[str]:
    """Every lock is at a scale the claim has, with a verdict word, and names only real
    parts and questions (a renamed part would otherwise never be compared again)."""
    out = []
    parts = {r.part for r in claim.rules}
    qids = {q.id for q in claim.questions}
    words = set(ALL_OUTCOMES) | {"SPLIT"}
    for scale, lock in claim.locks().items():
        if scale not in claim.scales:
            out.append(f"lock at unknown scale {scale!r}")
        if not isinstance(lock, dict):
            out.append(f"lock at {scale!r} is not a mapping")
            continue
        if lock.get("verdict") not in words:
            out.append(f"lock at {scale!r}: verdict {lock.get('verdict')!r}")
        out += [f"lock at {scale!r} names part {p!r}, which has no rule"
                for p in (lock.get("parts") or {}) if p not in parts]
        out += [f"lock at {scale!r} names question {q!r}, which the claim lacks"
                for q in (lock.get("questions") or {}) if q not in qids]
    return out


def check_record_fields(claim: Claim) -> list[str]:
    """Where the project has notes on the paper's record (``audit.papers``), every field a
    question answers is an item of that record."""
    from audit import papers

    notes = papers.notes(claim.paper.arxiv_id)
    if notes is None:
        return []
    return [f"question {q.id!r} answers {f!r}, which is no item of the "
            f"{claim.paper.short or claim.paper.arxiv_id} record"
            for q in claim.questions for f in q.fields if f not in notes]


#: (name, check) pairs, in the order a failing claim is best read
CHECKS: tuple[tuple[str, Callable[[Claim], list[str]]], ...] = (
    ("arms", check_arms),
    ("rules", check_rules),
    ("questions", check_questions),
    ("scales", check_scales),
    ("seeds", check_seeds),
    ("searches", check_searches),
    ("validation-metrics", check_validation_metrics),
    ("regime-maps", check_regime_maps),
    ("locks", check_locks),
    ("record-fields", check_record_fields),
)


def problems(claim: Claim) -> list[str]:
    """Every problem every check finds, each prefixed with its check's name."""
    return [f"{name}: {p}" for name, check in CHECKS for p in check(claim)]
