"""The engine on a CUDA GPU: determinism, fast == sequential, agreement with the CPU,
bf16 autocast. Skipped on machines without CUDA (CI has none); run on a GPU with
``python -m pytest tests/test_fl_cuda.py``."""

import numpy as np
import pytest
import torch

from audit.fl import data as D
from audit.fl.bench import run_bench
from audit.fl.engine import Algorithm, FedBN, FLConfig, run_federated
from audit.fl.models import build_lm, build_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def fed():
    ds = D.load_digits(seed=0)
    parts = D.dirichlet_partition(ds.y_train, 8, 0.3, np.random.default_rng(0), min_size=20)
    return D.make_federated(ds, parts, 0.1, 0.2, np.random.default_rng(0))


MODELS = {
    "cnn": lambda: build_model("cnn", 10, 1, 8),
    "resnet8-bn": lambda: build_model("resnet8", 10, 1, 8, width=0.5),
}


def _cfg(**kw):
    base = dict(rounds=3, clients_per_round=6, batch_size=16, lr=0.05, seed=1,
                device="cuda", eval_personal=False, layer_metrics=False)
    return FLConfig(**{**base, **kw})


def _same(a, b):
    return all(torch.equal(a.final_state[k], b.final_state[k]) for k in a.final_state)


@pytest.mark.parametrize("model", list(MODELS))
def test_same_seed_same_numbers_on_cuda(fed, model):
    alg = FedBN if model.endswith("bn") else Algorithm
    a = run_federated(MODELS[model], fed, alg(), _cfg())
    b = run_federated(MODELS[model], fed, alg(), _cfg())
    assert a.test_acc == b.test_acc and _same(a, b)
    c = run_federated(MODELS[model], fed, alg(), _cfg(seed=2))
    assert not _same(a, c)


def test_language_model_same_seed_same_numbers_on_cuda():
    ds = D.load_stdlib_chars(seq_len=32, max_chars=20_000)
    parts = D.iid_partition(len(ds.y_train), 4, np.random.default_rng(0))
    fedlm = D.make_federated(ds, parts, 0.0, 0.2, np.random.default_rng(0))
    lm = lambda: build_lm(vocab_size=ds.num_classes, max_len=32, d_model=32,  # noqa: E731
                          n_heads=2, n_layers=2)
    a = run_federated(lm, fedlm, Algorithm(), _cfg(rounds=2, clients_per_round=None))
    b = run_federated(lm, fedlm, Algorithm(), _cfg(rounds=2, clients_per_round=None))
    assert a.test_loss == b.test_loss and _same(a, b)


@pytest.mark.parametrize("model", list(MODELS))
def test_fast_path_equals_sequential_on_cuda(fed, model, monkeypatch):
    # One round, in full float32: this small BatchNorm ResNet amplifies a 1e-7 change of
    # its start to 3e-2 within one round (seen on the CPU), and the two paths' convolution
    # kernels round differently under TF32 (8e-3 apart after one round, seen on an H200).
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    alg = FedBN if model.endswith("bn") else Algorithm
    a = run_federated(MODELS[model], fed, alg(), _cfg(rounds=1))
    b = run_federated(MODELS[model], fed, alg(), _cfg(rounds=1, fast=False))
    for k in a.final_state:
        torch.testing.assert_close(a.final_state[k], b.final_state[k], rtol=2e-3, atol=2e-4)


def test_cuda_agrees_with_the_cpu(fed):
    a = run_federated(MODELS["cnn"], fed, Algorithm(), _cfg())
    b = run_federated(MODELS["cnn"], fed, Algorithm(), _cfg(device="cpu"))
    for k in a.final_state:  # TF32 convolutions on the GPU: agreement to ~1e-3
        torch.testing.assert_close(a.final_state[k].cpu(), b.final_state[k], rtol=1e-2,
                                   atol=2e-3)
    assert abs(a.test_acc[-1] - b.test_acc[-1]) <= 0.02


@pytest.mark.parametrize("model", list(MODELS))
def test_bf16_autocast_keeps_float32_weights_and_is_deterministic(fed, model):
    alg = FedBN if model.endswith("bn") else Algorithm
    fp32 = run_federated(MODELS[model], fed, alg(), _cfg(rounds=2))
    bf16 = run_federated(MODELS[model], fed, alg(), _cfg(rounds=2, amp="bf16"))
    assert all(v.dtype == fp32.final_state[k].dtype for k, v in bf16.final_state.items())
    assert not _same(fp32, bf16)  # autocast did change the arithmetic
    again = run_federated(MODELS[model], fed, alg(), _cfg(rounds=2, amp="bf16"))
    assert _same(bf16, again)


def test_bf16_autocast_reaches_the_float32_accuracy(fed):
    fp32 = run_federated(MODELS["cnn"], fed, Algorithm(), _cfg(rounds=15))
    bf16 = run_federated(MODELS["cnn"], fed, Algorithm(), _cfg(rounds=15, amp="bf16"))
    assert fp32.test_acc[-1] > 0.8
    assert abs(fp32.test_acc[-1] - bf16.test_acc[-1]) <= 0.05


def test_bench_reports_rounds_per_second_on_cuda():
    out = run_bench(device="cuda", rounds=5)
    assert out["device"] == "cuda" and out["rounds_per_second"] > 0
    assert out["seconds"] > 0 and out["baseline_seconds"] > 0


def test_grouped_chain_gradients_on_cuda_equal_torch_func():
    """The engine takes the chain on the CPU only; the program itself is device-agnostic
    (a check for a session that wants to time it on a GPU)."""
    from torch.func import functional_call, grad, vmap

    from audit.fl.grouped import compile_chain

    m = build_model("cnn2", 10, 3, 32, width=0.25).cuda()
    chain = compile_chain(m)
    gen = torch.Generator(device="cuda").manual_seed(0)
    K, b = 4, 8
    p = {k: torch.stack([v.detach() + 0.05 * torch.randn(v.shape, generator=gen, device="cuda")
                         for _ in range(K)]) for k, v in m.named_parameters()}
    x = torch.randn(K, b, 3, 32, 32, generator=gen, device="cuda")
    y = torch.randint(0, 10, (K, b), generator=gen, device="cuda")
    w = torch.ones(K, b, device="cuda")
    w[1, 5:] = 0

    def loss(params, xk, yk, wk):
        per = torch.nn.functional.cross_entropy(functional_call(m, params, (xk,)), yk,
                                                reduction="none")
        return (per * wk).sum() / wk.sum()

    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        ref, got = vmap(grad(loss))(p, x, y, w), chain.grads(p, x, y, w)
    finally:
        torch.backends.cudnn.allow_tf32 = old
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], atol=1e-4, rtol=1e-3, msg=k)
