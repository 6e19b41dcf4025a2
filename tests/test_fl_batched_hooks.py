"""The engine's batched end of a round and batched evaluation: Chain.logits against the
module's eval forward, evaluate_many against evaluate, update_client_state_batch (one
call a round, FLAYER's answers equal its client-by-client ones), the written-out
regularizer gradients against vmap, and the subclass guard of every batched hook."""


import numpy as np
import pytest
import torch
from torch.func import functional_call, grad, vmap

from audit.fl.data import dirichlet_partition, make_federated, synthetic_classification
from audit.fl.engine import FLConfig, run_federated
from audit.fl.evaluation import evaluate, evaluate_many
from audit.fl.grouped import compile_chain
from audit.fl.hooks import Algorithm, ClientUpdate, FedProx, batched_override
from audit.fl.models import build_model
from audit.papers.flayer.algorithm import FLAYER, SERVER_RULES, make_algorithm
from audit.papers.genefl.algorithm import GeneFL


def _fed(n_clients=5, seed=0):
    ds = synthetic_classification(seed=3, n=300, num_classes=4, shape=(1, 4, 4))
    rng = np.random.default_rng(seed)
    part = dirichlet_partition(ds.y_train, n_clients, 0.5, rng, min_size=12)
    return make_federated(ds, part, 0.2, 0.2, rng)


def _states(model, n, seed=0, stats=True):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        st = {}
        for k, v in model.state_dict().items():
            if not v.is_floating_point():
                st[k] = v.clone()
            elif k.endswith("running_var"):
                st[k] = v + torch.rand(v.shape, generator=g) if stats else v.clone()
            else:
                st[k] = v + 0.1 * torch.randn(v.shape, generator=g)
        out.append(st)
    return out


MODELS = [("cnn", {"width": 0.25}), ("vgg", {"width": 0.25, "norm": "bn"}),
          ("cnn2", {"width": 0.25, "dropout_middle": 0.5, "dropout": 0.5})]


@pytest.mark.parametrize("name, kw", MODELS)
def test_chain_logits_equal_the_modules_eval_forward(name, kw):
    model = build_model(name, 4, 1, 4, **kw)
    chain = compile_chain(model)
    assert chain is not None
    states = _states(model, 3)
    x = torch.randn(3, 7, 1, 4, 4)
    P = {k: torch.stack([s[k] for s in states]) for k, _ in model.named_parameters()}
    B = {k: torch.stack([s[k] for s in states]) for k, b in model.named_buffers()
         if b.is_floating_point()}
    before = {k: v.clone() for k, v in B.items()}
    got = chain.logits(P, x, B)
    model.eval()
    for i in range(3):
        want = functional_call(model, states[i], (x[i],))
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-5)
    model.train()
    for k in B:  # eval mode reads the running statistics and leaves them alone
        assert torch.equal(B[k], before[k])
    assert not got.requires_grad


@pytest.mark.parametrize("name, kw", MODELS)
@pytest.mark.parametrize("batch_size, chunk", [(1024, 100), (5, 2), (1, 1)])
def test_evaluate_many_equals_evaluate_client_by_client(name, kw, batch_size, chunk):
    model = build_model(name, 4, 1, 4, **kw)
    fed = _fed()
    states = _states(model, fed.n_clients, seed=1)
    sets = [(c.x_test, c.y_test) for c in fed.clients]
    c0 = fed.clients[0]
    sets[2] = (c0.x_test[:0], c0.y_test[:0])  # an empty split: (nan, nan) as evaluate
    assert len({len(y) for _, y in sets}) > 2  # unequal sizes: padded
    want = [evaluate(model, s, x, y, batch_size) for s, (x, y) in zip(states, sets)]
    got = evaluate_many(model, states, sets, batch_size, compile_chain(model), chunk)
    plain = evaluate_many(model, states, sets, batch_size)  # no chain: the loop itself
    np.testing.assert_equal(plain, want)
    assert np.isnan(got[2][0]) and np.isnan(got[2][1])
    for (ga, gl), (wa, wl) in zip(got[:2] + got[3:], want[:2] + want[3:]):
        assert ga == pytest.approx(wa, abs=1e-12)
        assert gl == pytest.approx(wl, rel=1e-5)
    assert model.training
    with pytest.raises(ValueError, match="states for"):
        evaluate_many(model, states[:2], sets, batch_size)


def test_engine_personal_evaluation_on_the_chain_equals_the_loop(monkeypatch):
    """The same run, its personal evaluation batched (chain) or client by client."""
    from audit.fl import training

    fed = _fed(n_clients=4)  # one minibatch a client (batch norm needs two samples)
    cfg = FLConfig(rounds=2, batch_size=200, lr=0.05, layer_metrics=False, eval_val=True)
    model_fn = lambda: build_model("vgg", 4, 1, 4, width=0.25, norm="bn")  # noqa: E731
    batched = run_federated(model_fn, fed, Algorithm(), cfg)
    real = training._chain_for
    made = []

    def no_logits(model, config):  # the same training, evaluation by the loop
        c = real(model, config)
        made.append(c)
        return type("NoLogits", (), {"grads": staticmethod(c.grads), "has_bn": c.has_bn})()
    monkeypatch.setattr(training, "_chain_for", no_logits)
    looped = run_federated(model_fn, fed, Algorithm(), cfg)
    assert made
    for k in batched.final_state:
        assert torch.equal(batched.final_state[k], looped.final_state[k]), k
    assert batched.client_acc == looped.client_acc
    assert batched.val_acc == looped.val_acc
    np.testing.assert_allclose(batched.personal_loss, looped.personal_loss, rtol=1e-5)


def test_update_client_state_batch_is_asked_once_a_round_for_every_client():
    calls, order = [], []

    class Batched(Algorithm):
        def update_client_state_batch(self, updates, round):
            calls.append((round, [u.client_id for u in updates]))
            order.append("update")
            return super().update_client_state_batch(updates, round)

        def upload(self, before, after, client_id, round, n_samples):
            order.append("upload")
            return super().upload(before, after, client_id, round, n_samples)

    class Plain(Algorithm):
        def update_client_state(self, client_state, start, after, client_id, round):
            order.append("update")
            return client_state

        def upload(self, before, after, client_id, round, n_samples):
            order.append("upload")
            return super().upload(before, after, client_id, round, n_samples)

    fed = _fed(n_clients=3)
    cfg = FLConfig(rounds=2, batch_size=8, lr=0.05, layer_metrics=False)
    model_fn = lambda: build_model("cnn", 4, 1, 4, width=0.25)  # noqa: E731
    a = run_federated(model_fn, fed, Batched(), cfg)
    assert calls == [(1, [0, 1, 2]), (2, [0, 1, 2])]
    assert order == (["update"] + ["upload"] * 3) * 2  # one call, then the uploads
    order.clear()
    b = run_federated(model_fn, fed, Plain(), cfg)
    assert order == ["update", "upload"] * 6  # not overridden: interleaved as before
    for k in a.final_state:
        assert torch.equal(a.final_state[k], b.final_state[k])


@pytest.mark.parametrize("arm", ["literal", "as-released"])
def test_flayer_batched_update_answers_as_the_client_by_client_one(arm):
    model = build_model("vgg", 4, 1, 4, width=0.25, norm="bn")
    fed = _fed()
    cfg = FLConfig(rounds=1)
    one, many, fresh = (make_algorithm(arm) for _ in range(3))
    for alg in (one, many, fresh):
        alg.setup(model, fed, cfg)
    assert many._chain is not None
    write_back = arm == "as-released"
    assert many.opt.write_back == write_back
    starts = _states(model, fed.n_clients, seed=2)
    afters = _states(model, fed.n_clients, seed=3)
    cs = [one.init_client_state(k, starts[k]) for k in range(fed.n_clients)]
    want = [one.update_client_state(cs[k], starts[k], afters[k], k, 1)
            for k in range(fed.n_clients)]
    got = many.update_client_state_batch(
        [ClientUpdate(cs[k], starts[k], afters[k], k) for k in range(fed.n_clients)], 1)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g["a_local"] == pytest.approx(w["a_local"], abs=1e-12)
        assert g["local"].keys() == w["local"].keys()
        for k in w["local"]:
            assert torch.equal(g["local"][k], w["local"][k]), k
    # as released, the write-back masks are kept for upload: the uploads equal those of
    # an instance that computes its masks afresh (no update before)
    assert len(many._masks) == (fed.n_clients if write_back else 0)
    for k in range(fed.n_clients):
        a = many.upload(starts[k], afters[k], k, 1, 10)
        b = fresh.upload(starts[k], afters[k], k, 1, 10)
        assert a.mask.keys() == b.mask.keys() and a.mask
        for key in a.mask:
            assert torch.equal(a.mask[key], b.mask[key]), key
            assert torch.equal(a.state[key], b.state[key]), key
    assert not many._masks  # each upload took its kept masks


def test_flayer_kept_masks_do_not_pile_up_when_uploads_are_dropped():
    class Dropping(FLAYER):
        def upload(self, before, after, client_id, round, n_samples):
            if client_id % 2:
                return None  # a straggler: FLAYER's upload never runs
            return super().upload(before, after, client_id, round, n_samples)

    base = make_algorithm("as-released")
    alg = Dropping(base.rule, base.opt, name="as-released")
    fed = _fed(n_clients=4)
    cfg = FLConfig(rounds=4, batch_size=8, lr=0.05, layer_metrics=False)
    run_federated(lambda: build_model("cnn", 4, 1, 4, width=0.25), fed, alg, cfg)
    assert {r for _, r in alg._masks} <= {4}  # only the last round's, never earlier ones
    assert len(alg._masks) <= 2


def test_a_short_batched_answer_is_refused():
    class Short(Algorithm):
        def update_client_state_batch(self, updates, round):
            return super().update_client_state_batch(updates, round)[:-1]

    fed = _fed(n_clients=3)
    with pytest.raises(ValueError, match="answered 2 updates of 3"):
        run_federated(lambda: build_model("cnn", 4, 1, 4, width=0.25), fed, Short(),
                      FLConfig(rounds=1, batch_size=8, layer_metrics=False))


@pytest.mark.parametrize("name, kw", MODELS[:2])
def test_evaluate_many_does_not_depend_on_which_clients_share_a_forward(name, kw):
    """Bitwise on the reference CNN; on VGG up to the grouped convolution's last bit (it
    blocks by the total channel count on the CPU): the sums themselves are per client."""
    model = build_model(name, 4, 1, 4, **kw)
    chain = compile_chain(model)
    exact = name == "cnn"

    def same(a, b):
        if exact:
            return a == b
        return all(x[0] == y[0] and x[1] == pytest.approx(y[1], rel=1e-6)
                   for x, y in zip(a, b)) and len(a) == len(b)
    fed = _fed(n_clients=8)
    states = _states(model, 8, seed=6)
    sets = [(c.x_test, c.y_test) for c in fed.clients]
    base = evaluate_many(model, states, sets, 1024, chain, chunk=100)
    for bs, chunk in ((1024, 3), (7, 100), (7, 2)):
        got = evaluate_many(model, states, sets, bs, chain, chunk)
        alone = [evaluate_many(model, states[i:i + 2], sets[i:i + 2], bs, chain)
                 for i in range(0, 8, 2)]
        ref = evaluate_many(model, states, sets, bs, chain, chunk=100)
        assert same(got, ref) and same(ref, [r for pair in alone for r in pair])
        assert [a for a, _ in got] == [a for a, _ in base]  # the loss sums by bs


def test_larger_inputs_take_the_loop():
    from audit.fl.evaluation import GROUPED_EVAL_MAX_INPUT

    model = build_model("cnn", 4, 3, 16, width=0.25)  # 768 values a sample
    assert 3 * 16 * 16 > GROUPED_EVAL_MAX_INPUT
    states = _states(model, 3)
    g = torch.Generator().manual_seed(0)
    sets = [(torch.randn(5, 3, 16, 16, generator=g), torch.randint(0, 4, (5,), generator=g))
            for _ in range(3)]

    class Boom:
        def logits(self, *a):
            raise AssertionError("the grouped forward ran")
    want = [evaluate(model, s, x, y) for s, (x, y) in zip(states, sets)]
    assert evaluate_many(model, states, sets, chain=Boom()) == want


def test_flayer_runs_alike_with_and_without_the_batched_update():
    fed = _fed(n_clients=4)
    cfg = FLConfig(rounds=3, batch_size=8, lr=0.05, layer_metrics=False, eval_val=True)
    model_fn = lambda: build_model("cnn", 4, 1, 4, width=0.25)  # noqa: E731

    class OneByOne(FLAYER):  # the one-client hook below the batched one: the default
        def update_client_state(self, *a):
            return super().update_client_state(*a)

    for arm in ("literal", "as-released"):
        base = make_algorithm(arm)
        slow = OneByOne(base.rule, base.opt, name=arm)
        assert batched_override(slow, "update_client_state",
                                "update_client_state_batch") is None
        h1 = run_federated(model_fn, fed, make_algorithm(arm), cfg)
        h2 = run_federated(model_fn, fed, slow, cfg)
        for k in h1.final_state:
            torch.testing.assert_close(h1.final_state[k], h2.final_state[k],
                                       rtol=1e-4, atol=1e-5)


def _stacked_ctx(alg, model, K):
    starts = _states(model, K, seed=4)
    ctxs = [alg.regularizer_context(s, 0, 1) for s in starts]
    C = {k: torch.stack([c[k] for c in ctxs]) for k in ctxs[0]}
    P = {k: torch.stack([s[k] + 0.01 for s in _states(model, K, seed=5)])
         for k, _ in model.named_parameters()}
    return P, C


@pytest.mark.parametrize("which", ["fedprox", "genefl"])
def test_written_out_regularizer_gradients_equal_vmap(which):
    model = build_model("cnn", 4, 1, 4, width=0.25)
    fed = _fed(n_clients=3)
    if which == "fedprox":
        alg = FedProx(0.3)
    else:
        alg = GeneFL(1, "top", lam_gen=0.02, lam_elg=0.3)
    alg.setup(model, fed, FLConfig(rounds=1))
    if which == "fedprox":
        pkeys = [k for k, _ in model.named_parameters()]
        alg.regularizer_context = lambda s, c, r: {k: s[k] for k in pkeys}
    P, C = _stacked_ctx(alg, model, 3)
    want = vmap(grad(lambda p, c: alg.regularizer(p, c)))(P, C)
    got = batched_override(alg, "regularizer", "regularizer_grad")(P, C)
    assert got.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-7)


def test_batched_overrides_give_way_to_a_newer_one_client_rule():
    class NewProx(FedProx):
        def regularizer(self, params, context):
            return sum((params[k] - context[k]).abs().sum() for k in params)

    assert batched_override(FedProx(0.1), "regularizer", "regularizer_grad") is not None
    assert batched_override(NewProx(0.1), "regularizer", "regularizer_grad") is None
    assert batched_override(Algorithm(), "regularizer", "regularizer_grad") is None
    assert batched_override(Algorithm(), "update_client_state",
                            "update_client_state_batch") is None
    class L1:  # a mixin with a newer rule, before FedProx in the resolution order
        def regularizer(self, params, context):
            return sum((params[k] - context[k]).abs().sum() for k in params)

    class Mixed(L1, FedProx):
        pass
    assert batched_override(Mixed(0.1), "regularizer", "regularizer_grad") is None

    class KeepAll:
        def update_client_state(self, client_state, start, after, client_id, round):
            return dict(after)

    class MixedFlayer(KeepAll, FLAYER):
        pass
    assert batched_override(MixedFlayer(SERVER_RULES["literal"]), "update_client_state",
                            "update_client_state_batch") is None
    flayer = FLAYER(SERVER_RULES["literal"])
    assert batched_override(flayer, "update_client_state", "update_client_state_batch") \
        .__func__ is FLAYER.update_client_state_batch
