"""Intervals in the claims' texts: a zero-width interval (every seed equal) reads
``stats.NO_SPREAD`` and an undefined one (an end missing, NaN or infinite) reads
``stats.NO_INTERVAL``, never a point dressed as ``[x, x]`` nor ``[nan, nan]``; an interval
with width prints exactly as before."""
import math
import re
import string
from pathlib import Path

import numpy as np
import pytest

from audit import stats
from audit.claims import RunSpec
from audit.verdict import Estimate

NUM = r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)"
#: "[x, x]": both ends printed the same
POINT = re.compile(rf"\[\s*({NUM})\s*,\s*\1\s*\]")


def _honest(text: str) -> str:
    assert not POINT.search(text), text
    assert not re.search(r"\b(nan|inf)\b", text, re.IGNORECASE), text
    return text


def _flat(n=6, value=0.1):
    """A paired difference whose every pair gives ``value``: a zero-width interval."""
    base = np.linspace(0.2, 0.7, n)
    return stats.paired_difference(base + value, base, method="t")


def _nan(value=0.1, n=1):
    """A difference whose interval is undefined (one value: Student t gives NaN ends)."""
    return stats.PairedDifference(value, math.nan, n, 0.95, math.nan, math.nan, "t", math.nan,
                                  math.nan)


def _spread():
    return stats.paired_difference([1.0, 2.5, 3.1, 0.2, 1.7, 2.2],
                                   [0.5, 1.0, 2.0, 0.9, 0.3, 1.1], method="t")


# ----------------------------------------------------------------------- the helpers
@pytest.mark.parametrize("low, high", [(math.nan, math.nan), (math.nan, 1.0),
                                       (-math.inf, math.inf), (None, None)])
def test_interval_text_of_an_undefined_interval_is_no_interval(low, high):
    est = Estimate("x", 0.5, low, high, 0.95 if low is not None else None, 3, "t")
    assert stats.interval_text(est) == stats.NO_INTERVAL
    assert stats.ci_text(est, "95% CI [{low:.2f}, {high:.2f}]") == stats.NO_INTERVAL
    assert stats.ci_text(est, paren=True) == f"({stats.NO_INTERVAL})"


def test_ci_text_drops_the_label_with_a_zero_width_interval_and_keeps_a_real_one():
    flat, spread = _flat(), _spread()
    assert stats.ci_text(flat, "{conf:.4g}% CI [{low:.2f}, {high:.2f}]", conf=95) == \
        stats.NO_SPREAD
    assert stats.ci_text(flat, "[{low:.2f}, {high:.2f}]", paren=True) == \
        f"({stats.NO_SPREAD})"
    assert stats.ci_text(spread, "{conf:.4g}% CI [{low:.2f}, {high:.2f}]", conf=95) == \
        f"95% CI [{spread.low:.2f}, {spread.high:.2f}]"
    assert stats.interval_text(spread, ".3f") == f"[{spread.low:.3f}, {spread.high:.3f}]"
    # one value gives no interval, not "no spread"
    one = stats.MeanEstimate(0.4, 0.4, 0.4, 1, 0.0, 0.95)
    assert stats.interval_text(one) == stats.NO_INTERVAL


# ------------------------------------------- no template prints an interval's ends itself
DECLARATIONS = sorted((Path(stats.__file__).parent / "papers").glob("*/declarations/*.py"))
#: what an interval fragment (filled by stats.ci_text) may name beside the ends
FRAGMENT_FIELDS = {"low", "high", "level", "conf", "method"}


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, (tuple, list)):
        for y in x:
            yield from _strings(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _strings(y)


@pytest.mark.parametrize("path", DECLARATIONS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_declared_templates_take_a_rendered_interval(path):
    """A template reads an interval only through a fragment that stats.ci_text fills (the
    ends and their label, nothing else), so no sentence formats ``{x.low}``/``{low}``
    itself and prints ``[x, x]`` or ``[nan, nan]``."""
    import importlib

    module = importlib.import_module(
        f"audit.papers.{path.parent.parent.name}.declarations.{path.stem}")
    bad = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        for text in _strings(value):
            try:
                fields = {f.split(".")[0].split("[")[0] if not f.endswith((".low", ".high"))
                          else f for _, f, _, _ in string.Formatter().parse(text) if f}
            except ValueError:  # not a template
                continue
            ends = {f for f in fields if f in ("low", "high") or f.endswith((".low", ".high"))}
            if ends and (ends - {"low", "high"} or fields - FRAGMENT_FIELDS):
                bad.append((name, text[:80]))
    assert not bad, bad


# ------------------------------------------------------------------------------- LIPS
def test_lips_measurements_print_no_point_as_an_interval():
    import audit.papers.lips.dropout_control as L

    const = np.full(6, 0.9)
    _, reason, _ = L._decide_cosine({"fedbn": const, "lips": const - 0.1}, 0.95)
    assert stats.NO_SPREAD in _honest(reason)
    _, reason, _ = L._decide_overfitting({"lips": np.full(6, 3.0)}, {"lips": np.full(6, 4.0)})
    assert f"lips 3.00 ({stats.NO_SPREAD}) (peak 4.00)" in _honest(reason)
    _, reason, _ = L._decide_best_round({"lips": np.zeros(6)}, _flat(), _nan())
    assert stats.NO_SPREAD in _honest(reason) and stats.NO_INTERVAL in reason
    assert "95% t CI" not in reason  # the label goes with the interval


@pytest.mark.parametrize("est", [_flat(), _nan()], ids=["no-spread", "nan"])
def test_lips_notes_print_no_point_as_an_interval(est):
    from audit.papers.lips.present import dropout_control as P

    f = dict(short_rounds=3, rounds=10, outcome="INCONCLUSIVE", alpha=0.05, detected="x",
             a_side=0.025, detected_side="x", mdes="x")
    texts = [P._note_sensitivity(est, 95.0, **f), P._note_gain(est, where="w", decided="d"),
             P._note_inertia(est, est, est, f_round=4),
             P._note_beside(est, est, 97.5, outcome="o", grid_range=1.0, n_c=3)]
    for text in texts:
        assert "CI [" not in _honest(text)


# ----------------------------------------------------------------------------- FLAYER
@pytest.mark.parametrize("est", [_flat(), _nan()], ids=["no-spread", "nan"])
def test_flayer_notes_print_no_point_as_an_interval(est):
    from audit.papers.flayer.present import masked_zero as P

    class Premise:
        status = "not reproduced"
        estimate = Estimate.of("premise", est)  # a NaN interval is dropped: None ends

    texts = [P._note_premise(Premise, est, 95.0), _which_fix(P, est, est, rule=est),
             P._note_metric(est, 0.05, "it points neither way", best="carry-over",
                            literal=0.1, fedavg=0.2)]
    for text in texts:
        assert "(95% t)" not in _honest(text) and "% interval)" not in text


def _which_fix(P, dc, ds, rule=None, verdict="INCONCLUSIVE"):
    """``_note_which_fix`` with the decisive collapse test beside it: an INCONCLUSIVE part
    (or ``verdict``) decided on ``rule`` (default: ``ds``), m = 0.054, alpha = 0.05."""
    from types import SimpleNamespace as NS

    from audit.verdict import Outcome

    collapse = NS(verdict=Outcome(verdict), held="")
    tw = NS(margin=0.054, difference=ds if rule is None else rule, alpha=0.05)
    return P._note_which_fix(dc, ds, collapse, tw, "selector-mean")


def test_flayer_which_fix_separates_only_two_intervals():
    from audit.papers.flayer.declarations import masked_zero as D
    from audit.papers.flayer.present import masked_zero as P

    high = stats.paired_difference([1.5, 3.0, 3.6, 0.7, 2.2, 2.7],
                                   [0.5, 1.0, 2.0, 0.9, 0.3, 1.1], method="t")
    low = _flat(value=-5.0)  # a point below the interval: its ends compare points
    assert low.high < high.low
    for dc, ds in [(low, high), (_nan(-5.0), high), (high, high)]:
        text = _which_fix(P, dc, ds)
        assert (D.WHICH_NO_INTERVAL if dc is not high else D.WHICH_NOT_SEPARATED) in text, text
    far = stats.paired_difference([-9.0, -8.2, -8.8, -9.4, -8.6, -9.1], [0.0] * 6, method="t")
    assert D.WHICH_SEPARATED in _which_fix(P, far, high)
    assert D.WHICH_NOT_SEPARATED not in _which_fix(P, far, high)


def test_flayer_sensitivity_text_prints_no_point_as_an_interval():
    import audit.papers.flayer.masked_zero as F

    seeds = list(range(6))
    a = np.linspace(0.5, 0.6, 6)
    b = a - np.array([0.1, 0.3, 0.2, 0.25, 0.15, 0.05])
    results = {RunSpec("carry-over", s, ""): {"planted_personal_acc": a[i] - 0.1}
               for i, s in enumerate(seeds)}
    _, text = F._sensitivity(results, seeds, "", "carry-over", a, b, 0.1, 0.1, 0.05)
    assert f"measured 0.1000 ({stats.NO_SPREAD}) ->" in _honest(text)


# ----------------------------------------------------------------------------- GENE-FL
def test_genefl_sensitivity_text_prints_no_point_as_an_interval():
    import audit.papers.genefl.inverted_cosine as G

    top = np.linspace(0.5, 0.7, 8)
    rng = np.random.default_rng(0)
    rev = G._reversal(top, top - rng.normal(0.05, 0.02, 8), top - rng.normal(0.1, 0.02, 8),
                      top - 0.05, 0.05, 0.05, 0.01)
    assert stats.NO_SPREAD in _honest(rev["sens_txt"]) and "CI [" not in rev["sens_txt"]


@pytest.mark.parametrize("ci, n, says", [((-math.inf, math.inf), 1, stats.NO_INTERVAL),
                                         ((0.5, 0.5), 6, stats.NO_SPREAD)])
def test_genefl_selection_prints_no_point_and_no_infinite_interval(ci, n, says):
    import audit.papers.genefl.inverted_cosine as G

    ev = {"rho": 0.9, "n_updates": 5, "j_high": 0.8, "j_low": 0.5, "level": 0.95,
          "n_seeds": n, "j_stable": 0.5, "j_size": 0.5, "j_stable_ci": ci, "j_size_ci": ci}
    _, reason, _ = G._selection_decide(ev)
    assert f"= 0.500 ({says})," in _honest(reason)
    assert reason.count(f"= 0.500 ({says}),") == 2 and "t interval" not in reason
    # one real interval: the label goes with it alone
    _, mixed, _ = G._selection_decide({**ev, "j_stable_ci": (0.4, 0.6)})
    assert "= 0.500 [0.400, 0.600] (95% t interval over" in mixed
    assert mixed.count("t interval") == 1 and f"smallest) = 0.500 ({says})," in mixed


@pytest.mark.parametrize("est", [_flat(), _nan()], ids=["no-spread", "nan"])
def test_genefl_notes_print_no_point_as_an_interval(est):
    from audit.papers.genefl.declarations import inverted_cosine as D
    from audit.papers.genefl.present import inverted_cosine as P

    ci = P._ci_method(est)
    assert ci in (stats.NO_SPREAD, stats.NO_INTERVAL)
    for text in (D.NOTE_PREMISE.format(effect="e", status="s", mean=est.mean, ci=ci),
                 D.NOTE_OWN_TEST.format(verdict="v", mean=est.mean, ci=ci, tail="."),
                 D.FAIR_SAID.format(mean=est.mean, ci=ci, verdict="v")):
        assert "CI [" not in _honest(text)


# ------------------------------------------------------------------------------ FedTLU
def test_fedtlu_assumption_prints_no_point_as_an_interval():
    import audit.papers.fedtlu.lower_bound as LB

    tw = stats.three_way(np.full(8, LB.ONE_MINUS_DELTA), np.full(8, 0.85), margin=0.0,
                         equivalence_margin=1e-9, alpha=0.05, sensitive=False)
    oracle = stats.mean_interval(np.array([0.89, 0.9, 0.91]))
    part = LB.RULE_ASSUMPTION({"three_way": tw, "oracle": oracle})
    assert f"mean ratio over seeds = 0.85, {stats.NO_SPREAD} (n = 8" in _honest(part.reason)
