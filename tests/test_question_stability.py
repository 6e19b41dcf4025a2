"""Leave-one-seed-out stability per reviewer question: the runner answers every question
again from each subset's parts, and the report marks a decided question "(fragile)" when
one left-out seed changes its word, not only when one of its parts is fragile."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from audit import questions, report
from audit.claims import RunSpec
from audit.questions import Question
from audit.runner import Cache, execute, make_context
from audit.verdict import Outcome, Rule

#: the seed whose unit alone carries the toy's second part
CARRIER = 3


def _decide_lead(peaks):
    if max(peaks) > 0.5:
        return Outcome.CONFIRMED, "a seed peaks above 0.5", ""
    return Outcome.INCONCLUSIVE, "no seed peaks above 0.5", "a seed that peaks"


LEAD = Rule("lead", "CONFIRMED when some seed's peak is above 0.5; INCONCLUSIVE otherwise "
            "(a toy part resting on one seed).", _decide_lead,
            reachable=("CONFIRMED", "INCONCLUSIVE"))


@pytest.fixture
def two_questions(toy):
    """The toy claim with a second part, ``lead``, that only the unit of seed
    :data:`CARRIER` makes CONFIRMED, and one question for each part: leaving that seed
    out changes the answer of ``lead-q`` and never that of ``gain-q``."""
    def run(spec, ctx):
        out = toy.run(spec, ctx)
        out["peak"] = 1.0 if spec.seed == CARRIER else 0.0
        return out

    def analyse(results, ctx):
        a = toy.analyse(results, ctx)
        lead = LEAD([results[RunSpec("better", s)]["peak"] for s in ctx.seeds])
        return dataclasses.replace(a, parts=tuple(a.parts) + (lead,))

    qs = (Question("gain-q", "does better beat base?", ("falsifier",), ("gain",)),
          Question("lead-q", "does some seed peak?", ("falsifier",), ("lead",)))
    return dataclasses.replace(toy.CLAIM, run=run, analyse=analyse, rules=(toy.RULE, LEAD),
                               questions=qs, combination=questions.combination(qs))


def test_one_left_out_seed_flips_one_question_and_not_the_other(two_questions, tmp_path):
    res = execute(two_questions, make_context(two_questions, "smoke"),
                  cache=Cache(tmp_path / "c"), progress=False)
    assert {a["id"]: a["verdict"] for a in res.answers} == {"gain-q": "CONFIRMED",
                                                            "lead-q": "CONFIRMED"}
    st = res.verdict.stability
    seeds = [str(s) for s in res.ctx.seeds]
    per_q = st["questions"]
    assert list(per_q) == ["gain-q", "lead-q"]
    gain, lead = per_q["gain-q"], per_q["lead-q"]
    assert (gain["loo_agree"], gain["loo_total"], gain["fragile"]) == (8, 8, False)
    assert (lead["loo_agree"], lead["loo_total"], lead["fragile"]) == (7, 8, True)
    assert list(lead["loo"]) == seeds  # in the run's seed order, keyed as the claim's loo
    assert lead["loo"][str(CARRIER)] == "INCONCLUSIVE"
    assert all(w == "CONFIRMED" for s, w in lead["loo"].items() if s != str(CARRIER))
    assert set(gain["loo"].values()) == {"CONFIRMED"}
    # the claim-level keys are as before: its word (SPLIT without the carrier) disagrees
    # once, and its own fragile flag reads its own agreement
    assert st["loo_total"] == 8 and st["loo_agree"] == 7
    assert st["loo"][str(CARRIER)] == "SPLIT" and st["fragile"] is True
    # the report: the fragile question is marked, the other is not, and the line says why
    data = report.to_json(res)
    json.dumps(data, allow_nan=False)  # small, plain JSON
    md = report.render_markdown(data)
    rows = {ln.split("`")[1]: ln for ln in md.splitlines() if ln.startswith("| `")
            and "-q`:" in ln}
    assert "**CONFIRMED** (fragile: holds in 7 of 8 leave-one-seed-out subsets)" in \
        rows["lead-q"]
    assert "(fragile" not in rows["gain-q"]
    assert ("`lead-q`: 7 of 8 subsets give the same answer (without seed 3: "
            "INCONCLUSIVE), fragile") in md
    assert "`gain-q`: 8 of 8 subsets give the same answer;" in md


def test_a_claim_without_questions_has_its_statement_checked(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    st = res.verdict.stability
    (qa,) = res.answers
    assert list(st["questions"]) == [qa["id"]] == ["claim"]
    q = st["questions"]["claim"]
    assert (q["loo_agree"], q["loo_total"]) == (st["loo_agree"], st["loo_total"]) == (8, 8)
    assert q["loo"] == st["loo"] and q["fragile"] is False


def test_too_few_seeds_check_no_question(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke", seeds=[0, 1])
    res = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "c"), progress=False)
    assert res.verdict.stability["questions"] == {}


# ----------------------------------------------------------------------- the report
def _report(toy, tmp_path) -> dict:
    """A toy report with two decided questions whose parts are not fragile."""
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    data = report.to_json(res)
    (q,) = data["questions"]
    assert q["verdict"] == "CONFIRMED" and not any(p["fragile"] for p in data["parts"])
    data["questions"] = [q, {**q, "id": "other"}]
    return data


def _marked(data) -> dict[str, bool]:
    md = report.render_markdown(data)
    return {qid: f"`{qid}`:" in md and any(
        ln.startswith(f"| `{qid}`:") and "(fragile" in ln for ln in md.splitlines())
        for qid in ("claim", "other")}


def test_a_report_with_a_question_a_seed_overturns_marks_it(toy, tmp_path):
    data = _report(toy, tmp_path)
    loo = {str(s): "CONFIRMED" for s in range(8)}
    data["stability"]["questions"] = {
        "claim": {"loo_agree": 8, "loo_total": 8, "loo": loo, "fragile": False},
        "other": {"loo_agree": 7, "loo_total": 8, "loo": {**loo, "5": "REFUTED"},
                  "fragile": True}}
    assert _marked(data) == {"claim": False, "other": True}
    assert report._fragile_questions(data) == {"other"}
    md = report.render_markdown(data)
    assert ("Leave-one-seed-out, by question: `claim`: 8 of 8 subsets give the same "
            "answer; `other`: 7 of 8 subsets give the same answer (without seed 5: "
            "REFUTED), fragile.") in md
    # an undecided question is never called fragile, however its subsets went
    data["questions"][1]["verdict"] = "INCONCLUSIVE"
    data["verdict"] = "SPLIT"  # the word its questions now give
    assert _marked(data) == {"claim": False, "other": False}
    assert report._fragile_questions(data) == set()


def test_an_older_report_without_per_question_subsets_renders_as_before(toy, tmp_path):
    data = _report(toy, tmp_path)
    data["stability"].pop("questions", None)
    md = report.render_markdown(data)
    assert "by question" not in md and _marked(data) == {"claim": False, "other": False}
    # a fragile part still marks its question, as it did
    frail = copy.deepcopy(data)
    frail["parts"][0]["fragile"] = True
    assert _marked(frail) == {"claim": True, "other": True}
    # and no stability at all (an exact claim's older report)
    data["stability"] = None
    assert "by question" not in report.render_markdown(data)


@pytest.mark.parametrize("table", [
    "questions", ["other"], 7,
    {"other": "7/8"}, {"other": None}, {"other": [7, 8]},
    {"other": {"loo_agree": "7", "loo_total": 8}},
    {"other": {"loo_agree": 7, "loo_total": 8.0}},
    {"other": {"loo_agree": True, "loo_total": 8}},
    {"other": {"loo_agree": 9, "loo_total": 8}},
    {"other": {"loo_agree": -1, "loo_total": 8}},
    {"other": {"loo_agree": 0, "loo_total": 0}},
    {"other": {"loo_total": 8}},
    # counts that no subsets back: none, or fewer than the count says (10**30 subsets
    # of an 8-seed run would print as they came)
    {"other": {"loo_agree": 7, "loo_total": 8}},
    {"other": {"loo_agree": 7, "loo_total": 10**30, "loo": {"0": "REFUTED"}}},
    {"other": {"loo_agree": 1, "loo_total": 2, "loo": "0,1"}},
])
def test_hostile_per_question_subsets_are_ignored(toy, tmp_path, table):
    data = _report(toy, tmp_path)
    data["stability"]["questions"] = table
    md = report.render_markdown(data)
    assert "by question" not in md and _marked(data) == {"claim": False, "other": False}
    assert report._fragile_questions(data) == set()


def test_hostile_subset_words_are_dropped_not_printed(toy, tmp_path):
    data = _report(toy, tmp_path)
    data["stability"]["questions"] = {
        "other": {"loo_agree": 7, "loo_total": 8, "loo": {
            **{str(i): "CONFIRMED" for i in (0, 1, 2, 3, 4, 7)}, "5": ["REFUTED"], "6": 3}},
        "claim": {"loo_agree": 8, "loo_total": 8, "loo": "everything agrees"}}
    md = report.render_markdown(data)
    assert _marked(data) == {"claim": False, "other": True}
    assert "`other`: 7 of 8 subsets give the same answer, fragile" in md
    assert "without seed" not in md and "everything agrees" not in md
    data["stability"] = ["not", "a", "mapping"]
    assert report._fragile_in(data["parts"], data["questions"], data["stability"]) == set()


def test_questions_every_subset_answers_alike_are_named_together_first():
    loo = {str(s): "REFUTED" for s in range(4)}
    stab = {"questions": {
        "a": {"loo_agree": 4, "loo_total": 4, "loo": loo},
        "b": {"loo_agree": 3, "loo_total": 4, "loo": {**loo, "2": "INCONCLUSIVE"}},
        "c": {"loo_agree": 4, "loo_total": 4, "loo": loo}}}
    qs = [{"id": i, "verdict": "REFUTED", "kind": "experiment"} for i in "abc"]
    assert report._question_loo_line(stab, qs) == (
        "Leave-one-seed-out, by question: `a`, `c`: 4 of 4 subsets give the same answer; "
        "`b`: 3 of 4 subsets give the same answer (without seed 2: INCONCLUSIVE), fragile.")


def test_a_subset_whose_premise_goes_unshown_says_the_gate_held_it(toy, tmp_path):
    """Leaving out the seed that carries the premise holds the gated part: the subset's
    word says why, in the premise line's words ("INCONCLUSIVE (decided, held: premise
    undecided)"), and it still counts against the full-data word, like any other
    INCONCLUSIVE."""
    from audit.verdict import Premise, premise_gate

    def analyse(results, ctx):
        a = toy.analyse(results, ctx)
        premise = Premise("toy effect", "reproduced" if CARRIER in ctx.seeds else "undecided",
                          "toy")
        lead = premise_gate(LEAD([1.0 for _ in ctx.seeds]), premise)
        return dataclasses.replace(a, parts=tuple(a.parts) + (lead,), premise=premise)

    qs = (Question("gain-q", "does better beat base?", ("falsifier",), ("gain",)),
          Question("lead-q", "does some seed peak?", ("falsifier",), ("lead",)))
    claim = dataclasses.replace(toy.CLAIM, analyse=analyse, rules=(toy.RULE, LEAD),
                                questions=qs, combination=questions.combination(qs))
    res = execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    st = res.verdict.stability
    lead = st["questions"]["lead-q"]
    # the word is a word alone; why the gate held it is its own field
    assert lead["loo"][str(CARRIER)] == "INCONCLUSIVE"
    assert lead["held"] == {str(CARRIER): "not shown"}
    assert st["questions"]["gain-q"]["held"] == {}
    assert (lead["loo_agree"], lead["loo_total"], lead["fragile"]) == (7, 8, True)
    # the premise's own subsets: reproduced in 7 of 8, so the premise is fragile
    prem = st["premise"]
    assert prem["status"] == "reproduced"
    assert prem["loo"][str(CARRIER)] == "undecided"
    assert (prem["loo_agree"], prem["loo_total"], prem["fragile"]) == (7, 8, True)
    md = report.render_markdown(report.to_json(res))
    assert f"without seed {CARRIER}: INCONCLUSIVE (decided, held: premise undecided)" in md
    assert (f"With one seed left out: reproduced in 7 of 8 subsets (without seed "
            f"{CARRIER}: undecided), fragile.") in md


def test_a_claim_word_no_seed_moves_is_fragile_where_a_question_it_sums_up_is(
        two_questions, tmp_path):
    """SPLIT with and without the carrier seed (a REFUTED question keeps it split), yet
    ``lead-q`` rests on that one seed: the claim's word is marked fragile too."""
    never = Rule("never", "REFUTED always (a toy part).",
                 lambda: (Outcome.REFUTED, "toy", ""), reachable=("REFUTED",))
    base = two_questions.analyse

    def analyse(results, ctx):
        a = base(results, ctx)
        return dataclasses.replace(a, parts=tuple(a.parts) + (never(),))

    qs = tuple(two_questions.questions) + (
        Question("never-q", "is it never?", ("falsifier",), ("never",)),)
    claim = dataclasses.replace(two_questions, analyse=analyse,
                                rules=tuple(two_questions.rules) + (never,), questions=qs,
                                combination=questions.combination(qs))
    res = execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    st = res.verdict.stability
    assert res.verdict.verdict.value == "SPLIT"
    assert st["loo_agree"] == st["loo_total"] == 8  # the word itself never moves
    assert st["questions"]["lead-q"]["fragile"] is True
    assert st["fragile"] is True


def test_the_headline_index_cell_and_stability_line_name_the_question_a_seed_moves(
        two_questions, tmp_path):
    res = execute(two_questions, make_context(two_questions, "smoke"),
                  cache=Cache(tmp_path / "c"), progress=False)
    data = report.to_json(res)
    # the word's own subsets: made to agree, so only the question tells
    data["stability"] = dict(data["stability"], loo_agree=8, loo_total=8)
    md = report.render_markdown(data)
    head = next(ln for ln in md.splitlines() if ln.startswith("**CONFIRMED"))
    assert "— **fragile** (through `lead-q`)" in head
    assert "`lead-q` CONFIRMED (experiment, fragile)" in head
    assert "`gain-q` CONFIRMED (experiment)" in head
    line = next(ln for ln in md.splitlines() if ln.startswith("Stability"))
    assert "8 of 8 subsets give the same verdict (the questions' own answers hold in " \
           "fewer: `lead-q` in 7 of 8" in line
    assert report._stability_cell(data).startswith("LOO 8/8 (question `lead-q` 7/8)")


def test_the_premise_s_own_subsets_are_read_defensively_and_marked_in_the_index():
    """``stability["premise"]`` comes from a report read from elsewhere: malformed counts
    or maps give no line; a fragile premise is marked in the index's premise cell."""
    good = {"premise": {"status": "reproduced", "loo_agree": 9, "loo_total": 10,
                        "loo": {"4": "undecided", **{str(s): "reproduced" for s in range(10)
                                                     if s != 4}}, "fragile": True}}
    assert report._premise_loo_text(good) == (
        "reproduced in 9 of 10 subsets (without seed 4: undecided), fragile")
    same = {"premise": {**good["premise"], "loo_agree": 10, "fragile": False}}
    assert report._premise_loo_text(same) == "reproduced in all 10 subsets"
    for bad in (None, [], {"premise": "x"}, {"premise": {"status": 3, "loo_agree": 1,
                                                          "loo_total": 1}},
                {"premise": {**good["premise"], "loo_agree": 11}},
                {"premise": {**good["premise"], "loo_total": True}}):
        assert report._premise_loo_text(bad) == ""
    data = {"premise": {"status": "reproduced", "effect": "e"}, "stability": good}
    assert report._premise_cell(data) == "reproduced (fragile)"
    assert report._premise_cell({**data, "stability": same}) == "reproduced"


def test_the_word_across_scales_is_no_firmer_than_the_scales_it_comes_from(tmp_path):
    """GENE-FL's `selection-reversal` is REFUTED and fragile at both committed scales:
    the index's common word carries the mark; a question firm at one scale does not."""
    import shutil

    from audit.cli import main

    repo = Path(__file__).resolve().parents[1] / "reports"
    (tmp_path / "full").mkdir()
    for sub in ("", "full"):
        for f in [*(repo / sub).glob("genefl-*.json"), repo / sub / ".audit-output"]:
            shutil.copy(f, tmp_path / sub / f.name)
    assert main(["report", "--out", str(tmp_path)]) == 0
    rows = {ln.split("|")[2].split("`")[1]: ln for ln in
            (tmp_path / "README.md").read_text().splitlines()
            if ln.startswith("| `genefl-inverted-cosine` | `")}
    assert rows["selection-reversal"].split("|")[-3].strip() == "**REFUTED** (fragile)"
    assert rows["prose-inverted"].split("|")[-3].strip() == "**CONFIRMED**"
    # one scale firm: the common word is as firm as that scale
    data = json.loads((tmp_path / "full" / "genefl-inverted-cosine.json").read_text())
    data["stability"]["questions"]["selection-reversal"].update(
        loo_agree=20, fragile=False, loo={str(s): "REFUTED" for s in data["seeds"]})
    for p in data["parts"]:
        p["fragile"] = False
    (tmp_path / "full" / "genefl-inverted-cosine.json").write_text(json.dumps(data))
    assert main(["report", "--out", str(tmp_path)]) == 0
    row = next(ln for ln in (tmp_path / "README.md").read_text().splitlines()
               if ln.startswith("| `genefl-inverted-cosine` | `selection-reversal`"))
    assert row.split("|")[-3].strip() == "**REFUTED**"
