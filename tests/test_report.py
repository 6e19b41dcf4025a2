"""Report rendering from JSON alone, and the index."""
import json

import pytest

from audit import report
from audit.claims import AuditError
from audit.runner import Cache, execute, make_context


@pytest.fixture
def data(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    return report.to_json(res)


def test_markdown_opens_with_questions_then_premise_and_stability(data):
    md = report.render_markdown(data).splitlines()
    assert md[0] == "# toy-claim: toy"
    assert md[2] == "## The reviewer's questions, one verdict each"
    word = data["verdict"]
    assert md[4].startswith(f"**{word}** (locked: ")
    assert "`claim` " + word in md[4]
    assert md[6].startswith("| question (our words) | kind | verdict | scale |")
    premise = next(i for i, ln in enumerate(md) if ln.startswith("**Premise**"))
    assert md[premise].startswith("**Premise** (the paper's own effect, measured first): "
                                  "better scores above base")
    assert "toy premise: the mean gain is positive" in md[premise]
    # the figure names its estimate (a premise decided per setting shows one setting's)
    name = data["premise"]["estimate"]["name"]
    assert f" (`{name}`), CI [" in md[premise] or f" (`{name}`) " in md[premise], md[premise]
    assert md[premise + 2].startswith("Stability (")
    # fields from the JSON are inert markdown (safeio.md_text escapes a leading "2412."
    # as an ordered-list number); as rendered, the backslash is not shown
    assert md[premise + 4].replace("\\", "").startswith("Paper: FLAYER, arXiv 2412.07062v3")


def test_json_carries_premise_stability_and_part_fields(data):
    assert data["premise"]["status"] == "reproduced"
    # leave-one-out over the toy's eight default seeds
    assert data["stability"]["loo_total"] == 8 and data["stability"]["loo_agree"] == 8
    part = data["parts"][0]
    assert part["kind"] == "experiment"
    assert part["reachable"] == ["CONFIRMED", "REFUTED", "INCONCLUSIVE"]
    assert part["flip"] > 0 and part["resolution"] == 0.01 and part["fragile"] is False
    assert data["looks"] == [] and data["plan"] is None


def test_markdown_has_every_section(data):
    md = report.render_markdown(data)
    for heading in ("## Verdict by part", "## The paper's numbers beside ours", "## Arms",
                    "## Estimates", "### per seed", "## Figures",
                    "## What this shows, and what it does not",
                    "## Decision rules (fixed in code before the run)", "## Reproduce"):
        assert heading in md
    assert "| `n_arms` | 2 | exact |" in md
    assert "Seeds: [0, 1, 2, 3, 4, 5, 6, 7]" in md


def test_json_round_trip_renders_the_same(data, tmp_path):
    report.write_data(data, tmp_path)
    again = json.loads((tmp_path / "toy-claim.json").read_text())
    assert report.render_markdown(again) == report.render_markdown(data)


def test_missing_keys_and_corrupt_json_are_clear_errors(data, tmp_path):
    broken = dict(data)
    del broken["seeds"]
    with pytest.raises(AuditError, match="lacks required keys: seeds"):
        report.render_markdown(broken)
    (tmp_path / "toy-claim.json").write_text("{oops")
    with pytest.raises(AuditError, match="is not valid JSON"):
        report.load(tmp_path, "toy-claim")


def test_index_lists_pending_and_run_claims(data, tmp_path, toy):
    from audit import claims

    report.write_data(data, tmp_path)
    text = report.write_index(tmp_path, claims.registry()).read_text()
    assert "[`toy-claim`](toy-claim.md)" in text and "**CONFIRMED**" in text


def test_the_runtime_line_says_how_many_cached_units_came_from_elsewhere(data):
    data = json.loads(json.dumps(data))
    data["runs"] = {"computed": 2, "cached": 4, "cached_elsewhere": 0}
    assert "(2 runs computed, 4 from cache)" in report.render_markdown(data)
    data["runs"]["cached_elsewhere"] = 3
    assert ("(2 runs computed, 4 from cache, 3 of them computed on another or an "
            "unrecorded machine)") in report.render_markdown(data)


def test_interval_levels_keep_their_digits_and_methods():
    """99.53% was printed as (100%); an interval in a finding carries its level and
    method, so the rule's interval and a robust one of the same number differ in print."""
    from audit.report import _ci, _level

    assert _level(0.9953) == "99.53%" and _level(0.95) == "95%" and _level(0.981) == "98.1%"
    assert _level(None) == "" and _level(float("nan")) == "" and _level(True) == ""
    assert _ci({"low": 0.1, "high": 0.2, "level": 0.975, "method": "t"}) == \
        "[0.1, 0.2] (97.5%, t)"
    # the two Hall intervals of one difference say which is descriptive and which decides
    hall = _ci({"low": 0.1, "high": 0.2, "level": 0.95, "method": "hall"})
    rule = _ci({"low": 0.0, "high": 0.3, "level": 0.95, "method": "robust-hall"})
    assert "descriptive" in hall and "three-way rule" in rule and "descriptive" not in rule
    assert _ci({"low": None, "high": 0.2}) == ""


def test_the_full_index_sees_the_smoke_reports_above_it(tmp_path):
    """reports/full's index and coverage never saw reports/ (every across-scales cell was
    "—"); the folder above is read when it is an audit output folder, never written."""
    from audit import safeio
    from audit.report import scale_folders

    full = tmp_path / "full"
    full.mkdir()
    assert scale_folders(full) == [(full, "smoke"), (full / "full", "full")]
    (tmp_path / safeio.OUTPUT_MARKER).write_text("x")
    assert scale_folders(full) == [(full, "full"), (tmp_path, "smoke")]
    assert scale_folders(tmp_path) == [(tmp_path, "smoke"), (full, "full")]


def test_measurements_read_measured_and_flip_distances_carry_their_unit():
    """A measurement's stored outcome is a placeholder (INCONCLUSIVE): the part table read
    it as a verdict while its question read MEASURED. An index flip distance without a
    resolution was a bare number ("flip 0.0216"), its unit (a share of ||g||^2) lost."""
    import json
    from pathlib import Path

    from audit.report import _stability_cell, render_markdown

    src = Path(__file__).resolve().parents[1] / "reports" / "lips-dropout-control.json"
    data = json.loads(src.read_text())
    rows = [line for line in render_markdown(data).splitlines()
            if line.startswith("| middle-cosine | measurement")]
    assert rows and "| MEASURED |" in rows[0] and "INCONCLUSIVE" not in rows[0].split("|")[3]
    # and in the sequential looks' table: a measurement has no verdict at any look
    data["looks"] = [{"look": 1, "n": 10, "alpha_fraction": 1.0, "verdict": "INCONCLUSIVE",
                      "parts": {"middle-cosine": "INCONCLUSIVE"}}]
    md = render_markdown(data)
    head = next(ln for ln in md.splitlines() if ln.startswith("| look | n |"))
    row = md.splitlines()[md.splitlines().index(head) + 2].split("|")
    col = head.split("|").index(" middle-cosine ")
    assert row[col].strip() == "MEASURED"
    cell = _stability_cell({"stability": {"loo_agree": 9, "loo_total": 10, "flip": 0.0216,
                                          "unit": "share of ||g||^2", "resolution": None}})
    assert cell == "LOO 9/10, flip 0.0216 share of ||g||^2"


def test_an_interval_of_width_zero_reads_as_no_interval():
    """A control compared with itself (every seed's difference 0) read "0 [0, 0] (95%,
    Hall's t, descriptive)": an interval no method made. A zero-width interval now reads
    as every seed equal, in the estimate table and beside a finding."""
    from audit.report import POINT_TEXT, _ci, _estimate_rows

    point = {"name": "d", "value": 0.0, "low": 0.0, "high": 0.0, "level": 0.95, "n": 10,
             "method": "hall"}
    assert _ci(point) == f"({POINT_TEXT})" and "Hall" not in _ci(point)
    row = _estimate_rows([point])[0]
    assert row[2] == f"— ({POINT_TEXT})" and row[4] == "—"
    real = {**point, "high": 0.1}
    assert _ci(real).startswith("[0, 0.1] (95%, Hall's t") and "Hall's t" in \
        _estimate_rows([real])[0][4]
    assert _ci({**point, "n": 1}).startswith("[0, 0]")  # one value: said by n = 1


def test_an_exact_claim_with_a_simulated_part_is_not_called_exact_or_mathematics():
    """fedtlu-score-undefined has no seeds but one experiment (planted-pick: 200 fixed
    seeded draws inside one unit); the index called it "exact" and its premise "—
    (mathematics)", which a referee reads as a proof (a referee's read of the index)."""
    from audit import report

    stab = {"loo": {}, "loo_agree": 0, "loo_total": 0, "flip": None, "resolution": None}
    proof = {"parts": [{"id": "a", "kind": "derivation"}], "stability": stab}
    sim = {"parts": [{"id": "a", "kind": "derivation"}, {"id": "b", "kind": "experiment"}],
           "stability": stab}
    assert report._stability_cell(proof) == "exact"
    assert report._premise_cell(proof) == "— (mathematics)"
    assert report._stability_cell(sim) == "fixed draws, no seeds"
    assert report._premise_cell(sim) == "— (none declared)"
    assert "not applicable (an exact computation)" in report._stability_line(stab, proof)
    assert "fixed seeded draws" in report._stability_line(stab, sim)


def test_a_fragile_part_marks_its_decided_question_not_only_the_claim_word():
    """GENE-FL's smoke word was "(fragile)" in the index while the question it came from,
    selection-reversal, showed a plain REFUTED (a referee's read of the index)."""
    from audit import report

    parts = [{"id": "a", "fragile": True}, {"id": "b", "fragile": False}]
    qs = [{"id": "qa", "verdict": "REFUTED", "parts": ["a"]},
          {"id": "qb", "verdict": "CONFIRMED", "parts": ["b"]},
          {"id": "qc", "verdict": "INCONCLUSIVE", "parts": ["a", "b"]}]
    assert report._fragile_in(parts, qs) == {"qa"}
    data = {"parts": parts, "questions": qs}
    assert report._fragile_questions(data) == {"qa"}
    # a report from elsewhere: ids that are no strings are never matched, never a crash
    odd = [{"id": ["a"], "fragile": True}, {"id": "a", "fragile": True}]
    assert report._fragile_in(odd, [{"id": ["q"], "verdict": "REFUTED", "parts": ["a"]},
                                    {"id": "q", "verdict": "REFUTED", "parts": [["a"]]},
                                    {"id": "r", "verdict": "REFUTED", "parts": "a"}]) == set()


def test_findings_say_their_intervals_are_not_the_decisions():
    """A finding quoted "0.2725 [0.1765, 0.3685] (95%, t)" where the rule decided from
    "98.33% CI [-0.2362, 0.771]": a referee quoting the finding overstated the precision
    (a referee's read of the reports)."""
    from audit import report

    data = {"findings": [{"text": "a gap", "estimates": ["g"]}],
            "estimates": [{"name": "g", "value": 0.27, "low": 0.18, "high": 0.37, "n": 10,
                           "level": 0.95, "method": "t"}]}
    text = "\n".join(report.findings_section(data))
    assert "They are not the decisions" in text and "[0.18, 0.37] (95%, t)" in text


def test_the_index_run_cell_says_why_a_sequential_plan_stopped():
    look = {"look": 1, "n": 10, "decided": False}
    one = {"looks": [look], "plan": {"looks": [10]}}
    assert report._looks_cell(one) == " (sequential, one planned look)"
    cap = {"looks": [look, {"look": 2, "n": 20, "decided": False}],
           "plan": {"looks": [10, 20]}}
    assert report._looks_cell(cap) == " (sequential, stopped at look 2 of 2: the cap)"
    early = {"looks": [dict(look, decided=True, stop_reason="decided")],
             "plan": {"looks": [10, 20]}}
    assert report._looks_cell(early) == " (sequential, stopped at look 1 of 2: decided)"
    futile = {"looks": [dict(look, stop_reason="premise not reproduced")],
              "plan": {"looks": [10, 20]}}
    assert report._looks_cell(futile) == " (sequential, stopped at look 1 of 2: futility)"


def test_the_index_premise_cell_gives_the_estimate_of_a_premise_leaning_against():
    data = {"premise": {"status": "undecided", "leans": "against", "effect": "e",
                        "estimate": {"name": "x", "value": -0.7556}}, "parts": []}
    assert report._premise_cell(data) == "undecided (estimate against the effect: -0.7556)"
    data["premise"]["leans"] = "toward"
    assert report._premise_cell(data) == "undecided"
    data["premise"].update(leans="against", estimate="not an estimate")
    assert report._premise_cell(data) == "undecided (estimate against the effect)"


def test_an_estimate_without_an_interval_says_whether_it_had_no_spread_or_none_computed():
    rows = report._estimate_rows([
        {"name": "a", "value": 0.3, "low": None, "high": None, "n": 20, "method": "mean"},
        {"name": "b", "value": 0.3, "low": None, "high": None, "n": 20,
         "method": "mean (no spread)"},
        {"name": "c", "value": 3, "low": None, "high": None, "n": None, "method": "exact"}])
    assert [r[2] for r in rows] == ["none computed", "no spread, no interval", "exact"]
