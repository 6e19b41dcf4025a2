"""The kit (audit/kit.py): the idioms claims share, each driven to every outcome it can give."""
from __future__ import annotations

import numpy as np
import pytest

from audit import kit, stats
from audit.claims import RunContext
from audit.verdict import Outcome, Premise

RULE = kit.pair_rule("gap", "A = new, B = old: {rule}; m = {margin}, n = {n}.", a="new",
                     b="old", metric="final accuracy", holds_when="SUPPORTED")
RULE_NOT = kit.pair_rule("same", "{rule}", a="new", b="old", metric="final accuracy",
                         holds_when="FALSIFIED")
BASE = np.random.default_rng(0).normal(0.6, 0.02, 10)
CASES = {  # per-seed B values against BASE as A, and the three-way outcome they give
    "SUPPORTED": BASE - 0.2 + np.random.default_rng(1).normal(0, 0.01, 10),
    "FALSIFIED": BASE + np.random.default_rng(2).normal(0, 1e-3, 10),  # no gap at all
    "INCONCLUSIVE": BASE - 0.05 + np.random.default_rng(3).normal(0, 0.2, 10),
}
MAP = {"SUPPORTED": "CONFIRMED", "FALSIFIED": "REFUTED", "INCONCLUSIVE": "INCONCLUSIVE"}


@pytest.mark.parametrize("case", list(CASES))
def test_a_pair_is_decided_and_mapped_onto_the_reviewer_both_ways(case):
    tw, part = kit.decide_pair(RULE, BASE, CASES[case], margin=0.05, equivalence_margin=0.05,
                               alpha=0.05, sensitive=True, resolution=0.01, unit="accuracy",
                               params={"n": 10})
    assert tw.outcome == case
    assert part.verdict.value == MAP[case]
    assert part.rule == f"A = new, B = old: {tw.text()}; m = 0.05, n = 10."
    assert part.reason.startswith("new vs old, final accuracy: ") and tw.reason in part.reason
    assert (part.resolution, part.unit, part.kind) == (0.01, "accuracy", "experiment")
    assert part.flip == tw.flip
    assert bool(part.needs) == (case == "INCONCLUSIVE")
    _, other = kit.decide_pair(RULE_NOT, BASE, CASES[case], margin=0.05,
                               equivalence_margin=0.05, alpha=0.05, sensitive=True)
    flipped = {"CONFIRMED": "REFUTED", "REFUTED": "CONFIRMED"}
    assert other.verdict.value == flipped.get(MAP[case], "INCONCLUSIVE")


def test_no_equivalence_without_sensitivity_and_sensitive_has_no_default():
    # "A beats B" at m = 0 on equal arms: FALSIFIED by equivalence only with sensitivity
    # (at m > 0 an interval below m is the wrong side, sensitivity or not)
    for sensitive, verdict in ((False, Outcome.INCONCLUSIVE), (True, Outcome.CONFIRMED)):
        tw, part = kit.decide_pair(RULE_NOT, BASE, CASES["FALSIFIED"], margin=0.0,
                                   equivalence_margin=0.05, alpha=0.05, sensitive=sensitive)
        assert part.verdict == verdict and tw.sensitive is sensitive
    with pytest.raises(TypeError):
        kit.decide_pair(RULE_NOT, BASE, CASES["FALSIFIED"], margin=0.05,  # no sensitive=
                        equivalence_margin=0.05, alpha=0.05)


def test_the_gate_applies_only_when_given_a_premise():
    args = dict(margin=0.05, equivalence_margin=0.05, alpha=0.05, sensitive=True,
                params={"n": 10})
    absent = Premise("the method beats FedAvg", "not reproduced", "shown equal")
    _, gated = kit.decide_pair(RULE, BASE, CASES["SUPPORTED"], gate=absent, **args)
    assert gated.verdict == Outcome.INCONCLUSIVE and gated.gated
    assert "premise not reproduced" in gated.reason
    _, ungated = kit.decide_pair(RULE, BASE, CASES["SUPPORTED"], **args)
    assert ungated.verdict == Outcome.CONFIRMED and not ungated.gated
    there = Premise("the method beats FedAvg", "reproduced", "shown")
    _, passed = kit.decide_pair(RULE, BASE, CASES["SUPPORTED"], gate=there, **args)
    assert passed.verdict == Outcome.CONFIRMED and passed.gated


def test_a_bad_direction_is_refused_when_the_rule_is_made():
    with pytest.raises(ValueError, match="holds_when"):
        kit.pair_rule("gap", "{rule}", a="a", b="b", metric="m", holds_when="CONFIRMED")


@pytest.mark.parametrize("case, status", [("SUPPORTED", "reproduced"),
                                          ("FALSIFIED", "not reproduced"),
                                          ("INCONCLUSIVE", "undecided")])
def test_premise_from_a_three_way_result(case, status):
    tw = stats.three_way(BASE, CASES[case], margin=0.0 if case != "FALSIFIED" else 0.05,
                         equivalence_margin=0.05, alpha=0.05, sensitive=True)
    assert tw.outcome == case
    p = kit.premise("the method learns", tw, note=" (noted)")
    assert (p.effect, p.status) == ("the method learns", status)
    reads = (f' As a premise, {tw.seeds_decide} reads "{kit.PREMISE_STATUS[tw.seeds_decide]}".'
             if tw.seeds_decide else "")
    assert p.reason == f"{tw.text()}: {tw.reason}{reads} (noted)"
    assert kit.premise("x", tw, rule="my rule").reason == f"my rule: {tw.reason}{reads}"


def test_planted_accuracy_has_the_expected_drop_and_varies_with_the_seed():
    correct = np.random.default_rng(5).random(2000) < 0.8
    drops = [correct.mean() - kit.planted_accuracy(correct, 0.1, np.random.default_rng(s))
             for s in range(200)]
    assert abs(np.mean(drops) - 0.1) < 0.003 and np.std(drops) > 0
    assert kit.planted_accuracy(correct, 0.9, np.random.default_rng(0)) == 0.0  # all of it
    assert kit.planted_accuracy(np.zeros(5, bool), 0.1, np.random.default_rng(0)) == 0.0
    assert np.isnan(kit.planted_accuracy([], 0.1, np.random.default_rng(0)))


def test_planted_assay_sees_a_drop_of_the_margin_and_not_one_far_below_it():
    rng = np.random.default_rng(0)
    acc = [rng.random(500) < 0.7 for _ in range(10)]
    a = np.array([c.mean() for c in acc])
    big = np.array([kit.planted_accuracy(c, 0.1, np.random.default_rng([s, 7]))
                    for s, c in enumerate(acc)])
    seen = kit.planted_assay(a, big, detect_above=0.05, equivalence_margin=0.1, alpha=0.05)
    assert seen.sensitive and "detected above 0.05" in seen.text
    small = np.array([kit.planted_accuracy(c, 0.01, np.random.default_rng([s, 7]))
                      for s, c in enumerate(acc)])
    missed = kit.planted_assay(a, small, detect_above=0.05, equivalence_margin=0.1,
                               alpha=0.05, label="a tiny drop")
    assert not missed.sensitive and missed.text.startswith("a tiny drop: ")
    assert "NOT detected" in missed.text


def test_look_alpha_tables_and_means():
    ctx = RunContext("toy", "smoke", {}, (0, 1), alpha_fraction=0.25)
    assert kit.look_alpha(0.05, ctx) == pytest.approx(0.0125)
    table = {"a": np.array([0.5, 0.7]), "b": np.array([0.25, 0.125])}
    t = kit.per_seed_table("per seed", table, ("a", "b"), (3, 4), digits=2)
    assert t.columns == ("seed", "a", "b") and t.rows == ((3, 0.5, 0.25), (4, 0.7, 0.12))
    est = kit.arm_means(table, ("a", "b"), "final_acc", "accuracy", "final accuracy")
    assert [e.name for e in est] == ["final_acc_a", "final_acc_b"]
    assert est[0].value == pytest.approx(0.6) and est[0].low < 0.6 < est[0].high
    assert est[1].description == "b: final accuracy, mean over seeds"


def test_misbehaving_seeds_lists_diverged_collapsed_and_outlying_seeds_with_the_rate():
    seeds = list(range(10))
    ok = np.random.default_rng(0).normal(0.8, 0.01, 10)
    bad = ok.copy()
    bad[2], bad[5], bad[7] = np.nan, 0.1, 0.55  # diverged, at chance, far below the rest
    flags = kit.misbehaving_seeds({"a": ok, "b": bad}, ("a", "b"), seeds, chance=0.1)
    assert flags == {"a": [], "b": [(2, "diverged"), (5, "collapsed"), (7, "outlier")]}
    # without a chance level the seed at chance is still an outlier; lower-is-better flips
    assert kit.misbehaving_seeds({"b": bad}, ("b",), seeds)["b"][1] == (5, "outlier")
    ppl = 100 + np.random.default_rng(1).normal(0, 1, 10)
    ppl[4] = 400.0
    assert kit.misbehaving_seeds({"p": ppl}, ("p",), seeds, higher_is_better=False) == {
        "p": [(4, "outlier")]}
    assert kit.misbehaving_seeds({"p": -ppl}, ("p",), seeds) == {"p": [(4, "outlier")]}
    # a constant arm (MAD 0) and a short one have no outliers to speak of
    assert kit.misbehaving_seeds({"c": np.full(10, 0.5)}, ("c",), seeds) == {"c": []}
    t = kit.misbehaviour_table(flags, 10, "accuracy", chance=0.1)
    assert t.rows == (("a", "0/10", 0.0, "none"),
                      ("b", "3/10", 0.3, "2 (diverged), 5 (collapsed), 7 (outlier)"))
    assert "chance (0.1)" in t.note


def test_gather_picks_the_named_evidence_and_names_what_is_missing():
    parts, premise, extra = ("p",), None, 3  # noqa: F841 (read through locals())
    assert kit.gather(("parts", "premise"), locals()) == {"parts": ("p",), "premise": None}
    with pytest.raises(kit.AuditError, match="'tables'"):
        kit.gather(("parts", "tables"), locals())


def test_staged_presents_the_evidence_and_decides_without_presenting():
    calls = []

    def evidence(results, ctx):
        calls.append("evidence")
        return {"parts": ("a", "b"), "premise": "reproduced", "n": len(results)}

    def present(ev, results, ctx):
        calls.append("present")
        return ("report", ev["n"], ctx)

    analyse, decide = kit.staged(evidence, present)
    assert decide({1: 1, 2: 2}, "ctx") == (("a", "b"), "reproduced")
    assert calls == ["evidence"]  # deciding built no report
    assert analyse({1: 1}, "ctx") == ("report", 1, "ctx")
    assert calls == ["evidence", "evidence", "present"]
    # named as the claim's own, so errors and tests that name its analyse name its module
    assert analyse.__module__ == decide.__module__ == __name__
    assert (analyse.__qualname__, decide.__qualname__) == ("analyse", "decide")


def _tw(outcome, flip):
    return type("TW", (), {"outcome": outcome, "flip": flip})()


@pytest.mark.parametrize("match, beaten, needed, want", [
    ([False, True], [False, False], [], Outcome.CONFIRMED),
    ([True, False], [True, True], [], Outcome.CONFIRMED),  # a match wins over beaten ones
    ([False, False], [True, True], [], Outcome.REFUTED),
    ([False, False], [True, False], ["c: 12 pairs"], Outcome.INCONCLUSIVE),
    ([False, False], [True, False], [], Outcome.INCONCLUSIVE),
])
def test_a_family_is_confirmed_by_one_match_and_refuted_only_when_every_one_is_beaten(
        match, beaten, needed, want):
    out, needs = kit.family_outcome(match, beaten, needed, needs_seeds="seeds: ",
                                    needs_other="another setting")
    assert out == want
    if want != Outcome.INCONCLUSIVE:
        assert needs == ""
    else:
        assert needs == ("seeds: c: 12 pairs" if needed else "another setting")


def test_a_family_flip_rests_on_what_its_outcome_rests_on():
    tws = {"x": _tw("FALSIFIED", 0.4), "y": _tw("FALSIFIED", 0.1), "z": _tw("SUPPORTED", 0.2),
           "w": _tw("INCONCLUSIVE", None)}
    # CONFIRMED: every FALSIFIED comparison must flip, so the largest of their flips
    assert kit.family_flip(tws, Outcome.CONFIRMED, resolution=0.5, unit="points") == {
        "flip": 0.4, "resolution": 0.5, "unit": "points"}
    # REFUTED or INCONCLUSIVE: the smallest flip of any comparison
    assert kit.family_flip(tws, Outcome.REFUTED)["flip"] == 0.1
    assert kit.family_flip({"w": tws["w"]}, Outcome.INCONCLUSIVE)["flip"] is None


def test_kit_helpers_refuse_degenerate_input():
    """An empty family was REFUTED (all([]) is True); a NaN drop planted a copy that got
    everything wrong; a short column was an IndexError; the note named the default MADs
    whatever threshold made the flags."""
    import numpy as np
    import pytest

    from audit import kit

    with pytest.raises(ValueError, match="at least one"):
        kit.family_outcome([], [], [], needs_seeds="", needs_other="")
    with pytest.raises(ValueError, match="one match and one beaten flag"):
        kit.family_outcome([False], [True, True], [], needs_seeds="", needs_other="")
    rng = np.random.default_rng(0)
    for bad in (float("nan"), -0.1, float("inf")):
        with pytest.raises(ValueError, match="planted drop"):
            kit.planted_accuracy([True, False, True], bad, rng)
    with pytest.raises(ValueError, match="2 values for 3 seeds"):
        kit.per_seed_table("t", {"a": [1.0, 2.0]}, ["a"], [0, 1, 2])
    with pytest.raises(ValueError, match="2 values for 3 seeds"):
        kit.misbehaving_seeds({"a": [1.0, 2.0]}, ["a"], [0, 1, 2])
    flags = kit.misbehaving_seeds({"a": [1.0] * 6}, ["a"], list(range(6)), outlier_mads=2)
    assert "more than 2 scaled" in kit.misbehaviour_table(flags, 6, "acc", outlier_mads=2).note


def _three_way_of(diffs, margin=0.0):
    d = np.asarray(diffs, dtype=float)
    return stats.three_way(d, np.zeros(d.size), margin=margin, equivalence_margin=2.0,
                           alpha=0.05)


# undecided, on either side of the margin 0; and decided each way
_AGAINST = [-0.78, -0.12, -1.29, 1.84, -2.35, 2.02, -1.82, -2.4, 1.04, -1.34]
_TOWARD = [-x for x in _AGAINST]
_SUPPORTED = [3.1, 2.9, 3.3, 3.0, 2.8, 3.2, 3.05, 2.95, 3.15, 2.85]


def test_an_undecided_premise_says_which_side_its_estimate_lies():
    against, toward, won = _three_way_of(_AGAINST), _three_way_of(_TOWARD), _three_way_of(_SUPPORTED)
    assert against.outcome == toward.outcome == "INCONCLUSIVE"
    assert won.outcome == "SUPPORTED"
    assert kit.premise("e", against).leans == "against"
    assert kit.premise("e", toward).leans == "toward"
    assert kit.premise("e", won).leans == ""
    # several settings, one reproducing is enough: against only when every open one is
    assert kit.premise_leans(against, toward) == "toward"
    assert kit.premise_leans(against, against) == "against"
    assert kit.premise_leans(against, won) == ""


def test_an_undecided_premise_says_what_more_seeds_would_decide_it_as():
    against = kit.premise("e", _three_way_of(_AGAINST), rule="r").reason
    toward = kit.premise("e", _three_way_of(_TOWARD), rule="r").reason
    assert ("as FALSIFIED (below the margin; the equivalence route, not simulated, is not "
            "counted) were the mean and spread to hold" in against
            and against.endswith(' As a premise, FALSIFIED reads "not reproduced".'))
    assert ("as SUPPORTED were the mean and spread to hold" in toward
            and toward.endswith(' As a premise, SUPPORTED reads "reproduced".'))
    assert "As a premise" not in kit.premise("e", _three_way_of(_SUPPORTED)).reason


def test_a_gated_part_offers_no_seed_count_where_the_premise_leans_against():
    from audit.verdict import Part, premise_gate

    part = Part("p", Outcome.INCONCLUSIVE, "rule", "reason", needs="about 40 pairs")
    against = premise_gate(part, kit.premise("LIPS beats FedBN", _three_way_of(_AGAINST)))
    toward = premise_gate(part, kit.premise("LIPS beats FedBN", _three_way_of(_TOWARD)))
    assert "40 pairs" not in against.needs and "other side" in against.needs
    assert toward.needs.endswith("; then about 40 pairs")
    assert "other side" not in toward.needs
