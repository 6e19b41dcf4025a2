"""Falsifier: is LIPS's gain (arXiv 2506.00932) more than generic regularisation?

Runs the claim once (audit_run), checks the internal consistency of what it reports and
the verdict against its lock in audit/locks.json.
"""
import numpy as np
import pytest

from audit.pytest_plugin import check_committed_report, check_lock
from audit.verdict import Outcome

CLAIM = "lips-dropout-control"
TUNED = ("lips", "lips-random", "lips-all-layers", "lips-released-score",
         "fedbn-dropout-middle", "fedbn-weight-decay", "fedbn-noise-middle")


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_verdict_matches_lock(result):
    check_lock(result)


def test_numbers_equal_the_committed_report_on_its_machine(result):
    # every number that decides, exactly, where this machine's processor and libraries
    # are those the committed report was computed with; elsewhere skipped (a trained
    # model's last digits may move), and `audit diff` compares at regeneration
    check_committed_report(result, same_machine=True)


def test_every_arm_has_an_accuracy_with_an_interval(result):
    for arm in ("fedbn", "lips", "lips-random", "lips-all-layers", "lips-released-score",
                "fedbn-dropout-middle", "fedbn-weight-decay", "fedbn-noise-middle",
                "fedbn-short", "fedbn-freeze-middle"):
        e = result.verdict.estimate(f"acc_{arm}")
        assert e.n == len(result.ctx.seeds) >= 5
        assert 0.0 <= e.value <= 100.0


def test_selection_optimism_is_never_negative(result):
    # by construction: the test-chosen candidate has the highest mean test accuracy
    for arm in TUNED:
        assert result.verdict.estimate(f"selection_optimism_{arm}").value >= 0.0


def test_equivalence_needs_the_sensitivity_check(result):
    sensitive = result.verdict.estimate("assay_sensitive").value == 1.0
    gap = result.verdict.estimate("assay_sensitivity_gap")
    # the planted handicap (about d) is detected: the three-way SUPPORTED, CI above 0
    assert sensitive == (gap.low > 0)
    if not sensitive:  # then no part may be decided by an equivalence
        for p in result.verdict.parts:
            assert "with assay sensitivity shown" not in p.reason


def _premise_reproduced(result):
    return result.verdict.premise is not None and result.verdict.premise.status == "reproduced"


def test_premise_is_reported_and_gates_the_explaining_parts(result):
    prem = result.verdict.premise
    assert prem is not None and prem.estimate is not None
    e = prem.estimate
    if e.low > 0:
        assert prem.status == "reproduced"
    if e.high < 0:
        assert prem.status == "not reproduced"
    if prem.status != "reproduced":
        for pid in ("regularisation-controls", "layer-targeting", "random-mask"):
            assert result.verdict.part(pid).verdict == Outcome.INCONCLUSIVE
        # only a question the premise does not gate (selection-optimism) can decide, so
        # the claim's word is INCONCLUSIVE or SPLIT, never one decided word
        assert result.verdict.verdict in (Outcome.INCONCLUSIVE, Outcome.SPLIT)


def test_parts_declare_kind_and_reachable(result):
    kinds = {p.id: (p.kind, tuple(p.reachable)) for p in result.verdict.parts}
    for pid in ("regularisation-controls", "layer-targeting", "random-mask"):
        assert kinds[pid] == ("experiment", ("CONFIRMED", "REFUTED", "INCONCLUSIVE"))
    assert kinds["selection-optimism"] == ("experiment", ("CONFIRMED", "REFUTED",
                                                          "INCONCLUSIVE"))
    assert kinds["middle-cosine"] == ("measurement", ("INCONCLUSIVE",))


def test_parts_follow_the_intervals(result):
    # a part is REFUTED only when LIPS's interval lies above 0 against each alternative
    alts = {"regularisation-controls": ("fedbn-dropout-middle", "fedbn-weight-decay",
                                        "fedbn-noise-middle"),
            "layer-targeting": ("lips-all-layers",)}
    for part in result.verdict.parts:
        if part.id not in alts:
            continue
        lows = [result.verdict.estimate(f"lips_minus_{a}").low for a in alts[part.id]]
        highs = [result.verdict.estimate(f"lips_minus_{a}").high for a in alts[part.id]]
        if part.verdict == Outcome.REFUTED:
            assert all(lo > 0 for lo in lows)
        if any(h < 0 for h in highs) and _premise_reproduced(result):
            assert part.verdict == Outcome.CONFIRMED


def test_inertia_appears_without_pruning(result):
    # the phenomenon the paper builds on: FedBN's middle layers stay close to their
    # round-2 weights (the paper reports a cosine above 0.95)
    assert result.verdict.estimate("fedbn_middle_cos_final").value > 0.9


def test_pruning_moves_middle_layers_away(result):
    est = result.verdict.estimate
    assert est("lips_middle_cos_final").value < est("fedbn_middle_cos_final").value


def test_cosine_figure_has_every_arm(result):
    fig = {f.name: f for f in result.analysis.figures}["middle_cosine"]
    labels = [s["label"] for s in fig.series]
    assert "fedbn" in labels and "lips" in labels and len(labels) == 10
    for s in fig.series:
        assert np.all(np.asarray(s["low"]) <= np.asarray(s["y"]) + 1e-12)


def test_verdict_is_the_questions_word_and_measurements_never_move_it(result):
    from audit.verdict import Part
    from audit.papers.lips.dropout_control import CLAIM

    parts = result.verdict.parts
    assert {p.id for p in parts} == {"regularisation-controls", "layer-targeting",
                                     "random-mask", "selection-optimism", "middle-cosine",
                                     "controls-match-both", "overfitting",
                                     "gap-not-narrowed", "best-round"}
    for o in Outcome:  # whatever the measurement parts say, the verdict stays the same
        if o == Outcome.SPLIT:
            continue
        swapped = [p if p.kind != "measurement" else Part(p.id, o, p.rule, p.reason)
                   for p in parts]
        assert CLAIM.combination(swapped) == result.verdict.verdict


def test_questions_name_decided_parts(result):
    from audit.papers.lips.dropout_control import CLAIM

    ids = {p.id for p in result.verdict.parts}
    by_id = {q.id: q for q in CLAIM.questions}
    assert all(set(q.parts) <= ids for q in CLAIM.questions)
    # the random-mask ablation: the major comment, and the concrete test's request for
    # random masks
    assert by_id["random-mask"].fields == ("referee_report.major_comments[0]",
                                           "skeptic_critique.concrete_test")
    assert "referee_report.major_comments[2]" in by_id["best-round"].fields
    assert by_id["overfitting"].fields == ("referee_report.major_comments[3]",)


def test_new_parts_declare_kind_and_follow_the_premise(result):
    kinds = {p.id: p.kind for p in result.verdict.parts}
    assert kinds["overfitting"] == kinds["best-round"] == "measurement"
    assert kinds["gap-not-narrowed"] == kinds["controls-match-both"] == "experiment"
    if not _premise_reproduced(result):
        for pid in ("gap-not-narrowed", "controls-match-both"):
            assert result.verdict.part(pid).verdict == Outcome.INCONCLUSIVE


def test_best_round_is_never_below_the_last(result):
    for arm in ("fedbn", "lips", "fedbn-dropout-middle", "fedbn-short"):
        assert result.verdict.estimate(f"best_minus_last_{arm}").value >= -1e-9


def test_overfitting_gap_is_reported_for_every_arm(result):
    fig = {f.name: f for f in result.analysis.figures}["overfitting_gap"]
    assert len(fig.series) == 10
    for arm in ("fedbn", "lips", "fedbn-weight-decay"):
        e = result.verdict.estimate(f"gap_{arm}")
        assert -100.0 <= e.value <= 100.0


def test_random_mask_part_follows_its_interval(result):
    e = result.verdict.estimate("lips_minus_lips-random")
    part = result.verdict.part("random-mask")
    assert e.n == len(result.ctx.seeds)
    if not _premise_reproduced(result):
        assert part.verdict == Outcome.INCONCLUSIVE
        return
    if e.low > 0:
        assert part.verdict == Outcome.REFUTED
    if e.high < 0:
        assert part.verdict == Outcome.CONFIRMED
    if part.verdict == Outcome.CONFIRMED and e.high >= 0:  # by equivalence: needs sensitivity
        assert result.verdict.estimate("assay_sensitive_beside").value == 1.0


def test_selection_optimism_is_tested_against_d(result):
    e = result.verdict.estimate("selection_optimism_per_run_lips")
    part = result.verdict.part("selection-optimism")
    assert e.value >= 0.0  # per run, the test-chosen candidate is best on test
    rng = result.verdict.estimate("selection_grid_range_lips").value
    assert e.value <= rng + 1e-9  # no choice can add more than the candidates' range
    assert part.kind == "experiment" and not part.gated
    if part.verdict == Outcome.REFUTED:  # below d, where the grid could have added d
        assert rng >= 2.0  # d at smoke scale
    if part.verdict == Outcome.CONFIRMED:
        assert e.low > 2.0

def test_gap_equivalence_needs_sensitivity_on_the_gap_itself(result):
    # the planted handicap is sized on accuracy; an equivalence of the train-test gaps
    # counts only where that arm also moves the gap by at least d, told apart
    d = float(result.ctx.config["equivalence_margin"])
    shift = result.verdict.estimate("planted_gap_shift")
    sensitive = result.verdict.estimate("gap_sensitive").value == 1.0
    if abs(shift.value) < d:
        assert not sensitive
    if sensitive:
        assert shift.low > 0 or shift.high < 0  # told apart, whichever way it moved
    else:
        reason = result.verdict.part("gap-not-narrowed").reason
        assert "with assay sensitivity shown" not in reason
        assert "no assay sensitivity on the gap" in reason
