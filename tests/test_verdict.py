"""Verdict objects and combination rules."""
import math

import pytest

from audit.verdict import (ALL_PARTS, Estimate, Outcome, Part, Rule, primary,
                           verdict_from_parts)

C, R, I = Outcome.CONFIRMED, Outcome.REFUTED, Outcome.INCONCLUSIVE


def _parts(*vs):
    # declared at a Bonferroni share (1/3 covers the up-to-three parts used here)
    return [Part(f"p{i}", v, "rule", "reason", needs="more seeds", alpha_share=1 / 3)
            for i, v in enumerate(vs)]


@pytest.mark.parametrize("verdicts, expected", [
    pytest.param((C, C), C, id="all-confirmed"),
    pytest.param((C, R), R, id="one-refuted"),
    pytest.param((C, I), I, id="one-inconclusive"),
    pytest.param((R, I), R, id="refuted-wins-over-inconclusive"),
    pytest.param((), I, id="no-parts"),
])
def test_all_parts(verdicts, expected):
    assert ALL_PARTS(_parts(*verdicts)) == expected


def test_primary_takes_the_named_part():
    comb = primary("p1", "the consequence is what the reviewer asserts")
    assert comb(_parts(C, R)) == R
    assert "p1" in comb.text
    with pytest.raises(KeyError):
        comb(_parts(C))


def test_rule_builds_a_part_with_its_own_text():
    rule = Rule("x", "CONFIRMED when v > 1.", lambda v: (C if v > 1 else I, f"v={v}", "bigger v"))
    assert rule(2) == Part("x", C, "CONFIRMED when v > 1.", "v=2", "")
    assert rule(0).needs == "bigger v"  # needs is kept only when INCONCLUSIVE


def test_verdict_from_parts_collects_needs():
    v = verdict_from_parts("c", ALL_PARTS, _parts(C, I), [Estimate("e", 1.0)])
    assert v.verdict == I and "p1: more seeds" in v.needs
    assert v.estimate("e").exact and v.part("p0").verdict == C
    with pytest.raises(KeyError):
        v.part("nope")


def test_estimate_serialises_exact_and_interval_values():
    exact = Estimate("bytes", 42.0, unit="bytes")
    assert exact.to_dict()["low"] is None and exact.to_dict()["high"] is None
    with pytest.raises(ValueError, match="exact"):
        exact.confidence_interval()
    e = Estimate("gap", 0.1, -0.2, math.inf, 0.95, 5, "t")
    assert e.confidence_interval() == (-0.2, math.inf)
    assert e.to_dict()["high"] is None  # JSON has no inf: an unbounded side is null
    assert Estimate.from_dict(exact.to_dict()) == exact


@pytest.mark.parametrize("verdicts, all_expected, any_expected", [
    pytest.param((C, C, R), C, C, id="reported-part-ignored"),
    pytest.param((C, I, C), I, C, id="one-named-inconclusive"),
    pytest.param((R, R, C), R, R, id="both-named-refuted"),
    pytest.param((R, C, I), R, C, id="mixed"),
])
def test_all_of_and_any_of_look_only_at_the_named_parts(verdicts, all_expected,
                                                        any_expected):
    from audit.verdict import all_of, any_of

    parts = _parts(*verdicts)  # p0, p1 named; p2 reported beside
    assert all_of(("p0", "p1"))(parts) == all_expected
    assert any_of(("p0", "p1"), "p2 is reported beside")(parts) == any_expected
    assert "p2 is reported beside" in any_of(("p0", "p1"), "p2 is reported beside").text
    with pytest.raises(KeyError, match="not decided"):
        all_of(("p0", "p9"))(parts)


def test_estimate_of_takes_value_interval_level_n_and_method_from_the_result():
    import numpy as np

    from audit import stats

    a, b = np.array([3.0, 4.0, 6.0, 5.0, 7.0]), np.array([1.0, 2.5, 3.0, 2.0, 4.5])
    d = stats.paired_difference(a, b, level=0.9, method="t")
    e = Estimate.of("gain", d, "points", "A - B")
    assert (e.value, e.low, e.high, e.level, e.n, e.method) == \
        (d.mean, d.low, d.high, 0.9, 5, "t")
    rng_a = np.random.default_rng(3).normal(size=12)
    boot = stats.paired_difference(rng_a + 1.0, rng_a * 0.5, method="bca",
                                   rng=stats.verdict_rng())
    assert Estimate.of("b", boot).method == "bca"  # never relabelled as "t"
    m = stats.mean_interval([2.0, 2.0, 2.0])
    assert Estimate.of("flat", m).confidence_interval() == (2.0, 2.0)


def test_verdict_rng_is_fresh_and_fixed():
    from audit import stats

    assert stats.verdict_rng().random() == stats.verdict_rng().random()


def test_a_gated_part_names_the_premise_and_has_no_flip():
    """Where the premise is not reproduced, a part INCONCLUSIVE on its own said "30 seeds
    would detect it" and carried a flip distance, though neither seeds nor one seed's
    move can decide it while the gate holds."""
    from audit.verdict import Premise, premise_gate

    part = Part("p", Outcome.INCONCLUSIVE, "rule", "CI straddles", "30 seeds would detect",
                flip=0.01, resolution=0.01)
    absent = premise_gate(part, Premise("the effect", "not reproduced", ""))
    assert absent.needs == "a scale or setting where the paper's effect reproduces"
    assert "premise not reproduced" in absent.reason and absent.flip is None
    open_ = premise_gate(part, Premise("the effect", "undecided", ""))
    assert open_.needs.startswith("the paper's effect shown first") and \
        open_.needs.endswith("30 seeds would detect") and open_.flip is None
    shown = premise_gate(part, Premise("the effect", "reproduced", ""))
    assert shown.needs == part.needs and shown.flip == 0.01 and shown.gated


def test_a_decided_part_under_an_undecided_premise_says_not_shown():
    """A part whose comparison decided, held INCONCLUSIVE by a premise that is undecided
    (not shown absent), read "premise not reproduced at this scale (...: undecided)" and
    asked for "a scale or setting where the paper's effect reproduces", though more seeds
    may still show the premise at this scale."""
    from audit.verdict import Premise, premise_gate

    part = Part("p", Outcome.REFUTED, "rule", "alternative worse", "")
    open_ = premise_gate(part, Premise("the effect", "undecided", ""))
    assert open_.verdict == Outcome.INCONCLUSIVE and open_.ungated == "REFUTED"
    assert open_.reason.startswith("premise not shown at this scale (the effect: undecided)")
    assert "not reproduced" not in open_.reason
    assert open_.needs.startswith("the paper's effect shown first")
    absent = premise_gate(part, Premise("the effect", "not reproduced", ""))
    assert absent.reason.startswith("premise not reproduced at this scale")
    assert absent.needs == "a scale or setting where the paper's effect reproduces"


def test_premise_leans_only_where_undecided_and_survives_json():
    from audit.verdict import Premise

    p = Premise("e", "undecided", "r", leans="against")
    assert Premise.from_dict(p.to_dict()) == p
    with pytest.raises(ValueError):
        Premise("e", "reproduced", "r", leans="toward")
    with pytest.raises(ValueError):
        Premise("e", "undecided", "r", leans="sideways")
    # from elsewhere: an unknown or misplaced leaning is read as none, never a crash
    assert Premise.from_dict({"effect": "e", "status": "undecided", "leans": 3}).leans == ""
    assert Premise.from_dict({"effect": "e", "status": "reproduced",
                              "leans": "against"}).leans == ""
    assert Premise.from_dict({"effect": "e", "status": "undecided"}).leans == ""
