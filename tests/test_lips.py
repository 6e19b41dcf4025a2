"""Tests of audit.papers.lips.algorithm (LIPS, arXiv 2506.00932) and the LIPS falsifier's data.

Prepare / Execute / Assert; literal seeds; hand-computed reference values in comments.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.papers.lips.algorithm import (FedBNProbe, Schedule, gaussian_noise, grad_sensitivity,
                                   lowest_fraction_mask, printed_schedule, prune,
                                   random_score, released_schedule, update_sensitivity)
from audit.fl.data import synthetic_classification
from audit.fl.engine import FLConfig, run_federated
from audit.fl.models import build_model

torch.set_num_threads(1)


# ------------------------------------------------------------------------ schedules
def test_printed_schedule_hand_values():
    # tau(t) = tau0 (1 - t/T) on rounds divisible by k, T = run length: 0.5 * (1 - 5/20)
    s = printed_schedule(0.5, 5, 20)
    assert s.strength(5) == pytest.approx(0.375)
    assert s.strength(10) == pytest.approx(0.25)
    assert s.strength(3) == 0.0  # not a multiple of k
    assert s.strength(20) == 0.0  # t = T: nothing left to prune


def test_released_schedule_ignores_run_length():
    # the release fixes T = 300: at t = 10, 0.5 * (1 - 10/300) = 0.48333...
    assert released_schedule(0.5, 5, 20).strength(10) == pytest.approx(0.5 * 29 / 30)


def test_schedule_rejects_bad_period():
    with pytest.raises(ValueError, match="period k"):
        Schedule(0.1, 0, 10)


@given(s0=st.floats(0, 1), k=st.integers(1, 10), T=st.integers(1, 100), t=st.integers(0, 200))
def test_schedule_strength_is_bounded_and_periodic(s0, k, T, t):
    v = Schedule(s0, k, T).strength(t)
    assert 0.0 <= v <= s0
    if t % k or t >= T:
        assert v == 0.0


# ----------------------------------------------------------------------------- masks
def test_lowest_fraction_mask_hand_example():
    score = torch.tensor([[0.5, 0.0], [9.0, 0.2]])
    m = lowest_fraction_mask(score, 0.5)  # floor(0.5 * 4) = 2 lowest: 0.0 and 0.2
    assert m.tolist() == [[False, True], [False, True]]


def test_lowest_fraction_mask_breaks_ties_by_position():
    m = lowest_fraction_mask(torch.zeros(5), 0.4)  # 2 of 5 equal scores: the first two
    assert m.tolist() == [True, True, False, False, False]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), frac=st.floats(0, 1), seed=st.integers(0, 2 ** 31))
def test_lowest_fraction_mask_counts_and_orders(n, frac, seed):
    g = torch.Generator().manual_seed(seed)
    score = torch.rand(n, generator=g)
    m = lowest_fraction_mask(score, frac)
    assert int(m.sum()) == math.floor(frac * n)
    if 0 < m.sum() < n:
        assert score[m].max() <= score[~m].min()


def test_update_sensitivity_hand_example():
    # s = |(w - w_prev) * w|: w = [1, -2, 3], w_prev = [0.5, -2, 0] -> [0.5, 0, 9]
    w, prev = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, -2.0, 0.0])
    assert update_sensitivity("x", w, prev, None, None).tolist() == [0.5, 0.0, 9.0]


def test_grad_sensitivity_needs_gradient():
    with pytest.raises(ValueError, match="last-batch gradient"):
        grad_sensitivity("x", torch.ones(2), torch.ones(2), None, None)
    g = torch.tensor([2.0, -1.0])
    assert grad_sensitivity("x", torch.tensor([1.0, 3.0]), None, g, None).tolist() == [2.0, 3.0]


# ---------------------------------------------------------------------------- pieces
def _state(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"a.weight": torch.randn(4, 5, generator=g), "b.weight": torch.randn(10, generator=g),
            "b.bias": torch.randn(3, generator=g)}


def test_prune_zeroes_the_scheduled_fraction_of_chosen_keys_only():
    new, prev = _state(0), _state(1)
    piece = prune(update_sensitivity, printed_schedule(0.5, 5, 10))
    # round 5: tau = 0.5 * (1 - 5/10) = 0.25 -> floor(0.25 * 20) = 5 of a.weight
    out = piece(new, prev, ["a.weight"], 5, torch.Generator().manual_seed(0), None)
    assert int((out["a.weight"] == 0).sum()) == 5
    assert torch.equal(out["b.weight"], new["b.weight"])
    kept = out["a.weight"] != 0
    s = update_sensitivity("a", new["a.weight"], prev["a.weight"], None, None)
    assert s[~kept].max() <= s[kept].min()  # the lowest-sensitivity weights went
    # an off-period round leaves the state untouched
    same = piece(new, prev, ["a.weight"], 4, torch.Generator().manual_seed(0), None)
    assert all(torch.equal(same[k], new[k]) for k in new)


def test_random_prune_is_seeded():
    new, prev = _state(0), _state(1)
    piece = prune(random_score, printed_schedule(0.5, 1, 10))
    a = piece(new, prev, ["a.weight"], 1, torch.Generator().manual_seed(7), None)
    b = piece(new, prev, ["a.weight"], 1, torch.Generator().manual_seed(7), None)
    c = piece(new, prev, ["a.weight"], 1, torch.Generator().manual_seed(8), None)
    assert torch.equal(a["a.weight"], b["a.weight"])
    assert not torch.equal(a["a.weight"], c["a.weight"])
    assert int((a["a.weight"] == 0).sum()) == 9  # floor(0.45 * 20)


def test_gaussian_noise_touches_chosen_keys_on_period_only():
    new = _state(0)
    piece = gaussian_noise(printed_schedule(0.2, 2, 10))
    out = piece(new, None, ["b.weight"], 2, torch.Generator().manual_seed(0), None)
    assert not torch.equal(out["b.weight"], new["b.weight"])
    assert torch.equal(out["a.weight"], new["a.weight"])
    off = piece(new, None, ["b.weight"], 3, torch.Generator().manual_seed(0), None)
    assert torch.equal(off["b.weight"], new["b.weight"])


# ---------------------------------------------------------------- end-to-end, tiny runs
@pytest.fixture(scope="module")
def fed():
    from audit.papers.lips.algorithm import build_clients

    ds = synthetic_classification(seed=3, n=400, num_classes=4, shape=(1, 8, 8))
    cfg = {"n_clients": 4, "n_train": 12, "n_val": 4, "n_test": 6, "alpha": 0.5}
    return build_clients(ds, cfg, seed=0)


def _run(fed, alg, rounds=6, seed=0, **kw):
    cfg = FLConfig(rounds=rounds, batch_size=6, lr=0.05, seed=seed, eval_every=rounds,
                   eval_val=True, layer_metrics=False, **kw)
    return run_federated(lambda: build_model("vgg", 4, 1, 8, width=0.25), fed, alg, cfg)


def test_probe_cosine_is_one_at_reference_and_fedbn_is_deterministic(fed):
    h1 = _run(fed, FedBNProbe())
    h2 = _run(fed, FedBNProbe())
    assert "middle_cos" not in h1.algo[0]  # no reference before round 2
    assert h1.algo[1]["middle_cos"] == pytest.approx(1.0)
    assert h1.personal_acc == h2.personal_acc
    assert [a["middle_cos"] for a in h1.algo[1:]] == [a["middle_cos"] for a in h2.algo[1:]]


def test_lips_prunes_middle_layers_on_its_rounds(fed):
    # k = 3, T = 6: round 3 prunes tau = 0.5 * (1 - 3/6) = 0.25 of every middle weight
    alg = FedBNProbe(post=prune(update_sensitivity, printed_schedule(0.5, 3, 6)))
    h = _run(fed, alg)
    zf = [a["middle_zero_frac"] for a in h.algo]
    assert zf[0] == 0.0 and zf[1] == 0.0
    assert zf[2] >= 0.24  # floor(0.25 n)/n per layer, n >= 72
    assert alg.middle == ["conv2", "conv3", "conv4"]


def test_all_layer_prune_reaches_first_conv_and_classifier(fed):
    alg = FedBNProbe(post=prune(update_sensitivity, printed_schedule(0.5, 6, 7), "all"))
    h = _run(fed, alg)
    for key in ("conv1.weight", "fc.weight", "fc1.weight"):
        w = h.final_state[key]
        frac = float((w == 0).double().mean())
        # round 6, tau = 0.5 * (1 - 6/7) = 1/14 of each tensor, floor(n/14)/n
        assert frac == pytest.approx(math.floor(w.numel() / 14) / w.numel())


def test_released_score_runs_and_uses_gradients(fed):
    alg = FedBNProbe(post=prune(grad_sensitivity, released_schedule(0.5, 3, 6), "middle",
                                needs_grad=True))
    h = _run(fed, alg)
    assert h.algo[2]["middle_zero_frac"] > 0.4  # tau = 0.5 * (1 - 3/300) = 0.495


def test_freeze_keeps_global_middle_layers_fixed(fed):
    alg = FedBNProbe(freeze_after=2)
    h = _run(fed, alg)
    cos = [a["middle_cos"] for a in h.algo[1:]]
    assert cos == pytest.approx([1.0] * len(cos), abs=1e-12)  # frozen after round 2


# --------------------------------------------------------------------------- the data
def test_build_clients_sizes_skew_and_determinism():
    from audit.papers.lips.algorithm import build_clients

    ds = synthetic_classification(seed=1, n=600, num_classes=6, shape=(1, 8, 8))
    cfg = {"n_clients": 5, "n_train": 20, "n_val": 10, "n_test": 30, "alpha": 0.1}
    a, b = build_clients(ds, cfg, seed=4), build_clients(ds, cfg, seed=4)
    for ca, cb in zip(a.clients, b.clients):
        assert (len(ca.y_train), len(ca.y_val), len(ca.y_test)) == (20, 10, 30)
        assert torch.equal(ca.x_train, cb.x_train) and torch.equal(ca.y_test, cb.y_test)
        # test images come from the held-out test set, never from the training pool
        for x in ca.x_test[:3]:
            assert not (ds.x_train == x).flatten(1).all(1).any()
    # Dirichlet(0.1) over 6 classes: most clients hold few classes
    n_classes = [len(torch.unique(c.y_train)) for c in a.clients]
    assert np.mean(n_classes) < 4


def test_a_class_missing_from_a_split_is_a_clear_error():
    """A partial copy of the data (a class with no test images, or too few training
    images for a client's training and validation draws) is one AuditError naming the
    class and split, not numpy's error from an empty choice; n_val = 0 is allowed."""
    import dataclasses

    from audit.errors import AuditError
    from audit.papers.lips.algorithm import build_clients

    ds = synthetic_classification(seed=1, n=600, num_classes=3, shape=(1, 8, 8))
    cfg = {"n_clients": 6, "n_train": 20, "n_val": 0, "n_test": 10, "alpha": 5.0}
    fed = build_clients(ds, cfg, seed=0)
    assert all(len(c.y_val) == 0 and len(c.y_train) == 20 for c in fed.clients)
    keep = ds.y_test != 2  # class 2 gone from the test split
    ds = dataclasses.replace(ds, x_test=ds.x_test[keep], y_test=ds.y_test[keep])
    with pytest.raises(AuditError, match="class 2 has no test images"):
        build_clients(ds, cfg, seed=0)
    ds = synthetic_classification(seed=1, n=600, num_classes=3, shape=(1, 8, 8))
    keep = torch.ones(len(ds.y_train), dtype=torch.bool)
    keep[torch.nonzero(ds.y_train == 1).flatten()[2:]] = False  # two training images of class 1
    ds = dataclasses.replace(ds, x_train=ds.x_train[keep], y_train=ds.y_train[keep])
    with pytest.raises(AuditError, match="class 1 has only 2 training images, all taken "
                                         "by a client's training draw, and its validation"):
        build_clients(ds, {**cfg, "n_val": 10}, seed=0)
    keep = ds.y_train != 1  # none at all: said so, whichever draw asks first
    ds = dataclasses.replace(ds, x_train=ds.x_train[keep], y_train=ds.y_train[keep])
    with pytest.raises(AuditError, match="class 1 has no training images, and a client's "
                                         "(training|validation) draw asks"):
        build_clients(ds, {**cfg, "n_val": 10}, seed=0)


def test_paper_scale_without_data_is_a_clear_error(tmp_path):
    from audit.claims import AuditError, RunSpec
    from audit.papers.lips.dropout_control import CLAIM, run
    from audit.runner import make_context

    ctx = make_context(CLAIM, "paper", data_dir=str(tmp_path))  # an empty directory
    with pytest.raises(AuditError, match="cifar100"):
        run(RunSpec("fedbn", 0, "cand=0"), ctx)


# ------------------------------------------------------------------------- checkpoints
class _Killed(Exception):
    pass


class _KillableProbe(FedBNProbe):
    """LIPS-random (the generator is used every round) that dies at round ``kill_at``."""

    def __init__(self, kill_at=None, keep_state=True):
        super().__init__(post=prune(random_score, printed_schedule(0.5, 1, 6)))
        self.kill_at, self.keep_state = kill_at, keep_state

    def round_metrics(self, round, *args):
        if round == self.kill_at:
            raise _Killed
        return super().round_metrics(round, *args)

    def state_dict(self):  # keep_state=False: a probe that forgets its state (control)
        return super().state_dict() if self.keep_state else {}

    def load_state_dict(self, state):
        if self.keep_state:
            super().load_state_dict(state)


def _history(h):
    d = h.to_dict()
    d.pop("seconds")
    return d


def _killed_and_resumed(fed, tmp_path, keep_state):
    ckpt = str(tmp_path / f"lips-{keep_state}.pt")
    cfg = FLConfig(rounds=6, batch_size=6, lr=0.05, seed=2, eval_every=6, eval_val=True,
                   layer_metrics=False)
    model = lambda: build_model("vgg", 4, 1, 8, width=0.25)  # noqa: E731
    with pytest.raises(_Killed):
        run_federated(model, fed, _KillableProbe(kill_at=5, keep_state=keep_state), cfg,
                      checkpoint=ckpt, checkpoint_every=2)
    assert torch.load(ckpt, weights_only=True)["round"] == 4  # rounds 1-4 survived
    resumed = run_federated(model, fed, _KillableProbe(keep_state=keep_state), cfg,
                            checkpoint=ckpt, checkpoint_every=2)
    full = run_federated(model, fed, _KillableProbe(keep_state=keep_state), cfg)
    return resumed, full


def test_lips_killed_midway_resumes_to_the_uninterrupted_history(fed, tmp_path):
    resumed, full = _killed_and_resumed(fed, tmp_path, keep_state=True)
    assert _history(resumed) == _history(full)
    assert all(torch.equal(resumed.final_state[k], full.final_state[k])
               for k in full.final_state)
    assert "middle_cos" in resumed.algo[-1]  # the round-2 reference survived the restart


def test_resume_without_the_probe_state_would_differ(fed, tmp_path):
    # the control that shows the test above can fail: forgetting the round-2 reference
    # and the mask generator changes the resumed run
    resumed, full = _killed_and_resumed(fed, tmp_path, keep_state=False)
    assert _history(resumed) != _history(full)


# ------------------------------------------------------------------------ the rules
from audit import stats  # noqa: E402
from audit.verdict import Outcome as O  # noqa: E402
from audit.verdict import ALL_OUTCOMES, Part, Premise  # noqa: E402

# ten pairs: an exact sign test at alpha / 2 = 0.00625 needs at least 8
BASE = np.array([80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0])
UP = np.array([3.0, 4.0, 3.5, 4.0, 3.0, 3.2, 3.8, 3.6, 3.4, 3.9])  # 3-4 points in every pair
TIE = np.array([0.1, -0.1, 0.05, 0.1, -0.1, 0.08, -0.05, 0.1, -0.08, 0.02])  # within d = 2
WIDE = np.array([5.0, -4.0, 3.0, -5.0, 1.0, 4.0, -3.0, 5.0, -4.5, 2.0])  # straddles 0


def _tw(delta, sensitive=True):
    """three_way of A = BASE + delta against B = BASE (LIPS minus an alternative)."""
    return stats.three_way(BASE + delta, BASE, equivalence_margin=2.0, alpha=0.0125,
                           sensitive=sensitive)


def _part(pid, outcome):
    return Part(pid, outcome, "rule", "reason")


def test_combination_is_the_questions_common_word_measurements_left_out():
    from audit.papers.lips.dropout_control import CLAIM, COMBINATION

    deciding = [q for q in CLAIM.questions if q.kind != "measurement"]
    measured = [q for q in CLAIM.questions if q.kind == "measurement"]
    assert {q.id for q in measured} >= {"overfitting", "best-round", "middle-cosine"}
    assert "selection-optimism" in {q.id for q in deciding}  # tested against d
    for o in (O.CONFIRMED, O.REFUTED, O.INCONCLUSIVE):
        parts = [_part(p, o) for q in deciding for p in q.parts]
        for m in (O.CONFIRMED, O.REFUTED):  # a measurement part never moves the word
            extra = [_part(p, m) for q in measured for p in q.parts]
            assert COMBINATION(parts + extra) == o
    mixed = [_part(p, O.REFUTED if q.id == "random-mask" else O.CONFIRMED)
             for q in deciding for p in q.parts]
    mixed += [_part(p, O.INCONCLUSIVE) for q in measured for p in q.parts]
    assert COMBINATION(mixed) == O.SPLIT


@pytest.mark.parametrize("rule_name", ["RULE_CONTROLS", "RULE_LAYERS"])
def test_family_rules_reach_each_outcome(rule_name):
    import audit.papers.lips.dropout_control as L

    rule = getattr(L, rule_name)
    assert rule.kind == "experiment" and set(rule.reachable) == set(ALL_OUTCOMES)
    # CONFIRMED: one alternative equivalent to LIPS (with sensitivity), or better
    assert rule({"a": _tw(UP), "b": _tw(TIE)}, True, 0.11).verdict == O.CONFIRMED
    assert rule({"a": _tw(-UP)}, True, 0.11).verdict == O.CONFIRMED
    # REFUTED: LIPS beats every alternative
    p = rule({"a": _tw(UP), "b": _tw(UP + 1)}, True, 0.11)
    assert p.verdict == O.REFUTED and p.flip is not None and p.resolution == 0.11
    # INCONCLUSIVE: a wide comparison; or a tie whose equivalence lacks sensitivity
    assert rule({"a": _tw(UP), "b": _tw(WIDE)}, True, 0.11).verdict == O.INCONCLUSIVE
    p = rule({"a": _tw(TIE, sensitive=False)}, False, 0.11)
    assert p.verdict == O.INCONCLUSIVE and "no assay sensitivity" in p.reason


def _optimism_tw(values, sensitive=True, d=2.0):
    x = np.asarray(values, dtype=float)
    return stats.three_way(x, np.zeros(len(x)), margin=d, equivalence_margin=d,
                           alpha=0.05, sensitive=sensitive)


def test_selection_rule_tests_against_d_never_against_zero():
    from audit.papers.lips.dropout_control import RULE_SELECTION

    assert RULE_SELECTION.kind == "experiment" and set(RULE_SELECTION.reachable) == set(
        ALL_OUTCOMES)
    small = [0.0, 0.1, 0.0, 0.2, 0.1, 0.0, 0.3, 0.1, 0.2, 0.0]  # >= 0, far below d
    big = [3.0, 4.0, 3.5, 4.0, 3.0, 3.2, 3.8, 3.6, 3.4, 3.9]    # above d in every run
    p = RULE_SELECTION(_optimism_tw(small), 4.0, 2.0, 0.11)
    assert p.verdict == O.REFUTED and "against d = 2" in p.reason
    assert RULE_SELECTION(_optimism_tw(big), 5.0, 2.0, 0.11).verdict == O.CONFIRMED
    # a grid whose candidates differ by less than d: "below d" is foregone, not a finding
    p = RULE_SELECTION(_optimism_tw(small), 1.5, 2.0, 0.11)
    assert p.verdict == O.INCONCLUSIVE and "foregone" in p.reason and "grid" in p.needs
    # straddling d: INCONCLUSIVE, naming the seeds it would take
    wide = [0.0, 4.0, 0.5, 3.5, 0.0, 4.5, 1.0, 3.0, 0.0, 4.0]
    p = RULE_SELECTION(_optimism_tw(wide), 5.0, 2.0, 0.11)
    assert p.verdict == O.INCONCLUSIVE and p.needs


def test_random_mask_rule_reaches_each_outcome():
    from audit.papers.lips.dropout_control import RULE_RANDOM

    assert RULE_RANDOM(_tw(UP), True, 0.11).verdict == O.REFUTED  # LIPS better
    assert RULE_RANDOM(_tw(-UP), True, 0.11).verdict == O.CONFIRMED  # random better
    assert RULE_RANDOM(_tw(TIE), True, 0.11).verdict == O.CONFIRMED  # equivalent
    assert RULE_RANDOM(_tw(WIDE), True, 0.11).verdict == O.INCONCLUSIVE


def test_measurement_parts_carry_no_verdict():
    from audit.papers.lips.dropout_control import RULE_COSINE

    assert RULE_COSINE.kind == "measurement" and RULE_COSINE.reachable == ("INCONCLUSIVE",)
    cos = {"fedbn": np.full(5, 0.97), "lips": np.array([0.91, 0.92, 0.9, 0.93, 0.92])}
    p = RULE_COSINE(cos, 0.95, params={"n": 5, "inertia_level": "0.95"})
    assert p.verdict == O.INCONCLUSIVE and "lips 0.916" in p.reason


def test_premise_gate_turns_decided_parts_inconclusive():
    from audit.papers.lips.dropout_control import RULE_CONTROLS
    from audit.verdict import premise_gate

    part = RULE_CONTROLS({"a": _tw(-UP)}, True, 0.11)
    assert part.verdict == O.CONFIRMED
    for status, held in (("not reproduced", "not reproduced"), ("undecided", "not shown")):
        g = premise_gate(part, Premise("LIPS beats FedBN", status, "r"))
        assert g.verdict == O.INCONCLUSIVE and f"premise {held} at this scale" in g.reason
    assert premise_gate(part, Premise("x", "reproduced", "r")).verdict == O.CONFIRMED


# ------------------------------------------------------------ analyse on synthetic runs
def _fake_results(ctx, means, seed=0, sd=1.0, noise=0.3):
    """Results of every unit with accuracies base + means[arm] + noise (points), the
    second tuning candidate 0.5 points worse."""
    from audit.claims import RunSpec
    from audit.papers.lips.dropout_control import ARM_NAMES, candidates

    rng = np.random.default_rng(seed)
    base = 85 + sd * rng.standard_normal(len(ctx.seeds))
    out = {}
    for arm in ARM_NAMES:
        for i, _ in enumerate(candidates(ctx.config, arm)):
            acc = base + means.get(arm, 0.0) - 0.5 * i + noise * rng.standard_normal(base.size)
            for j, s in enumerate(ctx.seeds):
                out[RunSpec(arm, s, f"cand={i}")] = {
                    "hp": None, "rounds": 30, "test_acc": acc[j] / 100, "val_acc": acc[j] / 100,
                    "n_test": 900, "middle_cos": [None] + [0.97] * 29,
                    "middle_zero_frac": [0.0] * 30, "final_layer_cos": {"conv2": 0.97},
                    "curve_rounds": [10, 20, 30],
                    "test_curve": [acc[j] / 100 - 0.02, acc[j] / 100 + 0.01, acc[j] / 100],
                    "gap_curve": [0.01, 0.05, 0.1 - acc[j] / 1000],
                    "seconds": 1.0}
    return out


def _ctx(n=10, **overrides):
    from audit.papers.lips.dropout_control import CLAIM
    from audit.runner import make_context

    return make_context(CLAIM, "smoke", seeds=list(range(n)), overrides=overrides)


TIED = {"lips": 4, "lips-random": 4, "lips-all-layers": 4, "fedbn-dropout-middle": 4,
        "fedbn-weight-decay": 4, "fedbn-noise-middle": 4, "fedbn-short": -2.5}


@pytest.mark.parametrize("means, premise, verdict", [
    (TIED, "reproduced", O.CONFIRMED),  # gain, controls match it
    ({"lips": 5, "fedbn-short": -2.5, "lips-random": -1, "lips-all-layers": -1},
     "reproduced", O.REFUTED),  # gain, LIPS beats every alternative
    ({**TIED, "lips": -3}, "not reproduced", O.INCONCLUSIVE),  # LIPS below FedBN: gated
])
def test_analyse_premise_and_verdict(means, premise, verdict):
    from audit.papers.lips.dropout_control import COMBINATION, analyse

    ctx = _ctx()
    a = analyse(_fake_results(ctx, means), ctx)
    assert a.premise.status == premise
    assert next(p for p in a.parts if p.id == "regularisation-controls").verdict == verdict
    assert COMBINATION(a.parts) in (verdict, O.SPLIT, O.INCONCLUSIVE)
    if premise != "reproduced":
        for pid in ("regularisation-controls", "layer-targeting", "random-mask"):
            p = next(p for p in a.parts if p.id == pid)
            assert "premise not reproduced" in p.reason


def test_analyse_premise_undecided_on_noise():
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx(n=4)
    a = analyse(_fake_results(ctx, {"lips": 1.0, "fedbn-short": -2.5}, noise=3.0), ctx)
    assert a.premise.status == "undecided"


def test_planted_handicap_not_detected_means_no_equivalence():
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx()
    a = analyse(_fake_results(ctx, {**TIED, "fedbn-short": 0.0}), ctx)
    est = {e.name: e for e in a.estimates}
    assert est["assay_sensitive"].value == 0.0
    assert next(p for p in a.parts if p.id == "layer-targeting").verdict == O.INCONCLUSIVE


def test_printed_rule_follows_the_parameters():
    from dataclasses import replace

    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx(equivalence_margin=1.5)
    a = analyse(_fake_results(ctx, TIED), ctx)
    rule = next(p for p in a.parts if p.id == "regularisation-controls").rule
    assert "d = 1.5 points" in rule and "(-1.5, +1.5)" in rule and "d = 2" not in rule
    half = replace(ctx, alpha_fraction=0.5)
    b = analyse(_fake_results(half, TIED), half)
    rule = next(p for p in b.parts if p.id == "regularisation-controls").rule
    assert "= 0.00625" in rule and "x 0.5" in rule
    assert "0.00625" in next(p for p in b.parts if p.id == "random-mask").rule or \
        "= 0.025" in next(p for p in b.parts if p.id == "random-mask").rule


def test_analyse_works_on_twenty_seeds_and_on_two():
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx(n=20)
    with stats.without_flip():
        assert analyse(_fake_results(ctx, TIED), ctx).parts
    ctx2 = _ctx(n=2)
    assert analyse(_fake_results(ctx2, TIED), ctx2).parts  # any subset of >= 2 seeds


def test_bench_analyse_at_twenty_seeds(benchmark):
    """Speed of one analysis at 20 seeds without the flip search, as the stability check
    calls it once per left-out seed (measured by pytest-benchmark, not asserted)."""
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx(n=20)
    res = _fake_results(ctx, TIED)

    def once():
        with stats.without_flip():
            return analyse(res, ctx)

    assert benchmark.pedantic(once, rounds=3, iterations=1).parts


def test_released_arm_scales_the_horizon_to_the_run():
    from audit.papers.lips.dropout_control import SCALES, make_arm

    cfg = dict(SCALES["smoke"])
    alg, _, _ = make_arm("lips-released-score", (0.5, 5), cfg)
    assert alg.post.schedule.T == 30  # T = R, as the release's T = 300 in 300-round runs
    assert alg.post.schedule.strength(30) == 0.0
    cfg["released_horizon"] = 300  # the unscaled reading
    alg300, _, _ = make_arm("lips-released-score", (0.5, 5), cfg)
    assert alg300.post.schedule.T == 300
    assert alg300.post.schedule.strength(30) == pytest.approx(0.45)


# ------------------------------------------------------------- composite calibration
def test_composite_rule_error_rates_under_global_nulls():
    """The claim's composite (any of 4 comparisons at alpha/4 -> CONFIRMED; all 4
    SUPPORTED -> REFUTED; equivalence only with the planted handicap detected), simulated
    with arms sharing LIPS: false CONFIRMED with every alternative d below LIPS (the
    equivalence boundary), false REFUTED with every alternative equal to LIPS."""
    from audit.calibration import draw, mc_se

    rng = np.random.default_rng(20261201)
    reps, n, k, alpha = 4000, 10, 4, 0.05
    for dist in ("normal", "exp-right", "exp-left", "t3"):
        sd = 1.0
        d = 0.5 * sd
        for truth, bad in ((d, "CONFIRMED"), (0.0, "REFUTED")):
            shared = draw(dist, (reps, n), rng, 0.0, sd / math.sqrt(2))
            codes = np.stack([stats.three_way_codes(
                shared + draw(dist, (reps, n), rng, truth, sd / math.sqrt(2)), margin=0.0,
                equivalence_margin=d, alpha=alpha / k, sensitive=True).codes
                for _ in range(k)])
            if bad == "CONFIRMED":
                rate = float(np.mean((codes == stats.FALSIFIED).any(axis=0)))
            else:
                rate = float(np.mean((codes == stats.SUPPORTED).all(axis=0)))
            assert rate <= alpha + 3 * mc_se(alpha, reps), (dist, bad, rate)


# ------------------------------------- overfitting gap, best round, the full reviewer test
def test_curve_probe_matches_the_engine_and_batched_matches_the_loop(fed):
    # the probe's test curve at the last round is the engine's personalised accuracy,
    # and the vmap path gives the per-client loop's numbers
    alg = FedBNProbe(post=prune(update_sensitivity, printed_schedule(0.5, 3, 6)),
                     curve_every=2)
    h = _run(fed, alg)
    rounds = [t for t, a in enumerate(h.algo, 1) if "curve_test_acc" in a]
    assert rounds == [2, 4, 6]
    assert h.algo[-1]["curve_test_acc"] == pytest.approx(h.personal_acc[-1], abs=1e-12)
    ids = sorted(alg._client_states)
    states = [alg.personal_state(h.final_state, alg._client_states[k], k, 6) for k in ids]
    clients = [fed.clients[k] for k in ids]
    alg.model.eval()
    with torch.no_grad():
        batched = alg._correct_batched(states, clients)
        loop = [alg._correct_one(st, c) for st, c in zip(states, clients)]
    assert all(torch.equal(x, y) for x, y in zip(batched, loop))
    alg.model.train()
    # the grouped chain's eval forward (the engine's path here) gives the same curve
    assert alg._chain is not None
    grouped = alg._curve_accuracies(h.final_state, 6)
    alg._chain = None
    assert grouped == pytest.approx(alg._curve_accuracies(h.final_state, 6), abs=1e-12)
    with pytest.raises(ValueError, match="curve_every"):
        FedBNProbe(curve_every=0)


def test_curves_leave_the_training_untouched(fed):
    plain = _run(fed, FedBNProbe(post=prune(random_score, printed_schedule(0.5, 1, 6))))
    probed = _run(fed, FedBNProbe(post=prune(random_score, printed_schedule(0.5, 1, 6)),
                                  curve_every=1))
    assert plain.personal_acc == probed.personal_acc
    assert all(torch.equal(plain.final_state[k], probed.final_state[k])
               for k in plain.final_state)


def test_outer_keys_are_the_first_and_last_weight_layers(fed):
    alg = FedBNProbe()
    _run(fed, alg, rounds=1)
    assert alg.keys_for("outer") == ["conv1.weight", "fc.weight"]
    with pytest.raises(ValueError, match="outer"):
        alg.keys_for("inner")


def test_gap_rule_reaches_each_outcome():
    from audit.papers.lips.dropout_control import RULE_GAP

    assert RULE_GAP.kind == "experiment" and set(RULE_GAP.reachable) == set(ALL_OUTCOMES)
    shown = _tw(UP, sensitive=False)  # the planted arm moves the gap by 3-4 points
    assert RULE_GAP(_tw(UP), shown, 0.11).verdict == O.REFUTED  # LIPS narrows the gap
    assert RULE_GAP(_tw(-UP), shown, 0.11).verdict == O.CONFIRMED  # LIPS widens it
    assert RULE_GAP(_tw(TIE), shown, 0.11).verdict == O.CONFIRMED  # no narrowing
    p = RULE_GAP(_tw(TIE, sensitive=False), _tw(TIE, sensitive=False), 0.11)
    assert p.verdict == O.INCONCLUSIVE and "no assay sensitivity" in p.reason
    assert RULE_GAP(_tw(WIDE), shown, 0.11).verdict == O.INCONCLUSIVE


def _cos_tw(delta, sensitive=True):
    """three_way of A = control cosine = 0.9 + delta, B = LIPS cosine 0.9 (e = 0.02)."""
    base = np.linspace(0.88, 0.92, BASE.size)
    return stats.three_way(base + delta, base, equivalence_margin=0.02, alpha=0.0125,
                           sensitive=sensitive)


def test_full_reviewer_test_needs_accuracy_and_cosine():
    from audit.papers.lips.dropout_control import COS_MARGIN, RULE_BOTH

    assert COS_MARGIN == 0.02 and set(RULE_BOTH.reachable) == set(ALL_OUTCOMES)
    c_same, c_higher = _cos_tw(TIE / 100), _cos_tw(UP / 100)  # +0.03-0.04: more inert
    # CONFIRMED: one control matches on both (accuracy equivalent, cosine equivalent)
    p = RULE_BOTH({"a": _tw(TIE), "b": _tw(UP)}, {"a": c_same, "b": c_same}, True, True)
    assert p.verdict == O.CONFIRMED
    assert p.basis == ""  # a match is on both criteria by definition
    # accuracy matches but the cosine stays higher: not a match; LIPS beats it -> REFUTED,
    # and the word says it rests on the cosine alone
    p = RULE_BOTH({"a": _tw(TIE)}, {"a": c_higher}, True, True)
    assert p.verdict == O.REFUTED and p.basis.startswith("on the middle-layer cosine: every control")
    # REFUTED also when LIPS wins on accuracy even if the cosine matches: on accuracy
    p = RULE_BOTH({"a": _tw(UP)}, {"a": c_same}, True, True)
    assert p.verdict == O.REFUTED and p.basis.startswith("on accuracy: LIPS beats every control")
    # beaten on accuracy by one control and on the cosine by another: no single basis
    p = RULE_BOTH({"a": _tw(UP), "b": _tw(TIE)}, {"a": c_same, "b": c_higher}, True, True)
    assert p.verdict == O.REFUTED and p.basis == ""
    # INCONCLUSIVE: accuracy equivalent, cosine equivalence without cosine sensitivity
    p = RULE_BOTH({"a": _tw(TIE)}, {"a": _cos_tw(TIE / 100, sensitive=False)}, True, False)
    assert p.verdict == O.INCONCLUSIVE and "no assay sensitivity on cosine" in p.reason
    assert RULE_BOTH({"a": _tw(WIDE)}, {"a": c_same}, True, True).verdict == O.INCONCLUSIVE


def test_overfitting_and_best_round_are_measurements():
    from audit.papers.lips.dropout_control import RULE_BEST_ROUND, RULE_OVERFIT

    for rule in (RULE_OVERFIT, RULE_BEST_ROUND):
        assert rule.kind == "measurement" and rule.reachable == ("INCONCLUSIVE",)
    gap = {"fedbn": np.array([5.0, 6.0, 7.0]), "lips": np.array([4.0, 4.0, 4.0])}
    p = RULE_OVERFIT(gap, gap, params={"every": 3, "n": 3})
    assert p.verdict == O.INCONCLUSIVE and "fedbn 6.00 [" in p.reason
    last = stats.paired_difference(BASE + 0.5, BASE + UP, level=0.95, method="t")  # < 0
    best = stats.paired_difference(BASE + UP, BASE, level=0.95, method="t")  # > 0
    p = RULE_BEST_ROUND({"lips": UP}, last, best, params={"every": 3, "n": 10})
    assert "sign CHANGES" in p.reason
    assert "does not change" in RULE_BEST_ROUND({"lips": UP}, best, best,
                                                params={"every": 3, "n": 10}).reason


def test_analyse_reports_the_new_questions_and_estimates():
    from audit import questions
    from audit.papers.lips.dropout_control import CLAIM, analyse

    ctx = _ctx()
    a = analyse(_fake_results(ctx, TIED), ctx)
    ids = {p.id for p in a.parts}
    assert {"overfitting", "gap-not-narrowed", "best-round",
            "controls-match-both"} <= ids
    est = {e.name: e for e in a.estimates}
    # fake curves: best round = last + 1 point, gap at the last round 10 - acc/10 points
    assert est["best_minus_last_lips"].value == pytest.approx(1.0)
    assert est["gap_fedbn"].value == pytest.approx(
        np.mean([100 * (0.1 - r["test_acc"] / 10) for k, r in
                 _fake_results(ctx, TIED).items() if k.arm == "fedbn" and k.setting ==
                 "cand=0"]))
    assert {f.name for f in a.figures} >= {"overfitting_gap"}
    ans = {x["id"]: x for x in questions.answers(CLAIM, a.parts, a)}
    assert ans["overfitting"]["verdict"] == "MEASURED"
    assert ans["overfitting"]["fields"] == ["referee_report.major_comments[3]"]
    assert "referee_report.major_comments[3]" in CLAIM.record.fields


# ------------------------------------------- referee read: gap sensitivity, texts, estimates
def _with_gaps(results, ctx, lips, short):
    """``results`` with the last-round train-test gaps (points) set per seed: FedBN's
    8 + a seed jitter, LIPS's FedBN's + ``lips``, the planted arm's FedBN's + ``short``
    (arrays over the seeds); accuracies and every other arm untouched."""
    jitter = np.linspace(-0.5, 0.5, len(ctx.seeds))
    shift = {"fedbn": 0.0 * jitter, "lips": np.asarray(lips), "fedbn-short": np.asarray(short)}
    out = {}
    for k, r in results.items():
        if k.arm in shift:
            j = list(ctx.seeds).index(k.seed)
            g = (8.0 + jitter[j] + shift[k.arm][j]) / 100
            r = {**r, "gap_curve": r["gap_curve"][:-1] + [g]}
        out[k] = r
    return out


def test_gap_equivalence_needs_sensitivity_on_the_gap_itself():
    # TIED: LIPS beats FedBN (premise reproduced) and the planted accuracy handicap is
    # detected; LIPS's gap is within d of FedBN's in every run. The planted arm moves the
    # gap by about 0.4 points only (as in the full-scale report): the accuracy check says
    # nothing of the gap, so the equivalence of the gaps must not count
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx()
    res = _fake_results(ctx, TIED)
    a = analyse(_with_gaps(res, ctx, lips=TIE, short=UP / 10), ctx)
    est = {e.name: e for e in a.estimates}
    assert a.premise.status == "reproduced" and est["assay_sensitive_beside"].value == 1.0
    assert abs(est["planted_gap_shift"].value) < 2.0 and est["gap_sensitive"].value == 0.0
    part = next(p for p in a.parts if p.id == "gap-not-narrowed")
    assert part.verdict == O.INCONCLUSIVE
    assert "no assay sensitivity on the gap" in part.reason
    assert "does not carry over" in part.reason
    assert "with assay sensitivity shown" not in part.reason
    assert "on the gap itself" in part.rule and "at least d" in part.rule
    # the planted arm moving the gap by 3-4 points (> d), told apart: equivalence counts
    b = analyse(_with_gaps(res, ctx, lips=TIE, short=UP), ctx)
    est_b = {e.name: e for e in b.estimates}
    assert est_b["planted_gap_shift"].value >= 2.0 and est_b["gap_sensitive"].value == 1.0
    part_b = next(p for p in b.parts if p.id == "gap-not-narrowed")
    assert part_b.verdict == O.CONFIRMED and "no assay sensitivity" not in part_b.reason
    # no other part moves with the planted arm's gap
    assert {p.id: p.verdict for p in a.parts if p.id != "gap-not-narrowed"} == {
        p.id: p.verdict for p in b.parts if p.id != "gap-not-narrowed"}


def test_gap_rule_reads_sensitivity_from_the_planted_gap_shift():
    from audit.papers.lips.dropout_control import RULE_GAP

    tie = _tw(TIE)  # an equivalence of the gaps, computed as if sensitivity were shown
    # told apart but a tenth of d: not at the margin's scale
    p = RULE_GAP(tie, _tw(UP / 10, sensitive=False), 0.11)
    assert p.verdict == O.INCONCLUSIVE and "under d = 2" in p.reason
    # about d in size but not told apart by the rule
    p = RULE_GAP(tie, _tw(2 * WIDE + 2.5, sensitive=False), 0.11)
    assert p.verdict == O.INCONCLUSIVE and "not told apart" in p.reason
    # at least d, told apart, either direction: equivalence counts
    assert RULE_GAP(tie, _tw(UP, sensitive=False), 0.11).verdict == O.CONFIRMED
    assert RULE_GAP(tie, _tw(-UP, sensitive=False), 0.11).verdict == O.CONFIRMED
    # a wrong-side or a supported comparison of the gaps needs no sensitivity
    assert RULE_GAP(_tw(UP), _tw(TIE, sensitive=False), 0.11).verdict == O.REFUTED
    assert RULE_GAP(_tw(-UP), _tw(TIE, sensitive=False), 0.11).verdict == O.CONFIRMED


def test_own_questions_are_not_called_beside_the_verdict():
    # random-mask and selection-optimism are questions of kind experiment: both enter
    # the claim's single word, so no text may set them beside it or call one a measurement
    from audit.papers.lips.dropout_control import CLAIM, analyse

    kinds = {q.id: q.kind for q in CLAIM.questions}
    assert kinds["random-mask"] == kinds["selection-optimism"] == "experiment"
    ctx = _ctx()
    a = analyse(_fake_results(ctx, TIED), ctx)
    texts = [p.rule for p in a.parts] + list(a.notes)
    assert not [t for t in texts if "beside the verdict" in t.lower()
                or "not combined into it" in t]
    note = next(t for t in a.notes if "Selection optimism" in t)
    assert "a measurement" not in note and "tested against the margin d" in note
    assert "enter the claim's single word" in note


def test_selection_optimism_estimates_say_which_validation_choice():
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx()
    res = _fake_results(ctx, TIED)
    a = analyse(res, ctx)
    est = {e.name: e for e in a.estimates}
    seed, run = est["selection_optimism_per_seed_lips"], est["selection_optimism_per_run_lips"]
    assert seed.description != run.description
    assert "pooled" in seed.description and "in the same run" in run.description


def test_cosine_note_names_the_questions_it_does_not_decide():
    from audit.papers.lips.dropout_control import analyse

    ctx = _ctx()
    a = analyse(_fake_results(ctx, TIED), ctx)
    note = next(t for t in a.notes if t.startswith("Caveat on the cosine"))
    assert "not a criterion of the verdict" not in note
    assert "regularisation-matches" in note and "regularisation-matches-both" in note


def test_gap_sensitivity_note_prints_no_point_as_an_interval():
    # the planted arm's gap shift in the sensitivity note: a sample with no spread
    # prints its no-spread text, never "[x, x]"
    from audit.papers.lips.present import dropout_control as P

    flat = stats.three_way(BASE + 0.3, BASE, equivalence_margin=2.0, alpha=0.05,
                           sensitive=False)
    f = dict(short_rounds=3, rounds=10, outcome="SUPPORTED", alpha=0.05, detected="x",
             a_side=0.05, detected_side="x", mdes="x")
    sd = stats.paired_difference(BASE + UP, BASE, level=0.95, method="t")
    text = P._note_sensitivity(sd, 95.0, gap_tw=flat, gap_shown=False,
                               gap_why="under d = 2 in size", **f)
    assert "moves FedBN's gap by +0.30 points (" in text and stats.NO_SPREAD in text
    assert "sensitivity on the gap not shown (under d = 2 in size)" in text
    assert P._note_sensitivity(sd, 95.0, **f) == text[:text.index(" On the train-test gap")]
