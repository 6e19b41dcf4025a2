"""The calibration matrix: every decision path's error rates, measured by simulation.

STATISTICS.md ("Calibration"): the three-way rule at n in {3, 5, 8, 10, 15, 20, 30, 50},
under the null (true difference = margin) and at the equivalence boundary (+-d), for
normal, skewed (both ways), heavy-tailed and accuracy-like differences; the sequential
procedure; and composites (any of k, best of k). Each rate must stay at or below its
nominal level plus three Monte-Carlo standard errors. CI runs it with 6000 replicates per
cell (about 10 s); ``python -m audit.calibration 20000`` prints the full table.
"""
import numpy as np
import pytest

from audit import calibration as cal
from audit import stats
from audit.sequential import Plan, plan

REPS = 6000


@pytest.mark.parametrize("dist", cal.DISTRIBUTIONS)
def test_three_way_holds_its_level_at_every_n(dist):
    rng = np.random.default_rng([20261201, cal.DISTRIBUTIONS.index(dist)])
    rates = [r for n in cal.NS for r in cal.three_way_rates(n, dist, rng, REPS)]
    bad = [r for r in rates if not r.ok]
    assert not bad, cal.table(bad)


@pytest.mark.parametrize("dist", cal.DISTRIBUTIONS)
@pytest.mark.parametrize("shape", ["pocock", "obrien-fleming"])
@pytest.mark.parametrize("path, seed", [("sequential", 7), ("futility", 13)])
def test_sequential_looks_and_the_futility_stop_hold_the_level(dist, shape, path, seed):
    # sequential: one rule over the looks; futility: a gated part, the plan stopping
    # where the premise is decided not reproduced (two error rates per cap)
    rates_of = cal.sequential_rates if path == "sequential" else cal.futility_rates
    rng = np.random.default_rng([seed, cal.DISTRIBUTIONS.index(dist)])
    rates = [r for cap in (10, 20, 40)
             for r in rates_of(plan(cap, spending=shape), dist, rng, REPS)]
    assert len(rates) == 6
    bad = [r for r in rates if not r.ok]
    assert not bad, cal.table(bad)


@pytest.mark.parametrize("dist", cal.DISTRIBUTIONS)
def test_composites_hold_the_level(dist):
    rng = np.random.default_rng([11, cal.DISTRIBUTIONS.index(dist)])
    rates = (cal.any_of_rates(4, 5, dist, rng, REPS) + cal.any_of_rates(4, 20, dist, rng, REPS)
             + cal.best_of_rates(3, 5, dist, rng, REPS) + cal.best_of_rates(3, 20, dist, rng, REPS))
    bad = [r for r in rates if not r.ok]
    assert not bad, cal.table(bad)


def test_stopping_when_decided_without_spending_breaks_the_level():
    # The reason for the plan: looking at 5, 10 and 20 seeds with the full alpha at every
    # look and stopping at the first decision inflates false SUPPORTED beyond alpha.
    rng = np.random.default_rng(3)
    naive = Plan((5, 10, 20))
    object.__setattr__(naive, "fractions", lambda: (1.0, 1.0, 1.0))
    rate = cal.sequential_rates(naive, "normal", rng, 20000)[0]
    spent = cal.sequential_rates(plan(20), "normal", rng, 20000)[0]
    assert spent.ok and spent.rate < rate.rate


def test_vectorised_codes_equal_the_scalar_rule():
    rng = np.random.default_rng(5)
    with stats.without_flip():
        for _ in range(400):
            n = int(rng.integers(2, 25))
            b = rng.normal(size=n)
            kind = int(rng.integers(4))
            if kind == 0:
                a = b + 0.3  # constant differences
            elif kind == 1:
                a = b + rng.gamma(2.0, 1.0, n) * rng.choice([0.01, 1.0])
            else:
                a = b + rng.normal(rng.normal(), 1.0, n)
            m, d = float(rng.choice([0.0, 0.1, -0.2])), float(rng.choice([0.05, 0.5, 2.0]))
            al, sens = float(rng.choice([0.05, 0.0125])), bool(rng.integers(2))
            tw = stats.three_way(a, b, margin=m, equivalence_margin=d, alpha=al, sensitive=sens)
            code = stats.three_way_codes((a - b)[None], margin=m, equivalence_margin=d,
                                         alpha=al, sensitive=sens).codes[0]
            assert stats.OUTCOMES[code] == tw.outcome, (a - b, m, d, al, sens, tw.reason)


def test_flip_distance_flips_the_outcome_and_a_smaller_move_does_not():
    rng = np.random.default_rng(9)
    d = 0.4 + rng.normal(0.0, 0.3, 8)
    kw = dict(margin=0.0, equivalence_margin=0.5, alpha=0.05)
    base = stats.three_way_codes(d[None], **kw).codes[0]
    flip = stats.flip_distance(d, **kw)
    assert flip is not None and flip > 0
    moved = [d + s * (flip * 1.0001) * np.eye(d.size)[i] for i in range(d.size) for s in (1, -1)]
    assert any(stats.three_way_codes(x[None], **kw).codes[0] != base for x in moved)
    smaller = [d + s * (flip * 0.999) * np.eye(d.size)[i] for i in range(d.size) for s in (1, -1)]
    assert all(stats.three_way_codes(x[None], **kw).codes[0] == base for x in smaller)


def test_no_verdict_depends_on_a_bootstrap_generator():
    # the rule behind every verdict resamples nothing: 20 generators, one answer
    rng = np.random.default_rng(2)
    for n in (5, 10, 20):
        b = rng.normal(size=n)
        a = b + 0.3 + rng.normal(0.0, 0.5, n)
        outs = {(tw.outcome, tw.difference.low, tw.difference.high)
                for tw in (stats.three_way(a, b, equivalence_margin=0.5,
                                           rng=np.random.default_rng(g)) for g in range(20))}
        assert len(outs) == 1


def test_plan_looks_and_shares():
    p = plan(20)
    assert p.looks == (5, 10, 20)
    assert sum(p.fractions()) == pytest.approx(1.0)
    assert all(f > 0 for f in p.fractions())
    assert plan(8).looks == (5, 8) and plan(3).looks == (3,)
    obf = plan(20, spending="obrien-fleming").fractions()
    assert obf[0] < p.fractions()[0]  # O'Brien-Fleming keeps alpha for the last look
    with pytest.raises(ValueError, match="increasing seed counts"):
        Plan((10, 5))
    with pytest.raises(ValueError, match="unknown spending"):
        Plan((5, 10), "bonferroni")
