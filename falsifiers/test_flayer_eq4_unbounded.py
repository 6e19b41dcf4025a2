"""Falsifier: FLAYER's Eq. 4 factor (arXiv 2412.07062, Eq. 4) has no upper bound.

The multiplier is audit.papers.flayer.algorithm.eq4_multiplier with floor = 0; here its values
are checked against hand computations, and the verdict against its lock.
"""
import math

import pytest

from audit.pytest_plugin import check_committed_report, check_lock

CLAIM = "flayer-eq4-unbounded"
L = 6  # the ladder's depth (the digits CNN has 6 parameter tensors)


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_verdict_is_locked(result):
    check_lock(result)


def test_numbers_equal_the_committed_report_on_its_machine(result):
    # every number that decides, exactly, where this machine's processor and libraries
    # are those the committed report was computed with; elsewhere skipped (a trained
    # model's last digits may move), and `audit diff` compares at regeneration
    check_committed_report(result, same_machine=True)


def test_ladder_values_match_hand_computation(result):
    est = result.verdict.estimate
    # 1 + log(1 + 1/1) * 6/6 = 1 + ln 2 = 1.693147...
    assert est("m_at_L_grad_1").value == pytest.approx(1 + math.log(2), rel=1e-15)
    # ln(1 + 1e12) = 12 ln 10 + ln(1 + 1e-12) = 27.6310211159... -> 28.6310211159
    assert est("m_at_L_grad_1e-12").value == pytest.approx(1 + 12 * math.log(10), rel=1e-12)
    # ln(1 + 1e300) = 300 ln 10 = 690.7755278982137 (the 1 vanishes in float64)
    assert est("m_at_L_grad_1e-300").value == pytest.approx(691.7755278982137, rel=1e-14)
    assert est("m_at_L_grad_1e-308").value == pytest.approx(1 + 308 * math.log(10), rel=1e-14)
    # the project's floor 1e-12 caps the factor at its value at 1e-12
    assert est("m_floored_max").value == est("m_at_L_grad_1e-12").value


def test_threshold_crossings(result):
    est = result.verdict.estimate
    # m(i = L) > 10 iff ln(1 + 1/g) > 9 iff g < 1/(e^9 - 1) = 1.234e-4: first ladder rung 1e-4
    assert est("first_grad_norm_above_10").value == 1e-4
    # m > 100 iff g < 1/(e^99 - 1) = 1.01e-43: first rung 1e-43 (1e-42 gives 97.71)
    assert est("first_grad_norm_above_100").value == 1e-43


def test_growth_law_slopes_equal_depth_fraction(result):
    est = result.verdict.estimate
    for i in (1, 3, 6):  # slope of (m - 1) on log(1/g) is i/L by the algebra
        assert est(f"slope_i{i}").value == pytest.approx(i / L, rel=1e-8)
        # the only departure from the line is (i/L) log(1 + g) < g <= 1e-4 (fit from 1e-4):
        # spread over ~300 rungs it moves the intercept by about 1e-6
        assert abs(est(f"intercept_i{i}").value) < 1e-5


def test_parts(result):
    assert result.verdict.part("unbounded").verdict.value == "CONFIRMED"
    assert result.verdict.part("unbounded").kind == "derivation"
    p = result.verdict.part("in-practice")
    assert p.verdict.value == "INCONCLUSIVE" and p.kind == "measurement"  # no verdict
    est = result.verdict.estimate
    assert est("practice_max_multiplier").value == max(
        est("practice_max_multiplier_probe").value, est("practice_max_multiplier_full").value)
    # every multiplier exceeds 1 (the log term is positive) and real norms keep it finite
    assert 1 < est("practice_min_multiplier").value <= est("practice_max_multiplier").value
    assert math.isfinite(est("practice_max_multiplier").value)


def test_eq4_multiplier_at_zero_is_infinite_as_printed():
    from audit.papers.flayer.algorithm import eq4_multiplier

    assert eq4_multiplier(0.0, 6, 6, floor=0.0) == math.inf  # 1/0: the printed rate
    assert eq4_multiplier(0.0, 6, 6) == pytest.approx(1 + math.log1p(1e12))  # project floor


def test_paper_scale_without_data_is_a_clear_error(monkeypatch):
    from audit.claims import AuditError, RunSpec
    from audit.papers.flayer.eq4_unbounded import CLAIM as C
    from audit.runner import make_context

    monkeypatch.delenv("AUDIT_DATA", raising=False)
    ctx = make_context(C, "paper")
    with pytest.raises(AuditError):
        C.run(RunSpec("digits-cnn"), ctx)


# ------------------------------------------------------- each part's reachable outcomes
def _ev_unbounded(m_at_L, slopes=((1 / 6, 1 / 6), (0.5, 0.5), (1.0, 1.0)), monotone=True):
    return {"m_at_L": m_at_L, "m_max_at_L": max(m_at_L), "last_exponent": 300,
            "monotone": monotone, "slopes": list(slopes)}


def test_unbounded_rule_reaches_each_outcome():
    from audit.papers.flayer.eq4_unbounded import RULE_UNBOUNDED

    assert RULE_UNBOUNDED.kind == "derivation"
    assert RULE_UNBOUNDED(_ev_unbounded([1.7, 20.0, 200.0])).verdict.value == "CONFIRMED"
    assert RULE_UNBOUNDED(_ev_unbounded([1.7, 2.0, 3.0])).verdict.value == "REFUTED"
    # passes 10 but not 100: neither shown unbounded nor shown bounded
    assert RULE_UNBOUNDED(_ev_unbounded([1.7, 20.0, 50.0])).verdict.value == "INCONCLUSIVE"
    # slopes off the growth law: INCONCLUSIVE even past every threshold
    bad = _ev_unbounded([1.7, 20.0, 200.0], slopes=((0.2, 1 / 6),))
    assert RULE_UNBOUNDED(bad).verdict.value == "INCONCLUSIVE"


def test_in_practice_is_a_measurement_without_verdict():
    from audit.papers.flayer.eq4_unbounded import CLAIM, RULE_PRACTICE

    assert RULE_PRACTICE.kind == "measurement" and RULE_PRACTICE.reachable == ("INCONCLUSIVE",)
    for top in (1.5, 5.47, 1e6):  # whatever the size, no verdict
        part = RULE_PRACTICE({"top": (top, "fc.bias", "full", 200),
                              "per_reading": {"probe": (3.65, "fc.bias", 200),
                                              "full": (top, "fc.bias", 200)}})
        assert part.verdict.value == "INCONCLUSIVE"
    assert CLAIM.combination.parts == ("unbounded",)
