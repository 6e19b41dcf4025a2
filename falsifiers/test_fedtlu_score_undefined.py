"""Falsifier: FedTLU's Section III score (arXiv 2412.17692) at std(dW) = 0, and its scale.

Checked against hand computations; the scale invariance also as a hypothesis property of
the project's audit.papers.fedtlu.algorithm.score.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.pytest_plugin import check_committed_report, check_lock

CLAIM = "fedtlu-score-undefined"


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_verdict_is_locked(result):
    check_lock(result)


def test_literal_formula_on_std_zero_updates():
    from audit.papers.fedtlu.score_undefined import literal_score

    assert math.isnan(literal_score([0.0] * 4))  # 0 / (2 * 0) = 0/0
    assert literal_score([0.5] * 4) == math.inf  # ||dW|| = 1, std = 0: 1/0
    assert literal_score([0.3]) == math.inf  # one entry: std = 0 always


def test_rounding_constant(result):
    est = result.verdict.estimate
    # float64: 0.1 + 0.1 + 0.1 = 0.30000000000000004, / 3 = 0.10000000000000002, so each
    # deviation is -2^-56 and np.std = 2^-56 = 1.3877787807814457e-17
    assert est("literal_std_rounding_constant").value == 2.0 ** -56
    # score = ||x|| / (sqrt(3) * 2^-56) = 0.1 * 2^56 = 7.2057594037927936e15 (to rounding)
    assert est("literal_score_rounding_constant").value == pytest.approx(0.1 * 2 ** 56,
                                                                         rel=1e-12)
    assert est("n_nonfinite_literal").value == 5  # all but the rounding row


def test_guarded_score_choices():
    from audit.papers.fedtlu.algorithm import score

    assert score(np.zeros(4)) == 0.0  # a frozen layer: the project's choice
    assert score(np.full(4, 0.5)) == math.inf  # constant: the limit of the identity
    # a hand case: [1, 3]: ||x|| = sqrt(10), n = 2, std = 1 -> sqrt(10)/sqrt(2) = sqrt(5)
    assert score([1.0, 3.0]) == pytest.approx(math.sqrt(5), rel=1e-15)
    # and sqrt(1 + mean^2/var) = sqrt(1 + 4/1) = sqrt(5)


def test_scale_sweep(result):
    """The identity holds up to float64 rounding, never beyond the rule's REFUTED bound.
    The tolerance is the worst-case rounding bound n u (1 + R^2) of the sweep's own sizes
    (1.1e-11 at smoke and full scale). The fixed 1e-12 it replaced was below that bound:
    the full sweep (4000 updates) found 4.1e-12 and was INCONCLUSIVE for rounding alone
    (reports/CHANGES.md says why the rule moved)."""
    from audit.papers.fedtlu.declarations.score_undefined import invariance_tol
    from audit.papers.fedtlu.score_undefined import DEPENDS_TOL

    est = result.verdict.estimate
    scale, ident = est("max_rel_dev_under_scaling").value, est("max_rel_dev_from_identity").value
    assert scale < DEPENDS_TOL and ident < DEPENDS_TOL  # never a real scale dependence
    part = result.verdict.part("scale-invariant").verdict.value
    tol = invariance_tol(result.ctx.config["sizes"], result.ctx.config["max_mean_over_sd"])
    assert part == ("CONFIRMED" if max(scale, ident) < tol else "INCONCLUSIVE")
    if result.ctx.scale == "smoke":
        assert part == "CONFIRMED"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=50),
       st.floats(-6, 6), st.booleans())
def test_score_is_scale_invariant_property(xs, log_c, neg):
    from audit.papers.fedtlu.algorithm import score, score_identity

    x = np.array(xs)
    if np.all(x == x[0]) or np.std(x) < 1e-6 * max(1.0, np.abs(x).max()):
        return  # std = 0 (or close enough that float64 decides): the other part
    c = (-1.0 if neg else 1.0) * 10.0 ** log_c
    s = score(x)
    assert score(c * x) == pytest.approx(s, rel=1e-8)
    assert s == pytest.approx(score_identity(x), rel=1e-8)


def test_the_committed_report_is_what_this_code_computes(result):
    # exact arithmetic on fixed inputs: the same on any machine to float rounding
    check_committed_report(result, rtol=1e-6, atol=1e-9)
