"""Falsifier: what GENE-FL's layer score (arXiv 2504.14628, Eq. 9) selects.

The verdict combines the perturbation test (a derivation), the selection statistics and
the reviewer's own test (top- vs bottom-gamma accuracy, gated by the premise that the
learnGene beats no gene), made fair by two controls (equal gene size; no classifier in
the bottom gene) and repeated over a gamma sweep (issue 30).
"""
import numpy as np
import pytest
import torch

from audit.papers.genefl.simulation import perturbation_test, selection_stats
from audit.pytest_plugin import check_committed_report, check_lock

CLAIM = "genefl-inverted-cosine"


def _toy_state():
    # three layers: a (4 params), b (4 params, same size as a), c (16 params)
    g = torch.Generator().manual_seed(0)
    st = {"a.weight": torch.randn(4, generator=g), "b.weight": torch.randn(4, generator=g),
          "c.weight": torch.randn(16, generator=g)}
    return st, {"a": ["a.weight"], "b": ["b.weight"], "c": ["c.weight"]}


def test_perturbation_pairs_on_a_hand_sized_model():
    state, layers = _toy_state()
    rows = perturbation_test(state, layers, seed=0, delta=0.5)
    by = {(r["perturbed"], r["untouched"]): r for r in rows}
    assert len(rows) == 6
    # equal sizes: the untouched layer always scores higher (cos < 1 for the moved one)
    assert by[("a", "b")]["untouched_higher"] and by[("b", "a")]["untouched_higher"]
    # a moved 4-parameter layer against an untouched 16-parameter one: raw xi =
    # cos/4 = (1/sqrt(1.25))/4 = 0.2236 vs 1/16 = 0.0625: the moved small layer wins
    assert by[("a", "c")]["untouched_higher"] is False
    # cos alone (no 1/dim): the untouched layer wins whatever the sizes
    assert all(r["untouched_higher_no_dim"] for r in rows)


def test_selection_stats_hand_case():
    # two updates over three layers; gamma = 1. Smallest layer: a (dim 1).
    dims = {"a": 1, "b": 10, "c": 100}
    ups = [{"xi": {"a": 0.9, "b": 0.09, "c": 0.01}, "cos": {"a": 0.5, "b": 0.99, "c": 1.0}},
           {"xi": {"a": 0.9, "b": 0.09, "c": 0.01}, "cos": {"a": 1.0, "b": 0.9, "c": 0.8}}]
    s = selection_stats(ups, dims, 1)
    assert s["j_size"] == 1.0  # top by xi is a, the smallest, in both
    assert s["j_stable"] == 0.5  # most stable is c in the first, a in the second
    assert s["rho"] == pytest.approx(1.0)  # xi ranks exactly like 1/dim


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_run_has_estimates_and_parts(result):
    v = result.verdict
    assert {p.id for p in v.parts} == {"direction", "selection", "accuracy-top-vs-bottom",
                                       "fair-bytes", "fair-no-classifier", "gamma-sweep"}
    rho = v.estimate("xi_dim_rank_correlation").value
    assert -1.0 <= rho <= 1.0
    assert v.part("direction").kind == "derivation"
    assert v.premise is not None and v.premise.estimate is not None
    for arm in ("top-gamma", "bottom-gamma", "random-gamma", "top-gamma-no-dim",
                "top-gamma-reset", "bottom-gamma-bytes", "bottom-gamma-no-classifier"):
        e = v.estimate(f"agnostic_acc_{arm}")
        assert e.n == len(result.ctx.seeds) and 0.0 <= e.value <= 1.0


def test_equal_size_perturbation_is_exact(result):
    # every equal-size pair was decided, so the estimate is a fraction of a real count
    e = result.verdict.estimate("perturb_equal_untouched_higher")
    assert e.n > 0 and np.isfinite(e.value)


def test_verdict_is_locked(result):
    check_lock(result)


def test_numbers_equal_the_committed_report_on_its_machine(result):
    # every number that decides, exactly, where this machine's processor and libraries
    # are those the committed report was computed with; elsewhere skipped (a trained
    # model's last digits may move), and `audit diff` compares at regeneration
    check_committed_report(result, same_machine=True)


def test_paper_scale_without_data_is_a_clear_error(monkeypatch):
    from audit.claims import AuditError, RunSpec
    from audit.papers.genefl.inverted_cosine import CLAIM
    from audit.runner import make_context

    monkeypatch.delenv("AUDIT_DATA", raising=False)
    ctx = make_context(CLAIM, "paper")
    with pytest.raises(AuditError, match="cifar10"):
        CLAIM.run(RunSpec("top-gamma", 0), ctx)
