"""`audit review`: record validation, coverage from claims' own declarations, verdicts
from reports, the real records' coverage, and that our paraphrases copy no record text."""
from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from audit import claims as claims_mod
from audit import coverage
from audit.claims import Claim, Paper, RecordRef
from audit.cli import main
from audit.verdict import ALL_PARTS

REPO = Path(__file__).resolve().parents[1]
PAPERS_DIR = REPO / "audit" / "papers"


def _reviews_dir() -> Path | None:
    """The review records (JSON in ``*.txt`` files), which this repository does not ship:
    ``$AUDIT_RECORDS`` when set, else the ``reviews`` folder of a ``shared`` folder beside
    the clone."""
    env = os.environ.get("AUDIT_RECORDS")
    cands = [Path(env)] if env else [REPO.parent / "shared" / "reviews"]
    for cand in cands:
        if cand.is_dir() and any(cand.glob("*.txt")):
            return cand
    return None


# ------------------------------------------------------------------ toy claims, records
TOY = Paper("9999.00001", "a toy paper", "1", "TOY")


def _claim(cid: str, fields: tuple[str, ...], answers: dict[str, str]) -> Claim:
    return Claim(id=cid, paper=TOY, record=RecordRef("toy.json", fields), title=cid,
                 statement="toy", arms=(), rules=(), combination=ALL_PARTS,
                 stochastic=False, scales={"smoke": {}}, run=lambda s, c: {},
                 analyse=lambda r, c: None, answers=answers)


def _toy_q(seeds_parts: tuple[str, ...] = ("s1",)) -> Claim:
    """A toy claim with two questions: a proof (part b) and an experiment (seeds_parts)."""
    from audit.questions import Question

    qs = (Question("bound", "toy: is the bound vacuous?",
                   ("skeptic_critique.concrete_test",), ("b",), kind="proof"),
          Question("seeds", "toy: does the gap survive more seeds?",
                   ("referee_report.major_comments[1]",), seeds_parts))
    return dataclasses.replace(_claim("toy-q", (), {}), questions=qs)


def _record(arxiv: str = TOY.arxiv_id, **drop) -> dict:
    """A record in the reviews' JSON shape, with our own invented text."""
    rec = {
        "arxiv_id": arxiv,
        "skeptic_critique": {"concrete_test": "Toy test: flip the sign and watch the loss.",
                             "load_bearing_attack": "Toy attack on the toy lemma."},
        "falsifier": "Toy falsifier: rerun with ten seeds.",
        "referee_report": {
            "major_comments": [{"comment": "Toy major one about the bound.",
                                "section": "Sec. 2"},
                               {"comment": "Toy major two about the seeds.",
                                "section": "Table 1"}],
            "minor_comments": [{"comment": "Toy minor typo in the caption."}],
        },
    }
    for dotted in drop:
        node = rec
        *head, last = dotted.split("__")
        for k in head:
            node = node[k]
        del node[last]
    return rec


@pytest.fixture
def toy_registry(monkeypatch):
    """Two toy claims of a toy paper: one with a report (and a part answer), one not run."""
    built = _claim("toy-built", ("skeptic_critique.concrete_test",
                                 "referee_report.major_comments[1]"),
                   {"referee_report.major_comments[1]": "seeds"})
    unrun = _claim("toy-unrun", ("falsifier",), {})
    reg = {"toy-built": built, "toy-unrun": unrun}
    monkeypatch.setattr(claims_mod, "registry", lambda: reg)
    monkeypatch.setattr(claims_mod, "RECORDS", {**claims_mod.RECORDS,
                                                TOY.arxiv_id: "toy.json"})
    return reg


def _write_report(out: Path, cid: str, verdict: str, parts: dict[str, str],
                  questions: dict[str, str] | None = None, scale: str = "smoke") -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {"id": cid, "paper": {}, "verdict": verdict, "rule": "toy", "scale": scale,
            "seeds": [0, 1], "arms": [], "estimates": [], "environment": {"commit": "x"},
            "runtime_s": 1.0,
            "parts": [{"id": k, "verdict": v, "rule": "r"} for k, v in parts.items()]}
    if questions is not None:
        data["questions"] = [{"id": k, "verdict": v, "kind": "experiment"}
                             for k, v in questions.items()]
    (out / f"{cid}.json").write_text(json.dumps(data))


def _proof_decided_seeds_open(out) -> None:
    """toy-q's smoke report: the proof CONFIRMED, the experiment open ("about 40 seeds")."""
    _write_report(out, "toy-q", "SPLIT", {"b": "CONFIRMED", "s1": "INCONCLUSIVE"},
                  questions={"bound": "CONFIRMED", "seeds": "INCONCLUSIVE"})
    data = json.loads((out / "toy-q.json").read_text())
    data["questions"][1]["needs"] = "about 40 seeds"
    (out / "toy-q.json").write_text(json.dumps(data))


def test_scales_that_need_the_same_thing_are_named_together(toy_registry, tmp_path):
    """Open at both scales with one and the same "needs": the cell names both scales and
    gives the text once; different texts stay one a scale, in scale order."""
    from audit import coverage

    claim = _toy_q()
    out = tmp_path / "reports"
    for folder, scale in ((out, "smoke"), (out / "full", "full")):
        _write_report(folder, "toy-q", "INCONCLUSIVE", {"b": "INCONCLUSIVE",
                                                        "s1": "INCONCLUSIVE"},
                      questions={"bound": "INCONCLUSIVE", "seeds": "INCONCLUSIVE"},
                      scale=scale)
        data = json.loads((folder / "toy-q.json").read_text())
        data["questions"][1]["needs"] = "the paper's setting"
        data["questions"][0]["needs"] = f"more seeds at {scale}"
        (folder / "toy-q.json").write_text(json.dumps(data))
    cov = coverage.cover_record(_record(), "rec.json", {"toy-q": claim}, out)
    by = {c.part: c for r in cov.rows for c in r.covered_by}
    assert by["seeds"].needs == "smoke and full: the paper's setting"
    assert by["bound"].needs == "smoke: more seeds at smoke; full: more seeds at full"


def test_an_open_question_names_what_would_decide_it_and_the_page_counts_decided_items(
        toy_registry, monkeypatch, tmp_path):
    """A question left open at every scale carries its reports' "needs" (per scale), a
    question decided at some scale needs nothing, and the page counts decided items
    among the checkable ones (presentation and missing definitions are not checkable)."""
    from audit import coverage

    claim = _toy_q()
    out = tmp_path / "reports"
    _proof_decided_seeds_open(out)
    _write_report(out / "full", "toy-q", "INCONCLUSIVE", {"b": "INCONCLUSIVE",
                                                          "s1": "INCONCLUSIVE"},
                  questions={"bound": "INCONCLUSIVE", "seeds": "INCONCLUSIVE"}, scale="full")
    cov = coverage.cover_record(_record(), "rec.json", {"toy-q": claim}, out)
    by = {c.part: c for r in cov.rows for c in r.covered_by}
    assert by["seeds"].needs == "smoke: about 40 seeds" and not by["seeds"].decided
    assert by["bound"].needs == "" and by["bound"].decided  # decided at smoke
    checkable, covered, decided = coverage.decided_counts([cov])
    assert (covered, decided) == (2, 1) and checkable >= covered
    md = coverage.render_markdown([cov], out)
    assert "what would decide it" in md and "smoke: about 40 seeds" in md
    assert "CONFIRMED or REFUTED at some committed scale; measurements aside): 1" in md


def test_an_item_is_decided_only_when_every_question_answering_it_is(toy_registry,
                                                                      tmp_path):
    """An item answered by a decided proof and an open experiment counted as decided, and
    the open question's "what would decide it" was blanked beside it (a referee's read of
    coverage.md). It is now partly decided, and the open question keeps its needs; a
    measurement neither decides an item nor leaves it open."""
    from audit import coverage
    from audit.questions import Question

    # both questions answer the same item (the falsifier): a proof and an experiment
    qs = (Question("bound", "toy: is the bound vacuous?", ("falsifier",), ("b",),
                   kind="proof"),
          Question("seeds", "toy: does the gap survive more seeds?", ("falsifier",),
                   ("s1",)))
    claim = dataclasses.replace(_claim("toy-q", (), {}), questions=qs)
    out = tmp_path / "reports"
    _proof_decided_seeds_open(out)
    cov = coverage.cover_record(_record(), "rec.json", {"toy-q": claim}, out)
    row = next(r for r in cov.rows if r.path == "falsifier")
    assert {c.part for c in row.covered_by} == {"bound", "seeds"}
    assert not row.decided and row.partly_decided
    needs = [n for _, _, _, _, n in coverage._rows_with_needs(cov) if n]
    assert "about 40 seeds" in " ".join(needs)
    assert coverage.partly_decided_count([cov]) >= 1
    m = coverage.Cover("c", "m", "MEASURED", words=("MEASURED",))
    d = coverage.Cover("c", "d", "CONFIRMED", words=("CONFIRMED",))
    assert coverage.Row("x", "y", [m, d]).decided
    assert not coverage.Row("x", "y", [m]).decided
    assert not coverage.Row("x", "y", [m]).partly_decided


def _review_json(capsys, *args) -> tuple[int, list[dict], str]:
    rc = main(["review", *map(str, args), "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err


def _items(cov: dict) -> dict[str, dict]:
    return {i["path"]: i for i in cov["items"]}


# ------------------------------------------------------------------------------ tests
def test_items_are_covered_by_claims_declarations_with_report_verdicts(
        toy_registry, tmp_path, capsys):
    out = tmp_path / "reports"
    _write_report(out, "toy-built", "CONFIRMED", {"seeds": "REFUTED"})
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(_record()))
    rc, data, err = _review_json(capsys, rec, "--out", out)
    assert rc == 0 and err == ""
    items = _items(data[0])
    assert list(items) == ["skeptic_critique.concrete_test",
                           "skeptic_critique.load_bearing_attack", "falsifier",
                           "referee_report.major_comments[0]",
                           "referee_report.major_comments[1]",
                           "referee_report.minor_comments[0]"]
    # the claim as a whole answers its record.fields: the claim's verdict
    assert items["skeptic_critique.concrete_test"]["covered_by"] == [
        {"claim": "toy-built", "part": None, "verdict": "CONFIRMED", "scale": "smoke",
         "needs": "", "words": ["CONFIRMED"], "fragile": False}]
    # an `answers` entry maps to one part: that part's verdict, not the claim's (and it
    # is the one shown when record.fields lists the same path)
    assert items["referee_report.major_comments[1]"]["covered_by"] == [
        {"claim": "toy-built", "part": "seeds", "verdict": "REFUTED", "scale": "smoke",
         "needs": "", "words": ["REFUTED"], "fragile": False}]
    assert items["falsifier"]["covered_by"][0]["verdict"] == "not run"
    left = items["referee_report.major_comments[0]"]
    assert not left["covered"] and left["reason"]
    # a paper without notes: the section label stands in for a paraphrase
    assert left["paraphrase"] == "(section: Sec. 2)"
    assert items["referee_report.minor_comments[0]"]["paraphrase"] == coverage.UNKNOWN_PAPER


def test_verdict_is_not_run_without_a_report_and_flags_a_missing_part(
        toy_registry, tmp_path, capsys):
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(_record()))
    rc, data, _ = _review_json(capsys, rec, "--out", tmp_path / "none")
    assert rc == 0
    assert _items(data[0])["skeptic_critique.concrete_test"]["covered_by"][0][
        "verdict"] == "not run"
    out = tmp_path / "reports"
    _write_report(out, "toy-built", "INCONCLUSIVE", {"other": "CONFIRMED"})
    rc, data, _ = _review_json(capsys, rec, "--out", out)
    # the ref is a question id, or a part id for a claim that declares no questions
    assert _items(data[0])["referee_report.major_comments[1]"]["covered_by"][0][
        "verdict"] == "'seeds' not in the report"


def _toy_q_split(toy_registry, monkeypatch, tmp_path):
    """toy-q registered, a record, and its smoke report: the proof CONFIRMED, the seeds
    question REFUTED. Returns (claim, record path, reports folder)."""
    claim = _toy_q(("s1", "s2"))
    reg = {**toy_registry, "toy-q": claim}
    monkeypatch.setattr(claims_mod, "registry", lambda: reg)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(_record()))
    out = tmp_path / "reports"
    _write_report(out, "toy-q", "SPLIT", {"b": "CONFIRMED", "s1": "REFUTED", "s2": "REFUTED"},
                  questions={"bound": "CONFIRMED", "seeds": "REFUTED"})
    return claim, rec, out


def test_an_item_shows_its_questions_verdict_with_the_scales_side_by_side(
        toy_registry, monkeypatch, tmp_path, capsys):
    """A claim with questions covers the items its questions name, each with the
    question's verdict (not the claim's word, not a part's); with a ``full/`` folder of
    reports both scales are shown, SPLIT when they differ (never one promoted)."""

    claim, rec, out = _toy_q_split(toy_registry, monkeypatch, tmp_path)
    rc, data, _ = _review_json(capsys, rec, "--out", out)
    items = _items(data[0])
    assert rc == 0
    assert [c for c in items["skeptic_critique.concrete_test"]["covered_by"]
            if c["claim"] == "toy-q"] == [
        {"claim": "toy-q", "part": "bound", "verdict": "CONFIRMED", "scale": "smoke",
         "needs": "", "words": ["CONFIRMED"], "fragile": False}]
    assert [c for c in items["referee_report.major_comments[1]"]["covered_by"]
            if c["claim"] == "toy-q"] == [
        {"claim": "toy-q", "part": "seeds", "verdict": "REFUTED", "scale": "smoke",
         "needs": "", "words": ["REFUTED"], "fragile": False}]
    # a full-scale report beside it: both scales, the question's word across them
    _write_report(out / "full", "toy-q", "CONFIRMED",
                  {"b": "CONFIRMED", "s1": "CONFIRMED", "s2": "CONFIRMED"},
                  questions={"bound": "CONFIRMED", "seeds": "CONFIRMED"}, scale="full")
    rc, data, _ = _review_json(capsys, rec, "--out", out)
    items = _items(data[0])
    by_q = {c["part"]: c["verdict"] for p in ("skeptic_critique.concrete_test",
                                               "referee_report.major_comments[1]")
            for c in items[p]["covered_by"] if c["claim"] == "toy-q"}
    assert by_q == {"bound": "CONFIRMED (smoke CONFIRMED, full CONFIRMED)",
                    "seeds": "SPLIT (smoke REFUTED, full CONFIRMED)"}
    assert main(["review", str(rec), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "toy-q / seeds" in text and "SPLIT (smoke REFUTED, full CONFIRMED)" in text


def test_malformed_records_give_one_line_each_and_the_rest_is_read(
        toy_registry, tmp_path, capsys):
    folder = tmp_path / "reviews"
    folder.mkdir()
    (folder / "a_good.json").write_text(json.dumps(_record()))
    (folder / "b_badjson.txt").write_text('{"arxiv_id": "9999.00001", ')
    (folder / "c_nomajor.json").write_text(
        json.dumps(_record(referee_report__major_comments=True)))
    (folder / "d_noctest.txt").write_text(
        json.dumps(_record(skeptic_critique__concrete_test=True)))
    (folder / "e_unknown.json").write_text(json.dumps(_record(arxiv="0000.11111")))
    (folder / "f_list.json").write_text("[1, 2]")
    (folder / "notes.md").write_text("not a record, not read")
    rc, data, err = _review_json(capsys, folder, "--out", tmp_path / "r")
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 5, err
    for name, words in [("b_badjson.txt", "not valid JSON"),
                        ("c_nomajor.json", "referee_report.major_comments"),
                        ("d_noctest.txt", "skeptic_critique.concrete_test"),
                        ("e_unknown.json", "unknown arXiv id '0000.11111'"),
                        ("f_list.json", "not a JSON object")]:
        assert sum(name in ln and words in ln for ln in lines) == 1, (name, err)
    by_file = {Path(c["source"]).name: c for c in data}
    assert "notes.md" not in by_file
    assert all(i["covered"] for p, i in _items(by_file["a_good.json"]).items()
               if p in ("skeptic_critique.concrete_test", "falsifier"))
    # the unknown paper's items are still listed, none covered, with the fixed reason
    unknown = _items(by_file["e_unknown.json"])
    assert len(unknown) == 6
    assert all(not i["covered"] and i["reason"] == coverage.NO_CLAIM_FOR_PAPER
               for i in unknown.values())


def test_fatal_path_errors_are_one_line_exit_2(tmp_path, capsys):
    assert main(["review", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]
    (tmp_path / "empty").mkdir()
    assert main(["review", str(tmp_path / "empty")]) == 2
    assert "holds no" in capsys.readouterr().err


def test_a_declared_field_the_record_lacks_is_a_warning_not_a_failure(
        toy_registry, monkeypatch, tmp_path, capsys):
    reg = dict(toy_registry)
    reg["toy-extra"] = _claim("toy-extra", (), {"referee_report.minor_comments[7]": "x"})
    monkeypatch.setattr(claims_mod, "registry", lambda: reg)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(_record()))
    rc = main(["review", str(rec), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 0 and "warning" in err and "minor_comments[7]" in err


def test_text_and_markdown_show_paths_not_record_text(toy_registry, tmp_path, capsys):
    out = tmp_path / "reports"
    _write_report(out, "toy-built", "CONFIRMED", {"seeds": "REFUTED"})
    rec = tmp_path / "rec.json"
    record = _record()
    rec.write_text(json.dumps(record))
    assert main(["review", str(rec), "--markdown", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    md = (out / "coverage.md").read_text()
    for shown in (text, md):
        assert "referee_report.major_comments[1]" in shown and "REFUTED" in shown
        assert "toy-built / seeds" in shown and "not run" in shown
        for sentence in ("Toy major one about the bound.", "Toy test: flip the sign",
                         "Toy falsifier: rerun"):
            assert sentence not in shown
    assert "[coverage.md](coverage.md)" in (out / "README.md").read_text()
    # a claim links to its report page only when that page exists
    assert "](toy-built.md)" not in md and "](toy-unrun.md)" not in md
    (out / "toy-built.md").write_text("# toy-built")
    main(["review", str(rec), "--markdown", "--out", str(out)])
    md = (out / "coverage.md").read_text()
    assert "[`toy-built`](toy-built.md)" in md and "](toy-unrun.md)" not in md


# ----------------------------------------------------------------- the real records
def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\W_]+", text.lower()) if w]


def _ngrams(text: str, n: int = 10) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def test_the_copy_detector_finds_a_copied_run():
    # the detector must be able to fail: ten words shared in a row are found, nine are not
    source = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
    assert _ngrams("x " + " ".join(source.split()[:10]) + " y") & _ngrams(source)
    assert not _ngrams("x " + " ".join(source.split()[:9]) + " y") & _ngrams(source)


needs_records = pytest.mark.skipif(_reviews_dir() is None,
                                   reason="no review records (set AUDIT_RECORDS to their "
                                          "folder)")


@needs_records
def test_paper_notes_share_no_ten_word_run_with_the_records():
    record_grams: set = set()
    for f in sorted(_reviews_dir().glob("*.txt")):
        for s in _strings(json.loads(f.read_text())):
            record_grams |= _ngrams(s)
    ours = [p for p in sorted(PAPERS_DIR.glob("*.py"))]
    ours += [REPO / "audit" / "coverage.py"]
    if (REPO / "reports" / "coverage.md").exists():
        ours.append(REPO / "reports" / "coverage.md")
    for path in ours:
        shared = _ngrams(path.read_text()) & record_grams
        assert not shared, f"{path.name} copies record text: {' '.join(next(iter(shared)))}"


@needs_records
def test_every_real_item_is_covered_or_has_a_reason(capsys, tmp_path):
    from audit import papers

    rc, data, err = _review_json(capsys, _reviews_dir(), "--out", tmp_path / "r")
    assert rc == 0, err
    assert {c["arxiv_id"] for c in data} == set(claims_mod.RECORDS)
    modules = papers.paper_modules()
    for cov in data:
        notes = modules[cov["arxiv_id"]].ITEMS
        items = _items(cov)
        # our notes name exactly the record's items: none missing, none stale
        assert set(notes) == set(items), cov["source"]
        for path, item in items.items():
            assert item["paraphrase"] == notes[path].paraphrase
            assert len(_words(item["paraphrase"])) <= 16, path
            if not item["covered"]:
                note = notes[path]
                assert note.reason or note.proposed, (cov["source"], path)
                assert item["reason"] and "no reason is recorded" not in item["reason"]
        # the fixed concrete test of each paper is declared by its claim(s)
        assert items["skeptic_critique.concrete_test"]["covered"]


@needs_records
def test_real_claims_declare_only_items_their_record_has(tmp_path):
    # a declaration such as "referee_report.major_comments" (no index) names no item, so
    # it covers nothing; every declared path must be an item of the paper's record
    covs = coverage.review([_reviews_dir()], tmp_path / "r")
    dangling = [d for c in covs for d in c.dangling]
    assert dangling == [], dangling


def test_a_split_against_a_report_by_earlier_code_names_that_code(
        toy_registry, monkeypatch, tmp_path):
    """Where scales disagree and one report was written by earlier code of the claim (its
    recorded code version is not today's), the coverage page and the index's question
    table tag that verdict with the commit it was written at: the difference may be the
    code's change, not the scale's. Agreeing scales carry no tag."""
    from audit import coverage, report
    from audit.keys import claim_code_version

    claim = _toy_q()
    out = tmp_path / "reports"
    _write_report(out, "toy-q", "SPLIT", {"b": "CONFIRMED", "s1": "REFUTED"},
                  questions={"bound": "CONFIRMED", "seeds": "REFUTED"})
    _write_report(out / "full", "toy-q", "CONFIRMED", {"b": "CONFIRMED", "s1": "CONFIRMED"},
                  questions={"bound": "CONFIRMED", "seeds": "CONFIRMED"}, scale="full")
    now = claim_code_version(claim.code_module()) + claim.plugin_version()
    for folder, version, commit in ((out, now, "1111111aaaa"),
                                    (out / "full", "0.1.0+old", "2222222bbbb")):
        data = json.loads((folder / "toy-q.json").read_text())
        data["environment"] = {"commit": commit, "claim_code_version": version}
        (folder / "toy-q.json").write_text(json.dumps(data))
    assert report.earlier_code(json.loads((out / "toy-q.json").read_text()), claim) == ""
    assert report.earlier_code(
        json.loads((out / "full" / "toy-q.json").read_text()), claim) == "2222222"
    assert coverage._verdict(claim, "seeds", out)[0] == (
        "SPLIT (smoke REFUTED, full CONFIRMED at earlier code `2222222`)")
    assert coverage._verdict(claim, "bound", out)[0] == (
        "CONFIRMED (smoke CONFIRMED, full CONFIRMED)")  # agreeing: nothing to explain
    header, rows = report.question_rows(out, {"toy-q": claim})
    by_q = {r[1].split("`")[1]: dict(zip(header, r)) for r in rows}
    assert by_q["seeds"]["full"].startswith("CONFIRMED (earlier code)")
    assert "full: written by earlier code of this claim (commit 2222222)" in by_q["seeds"][
        "why they differ / caveats"]
    assert by_q["seeds"]["smoke"] == "REFUTED"
    assert "earlier code" not in " ".join(map(str, by_q["bound"].values()))
    # a report from before claims' versions were recorded: earlier code too
    assert report.earlier_code({"environment": {"code_version": "0.1.0+abc",
                                                "commit": "3333333"}}, claim) == "3333333"
    assert report.earlier_code({"environment": {}}, claim) == ""  # nothing to compare


def test_a_fragile_question_is_marked_fragile_in_coverage_and_still_counts_decided(
        toy_registry, monkeypatch, tmp_path, capsys):
    claim, rec, out = _toy_q_split(toy_registry, monkeypatch, tmp_path)
    data = json.loads((out / "toy-q.json").read_text())
    data["stability"] = {"loo_agree": 2, "loo_total": 2, "fragile": True, "questions": {
        "seeds": {"loo_agree": 1, "loo_total": 2, "loo": {"0": "REFUTED",
                                                          "1": "INCONCLUSIVE"}}}}
    (out / "toy-q.json").write_text(json.dumps(data))
    rc, got, _ = _review_json(capsys, rec, "--out", out)
    items = _items(got[0])
    by_q = {c["part"]: (c["verdict"], c["words"]) for p in (
        "skeptic_critique.concrete_test", "referee_report.major_comments[1]")
        for c in items[p]["covered_by"] if c["claim"] == "toy-q"}
    assert by_q == {"bound": ("CONFIRMED", ["CONFIRMED"]),
                    "seeds": ("REFUTED (fragile)", ["REFUTED"])}
    # with a second scale that is fragile too, the common word is no firmer than both
    full = out / "full"
    full.mkdir()
    (full / "toy-q.json").write_text(json.dumps({**data, "scale": "full"}))
    rc, got, _ = _review_json(capsys, rec, "--out", out)
    both = {c["part"]: c["verdict"] for c in _items(got[0])[
        "referee_report.major_comments[1]"]["covered_by"] if c["claim"] == "toy-q"}
    assert both == {"seeds": "REFUTED, fragile (smoke REFUTED (fragile), full REFUTED "
                             "(fragile))"}
    (full / "toy-q.json").unlink()
    # the question is decided only where its word is fragile: its cover says so
    seeds_item = items["referee_report.major_comments[1]"]
    assert [c["fragile"] for c in seeds_item["covered_by"] if c["claim"] == "toy-q"] == [True]
    assert [c["fragile"] for c in items["skeptic_critique.concrete_test"]["covered_by"]
            if c["claim"] == "toy-q"] == [False]


def test_an_item_decided_only_through_a_fragile_word_is_counted_so():
    """A decided item is fragile where a question deciding it is decided only where its
    word is marked fragile; the page's counts say how many (they stay decided)."""
    firm = coverage.Cover("c", "q1", "REFUTED", "smoke", "", ("REFUTED",), False)
    frail = coverage.Cover("c", "q2", "REFUTED (fragile)", "smoke", "", ("REFUTED",), True)
    open_ = coverage.Cover("c", "q3", "INCONCLUSIVE", "smoke", "x", ("INCONCLUSIVE",), False)
    rows = [coverage.Row("a", "p", [firm]), coverage.Row("b", "p", [firm, frail]),
            coverage.Row("c", "p", [frail, open_])]
    assert [(r.decided, r.fragile) for r in rows] == [(True, False), (True, True),
                                                      (False, False)]
    cov = coverage.RecordCoverage("rec.json", "1", "paper", rows)
    assert coverage.fragile_count([cov]) == 1
    assert ("2 of 3 checkable items decided (1 resting on a word marked fragile), 1 partly"
            in coverage._summary(cov))
    assert "1 of them resting on a word marked fragile" in coverage._decided_line([cov])
    assert [i["fragile"] for i in cov.to_dict()["items"]] == [False, True, False]


def test_the_index_says_where_the_comparisons_alone_differ_across_scales(toy_registry,
                                                                          tmp_path):
    """INCONCLUSIVE at both scales, but the premise gate held a REFUTED at smoke while the
    comparison at full was undecided on its own: the index's caveat cell says the
    comparisons alone differ, so smoke's held word is not read as the answer at full;
    where they agree, or where a scale decides, it says nothing of the kind."""
    from audit import report

    claim = _toy_q()
    out = tmp_path / "reports"
    for folder, scale, alone in ((out, "smoke", "REFUTED"), (out / "full", "full", None)):
        _write_report(folder, "toy-q", "INCONCLUSIVE", {"b": "INCONCLUSIVE",
                                                        "s1": "INCONCLUSIVE"},
                      questions={"bound": "INCONCLUSIVE", "seeds": "INCONCLUSIVE"},
                      scale=scale)
        data = json.loads((folder / "toy-q.json").read_text())
        if alone:
            data["questions"][1].update(ungated=alone, gated=True)
        (folder / "toy-q.json").write_text(json.dumps(data))
    header, rows = report.question_rows(out, {"toy-q": claim})
    by_q = {r[1].split("`")[1]: dict(zip(header, r)) for r in rows}
    assert by_q["seeds"]["why they differ / caveats"] == (
        "the comparisons alone differ across scales (smoke REFUTED, full INCONCLUSIVE)")
    assert by_q["bound"]["why they differ / caveats"] == "—"
    assert report._alone_across({"by_scale": {"smoke": "INCONCLUSIVE", "full": "REFUTED"},
                                 "ungated": {"smoke": "CONFIRMED"}}) == ""  # SPLIT: its own why
    assert report._alone_across({"by_scale": {"smoke": "INCONCLUSIVE",
                                              "full": "INCONCLUSIVE"},
                                 "ungated": {"smoke": "REFUTED", "full": "REFUTED"}}) == ""
