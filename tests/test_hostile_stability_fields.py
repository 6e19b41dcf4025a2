"""The report-JSON fields of a premise's own leave-one-seed-out subsets
(``stability.premise``), of why the premise gate held a subset's answer (``stability.
questions[qid].held``) and of what a decided word rests on (``questions[].basis``,
``parts[].basis``) come from elsewhere: a value outside the contract is ignored, never
printed as if it were one, and nothing they hold breaks a table or the page."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from audit import claims, coverage, report
from audit.cli import main

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
EVIL = "a | b\n# heading <script>alert(1)</script> `x` [l](javascript:1) \x1b[31mred"


def _load(cid: str) -> dict:
    return json.loads((REPORTS / f"{cid}.json").read_text())


def _cells(line: str) -> int:
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def _tables_whole(md: str) -> None:
    """Every row of every table has its header's cells; no raw HTML, no heading."""
    assert "<script" not in md and "\x1b" not in md and "](javascript:" not in md
    lines = md.splitlines()
    assert not any(ln.startswith("# heading") for ln in lines)
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith("|") and re.fullmatch(r"\|(---\|)+", lines[i + 1]):
            n = _cells(ln)
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == n, lines[j][:200]
                j += 1


def test_why_a_subset_was_held_shows_only_beside_inconclusive_and_only_the_gates_words():
    stab = {"questions": {"q": {
        "loo_agree": 1, "loo_total": 4,
        "loo": {"0": "REFUTED", "1": "INCONCLUSIVE", "2": "INCONCLUSIVE", "3": "CONFIRMED"},
        "held": {"0": "not shown", "1": EVIL, "2": "not reproduced", "3": ["not shown"]}}}}
    line = report._question_loo_line(stab, [{"id": "q", "verdict": "CONFIRMED",
                                             "kind": "experiment"}])
    # a decided subset word was never held; a why that is no gate's word is no why
    assert "without seed 0: REFUTED;" in line and "REFUTED (" not in line
    assert "without seed 1: INCONCLUSIVE)" in line and "heading" not in line
    assert "without seed 2: INCONCLUSIVE (decided, held: premise not reproduced)" in line


def test_a_premise_subset_entry_is_read_only_where_it_matches_the_contract():
    loo = {"4": "undecided", **{str(s): "reproduced" for s in range(10) if s != 4}}
    good = {"status": "reproduced", "loo_agree": 9, "loo_total": 10, "loo": loo,
            "fragile": True}
    data = {"premise": {"status": "reproduced", "effect": "e"}, "stability": {"premise": good}}
    assert report._premise_cell(data) == "reproduced (fragile)"
    for bad in ({"fragile": True},  # no counts: ignored, as the page ignores it
                {**good, "loo_agree": 10},  # every subset agrees: nothing changed it
                {**good, "status": "not reproduced"},  # not this report's premise
                {**good, "status": EVIL}):
        stab = {"premise": bad}
        assert report._premise_cell({**data, "stability": stab}) == "reproduced", bad
        assert "fragile" not in report._premise_loo_text(stab, "reproduced")
    # an undecided premise is never fragile (the contract: decided, and one seed moves it)
    undecided = {"premise": {**good, "status": "undecided"}}
    assert report._premise_cell({"premise": {"status": "undecided", "effect": "e"},
                                 "stability": undecided}) == "undecided"
    assert report._premise_loo_text(undecided, "undecided").startswith("undecided in 9 of 10")
    assert not report._premise_loo_text(undecided, "undecided").endswith("fragile")
    # a status that is no premise status is not printed on the premise line
    assert report._premise_loo_text({"premise": {**good, "status": EVIL}}) == ""


def test_the_page_s_premise_line_names_only_the_report_s_own_premise_status():
    data = _load("genefl-inverted-cosine")  # premise reproduced
    data["stability"]["premise"] = {"status": "not reproduced", "loo_agree": 2,
                                    "loo_total": 10, "loo": {"0": "reproduced"},
                                    "fragile": True}
    md = report.render_markdown(data)
    line = next(ln for ln in md.splitlines() if ln.startswith("**Premise**"))
    assert "Leave-one-seed-out" not in line and "not reproduced in 2 of 10" not in line


@pytest.mark.parametrize("basis", [12, True, ["on x"], {"evil": "<script>"}])
def test_a_part_basis_that_is_no_string_is_not_printed_for_an_older_report(basis):
    data = _load("genefl-inverted-cosine")
    data.pop("questions")  # an older report: its questions derived from its parts
    for p in data["parts"]:
        p["basis"] = basis
    qs = report.report_questions(data, claims.registry()[data["id"]])
    assert qs and not any("basis" in q for q in qs)
    md = report.render_markdown(data)
    row = next(ln for ln in md.splitlines() if ln.startswith("| `prose-inverted`"))
    assert "**CONFIRMED** |" in row, row
    # a string basis still reads
    for p in data["parts"]:
        p["basis"] = "on the cosine alone"
    md = report.render_markdown(data)
    row = next(ln for ln in md.splitlines() if ln.startswith("| `prose-inverted`"))
    assert "**CONFIRMED** (on the cosine alone) |" in row, row


@pytest.mark.parametrize("blank", ["\n", "  ", "\x1b[31m", "\x00"])
def test_a_basis_with_nothing_to_show_adds_nothing_in_coverage(blank):
    data = _load("genefl-inverted-cosine")
    data["questions"][0]["basis"] = blank  # prose-inverted, CONFIRMED
    assert coverage._entry_ungated(data, "prose-inverted") == ("", "")
    data["questions"][0]["basis"] = "on the cosine alone"
    assert coverage._entry_ungated(data, "prose-inverted") == ("", "on the cosine alone")


def test_hostile_new_fields_leave_every_page_whole(tmp_path):
    """``audit report --out``: the report pages, the index and coverage.md."""
    out = tmp_path / "out"
    out.mkdir()
    for cid in ("genefl-inverted-cosine", "lips-dropout-control"):
        data = copy.deepcopy(_load(cid))
        st = data["stability"]
        st["premise"] = {"status": data["premise"]["status"], "loo_agree": 8,
                         "loo_total": 10, "loo": {"0": EVIL, EVIL: "x", "2": ["y"]},
                         "fragile": True}
        for e in st["questions"].values():
            e["loo_agree"] = e["loo_total"] - 2
            e["loo"].update({"0": "REFUTED", "1": "INCONCLUSIVE", EVIL: EVIL})
            e["held"] = {"0": "not shown", "1": EVIL, EVIL: EVIL}
        for q in data["questions"]:
            q["basis"] = EVIL
            if q["verdict"] == "INCONCLUSIVE":
                q["ungated"] = "REFUTED"
        for p in data["parts"]:
            p["basis"] = EVIL
        (out / f"{cid}.json").write_text(json.dumps(data))
    assert main(["report", "--out", str(out)]) == 0
    pages = ["README.md", "coverage.md", "genefl-inverted-cosine.md",
             "lips-dropout-control.md"]
    for name in pages:
        _tables_whole((out / name).read_text())
    index = (out / "README.md").read_text()
    # an undecided premise is never marked fragile
    row = next(ln for ln in index.splitlines() if ln.startswith("| [`lips-dropout"))
    assert ("undecided (estimate against the effect: -0.7556; setting chosen on verdict "
            "seeds) |") in row
    page = (out / "genefl-inverted-cosine.md").read_text()
    assert "REFUTED (premise" not in page


def test_subset_counts_must_be_backed_by_the_report_s_seeds_and_subsets(tmp_path):
    data = _load("genefl-inverted-cosine")  # 10 seeds, 10 subsets
    report.validate(data)
    for total in (11, 10**30):
        bad = copy.deepcopy(data)
        bad["stability"]["loo_total"] = total
        with pytest.raises(report.AuditError, match="loo_total <= the report's seeds"):
            report.validate(bad)
    # a premise or question entry whose count its own subsets do not back is not read
    prem = copy.deepcopy(data["stability"]["premise"])
    assert report._premise_loo(data["stability"]) is not None
    for bad in ({**prem, "loo_total": 10**30}, {k: v for k, v in prem.items() if k != "loo"},
                {**prem, "loo": dict(list(prem["loo"].items())[:9])}):
        assert report._premise_loo({"premise": bad}) is None
        assert report._premise_loo_text({"premise": bad}) == ""


def test_a_very_long_basis_is_cut_where_it_is_printed():
    data = _load("genefl-inverted-cosine")
    long = "on " + "x" * 5000
    data["questions"][0]["basis"] = long  # prose-inverted, CONFIRMED
    for p in data["parts"]:
        p["basis"] = long
    (q, *_), md = report.report_questions(data), report.render_markdown(data)
    assert len(q["basis"]) == report.BASIS_MAX and q["basis"].endswith("…")
    row = next(ln for ln in md.splitlines() if ln.startswith("| `prose-inverted`"))
    assert "x" * (report.BASIS_MAX - 4) in row and "x" * report.BASIS_MAX not in row
    assert len(md) < 4 * len(report.render_markdown(_load("genefl-inverted-cosine")))
    # only the basis is cut: an older report's questions, derived from its parts, keep
    # the parts' long reasons whole
    data.pop("questions")
    for p in data["parts"]:
        p["reason"] = "r" * 2000
    qs = report.report_questions(data, claims.registry()[data["id"]])
    assert qs and all(len(q["reason"]) >= 2000 for q in qs if q.get("reason"))
    assert all(len(q.get("basis", "")) <= report.BASIS_MAX for q in qs)


def test_the_notes_are_read_with_a_fragile_premise():
    """The claim's notes are written before the runner leaves seeds out: where the
    premise proves fragile, the notes' section says so before them, and only then."""
    data = _load("genefl-inverted-cosine")  # smoke: reproduced, 2 of 10 subsets
    md = report.render_markdown(data)
    head = md.split("## What this shows, and what it does not", 1)[1].split("\n\n")[1]
    assert head == ("The notes below were written from all 10 seeds, before the check "
                    "that leaves each out in turn; read them with what it found: the "
                    "premise is reproduced in only 2 of the 10 leave-one-seed-out subsets; "
                    "`selection-reversal` (REFUTED) is fragile: it holds in 1 of 10 (see "
                    "the premise line and the stability line).")
    full = json.loads((REPORTS / "full" / "genefl-inverted-cosine.json").read_text())
    head = report.render_markdown(full).split("## What this shows")[1].split("\n\n")[1]
    assert head.endswith("read them with what it found: `selection-reversal` (REFUTED) is "
                         "fragile: it holds in 19 of 20 (see the stability line).")
    # the premise holds in 20 of 20: the premise line is not pointed to
    # nothing fragile: no line
    lips = _load("lips-dropout-control")
    assert "before the check that leaves" not in report.render_markdown(lips)


def test_a_premise_measured_in_a_setting_chosen_on_test_data_says_so_in_the_index():
    data = _load("genefl-inverted-cosine")  # smoke: kept on verdict seeds, no test metric
    assert report._premise_cell(data) == "reproduced (fragile; setting chosen on verdict seeds)"
    full = json.loads((REPORTS / "full" / "genefl-inverted-cosine.json").read_text())
    assert full["searches"][0]["test_metric_read"] is True
    assert report._premise_cell(full) == "reproduced (setting chosen on test data)"
    for odd in ("yes", 1, None):  # only a true flag from elsewhere marks it
        bad = copy.deepcopy(full)
        bad["searches"][0]["test_metric_read"] = odd
        assert report._premise_cell(bad) == "reproduced"
    assert report._premise_cell({**full, "searches": {"test_metric_read": True}}) == \
        "reproduced"
    # a choice that read the verdict's own seeds says so too (LIPS smoke's pilot)
    lips = _load("lips-dropout-control")
    assert report._premise_cell(lips).endswith("; setting chosen on verdict seeds)")


def test_stable_without_a_resolution_says_it_rests_on_the_left_out_seeds_alone():
    # flip in share of ||g||^2: no resolution (the full report: the smoke one is fragile
    # through a question since the interval's turning-point clamp)
    data = json.loads((REPORTS / "full" / "fedtlu-lower-bound.json").read_text())
    assert data["stability"]["resolution"] is None and not data["stability"]["fragile"]
    line = report._stability_line(data["stability"], data)
    assert line.startswith("Stability (stable by leave-one-seed-out; the flip distance is "
                           "not judged: its metric has no resolution in test examples): ")
    full = json.loads((REPORTS / "full" / "lips-dropout-control.json").read_text())
    assert full["stability"]["resolution"] and not full["stability"]["fragile"]
    assert report._stability_line(full["stability"], full).startswith("Stability (stable): ")
    lips = _load("lips-dropout-control")  # no flip distance at all: nothing to judge
    assert lips["stability"]["flip"] is None
    assert report._stability_line(lips["stability"], lips).startswith("Stability (stable): ")


def test_a_held_why_the_map_does_not_know_prints_as_the_gate_wrote_it(monkeypatch):
    # a gate word added later to verdict.HELD_BY_PREMISE but not to the page's map of the
    # premise line's words prints as written, not as a KeyError
    from audit import verdict

    monkeypatch.setattr(verdict, "HELD_BY_PREMISE", verdict.HELD_BY_PREMISE + ("withdrawn",))
    word = report._subset_word({"3": "INCONCLUSIVE"}, {"3": "withdrawn"}, "3")
    assert word == "INCONCLUSIVE (decided, held: premise withdrawn)"
