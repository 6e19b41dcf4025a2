"""Tests of audit.stats against reference values whose source is named next to them.

Reference values never come from the code under test: they are published
outputs (R's ``t.test`` on the ``sleep`` data), the table in
docs/STATISTICS.md, hand computations, or a separate scipy/statsmodels
call named in the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

import audit.stats as stats_mod
from audit.stats import (
    three_way_codes,
    Interval,
    PairedDifference,
    bootstrap_interval,
    holm,
    mean_interval,
    minimum_detectable_effect,
    paired_difference,
    seeds_needed,
    smallest_signflip_p,
    three_way,
    tost_paired,
)

# Student (1908) / Cushny & Peebles sleep data, R's datasets::sleep: extra hours of
# sleep for 10 patients under drug 1 (group 1) and drug 2 (group 2), paired by ID.
SLEEP_1 = np.array([0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0])
SLEEP_2 = np.array([1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4])


# --------------------------------------------------------------------------- #
# paired differences and means
# --------------------------------------------------------------------------- #


def test_paired_t_matches_r_sleep_example():
    # Reference: R 4.x, t.test(extra ~ group, data = sleep, paired = TRUE) prints
    # t = -4.0621, df = 9, p-value = 0.002833,
    # 95 percent confidence interval: -2.4598858 -0.7001142, mean difference -1.58.
    res = paired_difference(SLEEP_1, SLEEP_2, method="t")
    assert res.method == "t"
    assert res.n == 10
    assert_allclose(res.mean, -1.58, rtol=1e-12)
    assert_allclose([res.low, res.high], [-2.4598858, -0.7001142], atol=1e-7)
    assert_allclose(res.p_value, 0.002833, atol=5e-7)
    # t = mean / (sd / sqrt(n)) = dz * sqrt(n)
    assert_allclose(res.effect_size * math.sqrt(10), -4.0621, atol=5e-5)
    # sd of the differences, ddof=1: numpy.std, a separate call
    assert_allclose(res.sd, np.std(SLEEP_1 - SLEEP_2, ddof=1), rtol=1e-12)
    assert res.confidence_interval() == Interval(res.low, res.high)
    assert isinstance(res.confidence_interval(), tuple)


@pytest.mark.parametrize(
    "level",
    [pytest.param(0.90, id="90pct"), pytest.param(0.95, id="95pct"), pytest.param(0.99, id="99pct")],
)
def test_mean_interval_matches_statsmodels_descrstats(level):
    # Reference: statsmodels DescrStatsW(x).tconfint_mean(alpha=1 - level), a separate
    # implementation of the one-sample t interval.
    x = SLEEP_2 - SLEEP_1
    est = mean_interval(x, level=level)
    ref_low, ref_high = DescrStatsW(x).tconfint_mean(alpha=1 - level)
    assert_allclose([est.low, est.high], [ref_low, ref_high], rtol=1e-10)
    assert est.mean == pytest.approx(1.58)
    assert est.method == "t" and est.n == 10 and est.level == level
    assert_allclose(est.sd, np.std(x, ddof=1))


def test_mean_interval_on_sleep_differences_matches_r():
    # R: t.test(extra ~ group, data = sleep, paired = TRUE) interval, sign flipped.
    est = mean_interval(SLEEP_2 - SLEEP_1)
    assert_allclose([est.low, est.high], [0.7001142, 2.4598858], atol=1e-7)


@pytest.mark.parametrize("n", [pytest.param(n, id=f"n{n}") for n in (3, 9, 10, 15, 50)])
def test_auto_method_is_student_t_at_every_n(n):
    # BCa inside the three-way rule measured 0.05-0.06 false SUPPORTED at n = 10 (nominal
    # 0.025); "auto" no longer switches to it at any n.
    rng = np.random.default_rng(20240601)
    a, b = rng.normal(size=n), rng.normal(size=n)
    res = paired_difference(a, b, rng=np.random.default_rng(1), n_resamples=999)
    assert res.method == "t"
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert_allclose([res.low, res.high], [ref.low, ref.high], rtol=1e-12)


def test_bca_matches_direct_scipy_bootstrap_call():
    # Reference: scipy.stats.bootstrap((d,), np.mean, method="BCa") called directly with
    # a Generator of the same seed.
    d = SLEEP_1 - SLEEP_2
    res = paired_difference(SLEEP_1, SLEEP_2, method="bca", rng=np.random.default_rng(7),
                            n_resamples=1999)
    ref = stats.bootstrap((d,), np.mean, method="BCa", n_resamples=1999, confidence_level=0.95,
                          rng=np.random.default_rng(7)).confidence_interval
    assert_allclose([res.low, res.high], [ref.low, ref.high], rtol=1e-12)
    # the p-value is still the paired t-test's (R: 0.002833)
    assert_allclose(res.p_value, 0.002833, atol=5e-7)
    assert res.low < res.mean < res.high


def test_bca_requires_a_generator():
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        paired_difference(SLEEP_1, SLEEP_2, method="bca")
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        paired_difference(SLEEP_1, SLEEP_2, method="bca", rng=np.random.RandomState(0))


@pytest.mark.parametrize(
    ("diff", "p", "effect"),
    [pytest.param(0.3, 0.0, math.inf, id="positive"),
     pytest.param(-2.0, 0.0, -math.inf, id="negative"),
     pytest.param(0.0, 1.0, math.nan, id="zero")],
)
@pytest.mark.parametrize("method", ["t", "bca"])
def test_constant_differences_collapse_to_the_point(diff, p, effect, method):
    # By definition (documented in paired_difference): no sampling error is visible.
    b = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    a = b + diff
    res = paired_difference(a, b, method=method, rng=np.random.default_rng(0))
    # b + 0.3 - b is 0.3 only up to rounding; the rule treats it as constant
    assert res.sd == 0.0
    assert res.low == res.high == res.mean == pytest.approx(diff, abs=1e-14)
    assert res.p_value == p
    if math.isnan(effect):
        assert math.isnan(res.effect_size)
    else:
        assert res.effect_size == effect


# --------------------------------------------------------------------------- #
# bootstrap for statistics with no t form
# --------------------------------------------------------------------------- #


def test_bootstrap_interval_one_sample_matches_scipy():
    # Reference: scipy.stats.bootstrap called directly (median has no t form).
    x = np.random.default_rng(11).normal(size=25)
    est = bootstrap_interval(x, np.median, np.random.default_rng(3), n_resamples=999)
    ref = stats.bootstrap((x,), np.median, method="BCa", n_resamples=999,
                          rng=np.random.default_rng(3)).confidence_interval
    assert_allclose([est.low, est.high], [ref.low, ref.high], rtol=1e-12)
    assert est.value == np.median(x) and est.n == 25 and est.method == "BCa"


def test_bootstrap_interval_paired_matches_scipy():
    # Reference: scipy.stats.bootstrap(..., paired=True) called directly.
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=20), rng.normal(size=20)

    def median_diff(x, y):
        return np.median(x - y)

    est = bootstrap_interval((a, b), median_diff, np.random.default_rng(4), method="percentile",
                             n_resamples=999)
    ref = stats.bootstrap((a, b), median_diff, paired=True, method="percentile", n_resamples=999,
                          vectorized=False, rng=np.random.default_rng(4)).confidence_interval
    assert_allclose([est.low, est.high], [ref.low, ref.high], rtol=1e-12)


def test_bootstrap_interval_rejects_degenerate_and_bad_input():
    with pytest.raises(ValueError, match="bootstrap interval is undefined"):
        bootstrap_interval(np.ones(12), np.mean, np.random.default_rng(0), n_resamples=199)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        bootstrap_interval(np.arange(12.0), np.mean, None)
    with pytest.raises(ValueError, match=r"^lengths differ: data\[0\] has 3 values, data\[1\] has 2 values$"):
        bootstrap_interval(([1.0, 2, 3], [1.0, 2]), lambda x, y: 0.0, np.random.default_rng(0))


# --------------------------------------------------------------------------- #
# input validation: one line naming the problem
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        pytest.param([1, 2, 3], [1, 2], r"^lengths differ: a has 3 values, b has 2$", id="lengths"),
        pytest.param([1.0], [2.0], r"^fewer than 2 values in a: got 1$", id="too-few"),
        pytest.param([1, 2, 3], [1, np.nan, 3], r"^NaN present in b at index 1$", id="nan-b"),
        pytest.param([np.nan, 2, np.nan], [1, 2, 3], r"^NaN present in a at index 0, 2$", id="nan-a"),
        pytest.param([1, 2, 3], [1, 2, np.inf], r"^infinite value present in b at index 2$", id="inf"),
        pytest.param([[1, 2], [3, 4]], [[1, 2], [3, 4]], r"^a must be 1-D", id="2d"),
    ],
)
@pytest.mark.parametrize("func", ["paired_difference", "tost_paired", "three_way"])
def test_paired_input_errors(a, b, message, func):
    call = {
        "paired_difference": lambda: paired_difference(a, b),
        "tost_paired": lambda: tost_paired(a, b, margin=1.0),
        "three_way": lambda: three_way(a, b, equivalence_margin=1.0),
    }[func]
    with pytest.raises(ValueError, match=message):
        call()


def test_other_input_errors():
    with pytest.raises(ValueError, match=r"^fewer than 2 values in x: got 0$"):
        mean_interval([])
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        paired_difference([1, 2, 3], [0, 0, 1], level=95)
    with pytest.raises(ValueError, match="method must be 'auto', 't', 'hall' or 'bca'"):
        paired_difference([1, 2, 3], [0, 0, 1], method="BCa")
    with pytest.raises(ValueError, match="margin must be a positive finite number"):
        tost_paired([1, 2, 3], [0, 0, 1], margin=0.0)
    with pytest.raises(ValueError, match="alpha must lie strictly between 0 and 0.5"):
        tost_paired([1, 2, 3], [0, 0, 1], margin=1.0, alpha=0.5)


# --------------------------------------------------------------------------- #
# TOST
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "margin", [pytest.param(0.5, id="tight"), pytest.param(2.0, id="medium"), pytest.param(3.0, id="wide")]
)
def test_tost_matches_two_one_sided_scipy_tests(margin):
    # Reference: two one-sided one-sample t-tests on the differences with scipy
    # (ttest_1samp, alternative="greater" against -margin and "less" against +margin);
    # TOST's p-value is the larger of the two (Schuirmann 1987).
    d = SLEEP_2 - SLEEP_1
    p_low = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    p_high = stats.ttest_1samp(d, margin, alternative="less").pvalue
    res = tost_paired(SLEEP_2, SLEEP_1, margin)
    assert_allclose(res.p_value, max(p_low, p_high), rtol=1e-10)
    # the 90 % CI, reference: statsmodels DescrStatsW.tconfint_mean(alpha=0.10)
    assert_allclose([res.low90, res.high90], DescrStatsW(d).tconfint_mean(alpha=0.10), rtol=1e-10)
    assert res.margin == margin and res.alpha == 0.05
    assert res.equivalent == (max(p_low, p_high) < 0.05)


def _check_tost_equals_ci_inclusion(seed, n, shift, scale, margin, alpha):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=n)
    a = b + shift + scale * rng.normal(size=n)
    res = tost_paired(a, b, margin, alpha=alpha)
    # Reference CI: scipy ttest_rel(...).confidence_interval(1 - 2 alpha), a separate call.
    ci = stats.ttest_rel(a, b).confidence_interval(confidence_level=1 - 2 * alpha)
    tol = 1e-9 * max(1.0, margin)
    # skip numerical ties at the boundary
    if abs(ci.low + margin) < tol or abs(ci.high - margin) < tol:
        return None
    inside = (-margin < ci.low) and (ci.high < margin)
    assert res.equivalent == inside, (seed, n, shift, scale, margin, alpha)
    assert_allclose([res.low90, res.high90], [ci.low, ci.high], rtol=1e-10, atol=1e-14)
    return inside


def test_tost_decision_equals_ci_inclusion_seeded_loop():
    # 600 random cases from one literal seed; both decisions must occur.
    master = np.random.default_rng(8675309)
    decisions = []
    for _ in range(600):
        decisions.append(_check_tost_equals_ci_inclusion(
            seed=int(master.integers(2**32)),
            n=int(master.integers(2, 30)),
            shift=float(master.normal(scale=0.5)),
            scale=float(master.uniform(0.01, 2.0)),
            margin=float(master.uniform(0.05, 2.0)),
            alpha=float(master.choice([0.01, 0.05, 0.1])),
        ))
    assert decisions.count(True) > 50 and decisions.count(False) > 50


@settings(deadline=None, max_examples=150, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    shift=st.floats(-3, 3),
    scale=st.floats(1e-3, 10),
    margin=st.floats(1e-3, 5),
    alpha=st.sampled_from([0.01, 0.025, 0.05, 0.1, 0.2]),
)
def test_tost_decision_equals_ci_inclusion_property(seed, n, shift, scale, margin, alpha):
    result = _check_tost_equals_ci_inclusion(seed, n, shift, scale, margin, alpha)
    assume(result is not None)


@pytest.mark.parametrize(
    ("diff", "margin", "equivalent"),
    [pytest.param(0.2, 0.5, True, id="inside"), pytest.param(0.5, 0.5, False, id="on-edge"),
     pytest.param(-0.7, 0.5, False, id="outside")],
)
def test_tost_constant_differences(diff, margin, equivalent):
    # Definition (documented): sd = 0 -> the CI is the point; equivalent iff |d| < margin.
    b = np.array([0.0, 1.0, 2.0, 3.0])
    res = tost_paired(b + diff, b, margin)
    assert res.equivalent is equivalent
    assert res.p_value == (0.0 if equivalent else 1.0)
    assert res.low90 == res.high90 == pytest.approx(diff)


# --------------------------------------------------------------------------- #
# Holm
# --------------------------------------------------------------------------- #


def test_holm_matches_hand_computation():
    # Hand computation (Holm 1979), m = 4: sorted p = 0.005 (idx 3), 0.01 (idx 0),
    # 0.03 (idx 2), 0.04 (idx 1); times (4, 3, 2, 1) = 0.02, 0.03, 0.06, 0.04;
    # running maximum = 0.02, 0.03, 0.06, 0.06. Reject at 0.05: idx 3 and idx 0.
    adjusted, reject = holm([0.01, 0.04, 0.03, 0.005])
    assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    assert_array_equal(reject, [True, False, False, True])
    assert adjusted.dtype == float and reject.dtype == bool


def test_holm_caps_at_one_and_differs_from_holm_sidak():
    # Hand: m = 2, sorted 0.3 * 2 = 0.6, then max(0.6, 0.8 * 1) = 0.8.
    adjusted, reject = holm([0.8, 0.3])
    assert_allclose(adjusted, [0.8, 0.6])
    assert not reject.any()
    # Hand: m = 3, 0.6 * 3 = 1.8 -> capped at 1.
    adjusted, _ = holm([0.6, 0.7, 0.9])
    assert_allclose(adjusted, [1.0, 1.0, 1.0])
    # Holm-Sidak (statsmodels' default "hs") would give 1 - (1 - 0.01)**4 = 0.03940399 for
    # the smallest; Holm gives 4 * 0.01 = 0.04.
    adjusted, _ = holm([0.01, 0.5, 0.6, 0.7])
    assert adjusted[0] == pytest.approx(0.04)


@pytest.mark.parametrize(
    ("pvalues", "message"),
    [pytest.param([0.01, np.nan, 0.2], r"NaN present in pvalues at index 1", id="nan"),
     pytest.param([0.01, 1.2], r"p-value outside \[0, 1\] in pvalues at index 1", id="range"),
     pytest.param([], r"fewer than 1 values in pvalues", id="empty")],
)
def test_holm_input_errors(pvalues, message):
    with pytest.raises(ValueError, match=message):
        holm(pvalues)


# --------------------------------------------------------------------------- #
# power
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("n", "table"),
    [pytest.param(3, 3.26, id="n3"), pytest.param(5, 1.68, id="n5"),
     pytest.param(10, 1.00, id="n10"), pytest.param(20, 0.66, id="n20")],
)
def test_minimum_detectable_effect_matches_statistics_md_table(n, table):
    # Reference: docs/STATISTICS.md, "What n buys" (paired t, alpha 0.05
    # two-sided, power 0.8), rounded to two decimals there.
    mde = minimum_detectable_effect(n)
    assert isinstance(mde, float)
    assert mde == pytest.approx(table, abs=0.006)
    # Cross-check with scipy's noncentral t: power of the two-sided one-sample t-test
    # at dz = mde is 0.8.
    df, tc, nc = n - 1, stats.t.ppf(0.975, n - 1), mde * math.sqrt(n)
    assert stats.nct.sf(tc, df, nc) + stats.nct.cdf(-tc, df, nc) == pytest.approx(0.8, abs=1e-6)


def _nct_seeds_needed(dz, alpha=0.05, power=0.8):
    """Reference: smallest n whose two-sided one-sample t power (scipy.stats.nct) reaches power."""
    for n in range(2, 10_000):
        df, tc, nc = n - 1, stats.t.ppf(1 - alpha / 2, n - 1), dz * math.sqrt(n)
        if stats.nct.sf(tc, df, nc) + stats.nct.cdf(-tc, df, nc) >= power:
            return n
    raise AssertionError("not reached")


@pytest.mark.parametrize(
    ("effect", "sd", "expected"),
    [
        # Cohen (1988) / G*Power: one-sample t, d = 0.5, alpha 0.05, power 0.8 -> 34.
        pytest.param(0.5, 1.0, 34, id="dz0.5"),
        # docs/STATISTICS.md table: n = 10 detects dz = 1.00.
        pytest.param(2.0, 2.0, 10, id="dz1"),
        pytest.param(-3.0, 1.5, 5, id="dz2-negative"),
        pytest.param(0.3, 0.1, 4, id="dz3"),
    ],
)
def test_seeds_needed(effect, sd, expected):
    assert seeds_needed(effect, sd) == expected
    assert expected == _nct_seeds_needed(abs(effect) / sd)


def test_seeds_needed_errors():
    with pytest.raises(ValueError, match="effect is 0: no number of seeds"):
        seeds_needed(0.0, 1.0)
    with pytest.raises(ValueError, match="sd must be positive"):
        seeds_needed(1.0, 0.0)


@pytest.mark.parametrize("n", [pytest.param(n, id=f"n{n}") for n in (3, 4, 5, 6, 8)])
def test_smallest_signflip_p_matches_exact_wilcoxon(n):
    # Reference: scipy.stats.wilcoxon exact two-sided p for n positive differences
    # (the most extreme sign pattern), e.g. 0.0625 at n = 5 as docs/STATISTICS.md says.
    ref = stats.wilcoxon(np.arange(1.0, n + 1), method="exact").pvalue
    assert smallest_signflip_p(n) == pytest.approx(ref, rel=1e-12)
    assert (smallest_signflip_p(n) < 0.05) == (n > 5)


# --------------------------------------------------------------------------- #
# the three-way rule
# --------------------------------------------------------------------------- #

_B10 = np.array([0.80, 0.82, 0.79, 0.81, 0.83, 0.78, 0.84, 0.80, 0.82, 0.81])
_NOISE10 = np.array([0.01, -0.02, 0.015, -0.005, 0.0, 0.012, -0.011, 0.004, -0.008, 0.013])


@pytest.mark.parametrize(
    ("shift", "margin", "sensitive", "outcome", "phrase"),
    [
        pytest.param(0.10, 0.0, True, "SUPPORTED", "lies above the margin", id="supported"),
        pytest.param(0.10, 0.05, True, "SUPPORTED", "lies above the margin 0.05", id="supported-margin"),
        pytest.param(0.10, 0.2, True, "FALSIFIED", "wrong side", id="below-margin"),
        pytest.param(-0.10, 0.0, True, "FALSIFIED", "wrong side", id="wrong-side"),
        pytest.param(0.0, 0.0, True, "FALSIFIED", "no effect as large as d = 0.05", id="equivalent"),
        pytest.param(0.0, 0.0, False, "INCONCLUSIVE", "no assay sensitivity", id="no-sensitivity"),
    ],
)
def test_three_way_branches(shift, margin, sensitive, outcome, phrase):
    a = _B10 + shift + _NOISE10
    res = three_way(a, _B10, margin=margin, equivalence_margin=0.05, sensitive=sensitive)
    assert res.outcome == outcome, res.reason
    assert phrase in res.reason
    assert "n = 10" in res.reason and "alpha = 0.05" in res.reason
    assert isinstance(res.difference, PairedDifference)
    assert res.difference.level == pytest.approx(0.95)
    assert res.difference.method == "robust-hall"
    assert res.tost.margin == 0.05
    if outcome == "FALSIFIED":
        assert res.falsified_by == ("equivalence" if shift == 0.0 else "wrong side")
    if outcome == "INCONCLUSIVE":
        assert not res.refused and res.mde is not None
    else:
        assert res.mde is None and res.seeds_needed is None


def test_three_way_p_value_is_the_exact_sign_test_that_decided():
    # Reference: scipy.stats.binomtest on the signs, called here directly.
    a = _B10 + 0.10 + _NOISE10
    res = three_way(a, _B10, margin=0.0, equivalence_margin=0.05)
    assert res.outcome == "SUPPORTED"
    assert res.p_value == pytest.approx(stats.binomtest(10, 10, 0.5, alternative="greater").pvalue)
    # equivalence: the larger of the two one-sided sign tests (above -d, below +d)
    d = np.array([0.01, -0.02, 0.015, -0.005, 0.003, 0.012, -0.011, 0.004, -0.008, 0.07])
    res = three_way(_B10 + d, _B10, equivalence_margin=0.05, sensitive=True)
    ref = max(stats.binomtest(10, 10, 0.5, alternative="greater").pvalue,
              stats.binomtest(9, 10, 0.5, alternative="greater").pvalue)
    assert res.tost.p_value == pytest.approx(ref)
    assert res.p_value == pytest.approx(ref)


def test_three_way_sensitivity_is_claimed_only_when_the_caller_says_so():
    a = _B10 + _NOISE10
    default = three_way(a, _B10, equivalence_margin=0.05)
    assert default.outcome == "FALSIFIED"  # equivalence still decides, as before
    assert "sensitivity shown" not in default.reason
    assert "not checked" in default.reason and not default.sensitivity_checked
    shown = three_way(a, _B10, equivalence_margin=0.05, sensitive=True)
    assert "assay sensitivity shown by the caller" in shown.reason
    assert shown.sensitivity_checked


@pytest.mark.parametrize("n", [2, 5])
def test_three_way_refuses_below_min_pairs(n):
    # five pairs all agreeing in sign: the exact sign test's smallest one-sided p is
    # 1/32 = 0.031 > 0.025 (scipy.stats.binomtest), so the rule cannot decide
    a = _B10[:n] + 1.0 + _NOISE10[:n]
    res = three_way(a, _B10[:n], equivalence_margin=0.05)
    assert res.outcome == "INCONCLUSIVE" and res.refused
    assert f"below {stats_mod.MIN_PAIRS} the rule does not decide" in res.reason
    assert stats.binomtest(5, 5, 0.5, alternative="greater").pvalue > 0.025


def test_three_way_decides_at_six_pairs_that_all_agree():
    a = _B10[:6] + 1.0 + _NOISE10[:6]
    assert three_way(a, _B10[:6], equivalence_margin=0.05).outcome == "SUPPORTED"


def test_three_way_refuses_constant_differences():
    # The examples: identical arms, and every seed one test example apart.
    for diff in (0.0, 0.01):
        res = three_way(_B10 + diff, _B10, equivalence_margin=0.05, sensitive=True)
        assert res.outcome == "INCONCLUSIVE" and res.refused, res.reason
        assert "every pair equal" in res.reason and "carries no evidence" in res.reason


def test_three_way_refuses_when_too_few_seeds_differ():
    # Three nonzero seeds of ten (the sparse-ties case): the old rule said
    # SUPPORTED (Hall CI [0.00007, 0.0075]); the exact sign test cannot reach 0.025.
    d = np.zeros(10)
    d[:3] = [0.01, 0.01, 0.01]
    res = three_way(_B10 + d, _B10, equivalence_margin=0.02)
    assert res.outcome == "INCONCLUSIVE"
    assert "3 of 10 seeds differ; an exact sign test cannot reach alpha / 2 = 0.025 " \
           "with fewer than 6" in res.reason
    assert stats.binomtest(3, 3, 0.5, alternative="greater").pvalue > 0.025
    assert stats_mod.min_differing(0.025) == 6 and stats_mod.min_differing(0.0125) == 7


def test_seeds_needed_counts_the_tied_seeds():
    # 3 of 10 seeds differ, all far below a margin of 2 (an optimism that is 0 when the
    # validation choice is the test choice): the interval lies below the margin but the
    # guard refuses; the simulation (no ties) alone would ask for fewer pairs than were
    # run, while at 3 differing seeds in 10 the guard wants about 6 * 10 / 3 = 20
    d = np.zeros(10)
    d[:3] = [0.9, 1.1, 1.0]
    res = three_way(d, np.zeros(10), margin=2.0, equivalence_margin=2.0)
    assert res.outcome == "INCONCLUSIVE" and res.refused and res.difference.high < 2.0
    assert res.seeds_needed == 20
    assert "6 differing seeds at the observed share of 3 in 10" in res.reason
    # with 20 seeds of the same pattern the rule decides (6 of 20 differ)
    d20 = np.zeros(20)
    d20[:6] = [0.9, 1.1, 1.0, 0.8, 1.2, 1.0]
    assert three_way(d20, np.zeros(20), margin=2.0, equivalence_margin=2.0).outcome == \
        "FALSIFIED"
    # no ties: the simulation's figure stands
    free = three_way(np.linspace(-1.0, 3.0, 10), np.zeros(10), equivalence_margin=0.5)
    assert free.outcome == "INCONCLUSIVE" and "differing seeds" not in free.reason


def test_three_way_needs_the_sign_test_to_agree():
    # the interval lies above 0, but 9 of 12 positive gives a one-sided sign p of 0.073
    d = np.array([0.27, 0.82, 0.48, -0.07, 0.12, -0.29, 1.78, 0.26, 0.66, -0.05, 0.34, 1.8])
    res = three_way(d, np.zeros(12), equivalence_margin=0.05)
    assert res.difference.low > 0.0
    assert res.outcome == "INCONCLUSIVE" and res.refused
    assert "exact sign test does not agree" in res.reason
    assert res.p_value == pytest.approx(stats.binomtest(9, 12, 0.5, alternative="greater").pvalue)


def test_three_way_inconclusive_reports_the_rule_s_own_mde_and_seeds_needed():
    rng = np.random.default_rng(0)
    d = 0.6 + rng.normal(size=10)
    res = three_way(_B10 + d, _B10, equivalence_margin=0.05)
    assert res.outcome == "INCONCLUSIVE"
    sd = np.std(d, ddof=1)
    n_need = res.seeds_needed
    assert n_need is not None and n_need > 10
    # the figure is the rule's own: at n_need pairs it decides the observed dz with
    # probability >= 0.8, at n_need - 1 it does not (the same simulation)
    dz = round(abs(d.mean()) / sd, 6)
    assert stats_mod._rule_power(dz, n_need, 0.05) >= 0.8
    assert stats_mod._rule_power(dz, n_need - 1, 0.05) < 0.8
    assert res.mde == pytest.approx(stats_mod.rule_mde(10) * sd)
    assert f"about {n_need} pairs would let this rule decide" in res.reason
    # which way: the simulation counts decisions on the side of mean - margin
    assert (" from the margin 0 as SUPPORTED were the mean and spread to hold (simulated"
            in res.reason) and res.seeds_decide == "SUPPORTED"
    below = three_way(_B10 - d, _B10, equivalence_margin=0.05)
    assert below.outcome == "INCONCLUSIVE" and below.seeds_needed == n_need
    assert (" as FALSIFIED (below the margin; the equivalence route, not simulated, is not "
            "counted) were the mean and spread to hold") in below.reason
    assert below.seeds_decide == "FALSIFIED"


def test_three_way_ignores_the_generator():
    rng = np.random.default_rng(99)
    b = rng.normal(size=12)
    a = b + 1.0 + 0.2 * rng.normal(size=12)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        three_way(a, b, equivalence_margin=0.1, rng="not a generator")
    res = three_way(a, b, equivalence_margin=0.1, rng=np.random.default_rng(0))
    assert res.outcome == "SUPPORTED"
    other = three_way(a, b, equivalence_margin=0.1, rng=np.random.default_rng(12345))
    assert other.difference.confidence_interval() == res.difference.confidence_interval()
    assert other.reason == res.reason


def test_three_way_supported_takes_precedence_over_equivalence():
    # a difference shown above the margin supports the claim even when it is also inside
    # the equivalence band (margin 0 < difference 0.1 < d = 0.5)
    a = _B10 + 0.10 + _NOISE10 / 10
    res = three_way(a, _B10, margin=0.0, equivalence_margin=0.5)
    assert res.outcome == "SUPPORTED"


def test_mean_interval_constant_values_collapse():
    est = mean_interval([0.9, 0.9, 0.9])
    assert est.sd == 0.0 and est.low == est.high == pytest.approx(0.9)


def test_three_way_survives_a_floating_point_residue_difference():
    # Two arms equal up to a float residue (found by the LIPS falsifier): the power
    # simulation finds no sample size; the rule must still decide instead of raising.
    b = _B10
    a = b + np.array([1e-3, -1e-3, 2e-3, -2e-3, 1e-12, 1e-3, -1e-3, 2e-3, -2e-3, 0.0])
    res = three_way(a, b, equivalence_margin=0.02, sensitive=False)
    assert res.outcome == "INCONCLUSIVE" and res.seeds_needed is None


# --------------------------------------------------------------------------- #
# calibration (seeded Monte Carlo, vectorised; the full matrix is test_calibration.py)
# --------------------------------------------------------------------------- #

_REPS = 20000


def _mc_se(p, reps):
    return math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize("n", [6, 10, 20])
def test_calibration_null_false_supported_rate(n):
    # Normal differences at the null: SUPPORTED needs the lower end of a two-sided 95 %
    # interval above 0 and a one-sided sign test at 0.025: at most alpha / 2.
    rng = np.random.default_rng([20250101, n])
    codes = three_way_codes(rng.normal(size=(_REPS, n)), equivalence_margin=0.5).codes
    rate = float(np.mean(codes == 0))
    assert rate <= 0.025 + 3 * _mc_se(0.025, _REPS), rate


def test_calibration_large_effect_is_supported():
    # A 3-SD effect at n = 10 is found about 85 % of the time (the price of the sign test
    # and the skewness allowance; the plain t test finds it always).
    rng = np.random.default_rng(31337)
    codes = three_way_codes(3.0 + rng.normal(size=(4000, 10)), equivalence_margin=0.5).codes
    assert np.mean(codes == 0) >= 0.8


def test_sd_interval_is_the_chi_square_interval_and_covers():
    import math

    import numpy as np
    from scipy.stats import chi2

    from audit import stats

    x = [1.0, 2.0, 4.0, 7.0]
    sd, lo, hi = stats.sd_interval(x, alpha=0.1)
    assert sd == pytest.approx(np.std(x, ddof=1))
    assert lo == pytest.approx(sd * math.sqrt(3 / chi2.ppf(0.95, 3)))
    assert hi == pytest.approx(sd * math.sqrt(3 / chi2.ppf(0.05, 3)))
    assert lo < sd < hi
    assert all(math.isnan(v) for v in stats.sd_interval([3.0]))
    assert stats.sd_interval([2.0, 2.0, 2.0]) == (0.0, 0.0, 0.0)  # constant: no spread
    # its coverage on normal data is its level (exact for the normal)
    rng = np.random.default_rng(5)
    draws = rng.normal(0.0, 2.0, size=(4000, 6))
    hits = sum(lo <= 2.0 <= hi for lo, hi in
               (stats.sd_interval(row, alpha=0.1)[1:] for row in draws))
    assert abs(hits / 4000 - 0.9) < 0.02


def test_rounding_residue_of_the_inputs_decides_nothing():
    """Differences that are equal but computed from inputs in other binades were spread
    to the rule (its tolerance ignored |a| and |b|): every seed exactly one example
    better gave SUPPORTED, and a tie at the margin fell on a side by residue."""
    k = np.arange(60, 70)
    a, b = (k + 1) / 100, k / 100
    assert stats_mod.three_way(a, b, equivalence_margin=0.05).outcome == "INCONCLUSIVE"
    assert stats_mod.three_way(b, a, equivalence_margin=0.05).outcome == "INCONCLUSIVE"
    x = 1e6 + np.arange(10) * 1e-10
    assert stats_mod.three_way(x, np.full(10, 1e6), equivalence_margin=1.0).outcome == \
        "INCONCLUSIVE"
    ka = np.array([380, 620, 399, 331, 412, 675, 736, 763, 657, 344])
    kb = np.array([377, 618, 397, 329, 410, 674, 734, 762, 656, 343])
    as_acc = stats_mod.three_way(ka / 1000, kb / 1000, margin=0.001, equivalence_margin=0.001)
    exact = stats_mod.three_way((ka - kb) / 1000, np.zeros(10), margin=0.001,
                            equivalence_margin=0.001)
    assert as_acc.outcome == exact.outcome and as_acc.p_value == exact.p_value


def test_overflow_underflow_and_power_are_clear():
    # values whose squares or cubes leave float64 are refused, not decided on a
    # zero-width (underflowed SD) or NaN interval: the rule read 1e-200 x data as
    # SUPPORTED where the same data at scale 1 is INCONCLUSIVE
    tiny = np.array([1.0] * 9 + [-5.0])
    assert stats_mod.three_way(tiny, np.zeros(10), equivalence_margin=0.1).outcome == \
        "INCONCLUSIVE"
    for scale in (1e-200, 1e-170, 1e160):
        for call in (lambda: stats_mod.paired_difference(tiny * scale, np.zeros(10)),
                     lambda: stats_mod.three_way(tiny * scale, np.zeros(10),
                                                 equivalence_margin=0.1 * scale),
                     lambda: stats_mod.mean_interval(tiny * scale),
                     lambda: stats_mod.tost_paired(tiny * scale, np.zeros(10), 3 * scale)):
            with pytest.raises(ValueError, match="rescale the metric"):
                call()
    with pytest.raises(ValueError, match="overflow float64|rescale the metric"):
        stats_mod.paired_difference(np.full(10, 1e308) + np.arange(10) * 1e292,
                                np.full(10, -1e308))
    for bad in (0, -1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="power must lie strictly between"):
            stats_mod.three_way(np.arange(10.0), np.zeros(10), equivalence_margin=1, power=bad)



@pytest.mark.parametrize("sensitive", [True, False, None])
@pytest.mark.parametrize("diff", [0.0, 0.5, -0.5])
def test_equal_pairs_read_as_no_interval_not_a_hall_interval(diff, sensitive):
    """Every pair equal: the zero-width "[x, x]" was printed as Hall's interval, which no
    method made; a reason whose point sat on the margin without sensitivity read as if the
    interval lay inside the equivalence band. It now says there is no interval, and that
    the rule does not decide from equal pairs, whatever side the point lies on."""
    a = [1.0 + diff] * 6
    tw = stats_mod.three_way(a, [1.0] * 6, margin=0.0, equivalence_margin=0.25,
                         sensitive=sensitive)
    assert tw.outcome == "INCONCLUSIVE"
    assert "CI [" not in tw.reason and "Hall's" not in tw.reason
    assert "every pair equal: no spread, no interval;" in tw.reason
    assert "the rule does not decide from it: a sample with no spread" in tw.reason
    assert stats_mod.interval_text(tw.difference) == stats_mod.NO_SPREAD
    # a sample with spread keeps its ends
    spread = stats_mod.three_way([1.1, 1.2, 1.0, 1.3, 1.1, 1.25], [1.0] * 6, margin=0.0,
                             equivalence_margin=0.25)
    assert stats_mod.interval_text(spread.difference).startswith("[")
    assert stats_mod.interval_text(spread.difference, method=True).endswith("(robust-hall)")


def test_a_seed_count_at_or_below_the_pairs_run_says_this_sample_did_not_decide():
    # 12 pairs that do not decide, though 12 would with power 0.8 at this spread
    d = np.array([0.78, 0.12, 1.29, 1.84, 2.35, 2.02, 1.82, 2.4, 1.04, 1.34, 2.39, 2.24])
    tw = stats_mod.three_way(d, np.zeros(12), margin=0.0, equivalence_margin=2.0, alpha=0.05)
    assert tw.outcome == "INCONCLUSIVE" and tw.seeds_needed is not None
    assert tw.seeds_needed <= tw.n
    assert "not more than the 12 already run, which did not decide" in tw.reason
    assert tw.seeds_phrase("pairs").startswith(f"{tw.seeds_needed} pairs (not more than")
    # above n: the count alone
    wide = stats_mod.three_way(d[:6] - 1.0, np.zeros(6), margin=0.0, equivalence_margin=2.0,
                           alpha=0.05)
    assert wide.seeds_needed is None or wide.seeds_needed > 6
    if wide.seeds_needed:
        assert wide.seeds_phrase() == f"{wide.seeds_needed} seeds"
        assert "already run" not in wide.reason


# --------------------------------------------------------------------------- #
# Hall's interval: its ends against the skewness, and the turning point
# --------------------------------------------------------------------------- #

def _hall_end_by_roots(g: float, n: int, level: float, upper: bool) -> float:
    """The end of Hall's interval (mean 0, SD 1) solved from the cubic itself, not from
    the cube-root formula under test: sqrt(n) T(x) = -+t, T(x) = x + g x^2 / 3
    + g^2 x^3 / 27 + g / (6 n) (Hall 1992, eq. for the transformation), with
    x = (mean - mu) / sd, so the end is mu = -x; T is monotone, so one real root."""
    q = stats.t.ppf(0.5 + level / 2, n - 1) / math.sqrt(n)
    y = -q if upper else q
    if g == 0:
        return -y
    roots = np.roots([g * g / 27, g / 3, 1.0, g / (6 * n) - y])
    # T is monotone: one real root (the others a complex pair); take the root with the
    # smallest imaginary part, so rounding near the flat point cannot lose it
    return -float(roots[np.argmin(np.abs(roots.imag))].real)


@pytest.mark.parametrize("n", [6, 10, 20])
def test_hall_interval_at_zero_skew_is_the_t_interval(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    d = a - b  # its own skewness is not zero: the interval is read at g = 0
    lo, hi = stats_mod._hall_bounds(d.mean(), d.std(ddof=1), 0.0, n, 0.95)
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert (float(lo), float(hi)) == pytest.approx((ci.low, ci.high), rel=1e-12)


@pytest.mark.parametrize("n", [6, 10, 20])
@pytest.mark.parametrize("g", [-1.0, -0.4, 0.3, 0.9])
def test_hall_ends_solve_the_cubic_before_the_turning_point(n, g):
    # inside (-h, h), where no end is clamped, both ends are Hall's transformation
    # inverted at the t quantiles, as the cubic's own root gives them
    assert abs(g) < stats_mod.hall_turning_point(n, 0.95)
    lo, hi = stats_mod._hall_bounds(0.0, 1.0, g, n, 0.95)
    assert float(lo) == pytest.approx(_hall_end_by_roots(g, n, 0.95, upper=False), abs=1e-9)
    assert float(hi) == pytest.approx(_hall_end_by_roots(g, n, 0.95, upper=True), abs=1e-9)


@pytest.mark.parametrize("n", [5, 10, 20, 50])
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_hall_turning_point_is_where_the_unclamped_end_is_widest(n, level):
    # on a fine grid of the cubic's own roots, the upper end (skewness g > 0 against it)
    # is widest at the turning point and narrower on either side of it
    h = stats_mod.hall_turning_point(n, level)
    grid = np.linspace(0.05, 4 * h, 801)
    ends = np.array([_hall_end_by_roots(g, n, level, upper=True) for g in grid])
    assert grid[np.argmax(ends)] == pytest.approx(h, abs=4 * h / 800)
    assert ends.max() > _hall_end_by_roots(4 * h, n, level, upper=True) * 1.2


@pytest.mark.parametrize("n", [6, 10, 20])
def test_hall_ends_never_narrow_as_the_skewness_turns_against_them(n):
    # past the turning point the unclamped ends came back towards the mean (at n = 10
    # the lower end was 2.96 SD out at g = -1.53 and 1.05 SD at g = -8); clamped, a
    # sample more skewed against an end has that end at least as far out
    g = np.linspace(-12, 12, 4801)
    lo, hi = stats_mod._hall_bounds(np.zeros_like(g), np.ones_like(g), g, n, 0.95)
    assert np.all(np.diff(lo) >= -1e-12)  # g rising: the lower end moves up or stays
    assert np.all(np.diff(hi) >= -1e-12)  # the upper end moves up or stays
    h = stats_mod.hall_turning_point(n, 0.95)
    widest = _hall_end_by_roots(h, n, 0.95, upper=True)
    assert float(hi[-1]) == pytest.approx(widest, rel=1e-9)
    assert float(lo[0]) == pytest.approx(-widest, rel=1e-9)


def test_the_rule_reads_a_strongly_skewed_sample_no_narrower_than_a_milder_one():
    # one seed far below the rest: the rule's lower end (skewness allowance against it)
    # must sit at least as many SDs below the mean as for a milder left skew (before the
    # clamp: 2.88 SDs at skewness -0.48, 1.96 at -2.05)
    mild = np.array([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 0.6])
    strong = np.array([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, -2.0])
    reach = []
    for d in (mild, strong):
        assert stats.skew(d) < 0
        res = stats_mod.three_way(d, np.zeros_like(d), margin=0.0, equivalence_margin=0.5)
        reach.append((res.difference.mean - res.difference.low) / d.std(ddof=1))
    assert stats.skew(strong) < stats.skew(mild) - 1
    assert reach[1] >= reach[0] - 1e-12
