"""What the reports say matches what the code does (the smaller errors of a skeptical
reading): agnostic classes, byte units, attribution, gates and printed sensitivity."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"


def _current(folder: Path, cid: str) -> dict:
    """A committed report written with questions; an older one (re-rendered with
    questions derived from its parts, and marked so) is skipped: these checks are about
    what the current code writes."""
    data = json.loads((folder / f"{cid}.json").read_text())
    if not data.get("questions"):
        pytest.skip(f"{folder.name}/{cid}.json is an older report (no questions of its own)")
    return data


def _by_this_code(data: dict, cid: str) -> bool:
    """Whether a report was written by the claim's current code (its runs' code version)."""
    from audit import claims
    from audit.keys import claim_code_version

    claim = claims.registry()[cid]
    return data["environment"].get("claim_code_version") == claim_code_version(
        claim.code_module())


class _Stop(Exception):
    pass


def test_genefl_agnostic_clients_hold_only_classes_the_known_clients_never_see(monkeypatch):
    from audit.papers.genefl import inverted_cosine as g
    from audit.papers.genefl import simulation as genefl_sim
    from audit.fl import data as D

    seen = []
    real = D.make_federated

    def spy(ds, parts, *a, **k):
        seen.append(sorted({int(y) for p in parts for y in ds.y_train.numpy()[p]}))
        if len(seen) == 2:
            raise _Stop
        return real(ds, parts, *a, **k)

    monkeypatch.setattr(D, "make_federated", spy)
    cfg = dict(g.SCALES["smoke"])
    with pytest.raises(_Stop):
        genefl_sim.simulate(cfg, 0, "top", True)
    known, agnostic = seen
    assert set(known) <= set(cfg["known_classes"])
    unseen = sorted(set(cfg["agnostic_classes"]) - set(cfg["known_classes"]))
    assert agnostic == unseen == [7, 8, 9]
    text = json.dumps(json.loads((REPORTS / "genefl-inverted-cosine.json").read_text())["notes"])
    assert "digits 7-9" in text and "digits 5-9;" not in text


def test_bytes_formula_table_names_its_unit():
    data = json.loads((REPORTS / "genefl-uplink-bytes.json").read_text())
    table = next(t for t in data["tables"] if t["title"].startswith("Section IV-B"))
    assert "1000 MiB" in table["columns"][1]
    once = next(p for p in data["parts"] if p["id"] == "once-per-client")
    assert once["kind"] == "measurement" and "from P =" in once["reason"]


def test_score_statement_credits_the_reviewer_only_with_what_they_said():
    from audit.papers.fedtlu import score_undefined as m

    assert "size" not in m.CLAIM.statement
    data = json.loads((REPORTS / "fedtlu-score-undefined.json").read_text())
    assert any(f["text"].startswith("Our own finding") for f in data["findings"])
    # the scale-freeness is ours (a finding), never a question put to the reviewer's name;
    # the planted pick answers the record's falsifier
    qs = {q["id"]: q for q in data["questions"]}
    assert set(qs) == {"score-undefined", "planted-pick"}
    assert qs["planted-pick"]["fields"] == ["falsifier"]


@pytest.mark.parametrize("folder", [REPORTS, REPORTS / "full"], ids=["smoke", "full"])
def test_fedtlu_assumption_b_is_never_gated_and_the_isotropic_test_is_answered(folder):
    data = _current(folder, "fedtlu-lower-bound")
    parts = {p["id"]: p for p in data["parts"]}
    assert not parts["assumption-b"]["gated"]
    assert "premise not reproduced" not in parts["assumption-b"]["reason"]
    iso = parts["isotropic-test"]
    assert "cannot separate" in iso["reason"]
    if _by_this_code(data, "fedtlu-lower-bound"):  # an older report: its own rule's word
        assert iso["verdict"] == "REFUTED" and iso["reachable"] == ["CONFIRMED", "REFUTED"]


@pytest.mark.parametrize("folder", [REPORTS, REPORTS / "full"], ids=["smoke", "full"])
def test_genefl_reads_as_a_split_with_the_size_ranking_first(folder):
    data = _current(folder, "genefl-inverted-cosine")
    q = {a["id"]: a for a in data["questions"]}
    assert q["prose-inverted"]["verdict"] == "CONFIRMED"
    assert q["prose-inverted"]["kind"] == "proof"
    assert data["findings"][0]["text"].startswith("In practice the Eq. 9 score is a size")
    md = (folder / "genefl-inverted-cosine.md").read_text()
    assert md.index("## Findings") < md.index("## Verdict by part")


def test_no_report_prints_assay_sensitivity_it_did_not_compute():
    for f in list(REPORTS.glob("*.json")) + list((REPORTS / "full").glob("*.json")):
        data = json.loads(f.read_text())
        if not data.get("questions"):
            continue  # an older report, written under the rules of its own commit
        texts = [p["reason"] for p in data["parts"]]
        if data.get("premise"):
            texts.append(data["premise"]["reason"])
        for t in texts:
            if "sensitivity shown" in t:  # only with the check beside it, or the rule's
                # own statement that the calling claim computed it
                assert ("Assay sensitivity" in t or "planted" in t
                        or "shown by the caller" in t), (f.name, t[:200])


def test_flayer_reports_say_whether_training_had_converged():
    for folder in (REPORTS, REPORTS / "full"):
        data = json.loads((folder / "flayer-masked-zero.json").read_text())
        if not data.get("questions"):
            continue  # an older report, written before the convergence check
        names = {e["name"] for e in data["estimates"]}
        assert {"late_change_literal", "late_change_fedavg"} <= names
        q = {a["id"]: a for a in data["questions"]}["accuracy-collapse"]
        late = [e for e in data["estimates"] if e["name"].startswith("late_change_")]
        unsettled = any("NOT converged" in e["description"] for e in late)
        assert bool(q["caveat"]) == unsettled
        assert all(np.isfinite(e["value"]) for e in late)
