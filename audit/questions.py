"""One verdict per reviewer question.

A reviewer's claim usually asks several things at once: is the printed formula inverted
(a proof)? does the inversion hurt (an experiment)? at which scale? Merging them into one
word hides the split. A claim therefore declares its :class:`Question` s, each tied to
the record fields it answers and to the parts that decide it; each question gets its own
verdict (CONFIRMED / REFUTED / INCONCLUSIVE), its kind (proof, experiment, measurement),
its scale and what would decide it. A derivation and an experiment are never merged into
one word.

Where a single word is still needed (a lock, CI, the index's sort), it is the common
verdict of the questions when they agree and **SPLIT** when they do not
(:func:`headline`); the headline text lists which way each question went. Across scales
the same rule holds per question (:func:`across_scales`): a smoke verdict is never
promoted over a full one; disagreeing scales are SPLIT, with both verdicts shown.

:class:`Finding`: an estimate or measurement that a reader should see before the numbers
(a score that is in fact a size ranking), listed right under the questions, in words,
with its interval.

This module is low in the layering: it imports only :mod:`audit.verdict`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from audit.verdict import (ALL_OUTCOMES, DIVERGED_PART, Combination, Outcome, Part,
                           held_of, share_counts)

#: What a question is: a ``proof`` (mathematics: an identity, a theorem, an exact count or
#: byte count; more seeds cannot move it), an ``experiment`` (decided from runs over
#: seeds), or a ``measurement`` (a number reported without a threshold of its own; it
#: carries no verdict and never enters the headline).
QUESTION_KINDS = ("proof", "experiment", "measurement")
#: The words a question can take; SPLIT only where its parts or settings disagree.
WORDS = ("CONFIRMED", "REFUTED", "INCONCLUSIVE", "SPLIT")
MEASURED = "MEASURED"  # shown for a measurement question instead of a verdict


@dataclass(frozen=True)
class Question:
    """A question of the reviewer that a claim answers.

    Attributes:
        id: stable identifier (``prose-inverted``), used by locks and the index.
        asks: the question, in our words (never the record's sentence).
        fields: the review-record field paths it answers (``falsifier``,
            ``referee_report.major_comments[1]``, ...); ``reports/coverage.md`` maps each
            record item to the questions that name it.
        parts: the ids of the parts that decide it.
        kind: one of :data:`QUESTION_KINDS`.
        how: ``"all"``: CONFIRMED when every part is, REFUTED when any is (and none is
            CONFIRMED), SPLIT when parts go both ways; ``"any"``: CONFIRMED when any part
            is (and none is REFUTED), REFUTED when all are, SPLIT when parts go both
            ways. The outcome one part carries alone (REFUTED under "all", CONFIRMED
            under "any") counts, where k > 1 of the question's experiments can reach it,
            only from a part whose rule ran at an ``alpha_share`` of at most 1/k
            (Bonferroni, as :func:`audit.verdict.all_of`); derivations always count.
        decides: what would decide it, shown while it is INCONCLUSIVE and its parts name
            nothing (e.g. "the paper's effect must first reproduce: paper scale").
        sweeps: the claim's sweep settings (``Analysis.settings``) are rows of this
            question, each with its own verdict.
    """

    id: str
    asks: str
    fields: tuple[str, ...]
    parts: tuple[str, ...]
    kind: str = "experiment"
    how: str = "all"
    decides: str = ""
    sweeps: bool = False

    def __post_init__(self):
        if self.kind not in QUESTION_KINDS:
            raise ValueError(f"question {self.id!r}: kind must be one of {QUESTION_KINDS}; "
                             f"got {self.kind!r}")
        if self.how not in ("all", "any"):
            raise ValueError(f"question {self.id!r}: how must be 'all' or 'any'")
        if not self.parts:
            raise ValueError(f"question {self.id!r} names no part that decides it")

    def to_dict(self) -> dict:
        return {"id": self.id, "asks": self.asks, "fields": list(self.fields),
                "parts": list(self.parts), "kind": self.kind, "how": self.how,
                "decides": self.decides, "sweeps": self.sweeps}


@dataclass(frozen=True)
class Finding:
    """Something the evidence shows that a reader should see first, in words.

    ``text``: one or two sentences with the numbers in them; ``estimates``: the names of
    the estimates behind it (their intervals are printed beside the text)."""

    text: str
    estimates: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"text": self.text, "estimates": list(self.estimates)}


# --------------------------------------------------------------------------- deciding
def combine_words(words: Sequence[str], how: str = "all") -> str:
    """One word from several decided words (parts of a question, or questions)."""
    words = [str(w) for w in words]
    if not words:
        return Outcome.INCONCLUSIVE.value
    has_c, has_r = "CONFIRMED" in words, "REFUTED" in words
    if "SPLIT" in words or (has_c and has_r):
        return "SPLIT"
    if how == "any":
        if has_c:
            return "CONFIRMED"
        return "REFUTED" if all(w == "REFUTED" for w in words) else "INCONCLUSIVE"
    if all(w == "CONFIRMED" for w in words):
        return "CONFIRMED"
    return "REFUTED" if has_r else "INCONCLUSIVE"


def headline_word(answers: Iterable[Mapping]) -> str:
    """The claim's single word: the questions' common verdict, SPLIT when they differ
    (measurement questions carry no verdict and are left out)."""
    words = [a["verdict"] for a in answers if a.get("kind") != "measurement"]
    if not words:
        return Outcome.INCONCLUSIVE.value
    return words[0] if len(set(words)) == 1 else "SPLIT"


def answer(question: Question, parts: Mapping[str, Part | Mapping],
           settings: Sequence[Mapping] = (), caveat: str = "", scale: str = "") -> dict:
    """Decide one question from its parts (``Part`` objects or their JSON dicts)."""
    def get(p, key, default=None):
        return p.get(key, default) if isinstance(p, Mapping) else getattr(p, key, default)

    missing = [i for i in question.parts if i not in parts]
    if missing:
        raise KeyError(f"question {question.id!r} needs the parts {missing}, which were "
                       "not decided")
    mine = [parts[i] for i in question.parts]
    words = [str(get(p, "verdict").value if isinstance(get(p, "verdict"), Outcome)
                 else get(p, "verdict")) for p in mine]
    # the union guard of verdict.all_of / any_of, per question: where k > 1 of its
    # experiments can carry the union outcome alone (REFUTED under "all", CONFIRMED under
    # "any"), one counts only if its test ran at a share of at most 1/k of alpha
    # (Bonferroni); a derivation's word is a computation, with no error rate to split
    union = "CONFIRMED" if question.how == "any" else "REFUTED"
    tests = [p for p in mine if get(p, "kind", "experiment") == "experiment"
             and union in (get(p, "reachable") or ALL_OUTCOMES)]
    k = len(tests)

    def guarded(ws: Sequence[str]) -> tuple[list[str], set]:
        """``ws`` (one word a part) with the guard applied: (counted words, dropped ids)."""
        drop = {get(p, "id") for p, w in zip(mine, ws) if k > 1 and w == union
                and any(p is t for t in tests) and not share_counts(get(p, "alpha_share"), k)}
        return ["INCONCLUSIVE" if get(p, "id") in drop else w
                for p, w in zip(mine, ws)], drop

    counted, dropped = guarded(words)
    verdict = combine_words(counted, question.how)
    reason = "; ".join(f"{get(p, 'id')}: {w}"
                       + (f" (not counted toward {union}: alpha share "
                          f"{_share_text(get(p, 'alpha_share'))}, above 1/{k})"
                          if get(p, "id") in dropped else "")
                       + (f" ({get(p, 'reason')})" if get(p, "reason") else "")
                       for p, w in zip(mine, words))
    needs = ""
    if verdict == "INCONCLUSIVE":
        # a part the gate held (``Part.held``): its premise not reproduced, or undecided
        # where its own comparison had decided
        gated = any(held_of(p) for p in mine)
        own = "; ".join(str(get(p, "needs")) for p in mine if get(p, "needs"))
        needs = (question.decides or own) if gated else (own or question.decides)
    rows = []
    if question.sweeps:
        rows = [{"setting": str(s.get("setting")), "verdict": str(s.get("verdict")),
                 "base": bool(s.get("base")), "note": str(s.get("note", ""))}
                for s in settings or () if isinstance(s, Mapping)]
    # what the parts' own comparisons say together where the premise gate held some of
    # them INCONCLUSIVE: shown beside the question's word, never in its place. Only a
    # gated part held INCONCLUSIVE gives back its word, and the union guard applies to
    # the words given back as it would had the premise reproduced
    own_words = [str(get(p, "ungated")) if get(p, "gated") is True and w == "INCONCLUSIVE"
                 and str(get(p, "ungated") or "") in ("CONFIRMED", "REFUTED") else w
                 for p, w in zip(mine, words)]
    alone = combine_words(guarded(own_words)[0], question.how) if own_words != words else ""
    if question.kind == "measurement":
        verdict = MEASURED
        alone = ""
    # how the shown decided word was reached, where its parts say (``Part.basis``): the
    # bases of the parts whose own word it is
    shown = alone if verdict == "INCONCLUSIVE" and alone else verdict
    basis = "; ".join(dict.fromkeys(
        str(get(p, "basis")) for p, w in zip(mine, own_words)
        if get(p, "basis") and w == shown and shown in ("CONFIRMED", "REFUTED")))
    return {"id": question.id, "asks": question.asks, "fields": list(question.fields),
            "parts": list(question.parts), "kind": question.kind, "verdict": verdict,
            "reason": reason, "needs": needs, "caveat": caveat, "rows": rows,
            "scale": scale, "gated": any(bool(get(p, "gated")) for p in mine),
            # settings split: rows DECIDED both ways (an undecided row contradicts none)
            "settings_split": {"CONFIRMED", "REFUTED"} <= {r["verdict"] for r in rows},
            **({"ungated": alone} if alone and alone != verdict else {}),
            **({"basis": basis} if basis else {})}


def _diverged_answer(question: Question, part: Part | Mapping, scale: str) -> dict:
    """A question of a run whose units diverged (``audit.runner.diverged_analysis``: one
    ``diverged`` part, no statistic computed): INCONCLUSIVE, with the diverged reason and
    what would decide it, whatever kind of question it is."""
    def get(key):
        return part.get(key, "") if isinstance(part, Mapping) else getattr(part, key, "")

    return {"id": question.id, "asks": question.asks, "fields": list(question.fields),
            "parts": list(question.parts), "kind": question.kind,
            "verdict": Outcome.INCONCLUSIVE.value, "reason": f"diverged: {get('reason')}",
            "needs": str(get("needs")), "caveat": "", "rows": [], "scale": scale,
            "gated": False, "settings_split": False}


def _share_text(share) -> str:
    return "undeclared" if share is None else f"{share:.3g}" \
        if isinstance(share, (int, float)) else "unreadable"


def default_question(claim) -> Question:
    """A claim that declares no questions answers one: its whole statement, decided by
    the parts that enter its combination (a plugin written before questions existed)."""
    parts = tuple(claim.combination.parts or (r.part for r in claim.rules
                                              if r.kind != "measurement"))
    kinds = {r.kind for r in claim.rules if r.part in parts}
    kind = "proof" if kinds == {"derivation"} else "experiment"
    return Question("claim", claim.statement, tuple(claim.record.fields), parts or ("?",),
                    kind=kind)


def answers(claim, parts: Sequence[Part | Mapping], analysis: Any = None,
            scale: str = "") -> list[dict]:
    """Every question of ``claim`` decided from ``parts`` (with the analysis' sweep
    settings and caveats). A claim without declared questions gets
    :func:`default_question`, decided by its own combination."""
    by_id = {(p.get("id") if isinstance(p, Mapping) else p.id): p for p in parts}
    settings = tuple(getattr(analysis, "settings", ()) or ())
    caveats = dict(getattr(analysis, "caveats", {}) or {})
    qs = tuple(getattr(claim, "questions", ()) or ())
    if DIVERGED_PART in by_id and qs and any(i not in by_id for q in qs for i in q.parts):
        return [_diverged_answer(q, by_id[DIVERGED_PART], scale) for q in qs]
    if not qs:
        q = default_question(claim)
        out = answer(q, by_id, settings, caveats.get(q.id, ""), scale) if all(
            i in by_id for i in q.parts) else None
        if out is None:
            return []
        if not any(isinstance(p, Mapping) for p in parts):
            out["verdict"] = claim.combination(list(parts)).value
        return [out]
    return [answer(q, by_id, settings, caveats.get(q.id, ""), scale) for q in qs]


def of_report(data: Mapping, claim=None) -> list[dict]:
    """The questions of one report's JSON: its own ``questions``; for a report written
    before questions existed, those of ``claim``'s declared questions whose parts are all
    in the report, decided from the report's stored part verdicts and marked
    ``derived`` (with a caveat saying so). Questions whose parts the report lacks are
    left out: they were not asked by that run."""
    own = [q for q in data.get("questions") or [] if isinstance(q, Mapping)]
    if own or claim is None:
        return own
    parts = {p.get("id"): p for p in data.get("parts") or [] if isinstance(p, Mapping)}
    out = []
    for q in tuple(getattr(claim, "questions", ()) or ()):
        if not all(i in parts for i in q.parts):
            continue
        a = answer(q, parts, data.get("settings") or (), scale=str(data.get("scale", "")))
        a["derived"] = True
        a["caveat"] = ("derived from the part verdicts of a report written before "
                       "questions existed (under the rules of its own commit)")
        out.append(a)
    return out


def combination(questions: Sequence[Question], note: str = "") -> Combination:
    """The claim-level combination of a claim with questions: its single word is the
    questions' common verdict, SPLIT when they disagree; the sequential plan waits for
    every part that decides a question that is not a measurement."""
    qs = tuple(questions)
    deciding = tuple(dict.fromkeys(p for q in qs if q.kind != "measurement"
                                   for p in q.parts))

    def combine(parts: Sequence[Part]) -> Outcome:
        by_id = {p.id: p for p in parts}
        return Outcome(headline_word(answer(q, by_id) for q in qs))

    names = ", ".join(f"`{q.id}`" for q in qs)
    text = (f"Each question ({names}) has its own verdict, decided by its own parts; the "
            f"claim's single word is their common verdict when they agree and SPLIT when "
            f"they do not (a proof and an experiment are never merged into one word)")
    return Combination(text + (f"; {note}" if note else "."), combine, deciding)


def headline_text(answers_: Sequence[Mapping]) -> str:
    """"prose-inverted: CONFIRMED (proof); ..." for the report's first line."""
    bits = []
    for a in answers_:
        cav = f"; {a['caveat']}" if a.get("caveat") else ""
        bits.append(f"{a['id']}: {a['verdict']} ({a['kind']}{cav})")
    return "; ".join(bits)


# ---------------------------------------------------------------------------- scales
#: The words a question's ``ungated`` may hold (what its comparisons alone said, where
#: the premise gate held it INCONCLUSIVE): SPLIT where they went both ways. Every page
#: shows exactly these, through :func:`gated_text`.
UNGATED_WORDS = ("CONFIRMED", "REFUTED", "SPLIT")


def gated_text(word: str, ungated: object, basis: object = "") -> str:
    """A question's word, with what its comparisons alone said where the premise gate
    overrode them: "INCONCLUSIVE (gated; the comparison alone: REFUTED)". Only an
    INCONCLUSIVE word carries one, and only one of :data:`UNGATED_WORDS`. ``basis``
    (the answer's ``basis``, ``Part.basis``): how a decided word was reached, added to
    it: "REFUTED (on the cosine)", "INCONCLUSIVE (gated; the comparison alone: REFUTED,
    on the cosine)"."""
    return word + gated_suffix(word, ungated, basis)


def gated_suffix(word: str, ungated: object, basis: object = "") -> str:
    """What :func:`gated_text` adds after ``word`` (for a cell that styles the word)."""
    basis = f", {basis}" if isinstance(basis, str) and basis else ""
    if word in ("CONFIRMED", "REFUTED") and basis:
        return f" ({basis[2:]})"
    if word != "INCONCLUSIVE" or ungated not in UNGATED_WORDS:
        return ""
    return f" (gated; the comparison alone: {ungated}{basis if ungated != 'SPLIT' else ''})"


def across_scales(by_scale: Mapping[str, Sequence[Mapping]]) -> list[dict]:
    """Per question, the verdict at every scale side by side and their combination: the
    common word when the scales agree, SPLIT when they do not (never one scale promoted
    over another). ``by_scale``: scale -> that report's ``questions`` list. ``ungated``:
    scale -> what the parts' own comparisons said where the premise gate held the
    question INCONCLUSIVE (:func:`gated_text` shows it beside the word)."""
    order: list[str] = []
    table: dict[str, dict] = {}
    for scale, answers_ in by_scale.items():
        for a in answers_ or ():
            if not isinstance(a, Mapping) or not isinstance(a.get("id"), str):
                continue
            row = table.setdefault(a["id"], {"id": a["id"], "asks": a.get("asks", ""),
                                             "kind": a.get("kind", ""), "by_scale": {},
                                             "caveats": {}, "reasons": {}, "ungated": {},
                                             "basis": {}})
            if a["id"] not in order:
                order.append(a["id"])
            row["by_scale"][scale] = str(a.get("verdict"))
            if a.get("ungated") in UNGATED_WORDS:  # the gate's overridden word
                row["ungated"][scale] = str(a["ungated"])
            if isinstance(a.get("basis"), str) and a["basis"]:
                row["basis"][scale] = a["basis"]
            if a.get("reason"):
                row["reasons"][scale] = " ".join(str(a["reason"]).split())
            if a.get("caveat"):
                row["caveats"][scale] = str(a["caveat"])
    out = []
    for qid in order:
        row = table[qid]
        words = set(row["by_scale"].values())
        row["combined"] = (next(iter(words)) if len(words) == 1 else "SPLIT")
        why = ""
        if len(words) > 1:  # each scale's word with the evidence that gave it
            why = "; ".join(f"{s}: {v}" + (f" ({row['caveats'][s]})" if s in row["caveats"]
                                           else "")
                            + (f" — {row['reasons'][s]}" if s in row["reasons"] else "")
                            for s, v in row["by_scale"].items())
        elif row["caveats"]:
            why = "; ".join(f"{s}: {c}" for s, c in row["caveats"].items())
        row["why"] = why
        out.append(row)
    return out


# ------------------------------------------------------------------------ convergence
def convergence(curve: Sequence[float], rounds: Sequence[int], resolution: float,
                window: float = 0.2, steps: float = 3.0) -> dict:
    """Whether a mean accuracy curve had settled when it was read (its last point).

    The change of the curve over its last ``window`` of rounds (at least two evaluation
    points) against ``steps`` x the metric's resolution (one test example): converged when
    the absolute change is at most that. Returns {"converged", "change", "from_round",
    "to_round", "threshold", "text"}."""
    y = [float(v) for v in curve]
    r = [int(v) for v in rounds]
    if len(y) < 2 or len(y) != len(r):
        return {"converged": None, "change": None, "from_round": None,
                "to_round": r[-1] if r else None, "threshold": None,
                "text": "too few evaluation rounds to judge convergence"}
    last = r[-1]
    start = last - max(1, int(math.ceil(window * last)))
    i = max(0, min(range(len(r)), key=lambda j: abs(r[j] - start)))
    if i == len(r) - 1:
        i = len(r) - 2
    change = y[-1] - y[i]
    threshold = steps * float(resolution)
    ok = abs(change) <= threshold
    text = (f"read at round {last}; over rounds {r[i]}-{last} the curve moved "
            f"{change:+.4f} ({'within' if ok else 'more than'} {steps:g} test examples = "
            f"{threshold:.4f}): {'converged' if ok else 'NOT converged'}")
    return {"converged": ok, "change": change, "from_round": r[i], "to_round": last,
            "threshold": threshold, "text": text}
