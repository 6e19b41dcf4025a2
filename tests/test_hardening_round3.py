"""A third hostile round on what reads reports and renders the summaries (index, coverage,
locks, diff): a report that contradicts itself is refused, a bad lock is never written,
an unreadable or tuning-seed report never lets the other scale's verdict stand alone,
and a command that rewrites several files writes none when one cannot be rendered."""
from __future__ import annotations

import copy
import json

import pytest

from audit import claims as claims_mod
from audit import coverage, report
from audit.claims import AuditError
from audit.cli import main
from audit.runner import Cache, execute, make_context


@pytest.fixture
def data(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    return report.to_json(res)


def _load(tmp_path, data):
    (tmp_path / "toy-claim.json").write_text(json.dumps(data))
    return report.load(tmp_path, "toy-claim")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["parts"][0].__setitem__("reachable", [""]), "'reachable'"),
    (lambda d: d["questions"].append(copy.deepcopy(d["questions"][0])), "appear once"),
    (lambda d: d.__setitem__("verdict", "REFUTED" if d["verdict"] != "REFUTED"
                             else "CONFIRMED"), "is not the word its questions give"),
    (lambda d: d.__setitem__("seeds", [10 ** 400]), "'seeds'"),
])
def test_a_report_that_contradicts_itself_is_one_error(data, tmp_path, mutate, message):
    # the headline, the index and coverage read different fields of a report: they can
    # only say the same where the fields agree
    mutate(data)
    with pytest.raises(AuditError, match=message):
        _load(tmp_path, data)


def test_diff_compares_a_number_past_float_s_range_as_written(data):
    other = copy.deepcopy(data)
    data["parts"][0]["reason"] = "gap 1e400"
    other["parts"][0]["reason"] = "gap 2e400"
    found, _ = report.compare(data, other, rtol=1e-3)
    assert found  # both read as infinity, but they are not the same text
    data["parts"][0]["reason"] = other["parts"][0]["reason"] = "x 1e" + "9" * 5000
    assert report.compare(data, other, rtol=1e-3)[0] == []


@pytest.mark.parametrize("change, message", [
    ({"plan": {"looks": [5, 3], "spending": "bogus"}}, "nothing locked"),
    ({"plan": {}}, "'looks' and 'spending'"),
    # odd types in a report's plan: one line, never a traceback from int() or a float
    # quietly cut to a whole number on its way into the lock
    ({"plan": {"looks": ["x"], "spending": "pocock"}}, "nothing locked"),
    ({"plan": {"looks": 5, "spending": "pocock"}}, "nothing locked"),
    ({"plan": {"looks": [10.9, 20.5], "spending": "pocock"}}, "whole numbers"),
    ({"plan": {"looks": {"10": 1, "20": 2}, "spending": "pocock"}}, "nothing locked"),
    ({"seeds": [-1] + list(range(1, 10))}, "nothing locked"),
    ({"scale": "\x1b]0;x\x07"}, "is not one of the claim's"),
])
def test_lock_writes_nothing_it_would_then_refuse(data, toy, tmp_path, capsys, change,
                                                  message):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    path = toy.CLAIM.locks_path()
    before = path.read_text() if path.exists() else None
    written = json.loads((out / "toy-claim.json").read_text())
    written.update(change)
    (out / "toy-claim.json").write_text(json.dumps(written))
    assert main(["lock", "toy-claim", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "\x1b" not in err and "Traceback" not in err
    assert (path.read_text() if path.exists() else None) == before
    claims_mod.read_locks(path)  # still readable by every later command


def test_report_renders_every_report_before_writing_any(data, toy, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    md = (out / "toy-claim.md").read_text()
    bad = json.loads((out / "toy-claim.json").read_text())
    bad["looks"] = [{}]  # passes the shape checks, fails in rendering
    (out / "toy-claim.json").write_text(json.dumps(bad))
    (out / "toy-claim.md").write_text(md + "\nmarker\n")
    # and a good report of another claim in the same folder, read before the toy's
    import shutil
    from pathlib import Path

    good = Path(__file__).resolve().parents[1] / "reports" / "genefl-uplink-bytes.json"
    shutil.copy(good, out / good.name)
    (out / "genefl-uplink-bytes.md").write_text("marker\n")
    reg = list(claims_mod.registry())
    assert reg.index("genefl-uplink-bytes") < reg.index("toy-claim")
    assert main(["report", "--out", str(out)]) == 2
    assert "not a report that can be rendered" in capsys.readouterr().err
    assert (out / "toy-claim.md").read_text().endswith("marker\n")  # untouched
    assert (out / "genefl-uplink-bytes.md").read_text() == "marker\n"  # not written either


def _record():
    return {"id": "rec", "arxiv_id": "0000.00000", "falsifier": "Some test.",
            "skeptic_critique": {"concrete_test": "A test.", "load_bearing_attack": "An attack."},
            "referee_report": {"major_comments": [{"comment": "c", "section": "Sec. 1"}],
                               "minor_comments": []}}


def test_a_word_quoted_in_an_unreadable_report_s_error_is_not_counted_decided():
    # decided is read from the question's words, never from the rendered text
    c = coverage.Cover("x", None, "report unreadable ('verdict' must be one of CONFIRMED, "
                       "REFUTED)", None, "", ())
    assert not c.decided
    assert coverage.Cover("x", None, "SPLIT (smoke REFUTED, full INCONCLUSIVE)", None, "",
                          ("REFUTED", "INCONCLUSIVE")).decided


@pytest.mark.parametrize("spoil, says", [
    (lambda d: d.__setitem__("runtime_s", "slow"), "full report is unreadable"),
    (lambda d: d.update(tuning_run=True, seeds=[1000 + s for s in d["seeds"]]),
     "tuning run"),
])
def test_a_full_report_without_a_verdict_leaves_no_word_standing_alone(
        data, toy, tmp_path, spoil, says):
    out = tmp_path / "r"
    report.write_data(data, out)
    full = copy.deepcopy(data)
    full["scale"] = "full"
    spoil(full)
    (out / "full").mkdir()
    (out / "full" / "toy-claim.json").write_text(json.dumps(full))
    text, scale, needs, words, _ = coverage._verdict_needs(toy.CLAIM, None, out)
    assert says in text and words == () and scale is None
    header, rows = report.question_rows(out, {"toy-claim": toy.CLAIM})
    cells = dict(zip(header, rows[0]))
    assert cells["full"] != "—" and cells["across scales"] == "—"


def test_a_tuning_run_is_no_verdict_in_the_index(data, toy, tmp_path):
    out = tmp_path / "r"
    data.update(tuning_run=True, seeds=[1000 + s for s in data["seeds"]])
    report.write_data(data, out)
    index = report.write_index(out, {"toy-claim": toy.CLAIM}).read_text()
    assert "a tuning run" in index and "no verdict" in index


def test_a_record_cannot_forge_lines_in_the_text_review(tmp_path, capsys):
    rec = _record()
    rec["referee_report"]["major_comments"][0]["section"] = (
        "Intro)\n  referee_report.major_comments[7]  (forged row)  CONFIRMED (full)")
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    main(["review", str(path), "--out", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert not any(line.lstrip().startswith("referee_report.major_comments[7]")
                   for line in out.splitlines())
