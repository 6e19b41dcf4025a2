"""The calibration matrix at CI size: every decision path's error rates, by simulation.

docs/STATISTICS.md ("Calibration"): the three-way rule at several n, under the null (true
difference = margin) and at the equivalence boundary (+-d), for every distribution of
``audit.calibration.DISTRIBUTIONS`` (normal; exponential and lognormal skew both ways;
t3; binomial accuracies on 100 and 1000 test examples; sparse ties; near-constant); the
sequential plans and the futility stop; composites, and claims of three correlated parts
under all_of / any_of. Each one-sided rate must stay at or below alpha / 2 plus three
Monte-Carlo standard errors. Each cell draws from a stream seeded from its own name.
``python -m audit.calibration --markdown`` prints the README's tables at 20,000 runs a
cell; CI runs 3,000 runs a cell over fewer n and caps.
"""
import numpy as np
import pytest

from audit import calibration as cal
from audit import stats
from audit.sequential import Plan, plan

REPS = 3000
CI_NS = (6, 10, 20, 50)
CI_CAPS = (10, 20)


@pytest.mark.parametrize("dist", cal.DISTRIBUTIONS)
def test_every_path_holds_alpha_over_two(dist):
    rates = cal.matrix(REPS, ns=CI_NS, dists=(dist,), caps=CI_CAPS)
    assert all(r.nominal == pytest.approx(0.025) for r in rates)
    bad = [r for r in rates if not r.ok]
    assert not bad, cal.table(bad)


def test_claim_level_rows_cover_three_correlated_parts():
    rates = cal.claim_rates(3, 10, "normal", 0.9, REPS)
    assert {r.path for r in rates} == {"all_of of 3 parts (alpha/3 each), rho 0.9",
                                       "any_of of 3 parts (alpha/3 each), rho 0.9"}
    # without the Bonferroni share the union path breaks the level (the reason for it)
    rng = cal.cell_rng("test/union-without-correction")
    parts = cal._correlated_parts("normal", 20000, 20, 3, 0.0, 0.0, 1.0, rng)
    hit = np.zeros(20000, dtype=bool)
    for D in parts:
        hit |= stats.three_way_codes(D, equivalence_margin=0.5).codes == stats.SUPPORTED
    corrected = cal.claim_rates(3, 20, "normal", 0.0, 20000)[1]
    assert corrected.ok and corrected.rate < hit.mean()


def test_cells_have_their_own_streams():
    # adding or reordering cells moves no other cell: a cell's rate depends on its name
    a = cal.three_way_rates(10, "normal", 2000)
    cal.three_way_rates(20, "t3", 2000)
    assert cal.three_way_rates(10, "normal", 2000) == a
    assert cal.cell_rng("x").random() == cal.cell_rng("x").random()
    assert cal.cell_rng("x").random() != cal.cell_rng("y").random()


def test_collapse_mixtures_are_measured_not_required():
    rates = cal.collapse_rates(REPS, ns=(10,))
    assert rates and all(not r.required and r.ok for r in rates)
    # a collapse of arm A on 15 % of seeds: false SUPPORTED where no collapse was drawn
    a15 = [r for r in rates if r.dist == "collapse-A-15%" and "SUPPORTED" in r.error][0]
    assert a15.rate > 0.05


def test_stopping_when_decided_without_spending_inflates_the_error():
    naive = Plan((10, 15, 20))
    object.__setattr__(naive, "fractions", lambda: (1.0, 1.0, 1.0))
    rate = cal.sequential_rates(naive, "normal", 20000)[0]
    spent = cal.sequential_rates(plan(20, first=10), "normal", 20000)[0]
    assert spent.ok and spent.rate < rate.rate


def test_vectorised_codes_equal_the_scalar_rule():
    rng = np.random.default_rng(5)
    with stats.without_flip():
        for _ in range(400):
            n = int(rng.integers(2, 25))
            b = rng.normal(size=n)
            kind = int(rng.integers(5))
            if kind == 0:
                a = b + 0.3  # constant differences
            elif kind == 1:
                a = b + rng.gamma(2.0, 1.0, n) * rng.choice([0.01, 1.0])
            elif kind == 2:  # ties: most seeds exactly equal
                a = b + np.where(rng.random(n) < 0.6, 0.0, rng.choice([-0.01, 0.01, 0.02], n))
            else:
                a = b + rng.normal(rng.normal(), 1.0, n)
            m, d = float(rng.choice([0.0, 0.1, -0.2])), float(rng.choice([0.05, 0.5, 2.0]))
            al, sens = float(rng.choice([0.05, 0.0125])), bool(rng.integers(2))
            tw = stats.three_way(a, b, margin=m, equivalence_margin=d, alpha=al, sensitive=sens)
            r = stats.three_way_codes((a - b)[None], margin=m, equivalence_margin=d,
                                      alpha=al, sensitive=sens)
            assert stats.OUTCOMES[r.codes[0]] == tw.outcome, (a - b, m, d, al, sens, tw.reason)
            assert bool(r.refused[0]) == tw.refused


def test_sign_test_p_matches_scipy_binomtest():
    from scipy.stats import binomtest

    for pos in range(0, 11):
        for neg in range(0, 11 - pos):
            ref = binomtest(pos, pos + neg, 0.5, alternative="greater").pvalue if pos + neg else 1
            assert stats._sign_p(pos, neg) == pytest.approx(ref, rel=1e-12)


def test_flip_distance_flips_the_outcome_and_a_smaller_move_does_not():
    rng = np.random.default_rng(9)
    d = 1.0 + rng.normal(0.0, 0.3, 12)
    kw = dict(margin=0.0, equivalence_margin=0.5, alpha=0.05)
    base = stats.three_way_codes(d[None], **kw).codes[0]
    assert base == stats.SUPPORTED
    flip = stats.flip_distance(d, **kw)
    assert flip is not None and flip > 0
    moved = [d + s * (flip * 1.0001) * np.eye(d.size)[i] for i in range(d.size) for s in (1, -1)]
    assert any(stats.three_way_codes(x[None], **kw).codes[0] != base for x in moved)
    smaller = [d + s * (flip * 0.999) * np.eye(d.size)[i] for i in range(d.size) for s in (1, -1)]
    assert all(stats.three_way_codes(x[None], **kw).codes[0] == base for x in smaller)


def test_no_verdict_depends_on_a_generator():
    rng = np.random.default_rng(2)
    for n in (5, 10, 20):
        b = rng.normal(size=n)
        a = b + 0.8 + rng.normal(0.0, 0.5, n)
        outs = {(tw.outcome, tw.difference.low, tw.difference.high, tw.reason)
                for tw in (stats.three_way(a, b, equivalence_margin=0.5,
                                           rng=np.random.default_rng(g)) for g in range(5))}
        assert len(outs) == 1


def test_plan_looks_and_shares():
    p = plan(20)
    assert p.looks == (10, 20)
    assert sum(p.fractions()) == pytest.approx(1.0)
    assert all(f > 0 for f in p.fractions())
    assert plan(8).looks == (8,) and plan(3).looks == (3,)
    assert plan(40).looks == (10, 20, 40) and plan(20, first=5).looks == (5, 10, 20)
    obf = plan(20, spending="obrien-fleming").fractions()
    assert obf[0] < p.fractions()[0]  # O'Brien-Fleming keeps alpha for the last look
    with pytest.raises(ValueError, match="increasing whole seed counts"):
        Plan((10, 5))
    with pytest.raises(ValueError, match="increasing whole seed counts"):
        Plan((10.9, 20))  # a tampered lock's look is refused, not truncated to 10
    with pytest.raises(ValueError, match="alpha must lie strictly between"):
        Plan((10, 20), "obrien-fleming", alpha=1.5)
    with pytest.raises(ValueError, match="first look needs at least 2"):
        plan(20, first=0)  # looped forever
    # O'Brien-Fleming at a cap of 200 spent exactly 0 at 10 seeds: a traceback mid-run
    with pytest.raises(ValueError, match=r"almost no alpha at \[10\] seeds"):
        plan(200, spending="obrien-fleming")
    assert min(plan(100, spending="obrien-fleming").fractions()) > 0
    with pytest.raises(ValueError, match="unknown spending"):
        Plan((5, 10), "bonferroni")
