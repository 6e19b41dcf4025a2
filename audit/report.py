"""Audit reports: ``<id>.json`` (the contract other tools read), ``<id>.md`` rendered from
that JSON alone, PNG figures redrawn from the JSON's figure data, and the ``README.md``
index of every claim.

JSON contract (keys always present): ``id``, ``paper``, ``verdict``, ``rule``, ``scale``,
``seeds`` (list of int), ``arms`` (list of names), ``estimates`` (objects with ``name``,
``value``, ``low``, ``high``, ``level``, ``n``; ``low``/``high`` null for exact values),
``environment`` (``python``, ``torch``, ``device``, ``commit``, ...), ``runtime_s`` and
``parts`` (objects with ``id``, ``verdict``, ``rule``).
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from pathlib import Path
from collections import Counter
from typing import Any, Iterable, Mapping, NamedTuple

from audit import safeio, stats, verdict
from audit.claims import AuditError, Claim
from audit.keys import claim_code_version
from audit.runner import ClaimResult, regenerate_command, with_overrides
from audit.seeds import is_tuning

SCHEMA_VERSION = 1
REQUIRED_KEYS = ("id", "paper", "verdict", "rule", "scale", "seeds", "arms", "estimates",
                 "environment", "runtime_s", "parts")


# ------------------------------------------------------------------------------ data
def to_json(result: ClaimResult) -> dict:
    claim, ctx, v, a = result.claim, result.ctx, result.verdict, result.analysis
    locked = result.locked
    return {
        "schema": SCHEMA_VERSION,
        "id": claim.id,
        "title": claim.title,
        "paper": {"arxiv_id": claim.paper.arxiv_id, "title": claim.paper.title,
                  "version": claim.paper.version, "short": claim.paper.short},
        "record": {"file": claim.record.file, "fields": list(claim.record.fields)},
        "statement": claim.statement,
        "verdict": v.verdict.value,
        "locked_verdict": locked.value if locked else None,
        "rule": v.rule,
        "reason": v.reason,
        "needs": v.needs,
        "parts": [p.to_dict() for p in v.parts],
        "scale": ctx.scale,
        "config": dict(ctx.config),
        "seeds": list(ctx.seeds),
        "device": ctx.device,
        "arms": [a_.name for a_ in claim.arms],
        "arm_details": [{"name": a_.name, "description": a_.description,
                         "differs": a_.differs} for a_ in claim.arms],
        "estimates": [e.to_dict() for e in v.estimates],
        "paper_numbers": [{"name": p.name, "value": p.value, "where": p.where,
                           "ours": p.ours} for p in claim.paper_numbers],
        "tables": [t.to_dict() for t in a.tables],
        "figures": [f.to_dict() for f in a.figures],
        "notes": list(a.notes),
        "environment": dict(result.environment),
        "runtime_s": round(result.runtime_s, 3),
        "runs": {"computed": result.computed, "cached": result.cached,
                 "cached_elsewhere": result.cached_elsewhere},
        "command": result.command or with_overrides(
            regenerate_command(ctx, getattr(result, "plan", None)),
            claim.scales[ctx.scale], ctx.config),
        "premise": v.premise.to_dict() if getattr(v, "premise", None) else None,
        "plan": (result.plan.to_dict() | {"describe": result.plan.describe()}
                 if getattr(result, "plan", None) is not None else None),
        "looks": [dict(look) for look in getattr(v, "looks", ())],
        "stability": dict(v.stability) if getattr(v, "stability", None) else None,
        "fragile": bool(getattr(v, "fragile", False)),
        "tuning_run": _tuning_run(ctx.seeds),
        "searches": [s.to_dict() for s in getattr(claim, "searches", ())
                     if s.scale == ctx.scale],
        "settings": [dict(x) for x in getattr(a, "settings", ())],
        # one verdict per reviewer question (audit.questions); "verdict" above is their
        # single word (SPLIT when they differ)
        "questions": result.answers,
        "findings": [f.to_dict() if hasattr(f, "to_dict") else dict(f)
                     for f in getattr(a, "findings", ())],
    }


strict_json = safeio.strict_json  # re-exported where callers import it


def _tuning_run(seeds) -> bool:
    """Whether a report's seeds are a tuning run's (:func:`audit.seeds.is_tuning`; a
    stored list that mixes the two ranges is no tuning run here, as before)."""
    try:
        return is_tuning([int(s) for s in seeds or ()])
    except AuditError:
        return False


def settings_split(settings) -> bool:
    """Settings decided both ways (a CONFIRMED row and a REFUTED row): what the index marks
    "settings split", as ``questions.answer`` marks a question. An INCONCLUSIVE row decides
    nothing, so it contradicts no other row."""
    words = {s.get("verdict") for s in settings or () if isinstance(s, Mapping)
             and isinstance(s.get("verdict"), str)}
    return {"CONFIRMED", "REFUTED"} <= words


def settings_line(settings) -> str | None:
    """The headline sentence on which setting the verdict speaks for (None when the claim
    ran one setting, or every setting says the same). "Settings disagree" only where rows
    decide both ways (:func:`settings_split`); rows that differ only by an INCONCLUSIVE are
    listed as such. (Rows read from a report that came from elsewhere: a verdict that is
    no string is left out.)"""
    settings = [s for s in settings or () if isinstance(s, Mapping)
                and isinstance(s.get("verdict"), str)]
    if len({s.get("verdict") for s in settings}) < 2:
        return None
    cells = "; ".join(f"{s.get('setting')}: {s.get('verdict')}"
                      + (" (base)" if s.get("base") else "")
                      + (" (closest to the paper)" if s.get("closest_to_paper") else "")
                      for s in settings)
    closest = next((s for s in settings if s.get("closest_to_paper")), None)
    base = next((s for s in settings if s.get("base")), None)
    reason = str(closest.get("why", "")).rstrip(". ") if closest is not None else ""
    if closest is not None and closest is base:
        why = (f" The verdict is decided on the base setting, which is also the one closest "
               f"to the paper's: {reason}.")
    elif closest is not None:
        why = f" Closest to the paper's setting: **{closest.get('setting')}**: {reason}."
    else:
        why = ""
    if settings_split(settings):
        return f"**Settings disagree**: {cells}.{why}"
    return (f"**Settings** (no two decide opposite ways; an INCONCLUSIVE row decides "
            f"nothing): {cells}.{why}")


def validate(data: Mapping, source: str = "report") -> None:
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise AuditError(f"{source} lacks required keys: {', '.join(missing)}")
    problem = _shape_problem(data)
    if problem:
        raise AuditError(f"{source} is malformed: {problem}")


_VERDICTS = ("CONFIRMED", "REFUTED", "INCONCLUSIVE")
_WORDS = _VERDICTS + ("SPLIT",)  # a claim's single word; SPLIT when its questions differ
_QUESTION_WORDS = _WORDS + ("MEASURED",)


def _shape_problem(data: Mapping) -> str | None:
    """The first way ``data`` breaks the JSON contract's types, or None."""
    def is_num(x: Any) -> bool:  # NaN, Infinity and an int past float's range are none
        if not isinstance(x, (int, float)) or isinstance(x, bool):
            return False
        try:
            return math.isfinite(x)
        except OverflowError:  # an int of hundreds of digits
            return False

    def objects(key: str, named: str | None) -> str | None:
        items = data.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
            return f"{key!r} must be a list of objects"
        if named and not all(isinstance(i.get(named), str) for i in items):
            return f"each entry of {key!r} needs a string {named!r}"
        return None

    checks = [
        (isinstance(data["id"], str), "'id' must be a string"),
        (isinstance(data["paper"], Mapping), "'paper' must be an object"),
        (data["verdict"] in _WORDS, f"'verdict' must be one of {', '.join(_WORDS)}"),
        (isinstance(data["rule"], str), "'rule' must be a string"),
        (isinstance(data["scale"], str), "'scale' must be a string"),
        (isinstance(data["seeds"], list) and all(is_num(s) and float(s).is_integer()
                                                 for s in data["seeds"]),
         "'seeds' must be a list of whole numbers"),
        (isinstance(data["arms"], list) and all(isinstance(a, str) for a in data["arms"]),
         "'arms' must be a list of strings"),
        (isinstance(data["environment"], Mapping), "'environment' must be an object"),
        (is_num(data["runtime_s"]), "'runtime_s' must be a finite number"),
    ]
    for ok, problem in checks:
        if not ok:
            return problem
    for key, named in (("estimates", "name"), ("parts", "id"), ("figures", "name"),
                       ("tables", "title")):
        problem = objects(key, named)
        if problem:
            return problem
    if not all(p.get("verdict") in _VERDICTS and isinstance(p.get("rule"), str)
               for p in data["parts"]):
        return "each entry of 'parts' needs a verdict (one of " \
               f"{', '.join(_VERDICTS)}) and a string 'rule'"
    if not all(isinstance(p.get("reachable", list(_VERDICTS)), list)
               and all(r in _VERDICTS for r in p.get("reachable", _VERDICTS))
               for p in data["parts"]):
        return f"each entry of 'parts' needs 'reachable' as a list of {', '.join(_VERDICTS)}"
    for key, named in (("estimates", "name"), ("parts", "id")):  # what decides: unique
        counts = Counter(str(x[named]) for x in data[key])
        if any(c > 1 for c in counts.values()):
            twice = sorted(n for n, c in counts.items() if c > 1)[:5]
            return f"each {named} must appear once in {key!r} (repeated: {', '.join(twice)})"
    for f in data.get("figures") or []:
        if not isinstance(f.get("series"), list) or not all(
                isinstance(s, Mapping) for s in f["series"]):
            return f"figure {f['name']!r} needs a list of series objects"
    problem = objects("questions", "id") or objects("findings", "text")
    if problem:
        return problem
    if not all(q.get("verdict") in _QUESTION_WORDS and isinstance(q.get("asks", ""), str)
               and isinstance(q.get("kind", ""), str)
               and isinstance(q.get("rows", []), list)
               and all(isinstance(r, Mapping) for r in q.get("rows", []))
               and isinstance(q.get("fields", []), list)
               and all(isinstance(f, str) for f in q.get("fields", []))
               for q in data.get("questions") or []):
        return ("each entry of 'questions' needs a verdict (one of "
                f"{', '.join(_QUESTION_WORDS)}), string 'asks' and 'kind', a list of "
                "string 'fields' and a list of 'rows' objects")
    ids = [q["id"] for q in data.get("questions") or []]
    if len(ids) != len(set(ids)):
        return "each question id must appear once in 'questions'"
    if ids:
        from audit.questions import headline_word

        word = headline_word(data["questions"])
        if data["verdict"] != word:
            return (f"'verdict' {data['verdict']} is not the word its questions give "
                    f"({word})")
    for key, named in (("settings", "setting"), ("searches", "question")):
        problem = objects(key, named)
        if problem:
            return problem
    if not all(isinstance(x.get("verdict"), str) and isinstance(x.get("why", ""), str)
               for x in data.get("settings") or []):
        return "each entry of 'settings' needs a string 'verdict' (and 'why', if any)"
    runs = data.get("runs")
    if runs is not None and not (isinstance(runs, Mapping) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for v in runs.values())):
        return "'runs' must be null or an object of whole numbers >= 0"
    premise = data.get("premise")
    if premise is not None and not (isinstance(premise, Mapping)
                                    and isinstance(premise.get("status"), str)
                                    and isinstance(premise.get("effect", ""), str)):
        return "'premise' must be null or an object with a string 'status'"
    stab = data.get("stability")
    if stab is not None:
        def count(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool) and x >= 0

        if not (isinstance(stab, Mapping)
                and all(count(stab[k]) for k in ("loo_agree", "loo_total") if k in stab)
                and stab.get("loo_agree", 0) <= stab.get("loo_total", 0)
                and stab.get("loo_total", 0) <= len(data.get("seeds") or ())
                and all(stab.get(k) is None or (is_num(stab[k]) and stab[k] >= 0)
                        for k in ("flip", "resolution"))
                and isinstance(stab.get("unit", ""), str)
                and isinstance(stab.get("flip_part", ""), (str, type(None)))):
            return ("'stability' must be null or an object with whole-number counts "
                    "(loo_agree <= loo_total <= the report's seeds), flip and resolution "
                    "numbers >= 0 or null, and string unit and flip_part")
    return None


# ------------------------------------------------------------------------- rendering
def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if float(x).is_integer() and 1000 <= abs(x) < 1e15:  # counts, bytes: exact
            return f"{int(x):,}"
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.{digits}g}"
        return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:,.{digits}f}".rstrip("0").rstrip(".")
    return str(x).replace("|", "\\|").replace("\n", " ")


def _table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    columns = list(columns)
    out = ["| " + " | ".join(_fmt(c) for c in columns) + " |",
           "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _level(level: Any) -> str:
    """An interval's coverage as a percentage to four significant digits (0.9953 ->
    "99.53%", not a rounded "100%"; 0.95 -> "95%"); "" when the report gives none."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not level \
            or not math.isfinite(level):
        return ""
    return f"{100 * float(level):.4g}%"


#: How an interval method reads in a report: the two Hall intervals of one paired
#: difference differ (the three-way rule widens its own for skewness), so each says which
#: it is and which one decides.
METHOD_LABELS = {"hall": "Hall's t, descriptive",
                 "robust-hall": "Hall's t widened for skewness: the three-way rule's"}

#: what an interval of width zero is shown as: every seed gave the same value (or the
#: same difference), so no method made an interval, whatever the estimate's method says
POINT_TEXT = f"every seed equal: {stats.NO_SPREAD}"


def _is_point(e: Mapping) -> bool:
    low, high = e.get("low"), e.get("high")
    n = e.get("n")
    return isinstance(low, (int, float)) and not isinstance(low, bool) and low == high \
        and isinstance(n, int) and not isinstance(n, bool) and n >= 2  # seeds, all equal


def _method_label(method: Any) -> str:
    return METHOD_LABELS.get(str(method or ""), str(method or ""))


def _ci(e: Mapping) -> str:
    """``[low, high] (level, method)``: an interval labelled with its coverage and the
    method that made it, so two intervals of one number (the rule's and a robust one) are
    never read as the same; "" without bounds."""
    if e.get("low") is None or e.get("high") is None:
        return ""
    if _is_point(e):
        return f"({POINT_TEXT})"
    label = ", ".join(x for x in (_level(e.get("level")), _method_label(e.get("method")))
                      if x)
    return f"[{_fmt(e['low'])}, {_fmt(e['high'])}]" + (f" ({label})" if label else "")


def _estimate_rows(estimates: list[Mapping]) -> list[list]:
    rows = []
    for e in estimates:
        if e.get("low") is None and e.get("high") is None:
            # a bare dash read as "no spread" where the values did vary: say which
            method = str(e.get("method") or "")
            interval = ("exact" if method == "exact" else
                        stats.NO_SPREAD if "no spread" in method else
                        "none computed")
        elif _is_point(e):
            rows.append([f"`{e['name']}`", e["value"], f"— ({POINT_TEXT})", e.get("n"), "—",
                         e.get("description", "")])
            continue
        else:
            level = _level(e.get("level"))
            interval = (f"[{_fmt(e['low'])}, {_fmt(e['high'])}]"
                        + (f" ({level})" if level else ""))
        rows.append([f"`{e['name']}`", e["value"], interval, e.get("n"),
                     _method_label(e.get("method", "")), e.get("description", "")])
    return rows


def _kind(p: Mapping) -> str:
    return p.get("kind", "experiment")


def _flip_cell(p: Mapping) -> str:
    if p.get("flip") is None:
        return "—"
    unit = f" {p['unit']}" if p.get("unit") else ""
    res = p.get("resolution")
    steps = f" ({p['flip'] / res:.1f} test examples)" if res else ""
    return f"{_fmt(p['flip'], 3)}{unit}{steps}"


def _premise_status(data: Mapping | None) -> str | None:
    """The status of a report's premise (None where it has none that reads)."""
    p = data.get("premise") if isinstance(data, Mapping) else None
    return p.get("status") if isinstance(p, Mapping) and isinstance(p.get("status"), str) \
        else None


def _stability_line(stab: Mapping, data: Mapping | None = None) -> str:
    """One line: leave-one-seed-out agreement and the flip distance of the verdict
    (``data``: the report, to tell an exact computation from fixed seeded draws)."""
    bits = []
    if stab.get("loo_total"):
        moved = [f"`{qid}` in {a} of {t}" for qid, (a, t, *_) in
                 _question_loo(stab).items() if a < t]
        prem = _premise_loo(stab, _premise_status(data))
        prem_txt = (f"; the premise holds in {prem.agree} of {prem.total}, see the premise line"
                    if prem and prem.fragile else "")
        bits.append(f"leave-one-seed-out: {stab['loo_agree']} of {stab['loo_total']} subsets "
                    f"give the same verdict" + (
                        f" (the questions' own answers hold in fewer: {', '.join(moved)}, "
                        f"listed under the questions' table{prem_txt})" if moved else
                        f" ({prem_txt[2:]})" if prem_txt else ""))
    if stab.get("flip") is not None:
        unit = f" {stab['unit']}" if stab.get("unit") else ""
        res = stab.get("resolution")
        steps = f", {stab['flip'] / res:.1f} times the metric's resolution {_fmt(res, 3)}" \
            if res else ""
        if res and stab["flip"] / res <= 1:  # the metric moves in steps: one is enough
            steps += " (one step of it flips the test)"
        bits.append(f"moving one seed's metric by {_fmt(stab['flip'], 3)}{unit} would flip "
                    f"the decisive test of `{stab.get('flip_part')}`{steps}")
    if not bits and data is not None and _has_experiment(data):
        return ("Stability: no seeds to leave out: the experiment parts run fixed seeded "
                "draws inside one unit, so their sampling error is in their own rules' "
                "intervals, not here.")
    if not bits:
        return "Stability: not applicable (an exact computation)."
    label = "fragile" if stab.get("fragile") else "stable"
    if label == "stable" and stab.get("flip") is not None and not stab.get("resolution"):
        # the flip half of the test needs the metric's resolution (test examples): with
        # none, "stable" rests on the left-out seeds alone
        label = ("stable by leave-one-seed-out; the flip distance is not judged: its "
                 "metric has no resolution in test examples")
    return f"Stability ({label}): " + "; ".join(bits) + "."


def _inert(obj: Any, pipes: bool = False) -> Any:
    """Every string of report data, keys included (a config key is printed), as inert
    markdown (``safeio.md_text``: no raw HTML, no heading or list started by a field, no
    control characters), pipes left to the table writer (``pipes``: kept escaped, for
    data that other code puts in its own tables); numbers and structure unchanged. Report
    JSON comes from elsewhere."""
    if isinstance(obj, str):
        text = safeio.md_text(obj)
        return text if pipes else text.replace("\\|", "|")
    if isinstance(obj, Mapping):
        return {_inert(k, pipes): _inert(v, pipes) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_inert(v, pipes) for v in obj]
    return obj


def render_markdown(data: Mapping, figure_dir: str | None = None) -> str:
    """The markdown report, from the JSON data alone (every string made inert first)."""
    validate(data)
    qs = _questions_of(data)  # from the data as read: each string made inert once
    # regime.markdown writes its own tables: its pipes stay escaped
    maps = _inert(data.get("regime_maps"), pipes=True)
    data = _inert(data)
    paper = data["paper"]
    env = data["environment"]
    lines = [f"# {data['id']}: {data.get('title', '')}", ""]
    lock = data.get("locked_verdict")
    lock_txt = f" (locked: {lock})" if lock else " (no lock at this scale and these seeds)"
    if data.get("tuning_run"):
        lines += ["**Tuning run** (seeds reserved for choosing settings): this is a pilot, "
                  "not a verdict; no lock is written from it.", ""]
    lines += question_section(data, lock_txt, qs)
    lines += findings_section(data)
    premise = data.get("premise")
    if premise:
        est = premise.get("estimate") or {}
        ci = _ci(est)
        ci = "" if not ci else f" {ci}" if _is_point(est) else f", CI {ci}"
        # which estimate: a premise decided per setting shows one setting's (FedTLU: the
        # noisy one's), and the name says which
        name = (f" (`{est['name']}`)" if isinstance(est.get("name"), str) and est["name"]
                else "")
        val = f": {_fmt(est['value'])}{name}{ci}" if est else ""
        leans = (f" ({verdict.PREMISE_AGAINST.removeprefix(', ')})"
                 if _leans_against(premise) else "")
        prem_loo = _premise_loo_text(data.get("stability"), premise["status"])
        prem_loo = f" With one seed left out: {prem_loo}." if prem_loo else ""
        reason = str(premise.get("reason", "")).rstrip()
        reason += "." if reason and reason[-1] not in ".!?" else ""
        lines += [f"**Premise** (the paper's own effect, measured first): {premise['effect']}"
                  f"{val} — **{premise['status']}**{leans}. {reason}{prem_loo} "
                  "The premise gates only the parts that explain the paper's effect (marked "
                  "*gated* below); a proof, an exact count or a byte count never depends on it.", ""]
    stab = data.get("stability")
    if stab:
        lines += [_stability_line(stab, data), ""]
    split = settings_line(data.get("settings"))
    if split:
        lines += [split, ""]
    looks = data.get("looks") or []
    if looks:
        last = looks[-1]
        lines += [f"Sequential seeds: stopped at look {last['look']} of the plan, n = "
                  f"{last['n']} seeds "
                  f"({_stop_text(last, (data.get('plan') or {}).get('looks'))}).", ""]
    lines += [f"Paper: {paper['short']}, arXiv {paper['arxiv_id']}v{paper['version']} "
              f"({paper['title']}). Reviewer's claim (our paraphrase of "
              f"`{data['record']['file']}`, fields "
              f"{', '.join('`' + f + '`' for f in data['record']['fields'])}): "
              f"{data['statement']}", ""]
    if data.get("needs") and not data.get("questions"):
        lines += [f"What would decide it: {data['needs']}", ""]

    lines += ["## Verdict by part", ""]
    lines += [_table(["part", "kind", "verdict", "reachable", "flip distance", "how it decided"],
                     [[p["id"], _kind(p) + (", gated" if p.get("gated") else ""),
                       # a measurement carries no verdict (its stored outcome is a
                       # placeholder): MEASURED, as its question reads
                       "MEASURED" if p.get("kind") == "measurement" else
                       f"**{p['verdict']}**" + (" (fragile)" if p.get("fragile") else ""),
                       "—" if p.get("kind") == "measurement" else
                       ", ".join(p.get("reachable", [])), _flip_cell(p), p.get("reason", "")]
                      for p in data["parts"]]), ""]
    if any(p.get("kind") == "derivation" for p in data["parts"]):
        lines += ["A part of kind *derivation* is mathematics (a theorem, an identity, an "
                  "exact count): its verdict is a proof or an exact computation, not an "
                  "experiment, and more seeds cannot move it. A *measurement* reports a "
                  "number for which no threshold independent of the results exists; it "
                  "carries no verdict.", ""]
    lines += [f"Combination rule: {data['rule']}", ""]
    if looks:
        lines += ["## Sequential looks", ""]
        if data.get("plan"):
            lines += [f"Plan: {data['plan'].get('describe', '')}.", ""]
        part_ids = [p["id"] for p in data["parts"]]
        measured = {p["id"] for p in data["parts"] if p.get("kind") == "measurement"}

        def cell(lk, i):  # a measurement carries no verdict at any look
            word = lk.get("parts", {}).get(i, "")
            return "MEASURED" if i in measured and word else word

        has_premise = any(lk.get("premise") for lk in looks)
        lines += [_table(["look", "n", "alpha share", "verdict"]
                         + (["premise"] if has_premise else []) + part_ids,
                         [[lk["look"], lk["n"], _fmt(lk["alpha_fraction"], 3),
                           lk["verdict"] + (" (stop)" if lk.get("stopped") else "")]
                          + ([lk.get("premise") or ""] if has_premise else [])
                          + [cell(lk, i) for i in part_ids]
                          for lk in looks]), ""]

    if data.get("paper_numbers"):
        ours = {e["name"]: e for e in data["estimates"]}
        rows = []
        for p in data["paper_numbers"]:
            o = ours.get(p.get("ours") or "")
            rows.append([p["name"], p["value"], p["where"],
                         f"`{p['ours']}` = {_fmt(o['value'])}" if o else
                         (p.get("ours") or "—")])
        caption = ("Left: as reported by the paper (not computed here). Right: ours, at "
                   f"`{data['scale']}` scale")
        if data["scale"] != "paper":
            caption += (", whose data set and model are smaller than the paper's: compare "
                        "directions and gaps, not levels")
        lines += ["## The paper's numbers beside ours", "", caption + ".", "",
                  _table(["quantity", "paper's value", "where in the paper", "ours"], rows),
                  ""]

    lines += ["## Arms", ""]
    lines += [_table(["arm", "what it is", "differs from the printed method in"],
                     [[f"`{a['name']}`", a["description"], a["differs"]]
                      for a in data.get("arm_details", [])]), ""]

    lines += ["## Estimates", ""]
    lines += [_table(["estimate", "value", "interval", "n", "method", "what"],
                     _estimate_rows(data["estimates"])), ""]

    for t in data.get("tables", []):
        lines += [f"### {t['title']}", "", _table(t["columns"], t["rows"]), ""]
        if t.get("note"):
            lines += [t["note"], ""]

    if data.get("figures"):
        lines += ["## Figures", ""]
        for f in data["figures"]:
            rel = f"{figure_dir or data['id']}/{f['name']}.png"
            lines += [f"![{f['title']}]({rel})", ""]
            if f.get("caption"):
                lines += [f"*{f['caption']}*", ""]

    if data.get("notes"):
        lines += ["## What this shows, and what it does not", ""]
        lines += _notes_caveat(data)
        for n in data["notes"]:
            lines += [n, ""]

    lines += ["## How the settings were chosen", ""]
    searches = [x for x in data.get("searches") or [] if isinstance(x, Mapping)]
    if searches:
        from audit.tuning import Search

        for x in searches:
            try:
                lines += [Search(**{k: (tuple(v) if isinstance(v, list) else v)
                                    for k, v in x.items()}).markdown()]
            except (TypeError, AuditError) as exc:
                lines += [f"- (unreadable search record: {exc})"]
        lines += [""]
    else:
        lines += ["No search over settings is recorded for this scale: its settings are "
                  "the stated choices in the claim's code (see the config below).", ""]
    if maps:
        from audit import regime

        problem = regime.shape_problem({"schema": regime.SCHEMA, "id": data["id"],
                                        "maps": maps}, data["id"])
        lines += ([f"(An unreadable regime map: {problem}.)", ""] if problem else
                  regime.markdown(maps, f"{figure_dir or data['id']}/{regime.FIGURE}"))
    lines += ["## Decision rules (fixed in code before the run)", ""]
    for p in data["parts"]:
        lines += [f"- **{p['id']}**: {p['rule']}"]
    lines += ["", "## Reproduce", ""]
    seeds, runs = data["seeds"], data.get("runs") or {}
    lines += [f"- Seeds: {seeds if seeds else 'none (exact computation)'}",
              f"- Scale: `{data['scale']}`; config: `{json.dumps(data.get('config', {}), sort_keys=True)}`",
              f"- Environment: python {env.get('python')}, torch {env.get('torch')}, "
              f"numpy {env.get('numpy')}, device {env.get('device')}"
              + (f" ({env['cpu']})" if env.get("cpu") else "") + ", commit "
              f"`{env.get('commit')}`, code `{env.get('code_version')}`"
              + (f" (the claim's runs: `{env['claim_code_version']}`)"
                 if env.get("claim_code_version") else "") + f", {env.get('date')}"
              + (f"; units ran {env['backend']}" + (
                  f", the main process with {env.get('torch_threads')} torch threads"
                  if env.get("torch_threads") else "") if env.get("backend") else ""),
              f"- Runtime: {data['runtime_s']:.1f} s "
              f"({runs.get('computed', '?')} runs computed, {runs.get('cached', '?')} from "
              f"cache" + (f", {runs['cached_elsewhere']} of them computed on another or an "
                          f"unrecorded machine" if runs.get("cached_elsewhere") else "") + ")",
              f"- Command: `{data['command']}`", ""]
    return "\n".join(lines)


#: the most characters of a ``basis`` a page prints beside a word (the project's own are
#: under 200); a longer one, from a report written elsewhere, is cut with an ellipsis, so
#: one field cannot fill every table it appears in
BASIS_MAX = 300


def _basis(v: Any) -> Any:
    return v[:BASIS_MAX - 1].rstrip() + "…" if isinstance(v, str) and len(v) > BASIS_MAX \
        else v


def report_questions(data: Mapping, claim=None) -> list[dict]:
    """``audit.questions.of_report`` of a report read from elsewhere: a part's ``basis``
    that is no string is dropped first (a question derived from an older report's parts
    would print it, as ``str`` of a list or a number, beside its word; a question's own
    ``basis`` that is no string is ignored by ``questions.gated_text``), and a part's or a
    question's ``basis`` longer than :data:`BASIS_MAX` characters is cut to it."""
    from audit import questions

    parts = data.get("parts")
    if isinstance(parts, list):
        data = {**data, "parts": [
            {k: _basis(v) if k == "basis" else v for k, v in p.items()
             if k != "basis" or isinstance(v, str)}
            if isinstance(p, Mapping) else p for p in parts]}
    return [{**q, "basis": _basis(q["basis"])} if isinstance(q.get("basis"), str) else q
            for q in questions.of_report(data, claim)]


def _questions_of(data: Mapping) -> list[Mapping]:
    """The report's questions (``audit.questions.of_report``: derived from its parts,
    and marked so, for a report written before questions existed)."""
    from audit import claims as claims_mod

    claim = None
    if not data.get("questions"):
        try:
            claim = claims_mod.registry().get(str(data.get("id")))
        except AuditError:
            claim = None
    return [_inert(q) for q in report_questions(data, claim)]


def question_section(data: Mapping, lock_txt: str = "",
                     qs: list[Mapping] | None = None) -> list[str]:
    """The report's opening: the claim's single word (SPLIT when its questions differ)
    and the table of questions, each with its own verdict, kind, scale and record fields;
    sweep settings as rows of their question. ``qs``: the questions, made inert from the
    data as read (:func:`_questions_of`); inerting the inert ``data`` again would show
    ``&gt;`` as ``&amp;gt;``."""
    from audit import questions

    qs = _questions_of(data) if qs is None else qs
    fragile = " — **fragile**" if data.get("fragile") else ""
    word = data["verdict"]
    if not qs:
        return [f"**Verdict on the reviewer's claim: {word}**{lock_txt} at "
                f"`{data['scale']}` scale{fragile}.", ""]
    voting = [q for q in qs if q.get("kind") != "measurement"]
    frail = _fragile_in(data.get("parts"), qs, data.get("stability"))
    if fragile and frail:  # the word is fragile through these questions: named
        prem = _premise_loo(data.get("stability"), _premise_status(data))
        gated = any(q.get("gated") is True for q in voting if q["id"] in frail)
        fragile = (" — **fragile** (through "
                   + ", ".join(f"`{q['id']}`" for q in voting if q["id"] in frail)
                   + (f"; the premise they rest on holds in {prem.agree} of {prem.total} "
                      f"leave-one-seed-out subsets" if prem and prem.fragile and gated else "")
                   + ")")
    ways = "; ".join(f"`{q['id']}` {q['verdict']} ({q.get('kind', '')}"
                     + (", fragile" if q["id"] in frail else "") + ")" for q in voting)
    caveats = [f"`{q['id']}`: {q['caveat']}" for q in qs
               if q.get("caveat") and not q.get("derived")]
    head = (f"**{word}**{lock_txt} at `{data['scale']}` scale{fragile}: "
            + (f"the questions went different ways ({ways})." if word == "SPLIT" else
               f"every question agrees ({ways})."))
    out = ["## The reviewer's questions, one verdict each", "", head, ""]
    if any(q.get("derived") for q in qs):
        out += ["**An older report**: it was written before claims declared their questions; "
                "the questions below are derived from its stored part verdicts (decided "
                "under the rules of its own commit), and those whose parts it never ran "
                "are left out. Its single word above is the one it was written with.", ""]
    if caveats:
        out += ["**Read with care**: " + "; ".join(caveats) + ".", ""]
    rows = []
    for q in qs:
        fields = ", ".join(f"`{f}`" for f in q.get("fields", []))
        decide = q.get("needs", "") if q.get("verdict") == "INCONCLUSIVE" else ""
        kind = str(q.get("kind", "")) + (", gated by the premise" if q.get("gated") is True
                                         else "")
        rows.append([f"`{q['id']}`: {q.get('asks', '')}", kind,
                     f"**{q['verdict']}**" + (_fragile_note(q, data.get("stability"),
                                                            _premise_status(data))
                                              if q["id"] in frail else "")
                     + (" (settings split)" if q.get("settings_split") else "")
                     + questions.gated_suffix(str(q.get("verdict")), q.get("ungated"),
                                              q.get("basis")),
                     data["scale"], fields or "—",
                     ", ".join(f"`{p}`" for p in q.get("parts", [])), decide or "—"])
        for r in q.get("rows", []):
            if r.get("base"):
                continue
            rows.append([f"↳ at {r.get('setting')}", q.get("kind", ""),
                         str(r.get("verdict")), data["scale"], "", "(sweep, same rule)",
                         r.get("note", "") or "—"])
    out += [_table(["question (our words)", "kind", "verdict", "scale", "record fields",
                    "decided by", "what would decide it"], rows), ""]
    loo = _question_loo_line(data.get("stability"), qs)
    if loo:
        out += [loo, ""]
    return out


def findings_section(data: Mapping) -> list[str]:
    """What the evidence shows, in words, with the estimates behind each finding."""
    found = [f for f in data.get("findings") or [] if isinstance(f, Mapping)]
    if not found:
        return []
    by_name = {e.get("name"): e for e in data.get("estimates", []) if isinstance(e, Mapping)}
    out = ["## Findings", "",
           "The intervals here describe each estimate at the level and by the method "
           "shown. They are not the decisions: a part is decided by its own rule's "
           "interval, printed in its reason in the parts table, often wider (the rule's "
           "share of alpha, and for the three-way rule a skewness allowance).", ""]
    for f in found:
        bits = []
        for name in f.get("estimates", []):
            e = by_name.get(name)
            if not e:
                continue
            ci = _ci(e)
            bits.append(f"`{name}` = {_fmt(e.get('value'))}" + (f" {ci}" if ci else ""))
        out += [f"- {f['text']}" + (f" ({'; '.join(bits)})" if bits else "")]
    return out + [""]


def render_figures(data: Mapping, out_dir: Path) -> list[Path]:
    """Draw each figure of the report as ``out_dir/<id>/<name>.png`` (all drawn in memory
    first, then each file replaced atomically; names checked, nothing outside out_dir)."""
    drawn = draw_figures(data, out_dir)
    if drawn:
        safeio.make_dir(out_dir, Path(out_dir) / data["id"])
    for path, png in drawn:
        safeio.atomic_write(path, png)
    return [path for path, _ in drawn]


def draw_figures(data: Mapping, out_dir: Path) -> list[tuple[Path, bytes]]:
    """Each figure of the report as (its path ``out_dir/<id>/<name>.png``, PNG bytes)."""
    if not data.get("figures"):
        return []
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = f"report {data.get('id')!r}"
    fig_dir = Path(out_dir) / safeio.check_name(data["id"], "id", source)
    for f in data["figures"]:
        safeio.check_name(f.get("name") if isinstance(f, Mapping) else f, "figure name",
                          source)
        for s in f.get("series") or () if isinstance(f, Mapping) else ():
            bins = s.get("bins", 30) if isinstance(s, Mapping) else 30
            if not (isinstance(bins, int) and not isinstance(bins, bool)
                    and 1 <= bins <= MAX_BINS):  # bins=10**9 would allocate gigabytes
                raise AuditError(f"{source}: figure {f.get('name')!r} asks for "
                                 f"{safeio.term_text(repr(bins))[:40]} histogram bins; "
                                 f"expected a whole number from 1 to {MAX_BINS}")
    paths = []
    with warnings.catch_warnings():  # the data came from a file: what matplotlib says of
        warnings.simplefilter("ignore")  # it (a glyph its font lacks, a log axis with no
        for f in data["figures"]:  # positive value) is no line for the terminal
            fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
            kind = f.get("kind", "line")
            for s in f["series"]:
                # strict JSON carries a missing point as null: plot it as a gap
                s = {k: ([math.nan if v is None else v for v in val]
                         if isinstance(val, list) else val) for k, val in s.items()}
                if kind == "hist":
                    s["y"] = [v for v in s["y"] if math.isfinite(v)]
                    ax.hist(s["y"], bins=s.get("bins", 30), alpha=0.6, label=s["label"])
                elif kind == "bar":
                    ax.bar(s["x"], s["y"], label=s["label"], alpha=0.8)
                    if s.get("low") is not None:
                        err = [[y - lo for y, lo in zip(s["y"], s["low"])],
                               [hi - y for y, hi in zip(s["y"], s["high"])]]
                        ax.errorbar(s["x"], s["y"], yerr=err, fmt="none", ecolor="k")
                else:
                    (line,) = ax.plot(s["x"], s["y"], label=s["label"], lw=1.5)
                    if s.get("low") is not None and s.get("high") is not None:
                        ax.fill_between(s["x"], s["low"], s["high"], alpha=0.2,
                                        color=line.get_color(), lw=0)
            if f.get("logy"):
                ax.set_yscale("log")
            ax.set_title(f["title"], fontsize=10)
            ax.set_xlabel(f["xlabel"])
            ax.set_ylabel(f["ylabel"])
            if len(f["series"]) > 1:
                ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
            fig.tight_layout()  # long titles: a cramped layout is not an error
            path = safeio.inside(out_dir, fig_dir / f"{f['name']}.png")
            png = io.BytesIO()
            fig.savefig(png, format="png", metadata={"Software": None})
            plt.close(fig)
            paths.append((path, png.getvalue()))
    return paths


#: The most histogram bins a report's figure may ask for (``bins`` of a series).
MAX_BINS = 1000


# --------------------------------------------------------------------------- writing
def check_writable(out_dir: Path) -> None:
    """Refuse, before any work, an output folder that cannot be created and written."""
    out_dir = Path(out_dir)
    target = out_dir if out_dir.exists() else out_dir.parent
    if out_dir.exists() and not out_dir.is_dir():
        raise AuditError(f"output path {str(out_dir)!r} exists and is not a directory")
    if not target.exists():
        raise AuditError(f"output directory {str(out_dir)!r} cannot be created: "
                         f"{str(target)!r} does not exist")
    if not os.access(target, os.W_OK):
        raise AuditError(f"output directory {str(out_dir)!r} is not writable")
    safeio.probe_dir(out_dir)  # os.access says yes to root and to some mounts: try it


def _atomic_write(path: Path, text: str) -> None:
    safeio.atomic_write(path, text)


def write(result: ClaimResult, out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    data = to_json(result)
    write_data(data, out_dir)
    return data


def write_data(data: Mapping, out_dir: Path, source: str | None = None) -> None:
    """Write ``<id>.json``, ``<id>.md`` and the figures ``<id>/<name>.png`` of one report.

    The id and figure names must be safe names and every path must lie inside
    ``out_dir``; everything is rendered in memory before the first file is replaced, and
    each file is replaced atomically without following a symlink. ``source`` names the
    file the data was read from: a report that cannot be rendered is then one AuditError.
    """
    write_rendered(rendered(data, out_dir, source))


def rendered(data: Mapping, out_dir: Path, source: str | None = None) -> tuple:
    """One report rendered in memory, nothing written: what :func:`write_rendered`
    writes. Rendering every report first lets a command that rewrites several write none
    when one of them cannot be rendered."""
    out_dir = Path(out_dir)
    where = source or "report"
    if not isinstance(data, Mapping):
        raise AuditError(f"{where} is not a JSON object")
    cid = safeio.check_name(data.get("id"), "id", where)
    json_path = safeio.inside(out_dir, out_dir / f"{cid}.json")
    md_path = safeio.inside(out_dir, out_dir / f"{cid}.md")
    from audit import regime

    maps = regime.read(out_dir, cid)  # the map run for this claim into this folder
    maps = [m for m in maps or [] if m["declared"].get("scale") == data.get("scale")]
    if maps:
        data = {**data, "regime_maps": maps}
    try:
        data = strict_json(data)
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
        if len(text.encode("utf-8")) > safeio.MAX_JSON_BYTES:  # never one load() refuses
            raise AuditError(f"{where} would be written as more than "
                             f"{safeio.MAX_JSON_BYTES >> 20} MiB of JSON, which audit then "
                             "refuses to read; nothing written")
        md = render_markdown(data)
        figures = draw_figures(data, out_dir)
    except AuditError:
        raise
    except Exception as exc:  # data read from a file: any shape error is the file's
        if source is None:
            raise
        import matplotlib.pyplot as plt

        plt.close("all")
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise AuditError(f"{source} is not a report that can be rendered ({detail})"
                         ) from None
    return out_dir, cid, figures, (json_path, text), (md_path, md)


def write_rendered(done: tuple) -> None:
    """Write one report that :func:`rendered` made."""
    out_dir, cid, figures, (json_path, text), (md_path, md) = done
    if figures:
        safeio.make_dir(out_dir, out_dir / cid)
    for path, png in figures:
        safeio.atomic_write(path, png)
    _atomic_write(json_path, text)
    _atomic_write(md_path, md)


def read(path: Path) -> dict:
    """The report at ``path``, read and checked: a file that is not a report is one
    AuditError naming it."""
    data = safeio.read_json(path, "report")
    if not isinstance(data, dict):
        raise AuditError(f"report {path} is not a JSON object (got {type(data).__name__})")
    validate(data, str(path))
    return data


def load(out_dir: Path, claim_id: str) -> dict | None:
    """``out_dir/<claim_id>.json`` read and checked (None when absent); a file that is not
    a report of that claim is one AuditError naming it."""
    path = Path(out_dir) / f"{claim_id}.json"
    if not path.exists():
        return None
    data = read(path)
    if data["id"] != claim_id:
        raise AuditError(f"report {path} has id {data['id']!r}, not {claim_id!r}")
    return data


#: what ``compare`` reads as a run's evidence and decisions, and the field that names each
#: item of a list (matched by it, not by position); everything else is presentation
#: (tables, figures, notes, texts) or volatile (environment, runtime, cache counts)
DECISIVE_KEYS = {"scale": "", "seeds": "", "config": "", "plan": "", "looks": "look",
                 "verdict": "", "parts": "id", "questions": "id", "premise": "",
                 "estimates": "name", "settings": "setting", "stability": ""}
_VOLATILE = ("environment", "runtime_s", "command", "runs")
# a number as printed in a text (a reason, a rule, a description)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _num_differs(a: Any, b: Any, rtol: float, atol: float, ulp: float = 0.0) -> bool:
    """Two JSON values differ: numbers beyond ``atol + rtol x the larger magnitude`` (and
    ``ulp``, one unit in the last printed place of a number read from a text); an
    infinity equals only itself, NaN only NaN; integers, booleans, text and None exactly
    (a boolean never equals a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is not type(b) or a != b
    if not all(isinstance(x, (int, float)) for x in (a, b)):
        return a != b
    if isinstance(a, int) and isinstance(b, int):
        return a != b
    if math.isnan(a) or math.isnan(b):
        return not (math.isnan(a) and math.isnan(b))
    if math.isinf(a) or math.isinf(b):
        return a != b
    return abs(a - b) > max(atol + rtol * max(abs(a), abs(b)), ulp * (1 + 1e-9))


def _text_differs(a: str, b: str, rtol: float, atol: float) -> bool:
    """Two texts differ: exactly when no tolerance is given; else in any word, or in any
    number they print beyond the tolerance or one unit in its last printed place (a
    rounded number may move by that much with the value under it)."""
    if a == b:
        return False
    if not (rtol or atol):
        return True
    na, nb = _NUMBER.findall(a), _NUMBER.findall(b)
    if _NUMBER.split(a) != _NUMBER.split(b) or len(na) != len(nb):
        return True

    def ulp(t: str) -> float:
        mant = t.lower().split("e")[0]
        places = len(mant.split(".")[1]) if "." in mant else 0
        exp = int(t.lower().split("e")[1]) if "e" in t.lower() else 0
        return 10.0 ** max(-300, min(300, exp - places))

    def differs(x: str, y: str) -> bool:
        fx, fy = float(x), float(y)
        if not (math.isfinite(fx) and math.isfinite(fy)):
            return x != y  # a number past float's range is compared as written
        return _num_differs(fx, fy, rtol, atol, max(ulp(x), ulp(y)))

    try:
        return any(differs(x, y) for x, y in zip(na, nb))
    except (OverflowError, ValueError):  # an exponent of thousands of digits: as text
        return a != b


def _key(k: Any) -> str:
    """A field name as a path step: printable, at most 60 characters."""
    t = safeio.term_text(str(k))
    return t if len(t) <= 60 else t[:57] + "..."


_LINE = object()  # _walk's marker of a difference line queued on its stack


def _walk(a: Any, b: Any, path: str, tol: tuple[float, float], out: list[str],
          limit: int) -> None:
    """Append to ``out`` every difference between ``a`` and ``b`` under ``path``, depth
    first, at most ``limit`` lines. With an explicit stack, not recursion: a report nested
    as deep as the JSON reader allows is compared, not a RecursionError."""
    stack = [(a, b, path)]
    while stack and len(out) < limit:
        a, b, path = stack.pop()
        if a is _LINE:  # a line queued below, written in its place in the order
            out.append(path)
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            todo = []
            for k in sorted(set(a) | set(b), key=str):
                if k not in a or k not in b:
                    todo.append((_LINE, None, f"{path}.{_key(k)}: only in "
                                 f"{'the second' if k not in a else 'the first'}"))
                else:
                    todo.append((a[k], b[k], f"{path}.{_key(k)}"))
            stack.extend(reversed(todo))
        elif isinstance(a, list) and isinstance(b, list):
            todo = [(_LINE, None, f"{path}: {len(a)} items != {len(b)}")] \
                if len(a) != len(b) else []
            todo += [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
            stack.extend(reversed(todo))
        elif (_text_differs(a, b, *tol) if isinstance(a, str) and isinstance(b, str)
              else _num_differs(a, b, *tol)):
            a_txt, b_txt = str(a), str(b)
            if isinstance(a, str) and isinstance(b, str):  # from the first differing character
                i = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y),
                         min(len(a), len(b)))
                cut = max(0, i - 20)
                a_txt, b_txt = (("..." if cut else "") + t[cut:cut + 80] for t in (a, b))
            out.append(f"{path}: {safeio.term_text(a_txt)[:90]} != "
                       f"{safeio.term_text(b_txt)[:90]}")


def _keyed(items: Any, key: str) -> Any:
    """A list of objects named by their ``key`` field (estimates by name, parts and
    questions by id, settings by setting, looks by number) as a mapping, so that an added
    or reordered item reads as what it is; a name that repeats is told apart by its
    occurrence (``name#2``). Anything else as given."""
    if not key or not isinstance(items, list) or not all(
            isinstance(x, Mapping) and isinstance(x.get(key), (str, int))
            and not isinstance(x.get(key), bool) for x in items):
        return items
    out, seen = {}, {}
    taken = {str(x[key]) for x in items}  # a later "name#2" of its own is never overwritten
    for x in items:
        name = str(x[key])
        seen[name] = seen.get(name, 0) + 1
        label = name
        if seen[name] > 1:
            k = seen[name]
            while f"{name}#{k}" in taken or f"{name}#{k}" in out:
                k += 1
            label = f"{name}#{k}"
            taken.add(label)
        out[label] = x
    return out


#: the most differences :func:`compare` lists
COMPARE_LIMIT = 200


def compare(first: Mapping, second: Mapping, rtol: float = 0.0, atol: float = 0.0,
            limit: int = COMPARE_LIMIT) -> tuple[list[str], int]:
    """How two reports of one claim differ: (the differences in what decides, at most
    ``limit`` of them, each a path and the two values; the count of the other top-level
    fields that differ: presentation). What decides (:data:`DECISIVE_KEYS`): scale,
    seeds, config and sequential plan, every look, the claim's word, every part and
    question (verdict, reason, flip distance), the premise, every estimate (value,
    interval, n, method), every setting's verdict and the stability check. Numbers
    compare within ``atol + rtol x magnitude`` (default: exactly), and so do the numbers
    printed in texts (to one unit in their last printed place); everything else exactly.
    Environment, runtime, command and cache counts are volatile and not counted."""
    if first.get("id") != second.get("id"):
        raise AuditError(f"the reports are of different claims: {first.get('id')!r} and "
                         f"{second.get('id')!r}")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if isinstance(tol, bool) or not (isinstance(tol, (int, float)) and math.isfinite(tol)
                                         and tol >= 0):
            raise AuditError(f"{name} must be a finite number >= 0, not {tol!r}")
    out: list[str] = []
    for k, key in DECISIVE_KEYS.items():
        _walk(_keyed(first.get(k), key), _keyed(second.get(k), key), k,
              (float(rtol), float(atol)), out, limit)
    other = sum(first.get(k) != second.get(k) for k in set(first) | set(second)
                if k not in DECISIVE_KEYS and k not in _VOLATILE)
    return out[:limit], other


def _leans_against(premise: Mapping) -> bool:
    """An undecided premise (from a report's JSON) whose estimate lies on the other side of
    its rule's margin (``audit.verdict.Premise.leans``)."""
    return premise.get("status") == "undecided" and premise.get("leans") == "against"


def _searches_flag(data: Mapping, flag: str) -> bool:
    """Whether a search that chose this report's settings is marked ``flag``:
    ``test_metric_read`` (it read a test-set metric, on tuning seeds) or
    ``verdict_seeds_used`` (it read results of the verdict's own seeds). Either way the
    premise measured in that setting may be flattered by the choice."""
    searches = data.get("searches")
    return isinstance(searches, list) and any(
        isinstance(x, Mapping) and x.get(flag) is True for x in searches)


def _premise_cell(data: Mapping, out_dir: Path | None = None, cid: str = "") -> str:
    """The premise's status in ``data``; where the claim's report at another scale (the
    other folder of :func:`scale_folders`) states another, every scale's, side by side
    ("smoke: reproduced; full: not reproduced"), so the row never shows one scale's
    premise as the claim's."""
    def status(d: Mapping) -> str:
        p = d.get("premise")
        if isinstance(p, Mapping) and "status" in p:
            against = _leans_against(p)
            est = p.get("estimate")
            value = est.get("value") if isinstance(est, Mapping) else None
            at = f": {_fmt(value)}" if isinstance(value, (int, float)) and not isinstance(
                value, bool) else ""
            prem = _premise_loo(d.get("stability"), p["status"])
            frail = prem is not None and prem.fragile
            marks = [f"estimate against the effect{at}"] * against + ["fragile"] * frail + [
                "setting chosen on verdict seeds"] * _searches_flag(d, "verdict_seeds_used") + [
                "setting chosen on test data"] * _searches_flag(d, "test_metric_read")
            return str(p["status"]) + (f" ({'; '.join(marks)})" if marks else "")
        # no premise: mathematics only where no part is an experiment (an exact claim may
        # run a fixed simulation, which is no proof)
        return "— (none declared)" if _has_experiment(d) else "— (mathematics)"

    own = status(data)
    if out_dir is None:
        return own
    by_scale = {str(data.get("scale")): own}
    for i, (folder, _) in enumerate(scale_folders(out_dir)):
        if not i or not Path(folder).is_dir():
            continue
        try:  # quietly: the question table below warns about an unreadable report
            other = load(folder, cid)
        except AuditError:
            continue
        if other is None or other.get("tuning_run"):
            continue  # no report there, or no verdict (tuning seeds)
        other = _inert(other)  # its scale is a report's text, as its status
        by_scale.setdefault(str(other.get("scale")), status(other))
    if len(set(by_scale.values())) == 1:
        return own
    return "; ".join(f"{s}: {v}" for s, v in sorted(by_scale.items(),
                                                    key=lambda kv: scale_rank(kv[0])))


def _reachable_cell(data: Mapping) -> str:
    """What each part entering the claim's verdict can return: the parts of its voting
    questions (a part reported beside the verdict, in no question, is left out); every
    non-measurement part for a report without questions."""
    qs = [q for q in data.get("questions") or () if isinstance(q, Mapping)
          and q.get("kind") != "measurement"]
    voting = {str(i) for q in qs for i in q.get("parts") or ()} if qs else None
    cells = []
    for p in data.get("parts", []):
        kind = p.get("kind", "experiment")
        if kind == "measurement" or (voting is not None and str(p.get("id")) not in voting):
            continue
        short = "/".join(o[0] for o in p.get("reachable", ["C", "R", "I"]))
        cells.append(f"{p['id']}: {short}" + (" (proof)" if kind == "derivation" else ""))
    return "; ".join(cells)


def _stability_cell(data: Mapping) -> str:
    st = data.get("stability")
    if not st:
        return "—"
    bits = []
    if st.get("loo_total"):
        # the question a left-out seed moves most, where it is lower than the word's own
        worst = min(((a / t, qid, a, t) for qid, (a, t, *_) in _question_loo(st).items()
                     if a < t), default=None)
        low = [f"question `{worst[1]}` {worst[2]}/{worst[3]}"] if worst and \
            worst[0] < st["loo_agree"] / st["loo_total"] else []
        prem = _premise_loo(st, _premise_status(data))
        low += [f"premise {prem.agree}/{prem.total}"] if prem and prem.fragile else []
        bits.append(f"LOO {st['loo_agree']}/{st['loo_total']}"
                    + (f" ({'; '.join(low)})" if low else ""))
    if st.get("flip") is not None and st.get("resolution"):
        ex = st["flip"] / st["resolution"]
        bits.append(f"flip {ex:.1f} ex." + (" (one flips it)" if ex <= 1 else ""))
    elif st.get("flip") is not None:  # in the metric's own unit, named where known
        unit = f" {st['unit']}" if st.get("unit") else ""
        bits.append(f"flip {_fmt(st['flip'], 3)}{unit}")
    if bits:
        return ", ".join(bits)
    # no seeds: exact where every part is mathematics; an experiment on fixed draws
    # (a seeded simulation inside one unit) has sampling error no seed split can show
    return "fixed draws, no seeds" if _has_experiment(data) else "exact"


def _has_experiment(data: Mapping) -> bool:
    return any(isinstance(p, Mapping) and p.get("kind", "experiment") == "experiment"
               for p in data.get("parts") or ())


def _stop_text(look: Mapping, planned: Any = None) -> str:
    """Why the plan stopped at ``look`` (older reports have no ``stop_reason``);
    ``planned``: the plan's look sizes, whose last is the cap."""
    reason = look.get("stop_reason") or ("decided" if look.get("decided") else "cap")
    at_cap = isinstance(planned, list) and bool(planned) and look.get("n") == planned[-1]
    if reason == "premise not reproduced" and at_cap:
        return ("the cap; there the paper's own effect was decided not reproduced, so every "
                "part still open, which explains it, stays INCONCLUSIVE")
    if reason == "premise not reproduced":
        return ("futility: the paper's own effect was decided not reproduced, and every "
                "part still open explains it")
    return "decided" if reason == "decided" else "the cap"


def _looks_cell(data: Mapping) -> str:
    looks = data.get("looks") or []
    if not looks:
        return ""
    planned = (data.get("plan") or {}).get("looks") if isinstance(data.get("plan"),
                                                                    Mapping) else None
    last = looks[-1]
    if isinstance(planned, list) and len(planned) == 1:
        return " (sequential, one planned look)"
    of = f" of {len(planned)}" if isinstance(planned, list) and planned else ""
    why = _stop_text(last, planned).split(";", 1)[0].split(":", 1)[0]  # its first words
    return f" (sequential, stopped at look {last['look']}{of}: {why})"


#: The order scales are shown in, side by side, on every page (any other scale after them,
#: by name): the index, the coverage table and the question rows read it from here.
SCALE_ORDER = ("smoke", "full", "paper")


def scale_rank(scale: str) -> tuple[int, str]:
    """The sort key of :data:`SCALE_ORDER` for ``scale``."""
    return (SCALE_ORDER.index(scale) if scale in SCALE_ORDER else len(SCALE_ORDER), scale)


def scale_folders(out_dir: Path) -> list[tuple[Path, str]]:
    """(folder, the scale it holds) for :func:`scale_reports`: ``out_dir`` first."""
    out_dir = Path(out_dir)
    if out_dir.name == "full" and (out_dir.parent / safeio.OUTPUT_MARKER).is_file():
        return [(out_dir, "full"), (out_dir.parent, "smoke")]
    return [(out_dir, "smoke"), (out_dir / "full", "full")]


def _scale_link(out_dir: Path, scale: str, cid: str) -> str | None:
    """The relative link from ``out_dir``'s index to ``cid``'s report at ``scale`` in the
    other folder of :func:`scale_folders`, or None (none there, or out_dir's own)."""
    for i, (folder, label) in enumerate(scale_folders(out_dir)):
        if i and label == scale and (Path(folder) / f"{cid}.md").exists():
            return f"{'full/' if label == 'full' else '../'}{cid}.md"
    return None


def scale_reports(out_dir: Path, cid: str,
                  left_out: dict[str, str] | None = None) -> dict[str, Mapping]:
    """The reports of one claim by scale: ``out_dir`` and, beside it, ``out_dir/full``;
    for a folder named ``full`` whose parent is an audit output folder (``reports/full``),
    the parent's reports too, so both indexes show the scales side by side (reading only).
    One that cannot be read, or a tuning run (on tuning seeds: no verdict), is left out:
    a warning line, and in ``left_out`` (folder's scale -> why) where given, so that a
    table can say so instead of showing the other scale's verdict alone."""
    out: dict[str, Mapping] = {}
    for folder, label in scale_folders(out_dir):
        if folder != out_dir and not folder.is_dir():
            continue
        try:
            data = load(folder, cid)
        except AuditError as exc:
            if folder != out_dir:  # the index row of out_dir's own report warns already
                print(f"audit: warning: {safeio.term_text(' '.join(str(exc).split()))}; "
                      "left out of the question table", file=sys.stderr)
            if left_out is not None:
                left_out[label] = "report unreadable"
            continue
        if data is not None and data.get("tuning_run"):
            if left_out is not None:
                left_out[str(data.get("scale"))] = "a tuning run (no verdict)"
            continue
        if data is not None and str(data.get("scale")) not in out:
            out[str(data["scale"])] = data
    return out


def earlier_code(data: Mapping, claim: Claim | None) -> str:
    """"" when the report ``data`` was written by ``claim``'s current code (its runs'
    recorded code version is today's), else the short commit it was written at
    ("unknown" when it records none): its rules and questions are those of that code, so
    a verdict that differs from a current report's may be the code's change, not the
    scale's. A report that records only the whole package's version was written before
    claims' versions were recorded, so by earlier code. "" for a report that records no
    version or a claim not registered here (nothing to compare)."""
    env = data.get("environment") if isinstance(data.get("environment"), Mapping) else {}
    recorded = env.get("claim_code_version")
    if claim is None or not (recorded or env.get("code_version")):
        return ""
    try:  # the run cache's key: the claim's import closure, plus a plugin's own hash
        if recorded == claim_code_version(claim.code_module()) + claim.plugin_version():
            return ""
    except (OSError, SyntaxError, ValueError):
        return ""
    return str(env.get("commit") or "")[:7] or "unknown"


def _fragile_questions(data: Mapping, claim=None) -> set:
    """The ids of the questions of one report decided (CONFIRMED or REFUTED) where one of
    their parts is fragile, or one left-out seed changes their word: the claim's word
    carries "(fragile)" in the index, and so does the question that it comes from."""
    return _fragile_in(data.get("parts"), report_questions(data, claim),
                       data.get("stability"))


def _fragile_in(parts, qs, stability: Any = None) -> set:
    """(Ids read from a report that came from elsewhere: strings only.) ``stability``:
    the report's, whose ``questions`` (:func:`_question_loo`) add the decided questions
    that a left-out seed overturns; a report without it is read by its parts alone."""
    fragile = {p.get("id") for p in parts or ()
               if isinstance(p, Mapping) and p.get("fragile") is True
               and isinstance(p.get("id"), str)}
    loo = _question_loo(stability)
    return {q.get("id") for q in qs if isinstance(q, Mapping)
            and isinstance(q.get("id"), str)
            and q.get("verdict") in ("CONFIRMED", "REFUTED")
            and ((isinstance(q.get("parts"), list)
                  and any(isinstance(pid, str) and pid in fragile for pid in q["parts"]))
                 or (q["id"] in loo and loo[q["id"]][0] < loo[q["id"]][1]))}


def _str_map(obj: Any) -> dict[str, str]:
    """The string -> string entries of ``obj`` (read from a report that came from
    elsewhere); {} for anything else."""
    return {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, str)
            } if isinstance(obj, Mapping) else {}


def _loo_counts(entry: Any) -> tuple[int, int] | None:
    """(agree, total) of a leave-one-seed-out entry from a report: whole numbers with
    0 <= agree <= total and total > 0, and as many subsets in its ``loo`` map as
    ``total`` says (the runner writes both; a count from elsewhere that no map backs,
    10**30 subsets of a 10-seed run, is not printed), else None."""
    if not isinstance(entry, Mapping):
        return None
    agree, total = entry.get("loo_agree"), entry.get("loo_total")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (agree, total)) \
            or not 0 <= agree <= total or total == 0 \
            or not isinstance(entry.get("loo"), Mapping) or len(entry["loo"]) != total:
        return None
    return agree, total


#: a held subset's why (``verdict.HELD_BY_PREMISE``) in the premise line's own words
_HELD_AS = {"not shown": "undecided", "not reproduced": "not reproduced"}
#: how a subset word the premise gate held begins its tag
_HELD_TAG = " (decided, held: premise "


def _subset_word(words: Mapping[str, str], held: Mapping[str, str], seed: str) -> str:
    """A leave-one-seed-out subset's word as printed: the word and, where the premise gate
    held an answer that the comparison had decided, that and the premise's status in the
    premise line's words ("INCONCLUSIVE (decided, held: premise undecided)"); a subset
    whose comparison was undecided on its own has no tag."""
    # only a subset held INCONCLUSIVE has a why, and only the gate's own words are one
    # (``verdict.HELD_BY_PREMISE``): a report from elsewhere names nothing else
    why = held.get(seed)
    # a gate's word this map does not yet know prints as the gate wrote it, never a KeyError
    return words[seed] + (f"{_HELD_TAG}{_HELD_AS.get(why, why)})"
                          if words[seed] == "INCONCLUSIVE"
                          and why in verdict.HELD_BY_PREMISE else "")


def _question_loo(stability: Any) -> dict[str, tuple[int, int, dict, dict]]:
    """Question id -> (subsets that agree, subsets, {seed: word}, {seed: why the premise
    gate held it}) from a report's ``stability["questions"]``; an older report has none
    ({}). Read from a report that came from elsewhere: an entry whose id is no string, or
    whose counts are no whole numbers with 0 <= agree <= total and total > 0, is left
    out; seeds and words that are no strings are dropped from the maps."""
    table = stability.get("questions") if isinstance(stability, Mapping) else None
    if not isinstance(table, Mapping):
        return {}
    out = {}
    for qid, entry in table.items():
        counts = _loo_counts(entry)
        if not isinstance(qid, str) or counts is None:
            continue
        out[qid] = (*counts, _str_map(entry.get("loo")), _str_map(entry.get("held")))
    return out


class _PremiseLoo(NamedTuple):
    """A report's ``stability["premise"]`` as read (:func:`_premise_loo`)."""

    status: str
    agree: int
    total: int
    words: dict
    fragile: bool


def _premise_loo(stability: Any, status: Any = None) -> _PremiseLoo | None:
    """(status, subsets that agree, subsets, {seed: status}, fragile) of a report's
    ``stability["premise"]``, or None. Read from a report that came from elsewhere: its
    status must be a premise status (``verdict.PREMISE_STATUSES``) and, where ``status``
    (the report's own premise's) is given, that one; its counts whole numbers with
    0 <= agree <= total and total > 0. Fragile only as the contract defines it: marked
    so, decided, and one left-out seed changes it (the page and the index read it
    alike)."""
    prem = stability.get("premise") if isinstance(stability, Mapping) else None
    counts = _loo_counts(prem)
    if counts is None or prem.get("status") not in verdict.PREMISE_STATUSES \
            or (status is not None and prem["status"] != status):
        return None
    agree, total = counts
    fragile = (prem.get("fragile") is True and agree < total
               and prem["status"] in ("reproduced", "not reproduced"))
    return _PremiseLoo(prem["status"], agree, total, _str_map(prem.get("loo")), fragile)


def _premise_loo_text(stability: Any, status: Any = None) -> str:
    """How the premise's own status fares in the leave-one-seed-out subsets (``stability
    ["premise"]``, :func:`_premise_loo`), as a clause: "reproduced in 9 of 10 subsets
    (without seed 4: undecided), fragile"; where every subset agrees, "reproduced in all
    10 subsets"; "" where the report has none (or none that reads)."""
    prem = _premise_loo(stability, status)
    if prem is None:
        return ""
    own, agree, total, words, fragile = prem
    if agree == total:
        return f"{own} in all {total} subsets"
    other = _by_word(words, own, lambda seed: words[seed])
    return (f"{own} in {agree} of {total} subsets"
            + (f" ({'; '.join(other)})" if other else "") + (", fragile" if fragile else ""))


def _notes_caveat(data: Mapping) -> list[str]:
    """The line before a report's notes where what they name proved fragile: the notes
    are written by the claim's analysis from all the seeds, before the runner leaves each
    seed out, so a premise they call reproduced, or a verdict they argue from, may rest
    on one seed. [] where nothing they could name is fragile."""
    stab = data.get("stability")
    bits = []
    prem = _premise_loo(stab, _premise_status(data))
    if prem is not None and prem.fragile:
        bits.append(f"the premise is {prem.status} in only {prem.agree} of the "
                    f"{prem.total} leave-one-seed-out subsets")
    loo, frail = _question_loo(stab), _fragile_questions(data)
    for q in report_questions(data):
        if q.get("id") not in frail or q.get("verdict") not in ("CONFIRMED", "REFUTED"):
            continue
        a, t = loo.get(q["id"], (0, 0))[:2]
        bits.append(f"`{q['id']}` ({q['verdict']}) is fragile"
                    + (f": it holds in {a} of {t}" if a < t else ""))
    if not bits:
        return []
    n = len(data.get("seeds") or ())
    # the lines that say more: the premise line only where the premise is the fragile one
    see = ("the premise line and the stability line" if prem is not None and prem.fragile
           else "the stability line")
    return [f"The notes below were written from all {n} seeds, before the check that leaves "
            f"each out in turn; read them with what it found: {'; '.join(bits)} (see "
            f"{see}).", ""]


def _fragile_note(q: Mapping, stability: Any, status: str | None = None) -> str:
    """What marks a fragile question's word in its report's table: " (fragile: holds in 1
    of 10 leave-one-seed-out subsets; its premise in 2 of 10)" where the subsets say so
    (the premise named where the question is gated and the premise itself is fragile),
    else " (fragile)" (a part one seed moved by a few steps flips)."""
    bits = []
    loo = _question_loo(stability).get(q.get("id"))
    if loo and loo[0] < loo[1]:
        bits.append(f"holds in {loo[0]} of {loo[1]} leave-one-seed-out subsets")
    prem = _premise_loo(stability, status)
    if q.get("gated") is True and prem and prem.fragile:
        bits.append(f"its premise in {prem.agree} of {prem.total}" if bits else
                    f"its premise holds in {prem.agree} of {prem.total} leave-one-seed-out subsets")
    return f" (fragile: {'; '.join(bits)})" if bits else " (fragile)"


def _seeds_or(seeds: list[str]) -> str:
    """"seed 4", "seed 0 or 1", "seed 0, 1 or 5": the left-out seeds of one answer."""
    return "seed " + (seeds[0] if len(seeds) == 1 else
                      f"{', '.join(seeds[:-1])} or {seeds[-1]}")


def _by_word(words: Mapping[str, str], skip: str, show) -> list[str]:
    """The subsets whose word is not ``skip``, grouped by the word as shown (``show``:
    seed -> printed word): "without seed 4: INCONCLUSIVE (decided, held: premise
    undecided)", "without seed 0, 1 or 2: INCONCLUSIVE"; a word the premise gate held
    first, then by count."""
    groups: dict[str, list[str]] = {}
    for seed, w in words.items():
        if w != skip:
            groups.setdefault(show(seed), []).append(seed)
    order = sorted(groups.items(), key=lambda kv: (_HELD_TAG not in kv[0], -len(kv[1])))
    return [f"without {_seeds_or(seeds)}: {w}" for w, seeds in order]


def _question_loo_line(stability: Any, qs: Iterable) -> str:
    """One line: per question, how many leave-one-seed-out subsets give its word, and
    which left-out seeds change it (at most three named); the questions that every
    subset answers alike are named together, first. "" for a report without
    per-question subsets (an older one, or one with no seeds to leave out)."""
    loo = _question_loo(stability)
    alike: dict[int, list[str]] = {}
    bits = []
    for q in qs:
        if not isinstance(q, Mapping) or not isinstance(q.get("id"), str) \
                or q["id"] not in loo or q.get("kind") == "measurement":
            continue
        agree, total, words, held = loo[q["id"]]
        if agree == total:
            alike.setdefault(total, []).append(f"`{q['id']}`")
            continue
        bit = (f"`{q['id']}`: {agree} of {total} subsets "
               f"{'gives' if agree == 1 else 'give'} the same answer")
        other = _by_word(words, str(q.get("verdict")),
                         lambda seed: _subset_word(words, held, seed))
        if other:
            bit += f" ({'; '.join(other)})"
        if q.get("verdict") in ("CONFIRMED", "REFUTED"):
            bit += ", fragile"
        bits.append(bit)
    same = [f"{', '.join(ids)}: {total} of {total} subsets give the same answer"
            for total, ids in alike.items()]
    if not same and not bits:
        return ""
    return "Leave-one-seed-out, by question: " + "; ".join(same + bits) + "."


def _alone_across(q: Mapping) -> str:
    """Where every scale gives a question one and the same word, INCONCLUSIVE, but what its
    comparisons said on their own (where the premise gate held them: ``ungated``; else the
    word itself) differs between scales, and decides at one: "the comparisons alone differ
    across scales (smoke REFUTED, full INCONCLUSIVE)", so a held word at one scale is not
    read as the run's answer at every scale. "" otherwise."""
    by_scale = q.get("by_scale") or {}
    if len(by_scale) < 2 or set(by_scale.values()) != {"INCONCLUSIVE"}:
        return ""
    ungated = q.get("ungated") or {}
    alone = {s: str(ungated.get(s) or v) for s, v in by_scale.items()}
    if len(set(alone.values())) < 2 or not set(alone.values()) & {"CONFIRMED", "REFUTED"}:
        return ""
    return ("the comparisons alone differ across scales ("
            + ", ".join(f"{s} {w}" for s, w in alone.items()) + ")")


def question_rows(out_dir: Path, claims: Mapping) -> tuple[list[str], list[list]]:
    """One row per reviewer question: its verdict at every scale found, side by side,
    and across scales the common word or SPLIT (never one scale promoted over another)."""
    from audit import questions

    left_out: dict[str, dict[str, str]] = {cid: {} for cid in claims}
    per_claim = {cid: scale_reports(out_dir, cid, left_out[cid]) for cid in claims}
    found = [set(r) | set(left_out[cid]) for cid, r in per_claim.items()]
    scales = [s for s in SCALE_ORDER if any(s in f for f in found)]
    scales += sorted(set().union(*found) - set(scales)) if found else []
    rows = []
    for cid, reports in per_claim.items():
        if not reports:
            continue
        missing = left_out[cid]  # a scale whose report is unreadable or a tuning run
        merged = questions.across_scales({s: report_questions(reports[s], claims.get(cid))
                                          for s in scales if s in reports})
        older = {s: earlier_code(reports[s], claims.get(cid)) for s in reports}
        fragile = {s: _fragile_questions(reports[s], claims.get(cid)) for s in reports}
        for q in merged:
            # where the scales disagree, a report by earlier code says so: the difference
            # may be the code's change, not the scale's
            split = len(set(q["by_scale"].values())) > 1
            cells = []
            for s in scales:
                v = _inert(q["by_scale"].get(s))
                if v is not None:
                    v = questions.gated_text(v, _inert(q.get("ungated", {}).get(s)),
                                             _inert(q.get("basis", {}).get(s)))
                if v is not None and q["id"] in fragile.get(s, ()):
                    v += " (fragile)"
                if v is not None and older.get(s) and split:
                    v += " (earlier code)"
                link = _scale_link(out_dir, s, cid) if s != next(iter(reports)) else None
                if v is None:
                    cells.append(_inert(missing[s]) if s in missing else "—")
                elif link:
                    cells.append(f"[{v}]({link})")
                else:
                    cells.append(v)
            both = len(q["by_scale"]) > 1
            alone = _alone_across(q)
            why = "; ".join([q["why"]] * bool(q["why"]) + [alone] * bool(alone) + [
                f"{s}: written by earlier code of this claim (commit {older[s]}): rerun to "
                "update" for s in q["by_scale"] if older.get(s) and split] + [
                f"{s}: {why}, so no word across scales" for s, why in missing.items()
                if s not in q["by_scale"]])
            both = both and not any(s not in q["by_scale"] for s in missing)
            # the common word is no firmer than the scales it comes from: fragile where
            # every scale that decides it marks it so
            deciding = [s for s, v in q["by_scale"].items() if v in ("CONFIRMED", "REFUTED")]
            frail = " (fragile)" if q["combined"] in ("CONFIRMED", "REFUTED") and deciding \
                and all(q["id"] in fragile.get(s, ()) for s in deciding) else ""
            rows.append([f"`{cid}`", f"`{_inert(q['id'])}`: {_inert(q['asks'])}",
                         _inert(q["kind"]), *cells,
                         (f"**{_inert(q['combined'])}**{frail}" if both else "—"),
                         _inert(why) or "—"])
    header = ["claim", "question (our words)", "kind",  # a scale: a report's, so inert
              *map(_inert, scales), "across scales", "why they differ / caveats"]
    return header, rows


def _other_folder_text(out_dir: Path) -> str:
    """Where the other scale's reports are, as a link that resolves from this index."""
    folders = scale_folders(out_dir)
    if folders[1][1] == "smoke":
        return "The smoke-scale reports are in [the folder above](../README.md)."
    return "Full-scale reports are in [full/](full/README.md) where that folder exists."


def _questions_section(out_dir: Path, claims: Mapping) -> list[str]:
    header, rows = question_rows(out_dir, claims)
    if not rows:
        return []
    return ["## Every reviewer question", "",
            "One row per question a claim answers, with its own verdict and kind (a proof "
            "and an experiment are never merged into one word). Where scales disagree both "
            "verdicts are shown and the question is SPLIT across scales, with the reason "
            "(and, where one report was written by earlier code of its claim, that "
            "code's commit: its rules may differ); no scale is promoted over another. "
            + _other_folder_text(out_dir), "",
            _table(header, rows), ""]


def write_index(out_dir: Path, claims: Mapping[str, Claim]) -> Path:
    """``out_dir/README.md``: one row per claim. A sibling JSON that is not a valid report
    is left out of the index with a warning line naming it; it does not fail the index.
    Reading the reports and writing the index hold the folder's lock, so two processes
    writing reports into one folder (pytest-xdist workers) never leave an index that
    misses one of them."""
    out_dir = Path(out_dir)
    with safeio.folder_lock(out_dir):
        return _write_index(out_dir, claims)


def _write_index(out_dir: Path, claims: Mapping[str, Claim]) -> Path:
    rows = []
    scales: set[str] = set()  # of the reports in this folder: the regenerate command's
    for cid, claim in claims.items():
        locks = claim.locks()
        lock_txt = _inert(", ".join(f"{s}: {v['verdict']}"  # a lock file's scale names
                                    for s, v in sorted(locks.items()))) or "—"
        try:
            data = load(out_dir, cid)
            if data is not None:
                data = _inert(data)
                row = [f"[`{cid}`]({cid}.md)", _inert(claim.paper.cite()), _inert(claim.title),
                       _premise_cell(data, out_dir, cid),
                       (f"**{data['verdict']}**" if not data.get("tuning_run") else
                        f"a tuning run ({data['verdict']} on tuning seeds; no verdict)")
                       + (" (fragile)" if data.get("fragile") else "")
                       + (" (settings split)" if settings_split(data.get("settings"))
                          else ""),
                       _reachable_cell(data), _stability_cell(data), lock_txt,
                       data["scale"],
                       (f"{len(data['seeds'])} seeds" if data["seeds"] else "exact")
                       + _looks_cell(data) + f", {data['runtime_s']:.0f} s, commit "
                       f"`{data['environment'].get('commit')}`"]
                scales.add(str(data["scale"]))
        except (AuditError, AttributeError, KeyError, TypeError, ValueError, IndexError,
                OverflowError) as exc:
            msg = str(exc) if isinstance(exc, AuditError) else (
                f"report {out_dir / (cid + '.json')} is malformed "
                f"({type(exc).__name__}: {exc})")
            print(f"audit: warning: {safeio.term_text(' '.join(msg.split()))}; left out of "
                  "the index",
                  file=sys.stderr)
            rows.append([f"`{cid}`", _inert(claim.paper.cite()), _inert(claim.title), "—", "—",
                         "—", "—",
                         lock_txt, "—", "report unreadable"])
            continue
        if data is None:
            status = "not run"
            rows.append([f"`{cid}`", _inert(claim.paper.cite()), _inert(claim.title), "—", "—",
                         "—", "—",
                         lock_txt, "—", status])
        else:
            rows.append(row)
    text = ["# Audit reports", "",
            "Each verdict is about the reviewer's claim: CONFIRMED (the criticism holds on "
            "our runs), REFUTED (it does not), INCONCLUSIVE (this scale and seed count "
            "cannot decide). A claim answers one or more reviewer questions, each with its "
            "own verdict (below); the claim's single word is SPLIT when they differ. "
            "Regenerate with `audit run --all --until-decided"
            + ("" if scales <= {"smoke"} else
               f" --scale {'|'.join(sorted(scales))} --out {out_dir.as_posix()}")
            + "` (smoke: one look at 10 seeds; full and paper: looks at 10 and 20); re-render without rerunning with `audit "
            "report" + ("" if scales <= {"smoke"} else f" --out {out_dir.as_posix()}")
            + "`.", "",
            "Premise: the paper's own effect that the claim is about, measured first "
            "(a part explaining it is INCONCLUSIVE where it does not reproduce; where the "
            "scales' reports disagree, each scale's status; 'estimate against the effect' "
            "marks an undecided one whose estimate lies on the other side of its rule's "
            "margin, where more seeds are likelier to show it absent; '(fragile)' marks "
            "a decided one that one left-out seed changes; 'setting chosen on test data' "
            "a scale whose settings a search chose on a test-set metric, on tuning seeds "
            "but on the test examples the premise is measured on, and 'setting chosen on "
            "verdict seeds' one whose choice read the verdict's own seeds, so a premise "
            "reproduced there may be flattered: the page's search record says what was "
            "read). "
            "Reachable: the verdicts the parts entering the claim's verdict can return by "
            "their rules, on some data (a derivation's verdict is a proof); not what this "
            "setting could give: a part whose setting allowed one outcome only says so in "
            "its reason. Stability: leave-one-seed-out agreement and the flip "
            "distance of the closest decisive test; a decided verdict is fragile when one "
            "seed moved by three test examples or fewer, or one left-out seed, flips it (an "
            "INCONCLUSIVE one is never called fragile: its flip distance says how near a "
            "test came to deciding; a part held INCONCLUSIVE by its premise has none). A "
            "question's word is marked fragile likewise, from its own parts and from its "
            "own answers with one seed left out.", "",
            _table(["claim", "paper", "falsifier", "premise", "verdict", "reachable",
                    "stability", "locked", "scale", "run"], rows), ""]
    text += _questions_section(out_dir, claims)
    if (out_dir / "CHANGES.md").exists():
        text += ["What changed since the last locks, and why: [CHANGES.md](CHANGES.md).", ""]
    # the coverage page follows the reports: its callers regenerate it from their JSON
    # with the index (audit.coverage.write_coverage; coverage sits above report)
    text += ["Coverage of the review records by the claims' questions: "
             "[coverage.md](coverage.md).", ""]
    path = out_dir / "README.md"
    _atomic_write(path, "\n".join(text))
    return path
