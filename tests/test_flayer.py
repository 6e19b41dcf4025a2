"""FLAYER's pieces (audit/papers/flayer/algorithm.py): equations, masks, hooks, determinism.

Reference values are computed by hand from the printed equations of arXiv 2412.07062v3
(Eq. 4, Eq. 9); the source of each number is in the comment beside it.
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

from audit.papers.flayer.algorithm import (ARMS, FLAYER, SERVER_RULES, Options, eq4_multiplier,
                                     head_mix, kernel_slice_mask, make_algorithm,
                                     structure_metrics, topk_mask, upload_fraction)
from audit.fl.aggregate import Upload
from audit.fl.data import dirichlet_partition, make_federated, synthetic_classification
from audit.fl.engine import FLConfig, run_federated
from audit.fl.hooks import ScaleRequest
from audit.fl.models import build_model


@pytest.mark.parametrize("i, L, cap, expected", [
    pytest.param(1, 10, 1.0, 0.1, id="i/L=0.1"),
    pytest.param(5, 10, 1.0, 0.5, id="middle"),
    pytest.param(10, 10, 1.0, 1.0, id="last-layer-full"),
    pytest.param(1, 20, 1.0, 0.1, id="floor: 1/20 -> 0.1"),
    pytest.param(2, 29, 1.0, 0.1, id="floor: 2/29 -> 0.1"),
    pytest.param(10, 10, 0.9, 0.9, id="released cap 0.9"),
])
def test_upload_fraction_eq9(i, L, cap, expected):
    assert upload_fraction(i, L, cap=cap) == pytest.approx(expected)


def test_upload_fraction_rejects_bad_index():
    with pytest.raises(ValueError, match="1..6"):
        upload_fraction(0, 6)


@pytest.mark.parametrize("g, i, L, expected", [
    pytest.param(1.0, 10, 10, 1 + math.log(2), id="g=1,i=L: 1+ln 2 = 1.6931"),
    pytest.param(1.0, 5, 10, 1 + 0.5 * math.log(2), id="g=1,i/L=.5: 1.3466"),
    pytest.param(0.5, 3, 6, 1 + 0.5 * math.log(3), id="g=.5: 1+ln(3)/2 = 1.5493"),
    pytest.param(1e-8, 10, 10, 1 + math.log1p(1e8), id="g=1e-8: 19.4207"),
])
def test_eq4_multiplier_values(g, i, L, expected):
    assert eq4_multiplier(g, i, L) == pytest.approx(expected, rel=1e-12)


def test_eq4_multiplier_unbounded_as_printed_and_clamped_in_runs():
    assert eq4_multiplier(0.0, 1, 1, floor=0.0) == math.inf
    # the runs' floor 1e-12: 1 + ln(1 + 1e12) = 28.631 at i = L
    assert eq4_multiplier(0.0, 4, 4) == pytest.approx(1 + math.log1p(1e12))
    ms = [eq4_multiplier(10.0 ** -k, 1, 1, floor=0.0) for k in range(0, 40, 5)]
    assert all(a < b for a, b in zip(ms, ms[1:]))


def test_topk_mask_keeps_largest_changes_rounded_up():
    change = torch.tensor([[0.1, -5.0, 0.3], [2.0, 0.0, -0.2]])
    m = topk_mask(change, 0.5)  # ceil(0.5 * 6) = 3: |-5|, |2|, |0.3|
    assert m.tolist() == [[False, True, True], [True, False, False]]
    assert int(topk_mask(change, 0.1).sum()) == 1  # ceil(0.6) = 1
    assert bool(topk_mask(change, 1.0).all())


def test_kernel_slice_mask_released():
    change = torch.arange(2 * 3 * 3, dtype=torch.float32).reshape(1, 2, 3, 3)
    m = kernel_slice_mask(change, 0.5)  # int(0.5 * 9) = 4 per 3x3 slice
    assert m.sum(dim=(2, 3)).tolist() == [[4, 4]]
    assert m[0, 0].reshape(-1).tolist() == [False] * 5 + [True] * 4  # largest: 5..8
    one = kernel_slice_mask(torch.ones(4, 3, 1, 1), 0.9)  # int(0.9 * 1) = 0
    assert not one.any()
    assert not kernel_slice_mask(torch.ones(2, 2, 3, 3), 0.1).any()  # int(0.9) = 0


def test_head_mix_eq2():
    local, glob = torch.tensor([1.0, 3.0]), torch.tensor([5.0, -1.0])
    torch.testing.assert_close(head_mix(local, glob, 0.25), torch.tensor([4.0, 0.0]))


def test_structure_metrics_on_hand_example():
    # prev irrelevant; A (w=1) selects coords 0,1 (values 1, 2); B (w=3) selects 1 (4).
    ups = [Upload({"w": torch.tensor([1.0, 2.0, 0.0])},
                  {"w": torch.tensor([True, True, False])}, 1.0),
           Upload({"w": torch.tensor([0.0, 4.0, 0.0])},
                  {"w": torch.tensor([False, True, False])}, 3.0)]
    new = SERVER_RULES["literal"]({"w": torch.zeros(3)}, ups)  # [0.25, 3.5, 0]
    m = structure_metrics(new, {"w": torch.zeros(3)}, ups, ["w"], {"": ["w"]})
    assert m["unselected_frac"] == pytest.approx(1 / 3)
    assert m["unselected_nonzero"] == 0
    assert m["shrunk_frac"] == pytest.approx(1 / 3)  # coord 0: p = 1/4
    assert m["mean_p"] == pytest.approx((0.25 + 1.0) / 2)
    assert m["literal_identity_err"] < 1e-7
    sel = SERVER_RULES["selector-mean"]({"w": torch.full((3,), 9.0)}, ups)  # [1, 3.5, 9]
    m2 = structure_metrics(sel, {"w": torch.zeros(3)}, ups, ["w"], {"": ["w"]})
    assert m2["unselected_nonzero"] == 1 and m2["literal_identity_err"] > 0.1


# ---------------------------------------------------------------- hooks on a tiny run
def _tiny(seed=0, n_clients=4):
    ds = synthetic_classification(seed=3, n=240, num_classes=4, shape=(1, 4, 4))
    rng = np.random.default_rng(seed)
    part = dirichlet_partition(ds.y_train, n_clients, 0.5, rng, min_size=12)
    return ds, make_federated(ds, part, 0.2, 0.2, rng)


def _run(arm, fast=True, seed=0, rounds=2):
    ds, fed = _tiny(seed)
    cfg = FLConfig(rounds=rounds, batch_size=8, lr=0.05, seed=seed, fast=fast,
                   layer_metrics=False)
    return run_federated(lambda: build_model("cnn", 4, 1, 4, width=0.25), fed,
                         make_algorithm(arm), cfg)


def test_make_algorithm_knows_every_arm():
    assert {make_algorithm(a).name for a in ARMS} == set(ARMS)
    with pytest.raises(ValueError, match="unknown FLAYER arm"):
        make_algorithm("nope")


def test_readings_of_the_accuracy_to_weight_map():
    """Eq. 2's A_l under each reading: identity is the accuracy, half ignores it, relative
    weighs the local accuracy against the received global model's on the same split."""
    with pytest.raises(ValueError, match="a_map must be one of"):
        Options(a_map="softmax")
    assert make_algorithm("literal", a_map="half").opt.a_map == "half"
    ds, fed = _tiny()  # clients with validation splits
    model = build_model("cnn", 4, 1, 4, width=0.25)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    cfg = FLConfig(rounds=1, batch_size=8, lr=0.05, layer_metrics=False)
    got = {}
    for reading in ("identity", "half", "relative"):
        alg = make_algorithm("selector-mean", a_map=reading)
        alg.setup(model, fed, cfg)
        got[reading] = alg._a_local(0.7, state, 0)
    assert got["identity"] == 0.7 and got["half"] == 0.5
    from audit.fl.evaluation import evaluate

    acc_g, _ = evaluate(model, state, fed.clients[0].x_val, fed.clients[0].y_val)
    assert got["relative"] == pytest.approx(0.7 / (0.7 + acc_g))


def test_literal_run_zeros_unselected_and_is_deterministic():
    h1, h2 = _run("literal"), _run("literal")
    assert h1.test_acc == h2.test_acc and h1.algo == h2.algo
    for m in h1.algo:
        assert m["unselected_nonzero"] == 0
        assert m["literal_identity_err"] < 1e-5
        assert m["zero_frac"] >= m["unselected_frac"] > 0
    for k, v in h1.final_state.items():
        assert torch.isfinite(v.float()).all(), k


def test_corrected_arm_has_no_zeros_from_masks():
    h = _run("selector-mean")
    assert all(m["zero_frac"] == 0 for m in h.algo)
    assert max(m["literal_identity_err"] for m in h.algo) > 1e-3


def test_fast_and_sequential_paths_agree_with_flayer_hooks():
    a, b = _run("literal", fast=True), _run("literal", fast=False)
    for k in a.final_state:
        torch.testing.assert_close(a.final_state[k], b.final_state[k], rtol=1e-4, atol=1e-5)


def test_released_upload_rules():
    ds, fed = _tiny()
    model = build_model("cnn", 4, 1, 4, width=0.25)  # conv1.w/b, conv2.w/b, fc.w/b
    alg = FLAYER(SERVER_RULES["selector-mean"], Options(released=True))
    alg.setup(model, fed, FLConfig(rounds=1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.manual_seed(0)
    after = {k: v + torch.randn_like(v) for k, v in before.items()}
    up = alg.upload(before, after, 0, 1, n_samples=10)
    # 3x3 conv1.weight is tensor 1 of 6: UP = max(1/6, 0.1) = 0.1667 -> int(1.5) = 1 kept
    assert up.state["conv1.weight"].ne(0).sum(dim=(2, 3)).eq(1).all()
    for k in ("fc.weight", "fc.bias"):  # last two tensors: in full
        torch.testing.assert_close(up.state[k], after[k])
    for k in up.mask:  # selected = non-zero upload
        assert torch.equal(up.mask[k], up.state[k] != 0)


def test_printed_upload_keeps_top_fraction_per_tensor():
    ds, fed = _tiny()
    model = build_model("cnn", 4, 1, 4, width=0.25)
    alg = FLAYER(SERVER_RULES["literal"])
    alg.setup(model, fed, FLConfig(rounds=1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    after = {k: v + torch.randn_like(v) for k, v in before.items()}
    up = alg.upload(before, after, 0, 1, n_samples=10)
    L = 6
    for i, k in enumerate(alg.pkeys, 1):
        n = after[k].numel()
        assert int(up.mask[k].sum()) == math.ceil(upload_fraction(i, L) * n - 1e-9), k
        torch.testing.assert_close(up.state[k], after[k] * up.mask[k])


# ---------------------------------------------------------------- the claim module
def test_claim_specs_per_scale():
    from audit.claims import RunContext
    from audit.papers.flayer.masked_zero import CLAIM, SCALES, specs

    seeds = tuple(range(8))  # the three-way rule decides from 6 pairs: sweeps use 6
    smoke = specs(RunContext(CLAIM.id, "smoke", SCALES["smoke"], seeds))
    # 6 arms x 8 seeds + (depth=vgg, cpr=5, layer=module, head=2, the two A_l readings)
    # x 3 sweep arms (the premise arm and FedAvg in every cell) x 6 sweep seeds +
    # as-released with the x20 factor on the 6 sweep seeds = 48 + 108 + 6
    assert len(smoke) == 162
    assert {s.setting for s in smoke} == {"", "depth=vgg", "cpr=5", "layer=module",
                                          "head=2", "amap=relative", "amap=half",
                                          "released-lr-x20"}
    full = specs(RunContext(CLAIM.id, "full", SCALES["full"], seeds))
    # 3 depths + 3 cpr settings + layer=module + head=2 + 2 readings, 3 arms, 6 seeds;
    # x20 on 6 seeds
    assert len(full) == 48 + 10 * 3 * 6 + 6
    # fewer seeds than sweep_seeds: every seed is a sweep seed
    assert len(specs(RunContext(CLAIM.id, "smoke", SCALES["smoke"], seeds[:5]))) == \
        30 + 6 * 3 * 5 + 5


def test_paper_scale_without_data_is_a_clear_error(monkeypatch):
    from audit.claims import AuditError, RunContext, RunSpec
    from audit.papers.flayer.masked_zero import CLAIM, SCALES, run

    monkeypatch.delenv("AUDIT_DATA", raising=False)
    ctx = RunContext(CLAIM.id, "paper", SCALES["paper"], (0, 1))
    with pytest.raises(AuditError, match="cifar-100-python"):
        run(RunSpec("literal", 0, ""), ctx)


# ---------------------------------------------------------------- layer reading, release
def test_layer_unit_module_shares_index_between_weight_and_bias():
    ds, fed = _tiny()
    model = build_model("cnn", 4, 1, 4, width=0.25)  # 3 modules, 6 tensors
    t = FLAYER(SERVER_RULES["literal"], Options(layer_unit="tensor"))
    t.setup(model, fed, FLConfig(rounds=1))
    m = FLAYER(SERVER_RULES["literal"], Options(layer_unit="module"))
    m.setup(model, fed, FLConfig(rounds=1))
    first = t.pkeys[0]
    assert t.up[first] == pytest.approx(1 / 6)  # tensor 1 of 6
    assert m.up[first] == pytest.approx(1 / 3)  # module 1 of 3 (harsher: tensor reading)
    assert m.index[t.pkeys[0]] == m.index[t.pkeys[1]] == 1 and m.L == 3
    with pytest.raises(ValueError, match="layer_unit"):
        Options(layer_unit="block")


def test_released_write_back_masks_the_kept_local_model():
    ds, fed = _tiny()
    model = build_model("cnn", 4, 1, 4, width=0.25)
    alg = make_algorithm("as-released")
    assert alg.opt.write_back and alg.opt.released_lr_factor == 1.0
    alg.setup(model, fed, FLConfig(rounds=1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.manual_seed(2)
    after = {k: v + torch.randn_like(v) for k, v in before.items()}
    st = alg.update_client_state(None, before, after, 0, 1)
    up = alg.upload(before, after, 0, 1, n_samples=10)
    for k in alg.pkeys:  # the kept local model is exactly what went up (theta * M)
        torch.testing.assert_close(st["local"][k], up.state[k])
    off = FLAYER(SERVER_RULES["selector-mean"], Options(released=True, write_back=False))
    off.setup(model, fed, FLConfig(rounds=1))
    st2 = off.update_client_state(None, before, after, 0, 1)
    torch.testing.assert_close(st2["local"]["conv1.weight"], after["conv1.weight"])


# ---------------------------------------------------------------- each part's outcomes
def _tw(a, b, margin=0.054, alpha=0.05 / 3):
    from audit import stats
    return stats.three_way(np.asarray(a, float), np.asarray(b, float), margin=margin,
                           equivalence_margin=0.054, alpha=alpha)


_B = [0.70, 0.72, 0.69, 0.71, 0.73, 0.705, 0.715, 0.695]  # eight seeds (six at least)


def _ev(tw, sensitive=True):
    return {"three_way": tw, "best": "selector-mean", "sensitive": sensitive,
            "sensitivity": "synthetic", "sweep": "", "resolution": 1 / 360}


def test_collapse_rule_reaches_each_outcome_and_is_gated_by_the_premise():
    from audit.papers.flayer.masked_zero import RULE_COLLAPSE, premise_of
    from audit.verdict import premise_gate

    # no difference exactly 0: the exact sign test needs 7 of 8 seeds that differ
    big = _tw([b + 0.20 + e for b, e in zip(_B, (.001, .01, -.01, .005, -.002, .003, -.006,
                                                 .008))], _B)
    small = _tw([b + 0.00 + e for b, e in zip(_B, (.001, .004, -.004, .002, -.001, .001,
                                                   -.003, .002))], _B)
    mid = _tw([b + e for b, e in zip(_B, (0.0, 0.15, -0.05, 0.10, 0.02, 0.12, -0.03, 0.06))],
              _B)
    p = {"n": 8, "k": 3, "margin": "0.054", "rule": big.text(), "setting": "x"}
    assert RULE_COLLAPSE(_ev(big), params=p).verdict.value == "CONFIRMED"
    assert RULE_COLLAPSE(_ev(small), params=p).verdict.value == "REFUTED"
    no_sens = RULE_COLLAPSE(_ev(small, sensitive=False), params=p)
    assert no_sens.verdict.value == "INCONCLUSIVE" and "assay sensitivity" in no_sens.reason
    assert RULE_COLLAPSE(_ev(mid), params=p).verdict.value == "INCONCLUSIVE"
    part = RULE_COLLAPSE(_ev(big), params=p)
    assert part.flip is not None and part.resolution == pytest.approx(1 / 360)
    assert "0.054" in part.rule and "k = 3" in part.rule
    # premise: SUPPORTED -> reproduced, FALSIFIED -> not reproduced, else undecided
    fed = [0.60, 0.63, 0.58, 0.61, 0.62, 0.605, 0.625, 0.59]
    up = premise_of(_tw(_B, fed, margin=0.0, alpha=0.05))
    down = premise_of(_tw(fed, _B, margin=0.0, alpha=0.05))
    eq = premise_of(_tw([b + e for b, e in zip(_B, (.05, -.05, .04, -.06, .01, -.03, .02,
                                                    -.01))], _B, margin=0.0, alpha=0.05))
    assert (up.status, down.status, eq.status) == ("reproduced", "not reproduced",
                                                  "undecided")
    for prem, out in ((up, "CONFIRMED"), (down, "INCONCLUSIVE"), (eq, "INCONCLUSIVE")):
        g = premise_gate(part, prem)
        assert g.verdict.value == out
        if out == "INCONCLUSIVE":
            held = "not reproduced" if prem is down else "not shown"
            assert f"premise {held} at this scale" in g.reason


def test_structural_rule_reaches_each_outcome():
    from audit.papers.flayer.masked_zero import RULE_STRUCTURAL

    assert RULE_STRUCTURAL.kind == "derivation"
    ok = {"runs": 5, "rounds_checked": 60, "max_unselected_nonzero": 0,
          "max_identity_err": 1e-8, "max_unselected_frac": 0.4, "mean_unselected_frac": 0.2,
          "max_shrunk_frac": 0.2, "mean_shrunk_frac": 0.1, "mean_p": 0.9}
    assert RULE_STRUCTURAL(ok).verdict.value == "CONFIRMED"
    assert RULE_STRUCTURAL({**ok, "max_unselected_nonzero": 3}).verdict.value == "REFUTED"
    assert RULE_STRUCTURAL({**ok, "max_identity_err": 0.1}).verdict.value == "REFUTED"
    none = {**ok, "max_unselected_frac": 0.0, "max_shrunk_frac": 0.0}
    assert RULE_STRUCTURAL(none).verdict.value == "INCONCLUSIVE"
    assert RULE_STRUCTURAL({**ok, "rounds_checked": 0}).verdict.value == "INCONCLUSIVE"


def test_collapse_global_is_a_measurement_outside_the_verdict():
    from audit.papers.flayer.masked_zero import CLAIM, RULE_COLLAPSE_GLOBAL

    big = _tw([b + 0.3 + e for b, e in zip(_B, (0, .01, -.01, .005, 0, .003, -.006, .008))],
              _B)  # not all differences equal: the rule refuses those
    part = RULE_COLLAPSE_GLOBAL({"three_way": big, "best": "selector-mean"},
                                params={"rule": big.text()})
    assert part.verdict.value == "INCONCLUSIVE" and part.kind == "measurement"
    assert "CONFIRMED" in part.reason  # says which way the global reading pushes
    # the claim's word is its questions'; measurement questions (global-model, head-size)
    # never enter it
    assert CLAIM.combination.parts == ("structural", "collapse", "carry-over-vs-literal")
    assert "collapse-global" not in CLAIM.combination.parts
    assert {q.kind for q in CLAIM.questions if "collapse-global" in q.parts} == {
        "measurement"}


# ---------------------------------------------------------------- the batched probe
@pytest.mark.parametrize("released", [False, True])
@pytest.mark.parametrize("model_name, kw", [("cnn", {"width": 0.25}),
                                            ("vgg", {"width": 0.25, "norm": "bn"})])
def test_batched_probe_answers_as_the_client_by_client_one(released, model_name, kw):
    """Eq. 4's multipliers from one batched probe equal those of one probe a client (up to
    rounding), with batch norm in train mode too; a client with fewer samples than the
    probe is probed on its own; later epochs take the cache or the last gradient."""
    ds, fed = _tiny(n_clients=5)
    model = build_model(model_name, 4, 1, 4, **kw)
    cfg = FLConfig(rounds=1, batch_size=8, layer_metrics=False)
    torch.manual_seed(0)
    states = [{k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v
               for k, v in model.state_dict().items()} for _ in range(5)]
    one, many = (FLAYER(SERVER_RULES["literal"], Options(released=released,
                                                         probe_samples=10))
                 for _ in range(2))
    c3 = fed.clients[3]  # a short client: probed on its own
    fed.clients[3] = dataclasses.replace(c3, x_train=c3.x_train[:7], y_train=c3.y_train[:7])
    assert min(len(c.y_train) for i, c in enumerate(fed.clients) if i != 3) >= 10
    one.setup(model, fed, cfg)
    many.setup(model, fed, cfg)
    buffers_before = {k: v.clone() for k, v in model.named_buffers()}
    grads = {k: torch.randn_like(v) for k, v in model.named_parameters()}
    requests = [ScaleRequest(st, c, 0, None) for c, st in enumerate(states)]
    requests.append(ScaleRequest(states[0], 0, 1, grads))  # a later epoch of client 0
    got = many.param_lr_scale_batch(requests, 1)
    want = [one.param_lr_scale(q.params, q.client_id, 1, q.epoch, q.last_grads)
            for q in requests]
    assert len(got) == len(requests)
    norms_many = many._grad_norms_batch(states, list(range(5)))
    norms_one = [one._grad_norms(st, c) for c, st in enumerate(states)]
    for g, w, n in zip(got, want, norms_one + [norms_one[0]]):
        assert g.keys() == w.keys()
        for k in w:
            # a bias followed by batch norm has a gradient of zero up to rounding: its
            # multiplier is rounding noise on either path
            if n[k] > 1e-4:
                assert g[k] == pytest.approx(w[k], rel=1e-5), k
    for a, b in zip(norms_many, norms_one):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)
    assert len({tuple(g.values()) for g in got[:5]}) == 5  # the clients differ
    for k, v in model.named_buffers():  # the probe leaves the running statistics alone
        assert torch.equal(v, buffers_before[k]), k


def test_engine_asks_for_every_due_client_in_one_call():
    """The batched path gathers the clients that start an epoch at a step into one
    param_lr_scale_batch call; the sequential path asks one client at a time."""
    calls = []

    class Spy(FLAYER):
        def param_lr_scale_batch(self, requests, round):
            calls.append((round, [(q.client_id, q.epoch) for q in requests]))
            return super().param_lr_scale_batch(requests, round)

    ds, fed = _tiny(n_clients=4)
    cfg = FLConfig(rounds=2, batch_size=8, lr=0.05, local_epochs=2, layer_metrics=False)
    model_fn = lambda: build_model("cnn", 4, 1, 4, width=0.25)  # noqa: E731
    fast = run_federated(model_fn, fed, Spy(SERVER_RULES["literal"]), cfg)
    firsts = [(r, sorted(ids)) for r, ids in calls if ids[0][1] == 0]
    assert firsts == [(1, [(0, 0), (1, 0), (2, 0), (3, 0)]),
                      (2, [(0, 0), (1, 0), (2, 0), (3, 0)])]
    assert all(len({e for _, e in ids}) == 1 for _, ids in calls)
    assert sorted(cid for _, ids in calls for cid, e in ids if e == 1) == [0, 0, 1, 1, 2, 2, 3, 3]
    calls.clear()
    slow = run_federated(model_fn, fed, Spy(SERVER_RULES["literal"]),
                         FLConfig(**{**cfg.__dict__, "fast": False}))
    assert calls and all(len(ids) == 1 for _, ids in calls)
    for k in fast.final_state:
        torch.testing.assert_close(fast.final_state[k], slow.final_state[k],
                                   rtol=1e-4, atol=1e-5)


def test_batched_probe_of_a_dropout_model_draws_as_the_client_by_client_one():
    """With dropout, vmap would draw the masks in another order: the batched probe then
    goes client by client, so the multipliers and the generator's state after them are
    those of the per-client probe, exactly."""
    ds, fed = _tiny(n_clients=4)
    model = build_model("cnn2", 4, 1, 4, width=0.25, dropout_middle=0.5, dropout=0.5)
    cfg = FLConfig(rounds=1, batch_size=8, layer_metrics=False)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    requests = [ScaleRequest(state, c, 0, None) for c in range(4)]
    got = []
    for batched in (True, False):
        alg = FLAYER(SERVER_RULES["literal"])
        alg.setup(model, fed, cfg)
        torch.manual_seed(5)
        if batched:
            got.append((alg.param_lr_scale_batch(requests, 1), torch.get_rng_state()))
        else:
            got.append(([alg.param_lr_scale(q.params, q.client_id, 1, 0, None)
                         for q in requests], torch.get_rng_state()))
    assert got[0][0] == got[1][0]
    assert torch.equal(got[0][1], got[1][1])


def test_a_subclass_rule_is_not_hidden_by_an_inherited_batched_override():
    """A subclass of FLAYER that overrides param_lr_scale alone is asked request by
    request on both paths (FLAYER's batched override answers for FLAYER's rule)."""
    from audit.fl.training import _scale_batch

    class Halved(FLAYER):
        def param_lr_scale(self, params, client_id, round, epoch, last_grads):
            return {k: 0.5 for k in params}

    ds, fed = _tiny(n_clients=3)
    model = build_model("cnn", 4, 1, 4, width=0.25)
    alg = Halved(SERVER_RULES["literal"])
    alg.setup(model, fed, FLConfig(rounds=1))
    state = {k: v.detach() for k, v in model.named_parameters()}
    answers = _scale_batch(alg)([ScaleRequest(state, c, 0, None) for c in range(3)], 1)
    assert answers == [{k: 0.5 for k in state}] * 3
    plain = FLAYER(SERVER_RULES["literal"])
    assert _scale_batch(plain).__func__ is FLAYER.param_lr_scale_batch


def test_sweeps_that_decide_nothing_never_agree():
    """"The sweeps agree with it" was said where every sweep was INCONCLUSIVE (FLAYER at
    full scale: six seeds a sweep, which the rule cannot decide from), and where no sweep
    ran at all (the paper scale); a referee read it as support."""
    from audit.papers.flayer.masked_zero import sweeps_said
    from audit.verdict import Outcome

    C, R, I = Outcome.CONFIRMED, Outcome.REFUTED, Outcome.INCONCLUSIVE
    assert sweeps_said({"base": C}) == "no sweep ran at this scale"
    assert sweeps_said({"base": C, "vgg": C}) == "the sweeps decide the same"
    assert sweeps_said({"base": I, "vgg": I}).startswith("the sweeps vgg do not decide")
    mixed = sweeps_said({"base": C, "vgg": R, "cnn2": I})
    assert mixed.startswith("the sweeps vgg decide otherwise, so it does not carry over")
    assert "the sweeps cnn2 do not decide" in mixed
    assert sweeps_said({"base": I, "vgg": C}) == "the sweeps vgg decide otherwise"
    assert "agree" not in sweeps_said({"base": I, "vgg": I, "cnn2": I})


# ------------------------------------------------------- notes that must follow the numbers
def _diff(a, b):
    from audit import stats
    return stats.paired_difference(np.asarray(a, float), np.asarray(b, float), level=0.95,
                                   method="t")


def test_which_fix_note_names_the_decisive_test_and_follows_its_outcome():
    """The smoke note said selector-mean "does" close the gap on its 95% t interval while
    the decisive collapse test on that contrast was INCONCLUSIVE, its rule's interval
    containing 0: a descriptive interval must not read firmer than the verdict."""
    from audit.papers.flayer.masked_zero import RULE_COLLAPSE, premise_of
    from audit.papers.flayer.present.masked_zero import _note_which_fix
    from audit.verdict import premise_gate

    lit = np.asarray(_B)
    dc = _diff(lit - 0.03 + np.array([.001, .01, -.01, .005, -.002, .003, -.006, .008]), lit)
    ds = _diff(lit + 0.11 + np.array([.02, -.03, .01, .04, -.02, .0, -.01, .03]), lit)
    assert dc.high < ds.low  # the descriptive intervals separate the two fixes
    mid = _tw([b + e for b, e in zip(_B, (0.0, 0.15, -0.05, 0.10, 0.02, 0.12, -0.03,
                                          0.06))], _B)
    p = {"n": 8, "k": 3, "margin": "0.054", "rule": mid.text(), "setting": "x"}
    undecided = RULE_COLLAPSE(_ev(mid), params=p)
    assert undecided.verdict.value == "INCONCLUSIVE"
    d = mid.difference
    assert d.low < 0 < 0.054 < d.high
    note = _note_which_fix(dc, ds, undecided, mid, "selector-mean")
    assert "descriptive 95% t intervals, not the decisive test" in note
    assert "does not decide (INCONCLUSIVE: its interval contains the margin m and 0)" in note
    assert f"{d.low:+.3f}, {d.high:+.3f}" in note  # the rule's own interval, computed
    assert f"{100 * (1 - mid.alpha):.4g}%" in note
    assert "close the gap" not in note and "does." not in note
    # decided: the note says so, with no "does not decide"
    big = _tw([b + 0.20 + e for b, e in zip(_B, (.001, .01, -.01, .005, -.002, .003, -.006,
                                                 .008))], _B)
    decided = RULE_COLLAPSE(_ev(big), params=p)
    note = _note_which_fix(dc, ds, decided, big, "selector-mean")
    assert "it decides CONFIRMED" in note and "does not decide" not in note
    # held by the premise: the note says why, though the comparison alone decided
    fed = [0.60, 0.63, 0.58, 0.61, 0.62, 0.605, 0.625, 0.59]
    held = premise_gate(decided, premise_of(_tw(fed, _B, margin=0.0, alpha=0.05)))
    note = _note_which_fix(dc, ds, held, big, "masked-delta")
    assert "(INCONCLUSIVE: premise not reproduced)" in note
    assert "collapse part (masked-delta - literal" in note


def _global_tw(mean, spread, seed=1):
    from audit import stats
    rng = np.random.default_rng(seed)
    b = 0.6 + 0.02 * rng.standard_normal(20)
    z = rng.standard_normal(20)
    z = (z - z.mean()) / z.std(ddof=1)
    return stats.three_way(b + mean + spread * z, b, margin=0.054, equivalence_margin=0.054,
                           alpha=0.05 / 3)


def test_global_reading_says_which_way_it_points_from_the_numbers():
    """FLAYER full said the global reading "pushes towards CONFIRMED" for a gap of 0.060
    against m = 0.054 that no number of seeds up to 400 would decide: words written for
    smoke's gap of 0.27. The phrase now follows where the rule puts the gap."""
    from audit.papers.flayer.masked_zero import RULE_COLLAPSE_GLOBAL, global_lean

    above, lean, on, below = (_global_tw(*a) for a in ((0.3, 0.01), (0.27, 0.4),
                                                       (0.06, 0.07), (0.0, 0.01)))
    assert (above.outcome, lean.outcome, on.outcome, below.outcome) == (
        "SUPPORTED", "INCONCLUSIVE", "INCONCLUSIVE", "FALSIFIED")
    assert lean.seeds_needed is not None and on.seeds_needed is None
    assert "points towards CONFIRMED" in global_lean(above)
    txt = global_lean(lean)
    assert "leans towards CONFIRMED without deciding it" in txt
    assert f"{lean.seeds_needed} pairs" in txt
    txt = global_lean(on)
    assert "sits on the margin" in txt and "neither towards CONFIRMED nor away" in txt
    assert f"{on.difference.mean - 0.054:+.3g}" in txt
    assert "does not point towards CONFIRMED" in global_lean(below)
    part = RULE_COLLAPSE_GLOBAL({"three_way": on, "best": "selector-mean"},
                                params={"rule": on.text()})
    assert "pushes towards" not in part.reason and "sits on the margin" in part.reason


def test_metric_note_sizes_the_global_gap_and_carries_the_lean():
    from audit.papers.flayer.present.masked_zero import _note_metric

    dg = _diff(np.asarray(_B) + 0.06 + np.array([.01, -.01, .02, -.02, .0, .005, -.005, .0]),
               _B)
    kw = dict(best="selector-mean", literal=0.587, fedavg=0.910)
    note = _note_metric(dg, 0.022, "LEAN", **kw)
    assert "the gap is larger than the personalised one's +0.022" in note
    assert "by the collapse rule on that metric, LEAN." in note
    assert "pushes towards" not in note
    assert "smaller than" in _note_metric(dg, 0.2, "LEAN", **kw)
