"""One verdict per reviewer question (audit.questions): deciding, the single word,
scales side by side, convergence, locks, coverage and the built-in claims' declarations."""
from __future__ import annotations

import json
from pathlib import Path

from audit import claims, coverage, questions, report
from audit.questions import Question
from audit.verdict import Outcome, Part

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"


def _part(pid, verdict, kind="experiment", **kw):
    return Part(id=pid, verdict=Outcome(verdict), rule="r", reason=f"{pid} said {verdict}",
                kind=kind, **kw)


PROOF = Question("prose", "is the prose inverted?", ("falsifier",), ("direction",),
                 kind="proof")
EXPERIMENT = Question("reversal", "does reversing hurt?", ("falsifier",), ("accuracy",),
                      decides="the paper's effect must reproduce first")


def test_a_proof_and_an_experiment_that_disagree_make_split():
    parts = [_part("direction", "CONFIRMED", "derivation"), _part("accuracy", "REFUTED")]
    combo = questions.combination((PROOF, EXPERIMENT))
    assert combo(parts) == Outcome.SPLIT
    assert set(combo.parts) == {"direction", "accuracy"}
    answers = [questions.answer(q, {p.id: p for p in parts}) for q in (PROOF, EXPERIMENT)]
    assert [a["verdict"] for a in answers] == ["CONFIRMED", "REFUTED"]
    assert questions.headline_word(answers) == "SPLIT"
    assert "prose: CONFIRMED (proof)" in questions.headline_text(answers)
    # agreeing questions give their common word, never SPLIT
    same = [_part("direction", "CONFIRMED", "derivation"), _part("accuracy", "CONFIRMED")]
    assert combo(same) == Outcome.CONFIRMED


def test_measurement_questions_never_enter_the_single_word():
    meas = Question("size", "how big?", (), ("m",), kind="measurement")
    parts = {"m": _part("m", "INCONCLUSIVE", "measurement"),
             "direction": _part("direction", "CONFIRMED", "derivation")}
    answers = [questions.answer(q, parts) for q in (meas, PROOF)]
    assert answers[0]["verdict"] == questions.MEASURED
    assert questions.headline_word(answers) == "CONFIRMED"


def test_a_gated_question_names_the_premise_not_a_seed_count():
    gated = _part("accuracy", "INCONCLUSIVE", gated=True, needs="about 40 seeds")
    gated = Part(**{**gated.__dict__, "reason": "premise not reproduced at this scale (x)",
                    "held": "not reproduced"})
    a = questions.answer(EXPERIMENT, {"accuracy": gated})
    assert a["verdict"] == "INCONCLUSIVE"
    assert a["needs"] == "the paper's effect must reproduce first"
    open_ = _part("accuracy", "INCONCLUSIVE", needs="about 40 seeds")
    assert questions.answer(EXPERIMENT, {"accuracy": open_})["needs"] == "about 40 seeds"


def test_a_decided_part_held_by_an_undecided_premise_names_the_question_s_decider():
    """The gate's reason for an undecided premise now reads "premise not shown"; the
    question still says what its declaration says decides it (a first version of that
    wording matched only "not reproduced" and fell back to the parts' own needs)."""
    from audit.verdict import Premise, premise_gate

    held = premise_gate(_part("accuracy", "REFUTED"), Premise("x", "undecided", ""))
    a = questions.answer(EXPERIMENT, {"accuracy": held})
    assert a["verdict"] == "INCONCLUSIVE" and a["ungated"] == "REFUTED"
    assert a["needs"] == "the paper's effect must reproduce first"


def test_the_gate_s_hold_is_a_field_not_a_phrase_in_the_reason():
    """``Part.held`` says why the gate holds a part; the question reads it, not the
    reason's words. A part whose own comparison's reason merely quotes the phrase (a
    sub-reason, a premise mentioned in passing) is not held, and a held part survives the
    report's JSON."""
    from audit.verdict import Premise, held_of, premise_gate

    quoting = _part("accuracy", "INCONCLUSIVE", gated=True, needs="about 40 seeds")
    quoting = Part(**{**quoting.__dict__,
                      "reason": "the arms tie; cf. premise not shown at this scale"})
    assert questions.answer(EXPERIMENT, {"accuracy": quoting})["needs"] == "about 40 seeds"
    held = premise_gate(_part("accuracy", "CONFIRMED"), Premise("x", "not reproduced", ""))
    assert held.held == "not reproduced"
    back = Part.from_dict(held.to_dict())
    assert back.held == "not reproduced" and back == held
    assert questions.answer(EXPERIMENT, {"accuracy": held.to_dict()})["needs"] == \
        "the paper's effect must reproduce first"
    # an undecided part under an undecided premise is not held: its reason stays its own
    open_ = premise_gate(_part("accuracy", "INCONCLUSIVE", needs="8 seeds"),
                         Premise("x", "undecided", ""))
    assert open_.held == "" and open_.to_dict()["held"] == ""
    assert open_.needs.startswith("the paper's effect shown first")
    # a report written before the field: read from the gate's reason, as it then read
    old = {k: v for k, v in held.to_dict().items() if k != "held"}
    assert held_of(old) == "not reproduced"
    assert held_of({**old, "gated": False}) == ""
    assert held_of({**old, "held": "anything else"}) == ""


def test_parts_of_one_question_going_both_ways_are_split():
    # each test at half the alpha (two can carry the union outcome alone: Bonferroni)
    q = Question("both", "?", (), ("a", "b"))
    parts = {"a": _part("a", "CONFIRMED", alpha_share=0.5),
             "b": _part("b", "REFUTED", alpha_share=0.5)}
    assert questions.answer(q, parts)["verdict"] == "SPLIT"
    anyq = Question("any", "?", (), ("a", "b"), how="any")
    assert questions.answer(anyq, {"a": _part("a", "CONFIRMED", alpha_share=0.5),
                                   "b": _part("b", "INCONCLUSIVE")})["verdict"] == "CONFIRMED"


def test_sweep_rows_that_disagree_mark_the_question():
    q = Question("gap", "?", (), ("a",), sweeps=True)
    rows = [{"setting": "base", "verdict": "CONFIRMED", "base": True},
            {"setting": "depth=cnn2", "verdict": "REFUTED"},
            {"setting": "depth=vgg", "verdict": "INCONCLUSIVE", "note": "premise undecided"}]
    a = questions.answer(q, {"a": _part("a", "CONFIRMED")}, rows)
    assert a["settings_split"] and a["rows"][2]["note"] == "premise undecided"


def test_an_undecided_sweep_row_does_not_split_the_settings():
    """A row that decides nothing contradicts no other: "settings split" read as evidence
    that the outcome depends on the setting where rows were REFUTED and INCONCLUSIVE
    (GENE-FL's gamma sweep; a referee's read of the index)."""
    q = Question("gap", "?", (), ("a",), sweeps=True)
    for words in (("REFUTED", "INCONCLUSIVE"), ("CONFIRMED", "INCONCLUSIVE"),
                  ("INCONCLUSIVE", "INCONCLUSIVE")):
        rows = [{"setting": f"s{i}", "verdict": w, "base": i == 0}
                for i, w in enumerate(words)]
        assert not questions.answer(q, {"a": _part("a", "CONFIRMED")}, rows)["settings_split"]


def test_convergence_compares_the_late_change_with_the_resolution():
    flat = questions.convergence([0.1, 0.5, 0.80, 0.801], [0, 4, 8, 12], resolution=0.01)
    assert flat["converged"] is True and flat["from_round"] == 8
    rising = questions.convergence([0.1, 0.3, 0.5, 0.7], [0, 4, 8, 12], resolution=0.01)
    assert rising["converged"] is False and "NOT converged" in rising["text"]
    assert questions.convergence([0.5], [1], 0.01)["converged"] is None


def test_question_flip_is_caught_against_the_lock(toy, tmp_path):
    from audit.runner import Cache, execute, make_context

    claim = claims.get("toy-claim")
    ctx = make_context(claim, "smoke", seeds=[0, 1, 2, 3, 4])
    res = execute(claim, ctx, cache=Cache(tmp_path / "c"), progress=False)
    (qa,) = res.answers
    assert qa["id"] == "claim"  # a claim without questions answers one: its statement
    claims.write_lock("toy-claim", "smoke", res.verdict.verdict, res.verdict.parts,
                      ctx.seeds, path=claim.locks_path(), questions={"claim": "REFUTED"})
    lock = json.loads(claim.locks_path().read_text())["toy-claim"]["smoke"]
    assert lock["questions"] == {"claim": "REFUTED"}
    assert res.question_flips() == [("claim", "REFUTED", qa["verdict"])]


# every built-in claim's questions are checked by audit.checks (tests/test_claim_checks.py)


def _committed(scale_dir: Path):
    for f in sorted(scale_dir.glob("*.json")):
        yield f.stem, json.loads(f.read_text())


def test_committed_reports_open_with_their_questions():
    reg = claims.registry()
    for folder in (REPORTS, REPORTS / "full"):
        for cid, data in _committed(folder):
            qs = questions.of_report(data, reg[cid])
            assert qs, f"{folder.name}/{cid}.json has no questions"
            md = (folder / f"{cid}.md").read_text()
            first = md.split("\n## ")[1] if "\n## " in md else ""
            assert first.startswith("The reviewer's questions"), f"{cid}: {first[:40]}"
            if data.get("questions"):  # written with questions: its word is theirs
                words = {q["verdict"] for q in qs if q["kind"] != "measurement"}
                assert data["verdict"] == (words.pop() if len(words) == 1 else "SPLIT")
            else:  # an older report: every derived question says so
                assert all(q.get("derived") and q["caveat"] for q in qs)


def test_an_older_report_gets_the_questions_its_parts_can_answer():
    from audit.papers.genefl import inverted_cosine as g

    old = {"id": g.CLAIM.id, "scale": "full", "verdict": "REFUTED",
           "parts": [{"id": "direction", "verdict": "CONFIRMED", "kind": "derivation"},
                     {"id": "selection", "verdict": "CONFIRMED"},
                     {"id": "accuracy-top-vs-bottom", "verdict": "REFUTED"}]}
    got = {q["id"]: q for q in questions.of_report(old, g.CLAIM)}
    assert got["prose-inverted"]["verdict"] == "CONFIRMED" and got["prose-inverted"]["derived"]
    assert got["selection-reversal"]["verdict"] == "REFUTED"
    assert "fair-reversal" not in got  # its parts were never run by that report


def test_committed_coverage_equals_what_the_json_gives():
    """reports/coverage.md is regenerated from the committed JSON (``audit report``); a
    hand edit, or a report changed without it, fails here."""
    expected = coverage.render_markdown(coverage.from_notes(REPORTS), REPORTS)
    assert (REPORTS / "coverage.md").read_text() == expected


def test_every_covered_row_shows_its_questions_verdict():
    reg = claims.registry()
    by_scale = {}
    for folder in (REPORTS, REPORTS / "full"):
        for cid, data in _committed(folder):
            by_scale.setdefault(cid, {})[data["scale"]] = {
                q["id"]: q["verdict"] for q in questions.of_report(data, reg[cid])}
    n = 0
    for cov in coverage.from_notes(REPORTS, reg):
        for row in cov.rows:
            for c in row.covered_by:
                got = by_scale[c.claim]
                words = {s: v[c.part] for s, v in got.items() if c.part in v}
                word = (next(iter(set(words.values()))) if len(set(words.values())) == 1
                        else "SPLIT")
                assert c.verdict.startswith(word), (row.path, c, words)
                n += 1
    assert n >= 26


def test_index_has_a_row_per_question():
    text = (REPORTS / "README.md").read_text()
    assert "## Every reviewer question" in text
    for cid, data in _committed(REPORTS):
        for q in questions.of_report(data, claims.registry()[cid]):
            assert f"| `{cid}` | `{q['id']}`:" in text, (cid, q["id"])


def test_audit_lock_records_a_reports_verdicts_without_rerunning(toy, tmp_path, capsys):
    from audit.cli import main
    from audit.runner import Cache, execute, make_context

    claim = claims.get("toy-claim")
    res = execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    out = tmp_path / "out"
    report.write(res, out)
    calls = len(toy.CALLS)
    assert main(["lock", "toy-claim", "--out", str(out)]) == 0
    assert len(toy.CALLS) == calls  # nothing reran
    lock = json.loads(claim.locks_path().read_text())["toy-claim"]["smoke"]
    data = json.loads((out / "toy-claim.json").read_text())
    assert lock["verdict"] == data["verdict"]
    assert lock["seeds"] == data["seeds"]
    assert lock["questions"] == {q["id"]: q["verdict"] for q in data["questions"]}
    assert lock["parts"] == {p["id"]: p["verdict"] for p in data["parts"]}
    # an unknown id, a missing report and a tuning run are one line, exit 2
    assert main(["lock", "no-such-claim", "--out", str(out)]) == 2
    assert main(["lock", "toy-claim", "--out", str(tmp_path / "empty")]) == 2
    data["tuning_run"] = True
    (out / "toy-claim.json").write_text(json.dumps(data))
    before = claim.locks_path().read_text()
    assert main(["lock", "toy-claim", "--out", str(out)]) == 2
    assert claim.locks_path().read_text() == before
    err = capsys.readouterr().err
    assert "tuning run" in err and "Traceback" not in err


def test_a_question_applies_the_union_guard_of_all_of():
    """Two experiments that can each REFUTE a question alone: one REFUTED at the full alpha
    (no declared share) does not count, as under verdict.all_of; at a share of 1/2 it
    does; a derivation's word always counts (a computation has no error rate)."""
    from audit.verdict import Outcome, Part, all_of

    q = Question("q", "?", ("falsifier",), ("p1", "p2"))
    p1 = Part("p1", Outcome.REFUTED, "r", "x", alpha_share=1.0)
    p2 = Part("p2", Outcome.INCONCLUSIVE, "r", "x", alpha_share=1.0)
    assert all_of(["p1", "p2"])([p1, p2]) == Outcome.INCONCLUSIVE
    got = questions.answer(q, {"p1": p1, "p2": p2})
    assert got["verdict"] == "INCONCLUSIVE" and "not counted toward REFUTED" in got["reason"]
    assert questions.combination([q])([p1, p2]) == Outcome.INCONCLUSIVE
    half = Part("p1", Outcome.REFUTED, "r", "x", alpha_share=0.5)
    assert questions.answer(q, {"p1": half, "p2": p2})["verdict"] == "REFUTED"
    proof = Part("p1", Outcome.REFUTED, "r", "x", kind="derivation")
    assert questions.answer(q, {"p1": proof, "p2": p2})["verdict"] == "REFUTED"
    anyq = Question("a", "?", ("falsifier",), ("p1", "p2"), how="any")
    c1 = Part("p1", Outcome.CONFIRMED, "r", "x")
    assert questions.answer(anyq, {"p1": c1, "p2": p2})["verdict"] == "INCONCLUSIVE"
    c1 = Part("p1", Outcome.CONFIRMED, "r", "x", alpha_share=0.5)
    assert questions.answer(anyq, {"p1": c1, "p2": p2})["verdict"] == "CONFIRMED"


def test_a_gated_question_shows_what_its_comparison_alone_said():
    """The premise gate holds a part INCONCLUSIVE where the paper's effect is not
    reproduced; its own comparison's word was only in the part's reason, so the index and
    coverage read a bare INCONCLUSIVE. The word travels beside the verdict, never as it."""
    from audit.verdict import Premise, premise_gate

    absent = Premise("the method beats its baseline", "not reproduced", "no gain")
    part = premise_gate(Part("cmp", Outcome.REFUTED, "rule", "below the margin"), absent)
    assert part.verdict == Outcome.INCONCLUSIVE and part.ungated == "REFUTED"
    assert Part.from_dict(part.to_dict()) == part
    q = Question(id="q", asks="?", fields=("falsifier",), parts=("cmp",))
    a = questions.answer(q, {"cmp": part})
    assert a["verdict"] == "INCONCLUSIVE" and a["ungated"] == "REFUTED"
    # an undecided comparison, or a reproduced premise, overrides nothing
    held = premise_gate(Part("cmp", Outcome.INCONCLUSIVE, "rule", "wide"), absent)
    assert held.ungated == "" and "ungated" not in held.to_dict()
    shown = premise_gate(Part("cmp", Outcome.REFUTED, "rule", "below"),
                         Premise("effect", "reproduced", "gain"))
    assert shown.verdict == Outcome.REFUTED and "ungated" not in questions.answer(
        q, {"cmp": shown})
    row = questions.across_scales({"smoke": [a], "full": [dict(a, ungated="<b>x</b>")]})[0]
    assert row["ungated"] == {"smoke": "REFUTED"}  # a word outside the vocabulary is dropped
    assert questions.gated_text("INCONCLUSIVE", "REFUTED") == \
        "INCONCLUSIVE (gated; the comparison alone: REFUTED)"
    assert questions.gated_text("INCONCLUSIVE", None) == "INCONCLUSIVE"


def test_the_comparison_alone_is_guarded_as_the_verdict_and_may_be_split():
    """What the gate held back is combined as the verdict would have been: with the
    union guard (a REFUTED without a share among two experiments does not count), and
    SPLIT where the comparisons went both ways, shown on every page."""
    from audit.verdict import Premise, premise_gate

    absent = Premise("the method beats its baseline", "not reproduced", "no gain")

    def gated(pid, word, share=None):
        return premise_gate(Part(pid, Outcome(word), "r", "why", alpha_share=share), absent)

    q = Question(id="q", asks="?", fields=("falsifier",), parts=("a", "b"))
    unshared = questions.answer(q, {"a": gated("a", "REFUTED"), "b": gated("b", "INCONCLUSIVE")})
    assert unshared["verdict"] == "INCONCLUSIVE" and "ungated" not in unshared
    both = questions.answer(q, {"a": gated("a", "REFUTED", 0.5),
                                "b": gated("b", "CONFIRMED", 0.5)})
    assert both["ungated"] == "SPLIT"
    assert questions.gated_text("INCONCLUSIVE", "SPLIT").endswith("alone: SPLIT)")
    # a word that is no such word, or beside a decided verdict, is never shown
    assert questions.gated_text("REFUTED", "CONFIRMED") == "REFUTED"
    assert questions.gated_text("INCONCLUSIVE", "<b>") == "INCONCLUSIVE"
    # a part that was not gated cannot give back a word
    plain = Part("a", Outcome.INCONCLUSIVE, "r", "why", ungated="REFUTED")
    assert "ungated" not in questions.answer(
        Question(id="q1", asks="?", fields=("falsifier",), parts=("a",)), {"a": plain})


def test_the_index_premise_cell_of_another_scale_is_inert(tmp_path):
    import shutil

    from audit import safeio

    src = Path(__file__).resolve().parents[1] / "reports"
    out = tmp_path / "out"
    (out / "full").mkdir(parents=True)
    (out / safeio.OUTPUT_MARKER).write_text("")
    shutil.copy(src / "flayer-masked-zero.json", out)
    full = json.loads((src / "full" / "flayer-masked-zero.json").read_text())
    full["scale"] = "<img src=x onerror=alert(1)>"
    (out / "full" / "flayer-masked-zero.json").write_text(json.dumps(full))
    data = report._inert(report.load(out, "flayer-masked-zero"))
    cell = report._premise_cell(data, out, "flayer-masked-zero")
    assert "<img" not in cell and "&lt;img" in cell


def test_the_index_premise_cell_reads_only_a_report_that_is_there(tmp_path):
    """A full folder without the claim's report (or with a tuning run of it) leaves the
    premise cell as this folder's; the cell had read attributes of None."""
    import shutil

    from audit import safeio

    src = Path(__file__).resolve().parents[1] / "reports"
    out = tmp_path / "out"
    (out / "full").mkdir(parents=True)
    (out / safeio.OUTPUT_MARKER).write_text("")
    shutil.copy(src / "flayer-masked-zero.json", out)
    data = report._inert(report.load(out, "flayer-masked-zero"))
    kept = "reproduced (setting chosen on verdict seeds)"  # smoke kept its setting so
    assert report._premise_cell(data, out, "flayer-masked-zero") == kept
    tuning = json.loads((src / "full" / "flayer-masked-zero.json").read_text())
    tuning["tuning_run"] = True
    (out / "full" / "flayer-masked-zero.json").write_text(json.dumps(tuning))
    assert report._premise_cell(data, out, "flayer-masked-zero") == kept
    report.write_index(out, claims.registry())  # no row is "report unreadable"
    assert "report unreadable" not in (out / "README.md").read_text()


def test_a_word_that_rests_on_less_than_its_question_asks_says_on_what():
    """``Part.basis`` (a rule's ``info``): kept with a decided word only, through the
    premise gate (beside the ``ungated`` word) and the report's JSON; the question's answer
    carries it, and every page's word shows it."""
    from audit.verdict import Premise, Rule, premise_gate

    def decide(word):
        return word, "toy", "more seeds", {"basis": "on the cosine alone"}

    rule = Rule("accuracy", "a toy rule", decide)
    assert rule("INCONCLUSIVE").basis == ""  # an undecided word rests on nothing
    refuted = rule("REFUTED")
    assert refuted.basis == "on the cosine alone"
    assert Part.from_dict(refuted.to_dict()) == refuted
    a = questions.answer(EXPERIMENT, {"accuracy": refuted})
    assert (a["verdict"], a["basis"]) == ("REFUTED", "on the cosine alone")
    assert questions.gated_text(a["verdict"], a.get("ungated"), a["basis"]) == \
        "REFUTED (on the cosine alone)"
    held = premise_gate(refuted, Premise("x", "undecided", ""))
    a = questions.answer(EXPERIMENT, {"accuracy": held.to_dict()})
    assert (a["verdict"], a["ungated"], a["basis"]) == ("INCONCLUSIVE", "REFUTED",
                                                       "on the cosine alone")
    assert questions.gated_text(a["verdict"], a["ungated"], a["basis"]) == (
        "INCONCLUSIVE (gated; the comparison alone: REFUTED, on the cosine alone)")
    # no basis, or one that is not text (a report from elsewhere): the word alone
    assert questions.gated_text("REFUTED", None, "") == "REFUTED"
    assert questions.gated_text("REFUTED", None, ["x"]) == "REFUTED"
    plain = questions.answer(EXPERIMENT, {"accuracy": _part("accuracy", "REFUTED")})
    assert "basis" not in plain
