"""Engine: determinism, fast (chain and vmap) paths == sequential path, plans, hooks,
metrics."""

import json

import numpy as np
import pytest
import torch

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.fl import data as D
from audit.fl import engine, training
from audit.fl.aggregate import Upload, carry_over, chain, weighted_mean
from audit.fl.engine import (Algorithm, FedBN, FedProx, FLConfig, batched_path, client_steps,
                             evaluate, run_federated)
from audit.fl.models import build_lm, build_model

torch.set_num_threads(1)  # tests are small; avoid OpenMP spinning on a shared CPU


@pytest.fixture(scope="module")
def fed():
    ds = D.load_digits(seed=0)
    parts = D.dirichlet_partition(ds.y_train, 6, 0.3, np.random.default_rng(0), min_size=20)
    parts = [p[:48] for p in parts]  # keep the test small
    return D.make_federated(ds, parts, 0.1, 0.2, np.random.default_rng(0))


def cnn():
    return build_model("cnn", 10, 1, 8, width=0.5)


def hooked_cnn():
    """The chain CNN with a forward hook that halves its first convolution's output: the
    grouped chain calls kernels, not modules, so it must leave such a model to vmap."""
    m = cnn()
    first = next(mod for mod in m.modules() if isinstance(mod, torch.nn.Conv2d))
    first.register_forward_hook(lambda mod, inputs, out: out * 0.5)
    return m


def _strip(h):
    d = h.to_dict()
    d.pop("seconds")
    return d


def test_same_seed_same_metrics(fed):
    cfg = FLConfig(rounds=2, clients_per_round=4, batch_size=16, seed=3)
    a, b = run_federated(cnn, fed, Algorithm(), cfg), run_federated(cnn, fed, Algorithm(), cfg)
    assert _strip(a) == _strip(b)
    c = run_federated(cnn, fed, Algorithm(), FLConfig(rounds=2, clients_per_round=4,
                                                      batch_size=16, seed=4))
    assert _strip(a) != _strip(c)


class HalfLR(Algorithm):
    """lr multiplier 0.5 on conv1 for even clients, a tensor multiplier on fc.bias."""

    def param_lr_scale(self, params, client_id, round, epoch, last_grads):
        s = {"conv1.weight": 0.5 if client_id % 2 == 0 else 1.0}
        s["fc.bias"] = torch.linspace(0.1, 1.0, params["fc.bias"].numel())
        if last_grads is not None:  # 2nd epoch: scale from the last gradient norm
            s["conv2.weight"] = float(1.0 / (1.0 + last_grads["conv2.weight"].norm()))
        return s


CASES = {
    "fedavg": (cnn, lambda: Algorithm(), dict()),
    "momentum-wd-2epochs-sampled": (cnn, lambda: Algorithm(),
                                    dict(momentum=0.9, weight_decay=1e-3, local_epochs=2,
                                         clients_per_round=4)),
    "fedprox": (cnn, lambda: FedProx(mu=0.5), dict()),
    "lr-scale-hook": (cnn, lambda: HalfLR(), dict(local_epochs=2)),
    "fedbn-vgg-bn": (lambda: build_model("vgg", 10, 1, 8, width=0.25), lambda: FedBN(),
                     dict(momentum=0.5)),
    "client-chunk-4": (cnn, lambda: Algorithm(), dict(client_chunk=4, momentum=0.9)),
    "carry-over-rule": (cnn, lambda: Algorithm(chain(weighted_mean(), carry_over())), dict()),
    "forward-hook": (hooked_cnn, lambda: Algorithm(), dict()),
}


@pytest.mark.parametrize("path", ["auto", "vmap"])
@pytest.mark.parametrize("case", list(CASES))
def test_fast_path_equals_sequential_path(fed, case, path, monkeypatch):
    model_fn, alg, kw = CASES[case]
    if path == "vmap":  # the general path also for the chain models
        monkeypatch.setattr(training, "_chain_for", lambda model, cfg: None)
    base = dict(rounds=2, batch_size=16, lr=0.05, seed=1, eval_personal=True)
    base.update(kw)
    hs = run_federated(model_fn, fed, alg(), FLConfig(fast=False, **base))
    hf = run_federated(model_fn, fed, alg(), FLConfig(fast=True, **base))
    for k in hs.final_state:
        torch.testing.assert_close(hf.final_state[k].float(), hs.final_state[k].float(),
                                   atol=2e-5, rtol=1e-4, msg=k)
    np.testing.assert_allclose(hf.test_loss, hs.test_loss, rtol=1e-4)
    np.testing.assert_allclose(hf.personal_loss, hs.personal_loss, rtol=1e-4)


def test_sequential_path_equals_plain_torch_optim_loop(fed):
    # one client, one round: engine vs nn.Module + torch.optim.SGD on the same batches
    one = D.FederatedData(fed.clients[:1], fed.x_test, fed.y_test, 10)
    cfg = FLConfig(rounds=1, batch_size=16, lr=0.1, momentum=0.9, weight_decay=1e-3,
                   local_epochs=2, seed=5, fast=False)
    h = run_federated(cnn, one, Algorithm(), cfg)
    with torch.random.fork_rng():
        torch.manual_seed(5)
        m = cnn()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    c = one.clients[0]
    for _, idx in client_steps(len(c.y_train), cfg, 1, 0):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(c.x_train[idx]), c.y_train[idx]).backward()
        opt.step()
    for k, v in m.state_dict().items():
        torch.testing.assert_close(h.final_state[k], v, atol=1e-5, rtol=1e-4)


def test_history_is_json_and_layer_metrics(fed):
    cfg = FLConfig(rounds=3, batch_size=16, eval_every=1, eval_init=True, eval_val=True)
    h = run_federated(cnn, fed, Algorithm(), cfg, reference_round=2)
    d = json.loads(json.dumps(h.to_dict()))
    assert d["rounds"] == [0, 1, 2, 3]
    assert set(d["layer_norm"][0]) == {"conv1", "conv2", "fc"}
    assert d["layer_cos_ref"][1]["fc"] is None
    assert d["layer_cos_ref"][2]["fc"] == pytest.approx(1.0)
    assert d["layer_cos_ref"][3]["fc"] < 1.0
    assert all(z == 0.0 for z in d["layer_zero_frac"][-1].values())
    assert len(d["client_acc"][-1]) == fed.n_clients and d["val_acc"][-1] is not None
    acc, _ = evaluate(cnn(), h.final_state, fed.x_test, fed.y_test)
    assert acc == pytest.approx(h.test_acc[-1])


class Recorder(Algorithm):
    """Zeroes conv1 after aggregation, masks uploads, reports a metric; logs hook calls."""

    name = "recorder"

    def __init__(self):
        super().__init__(chain(weighted_mean()))
        self.calls = []

    def upload(self, before, after, client_id, round, n_samples):
        self.calls.append(("upload", round, client_id))
        mask = {"fc.weight": torch.zeros_like(after["fc.weight"], dtype=torch.bool)}
        state = dict(after, **{"fc.weight": after["fc.weight"] * 0})
        return Upload(state, mask, n_samples)

    def server_post(self, global_state, round, rng):
        self.calls.append(("post", round))
        return dict(global_state, **{"conv1.bias": torch.zeros_like(global_state["conv1.bias"])})

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        return {"n_uploads": len(uploads), "fc_zero": float((global_state["fc.weight"] == 0)
                                                            .float().mean())}


def test_hooks_are_called_in_order_and_shape_metrics(fed):
    alg = Recorder()
    h = run_federated(cnn, fed, alg, FLConfig(rounds=2, clients_per_round=3, batch_size=32))
    assert [c for c in alg.calls if c[0] == "post"] == [("post", 1), ("post", 2)]
    assert sum(c[0] == "upload" for c in alg.calls) == 6
    assert h.algo == [{"n_uploads": 3.0, "fc_zero": 1.0}] * 2
    assert h.layer_zero_frac[-1]["fc"] > 0.99 and h.algorithm == "recorder"


def test_fedbn_keeps_norm_layers_local(fed):
    vgg = lambda: build_model("vgg", 10, 1, 8, width=0.25)  # noqa: E731
    h = run_federated(vgg, fed, FedBN(), FLConfig(rounds=2, batch_size=32))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        init = vgg().state_dict()
    assert torch.equal(h.final_state["bn1.running_mean"], init["bn1.running_mean"])
    states = h.client_states
    assert not torch.equal(states[0]["bn1.running_mean"], states[1]["bn1.running_mean"])
    assert not torch.equal(h.final_state["conv1.weight"], init["conv1.weight"])


def test_language_model_fast_equals_sequential():
    ds = D.load_stdlib_chars(seq_len=8, max_chars=2500)
    fed = D.make_federated(ds, D.contiguous_partition(len(ds.y_train), 3), 0.0, 0.1,
                           np.random.default_rng(0))
    lm = lambda: build_lm(vocab_size=ds.num_classes, d_model=16, n_heads=2, n_layers=1)  # noqa
    cfg = dict(rounds=1, batch_size=8, lr=0.1, eval_personal=True)
    hs = run_federated(lm, fed, Algorithm(), FLConfig(fast=False, **cfg))
    hf = run_federated(lm, fed, Algorithm(), FLConfig(fast=True, **cfg))
    np.testing.assert_allclose(hf.test_loss, hs.test_loss, rtol=1e-4)
    assert hs.test_loss[-1] < np.log(ds.num_classes)


def test_dropout_model_runs_batched_and_is_seeded(fed):
    vgg = lambda: build_model("vgg", 10, 1, 8, width=0.25, norm="gn", dropout_middle=0.3)  # noqa
    cfg = FLConfig(rounds=1, batch_size=16, seed=2, eval_personal=False)
    a, b = run_federated(vgg, fed, Algorithm(), cfg), run_federated(vgg, fed, Algorithm(), cfg)
    assert _strip(a) == _strip(b)


def test_zero_weight_upload_and_single_client_round(fed):
    cfg = FLConfig(rounds=1, clients_per_round=1, batch_size=16)
    h = run_federated(cnn, fed, Algorithm(), cfg)  # K = 1 takes the sequential path
    assert len(h.test_acc) == 1 and 0.0 <= h.test_acc[0] <= 1.0


def test_amp_is_float32_on_the_cpu_and_checked(fed):
    cfg = FLConfig(rounds=2, clients_per_round=4, batch_size=16, seed=3)
    amp = FLConfig(**{**cfg.__dict__, "amp": "bf16"})
    a = run_federated(cnn, fed, Algorithm(), cfg)
    b = run_federated(cnn, fed, Algorithm(), amp)
    assert a.test_acc == b.test_acc  # autocast applies on CUDA only
    assert all(torch.equal(a.final_state[k], b.final_state[k]) for k in a.final_state)
    with pytest.raises(ValueError, match="amp must be one of"):
        FLConfig(rounds=1, amp="fp16")


@pytest.mark.parametrize("model", ["cnn", "resnet8-bn"])
def test_amp_bf16_trains_batched_norm_models(fed, model, monkeypatch):
    """bf16 autocast under vmap(grad): normalisation layers must run in float32 (else
    batch norm's backward fails). CUDA-only in use; here forced on for the CPU."""
    from audit.fl import config as fl_config

    monkeypatch.setattr(fl_config, "_AMP_DEVICES", ("cpu", "cuda"))
    fn = cnn if model == "cnn" else (lambda: build_model("resnet8", 10, 1, 8, width=0.25))
    cfg = FLConfig(rounds=2, clients_per_round=4, batch_size=16, seed=3)
    fp32 = run_federated(fn, fed, Algorithm(), cfg)
    bf16 = run_federated(fn, fed, Algorithm(), FLConfig(**{**cfg.__dict__, "amp": "bf16"}))
    assert all(v.dtype == fp32.final_state[k].dtype for k, v in bf16.final_state.items())
    assert any(not torch.equal(v, fp32.final_state[k]) for k, v in bf16.final_state.items())
    assert np.isfinite(bf16.test_loss[-1])
    seq = run_federated(fn, fed, Algorithm(), FLConfig(**{**cfg.__dict__, "amp": "bf16",
                                                          "fast": False}))
    assert np.isfinite(seq.test_loss[-1])


def test_on_rounds_reports_every_round_inside_its_context_only(fed):
    from audit.fl.engine import on_rounds

    seen = []
    cfg = FLConfig(rounds=3, clients_per_round=2, batch_size=16, seed=0,
                   eval_personal=False, layer_metrics=False)
    with on_rounds(lambda r, total: seen.append((r, total))):
        run_federated(cnn, fed, Algorithm(), cfg)
    run_federated(cnn, fed, Algorithm(), cfg)
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_batched_path_names_the_route_a_run_takes():
    cpu = FLConfig(rounds=1)
    assert batched_path(cnn(), cpu) == "chain"
    assert batched_path(build_model("cnn2", 10, 1, 8), cpu) == "chain"
    assert batched_path(build_model("vgg", 10, 1, 8, width=0.25), cpu) == "chain"  # bn
    assert batched_path(build_model("vgg", 10, 1, 8, width=0.25, norm="gn"), cpu) == "vmap"
    assert batched_path(build_model("resnet8", 10, 1, 8), cpu) == "vmap"
    assert batched_path(cnn(), FLConfig(rounds=1, device="cuda")) == "vmap"
    assert batched_path(cnn(), FLConfig(rounds=1, fast=False)) == "sequential"


def _plan(sizes, batch_size, epochs=1, norm=False, device="cpu", seed=0):
    model = build_model("vgg", 10, 1, 8, width=0.25) if norm else cnn()
    cfg = FLConfig(rounds=1, batch_size=batch_size, local_epochs=epochs, seed=seed,
                   device=device)
    trainer = engine._Trainer(model, Algorithm(), cfg)
    steps = [client_steps(n, cfg, 1, k) for k, n in enumerate(sizes)]
    return steps, trainer._plan(steps)


def _rows(calls):
    return sum(b * len(js) for b, js, _ in calls)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 80), min_size=1, max_size=12),
       batch_size=st.sampled_from([4, 8, 32]), epochs=st.integers(1, 2),
       norm=st.booleans(), device=st.sampled_from(["cpu", "cuda"]))
def test_every_plan_runs_each_step_once_in_order_and_never_pads_less_than_needed(
        sizes, batch_size, epochs, norm, device):
    steps, calls = _plan(sizes, batch_size, epochs, norm, device)
    seen = {j: [] for j in range(len(sizes))}
    for b, js, ss in calls:
        assert len(js) == len(ss) == len(set(js)) > 0
        for j, s in zip(js, ss):
            n = len(steps[j][s][1])
            assert n == b if norm else n <= b  # batch statistics never see padding
            seen[j].append(s)
    for j, st_ in seen.items():
        assert st_ == list(range(len(steps[j])))  # every step once, in its order
    if norm or device != "cpu":  # the aligned plan: local step s in call s (or split)
        assert all(len(set(ss)) == 1 for _, _, ss in calls)
    else:  # the chosen plan is never costlier than the aligned one under its model
        cost = lambda cs: _rows(cs) + batch_size * len(cs)  # noqa: E731
        aligned = []
        for s in range(max(len(x) for x in steps)):  # (a client may have no samples)
            act = [j for j in range(len(sizes)) if s < len(steps[j])]
            aligned.append((max(len(steps[j][s][1]) for j in act), act, [s] * len(act)))
        assert cost(calls) <= cost(aligned)


def test_reference_workload_plan_pads_fewer_rows():
    from audit.fl.bench import reference_workload

    sizes = [len(c.y_train) for c in reference_workload().clients]
    _, calls = _plan(sizes, 32)
    _, aligned = _plan(sizes, 32, device="cuda")  # the aligned plan
    assert _rows(calls) == 1484 < _rows(aligned) == 1660  # of 1437 real rows
