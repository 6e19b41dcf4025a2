"""The rules added for the reviewers' further points reach every verdict they declare,
driven with made-up evidence (no run)."""
from __future__ import annotations

import numpy as np
import pytest

from audit import stats
from audit.papers.fedtlu import lower_bound as tlu
from audit.papers.flayer import masked_zero as fmz
from audit.verdict import Outcome


def _power_ev(sd_low, sd_high, gap=0.00227):
    factor = stats.minimum_detectable_effect(3, alpha=0.05)
    row = ("clean", (sd_low + sd_high) / 2, sd_low, sd_high, factor * sd_low,
           factor * sd_high, 40)
    return {"rows": [row], "gap": gap, "runs": 3, "alpha": 0.05}


@pytest.mark.parametrize("sd_low,sd_high,want", [
    (0.004, 0.008, "CONFIRMED"),    # even the lowest plausible noise hides 0.227 % at 3 runs
    (0.0001, 0.0002, "REFUTED"),    # even the highest plausible noise resolves it
    (0.0002, 0.004, "INCONCLUSIVE"),
])
def test_three_runs_power_reaches_each_outcome(sd_low, sd_high, want):
    part = tlu.RULE_POWER(_power_ev(sd_low, sd_high), params={
        "runs": 3, "n": 20, "alpha": "0.05", "level": "95", "factor": "3.26",
        "gap_pct": "0.227"})
    assert part.verdict.value == want
    assert set(part.reachable) == {"CONFIRMED", "REFUTED", "INCONCLUSIVE"}


def test_printed_tables_are_arithmetic_both_ways():
    assert tlu.RULE_PRINTED({"rows": tlu.PRINTED}).verdict == Outcome.CONFIRMED
    fedtlu_lower = [(name, r, min(r, f) - 0.001) for name, r, f in tlu.PRINTED]
    assert tlu.RULE_PRINTED({"rows": fedtlu_lower}).verdict == Outcome.REFUTED
    assert tlu.RULE_PRINTED.kind == "derivation"


def test_minimum_readings_are_a_measurement_that_flags_a_sign_change():
    agree = tlu.RULE_READINGS({"rows": [("clean", 0.1, 0.09, 0.1)]})
    flips = tlu.RULE_READINGS({"rows": [("noisy", 0.1, -0.02, 0.05)]})
    assert agree.verdict == flips.verdict == Outcome.INCONCLUSIVE
    assert "agree in sign" in agree.reason and "depends on the reading in noisy" in flips.reason


def _carry_ev(a, b, sensitive=True):
    tw = stats.three_way(np.asarray(a), np.asarray(b), margin=0.054,
                         equivalence_margin=0.054, alpha=0.05)
    return {"three_way": tw, "sensitive": sensitive, "sensitivity": "made up",
            "resolution": 0.001}


def test_carry_over_falsifier_reaches_each_outcome():
    rng = np.random.default_rng(3)
    lit = rng.normal(0.5, 0.01, 12)
    far = lit + 0.2 + rng.normal(0, 0.005, 12)      # carry-over recovers far more than m
    same = lit + rng.normal(0, 0.002, 12)           # recovers nothing
    noisy = lit + rng.normal(0.05, 0.3, 12)         # cannot tell
    params = {"n": 12, "rule": "r", "margin": "0.054"}
    assert fmz.RULE_CARRY(_carry_ev(far, lit), params=params).verdict == Outcome.CONFIRMED
    assert fmz.RULE_CARRY(_carry_ev(same, lit), params=params).verdict == Outcome.REFUTED
    # without assay sensitivity a FALSIFIED comparison does not refute the reviewer
    blind = fmz.RULE_CARRY(_carry_ev(same, lit, sensitive=False), params=params)
    assert blind.verdict == Outcome.INCONCLUSIVE and "assay sensitivity" in blind.reason
    assert fmz.RULE_CARRY(_carry_ev(noisy, lit), params=params).verdict == \
        Outcome.INCONCLUSIVE


def test_a_carry_over_refutation_no_arm_could_escape_says_so():
    """Where no arm of the run comes m above literal (the release's rule included), a gap
    under m was the only outcome the setting allowed: the REFUTED carries that beside its
    word (``Part.basis``) and in its reason; an arm m above literal leaves it plain."""
    rng = np.random.default_rng(3)
    lit = rng.normal(0.5, 0.01, 12)
    same = lit + rng.normal(0, 0.002, 12)
    params = {"n": 12, "rule": "r", "margin": "0.054"}
    boxed = fmz.RULE_CARRY({**_carry_ev(same, lit), "headroom": ("as-released", 0.039)},
                           params=params)
    assert boxed.verdict == Outcome.REFUTED
    assert boxed.basis == "no arm here is 0.054 above literal (largest: as-released +0.039)"
    assert "the only outcome this setting allowed" in boxed.reason
    free = fmz.RULE_CARRY({**_carry_ev(same, lit), "headroom": ("as-released", 0.08)},
                          params=params)
    assert free.verdict == Outcome.REFUTED and free.basis == ""
    assert "only outcome" not in free.reason
    assert fmz.RULE_CARRY(_carry_ev(same, lit), params=params).basis == ""  # not given


def test_a_held_refutation_no_arm_could_escape_needs_the_headroom_too():
    """The premise gate holds a no-headroom REFUTED: its premise reproducing would not let
    this setting decide it, so what would decide it names the headroom after the premise;
    a held REFUTED that had headroom, and a part the gate lets through, keep the gate's
    own needs."""
    from audit.verdict import Premise, premise_gate

    rng = np.random.default_rng(3)
    lit = rng.normal(0.5, 0.01, 12)
    same = lit + rng.normal(0, 0.002, 12)
    params = {"n": 12, "rule": "r", "margin": "0.054"}
    absent = Premise("FLAYER beats FedAvg", "not reproduced", "made up")
    shown = Premise("FLAYER beats FedAvg", "reproduced", "made up")

    def part(lead, premise):
        ev = {**_carry_ev(same, lit), "headroom": ("as-released", lead)}
        return fmz._held_without_headroom(premise_gate(fmz.RULE_CARRY(ev, params=params),
                                                       premise), ("as-released", lead), 0.054)

    boxed = part(0.039, absent)
    assert boxed.verdict == Outcome.INCONCLUSIVE and boxed.ungated == "REFUTED"
    assert boxed.needs.startswith("a scale or setting where the paper's effect reproduces; ")
    assert "some arm comes m = 0.054 above literal" in boxed.needs
    assert "as-released, +0.039" in boxed.needs
    free = part(0.08, absent)
    assert free.needs == "a scale or setting where the paper's effect reproduces"
    through = part(0.039, shown)
    assert through.verdict == Outcome.REFUTED and through.needs == ""
    # the question says it too (it has no ``decides`` of its own to say less)
    from audit import questions

    q = next(q for q in fmz.QUESTIONS if q.id == "falsifier-carry-over")
    said = questions.answer(q, {"carry-over-vs-literal": boxed})
    assert said["verdict"] == "INCONCLUSIVE" and said["needs"] == boxed.needs


def test_head_size_is_a_measurement_that_says_whether_s_matters():
    one = fmz.RULE_HEAD({"rows": [("base", 1, 0.12, "CONFIRMED", "")]})
    assert one.verdict == Outcome.INCONCLUSIVE and "no head-size sweep" in one.reason
    split = fmz.RULE_HEAD({"rows": [("base", 1, 0.12, "CONFIRMED", ""),
                                    ("head=2", 2, 0.14, "INCONCLUSIVE", "premise undecided")]})
    assert "depends on s" in split.reason and fmz.RULE_HEAD.kind == "measurement"


# ------------------------------------------------------- fedtlu-score-undefined: planted
def _planted(counts, n=200):
    from audit.papers.fedtlu.score_undefined import CHANCE_BAND, PLANT_ALPHA

    rows = [{"family": f"f{i}", "n": n, "useful_picked": k,
             "mean_loss_decrease_of_pick": 0.0} for i, k in enumerate(counts)]
    return {"rows": rows, "band": CHANCE_BAND, "alpha": PLANT_ALPHA}


@pytest.mark.parametrize("counts,n,want", [
    ((100, 200, 0), 200, "CONFIRMED"),     # a coin flip and a wrong pick
    ((200, 200, 0), 200, "CONFIRMED"),     # the noise block picked in one family
    ((100, 200, 200), 200, "CONFIRMED"),   # a coin flip alone
    ((112, 200, 200), 200, "CONFIRMED"),   # 112 of 200: interval 0.49-0.63, in the band
    ((200, 190, 160), 200, "REFUTED"),     # the useful block every time, significantly
    ((20, 19, 13), 20, "INCONCLUSIVE"),    # 13 of 20: interval 0.41-0.85, p = 0.13
])
def test_planted_pick_rule_reaches_each_outcome(counts, n, want):
    from audit.papers.fedtlu.score_undefined import RULE_PLANTED

    part = RULE_PLANTED(_planted(counts, n))
    assert part.verdict.value == want, part.reason


def test_planted_instances_follow_sign_consistency_not_usefulness():
    from audit.papers.fedtlu.algorithm import score
    from audit.papers.fedtlu.score_undefined import BASE, _planted as planted

    rows = {r["family"]: r for r in planted({**BASE, "n_planted": 60}, score)}
    assert rows["useful one-signed"]["useful_picked"] == 60
    assert rows["noise one-signed"]["useful_picked"] == 0
    assert 15 <= rows["both zero-mean"]["useful_picked"] <= 45
    # the useful block's update lowers the loss, the noise block's raises it
    assert rows["useful one-signed"]["mean_loss_decrease_of_pick"] > 0
    assert rows["noise one-signed"]["mean_loss_decrease_of_pick"] < 0
