"""The grouped chain (audit.fl.grouped): which models it takes, and that its per-client
gradients equal torch.func.grad of the module itself, client by client."""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import functional_call, grad, vmap

from audit.fl import grouped
from audit.fl.grouped import compile_chain
from audit.fl.models import build_lm, build_model

torch.set_num_threads(1)


def reference_grads(model, params, x, y, w):
    """vmap over clients of torch.func.grad of the engine's loss for one client."""

    def loss(p, xk, yk, wk):
        per = F.cross_entropy(functional_call(model, p, (xk,)), yk, reduction="none")
        return (per * wk).sum() / wk.sum()

    return vmap(grad(loss))(params, x, y, w)


def stacked(model, K, gen, spread=0.05):
    """K different clients: the model's weights plus client-specific noise."""
    return {k: torch.stack([v.detach() + spread * torch.randn(v.shape, generator=gen)
                            for _ in range(K)]) for k, v in model.named_parameters()}


def check(model, shape, K=3, b=5, classes=10, seed=0, pad=True):
    gen = torch.Generator().manual_seed(seed)
    chain = compile_chain(model)
    assert chain is not None
    params = stacked(model, K, gen)
    x = torch.randn(K, b, *shape, generator=gen)
    y = torch.randint(0, classes, (K, b), generator=gen)
    w = torch.ones(K, b)
    if pad and K > 1 and b > 1:
        w[1, b // 2:] = 0.0  # client 1's minibatch is padded
    ref = reference_grads(model, params, x, y, w)
    got = chain.grads(params, x, y, w)
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].shape == params[k].shape
        torch.testing.assert_close(got[k], ref[k], atol=1e-5, rtol=1e-4, msg=k)
    return got


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.ReLU(), nn.Dropout(0.0),
                                  nn.Linear(7, 4))

    def forward(self, x):
        return self.body(x)


class StridedNet(nn.Module):
    """Stride, no bias, a padded ceil-mode pool, torch.flatten and x.relu()."""

    def __init__(self, cin=5):
        super().__init__()
        self.a = nn.Conv2d(cin, 6, 3, stride=2, padding=1, bias=False)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.b = nn.Conv2d(6, 4, 1)
        self.fc = nn.Linear(4 * 3 * 3, 3, bias=False)  # ceil mode: 4x4 -> 3x3

    def forward(self, x):
        x = self.pool(F.relu(self.a(x)))
        x = self.b(x).relu()
        return self.fc(torch.flatten(x, 1))


CHAINS = {
    "cnn": (lambda: build_model("cnn", 10, 1, 8), (1, 8, 8), 10),
    "cnn-half": (lambda: build_model("cnn", 10, 1, 8, width=0.5), (1, 8, 8), 10),
    "cnn2-digits": (lambda: build_model("cnn2", 10, 1, 8), (1, 8, 8), 10),
    "cnn2-cifar": (lambda: build_model("cnn2", 10, 3, 32, width=0.25), (3, 32, 32), 10),
    "mlp": (MLP, (3, 2, 2), 4),
    "strided-5ch": (StridedNet, (5, 8, 8), 3),  # 5 input channels: the NCHW first conv
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_chain_gradients_equal_torch_func_per_client(name):
    build, shape, classes = CHAINS[name]
    torch.manual_seed(0)
    check(build(), shape, classes=classes)


def test_one_client_and_unpadded_minibatches():
    torch.manual_seed(1)
    check(build_model("cnn", 10, 1, 8, width=0.5), (1, 8, 8), K=1, b=4, pad=False)


def test_no_weights_means_the_plain_mean():
    torch.manual_seed(2)
    m = build_model("cnn", 10, 1, 8, width=0.5)
    gen = torch.Generator().manual_seed(0)
    p = stacked(m, 2, gen)
    x, y = torch.randn(2, 4, 1, 8, 8, generator=gen), torch.randint(0, 10, (2, 4))
    chain = compile_chain(m)
    a, b = chain.grads(p, x, y), chain.grads(p, x, y, torch.ones(2, 4))
    for k in a:
        torch.testing.assert_close(a[k], b[k])


@settings(max_examples=20, deadline=None)
@given(cin=st.integers(1, 6), c1=st.integers(1, 5), k1=st.sampled_from([1, 3]),
       stride=st.integers(1, 2), pad=st.integers(0, 1), pool=st.booleans(),
       second=st.booleans(), bias=st.booleans(), hidden=st.sampled_from([0, 5]),
       K=st.integers(1, 3), b=st.integers(1, 4), seed=st.integers(0, 2 ** 16))
def test_random_chains_match_torch_func(cin, c1, k1, stride, pad, pool, second, bias,
                                        hidden, K, b, seed):
    torch.manual_seed(seed)
    layers = [nn.Conv2d(cin, c1, k1, stride=stride, padding=pad, bias=bias), nn.ReLU()]
    if pool:
        layers.append(nn.MaxPool2d(2))
    if second:
        layers += [nn.Conv2d(c1, 3, 3, padding=1, bias=not bias), nn.ReLU()]
    body = nn.Sequential(*layers)
    side = body(torch.zeros(1, cin, 8, 8)).shape
    feat = int(np.prod(side[1:]))
    head = [nn.Flatten()]
    head += [nn.Linear(feat, hidden), nn.ReLU(), nn.Linear(hidden, 4)] if hidden else \
        [nn.Linear(feat, 4)]
    # oneDNN's grouped convolution backward aborts the process on some of these random
    # shapes on this host's CPU (a fatal error inside torch, not a wrong number); both
    # sides of the comparison run on torch's native kernels here instead
    with torch.backends.mkldnn.flags(enabled=False):
        check(nn.Sequential(body, *head), (cin, 8, 8), K=K, b=b, classes=4, seed=seed)


def test_dropout_masks_are_drawn_from_the_torch_generator():
    m = build_model("cnn2", 10, 1, 8, width=0.25, dropout_middle=0.5, dropout=0.5)
    chain = compile_chain(m)
    gen = torch.Generator().manual_seed(0)
    p = stacked(m, 2, gen)
    x, y = torch.randn(2, 6, 1, 8, 8, generator=gen), torch.randint(0, 10, (2, 6))
    runs = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        runs.append(chain.grads(p, x, y))
    for k in p:
        assert torch.isfinite(runs[0][k]).all()
        torch.testing.assert_close(runs[0][k], runs[1][k], rtol=0, atol=0)
    assert any(not torch.equal(runs[0][k], runs[2][k]) for k in p)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(F.relu(self.fc(x.flatten(1))))


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.spare = nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x.flatten(1))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc2(x + self.fc1(x))


class InplaceCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1)), inplace=True))


class ControlFlow(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 2, 3, padding=1), nn.Linear(2 * 16, 3)

    def forward(self, x):
        x = F.relu(self.conv(x))
        if x.shape[-1] > 4:
            x = F.max_pool2d(x, 2)
        return self.fc(x.flatten(1))


NOT_CHAINS = {
    "group norm (vgg)": lambda: build_model("vgg", 10, 1, 8, width=0.25, norm="gn"),
    "control flow on a shape": ControlFlow,
    "batch norm without running statistics": lambda: nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, track_running_stats=False), nn.Flatten(),
        nn.Linear(2 * 36, 3)),
    "batch norm with a cumulative average": lambda: nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, momentum=None), nn.Flatten(),
        nn.Linear(2 * 36, 3)),
    "batch norm without scale and shift": lambda: nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, affine=False), nn.Flatten(),
        nn.Linear(2 * 36, 3)),
    "batch norm of the input": lambda: nn.Sequential(
        nn.BatchNorm2d(1), nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 36, 3)),
    "1-d batch norm": lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 4),
                                            nn.BatchNorm1d(4), nn.Linear(4, 3)),
    "a buffer of its own": lambda: _with_buffer(),
    "residual blocks (resnet8)": lambda: build_model("resnet8", 10, 1, 8, norm="none"),
    "embedding and attention": lambda: build_lm(vocab_size=11, d_model=8, n_heads=2,
                                                n_layers=1),
    "a layer used twice": Shared,
    "an unused parameter": Unused,
    "an addition": Residual,
    "an in-place functional relu": InplaceCall,
    "grouped convolution": lambda: nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten(),
                                                 nn.Linear(4 * 6 * 6, 3)),
    "'same' padding": lambda: nn.Sequential(nn.Conv2d(1, 2, 3, padding="same"),
                                            nn.Flatten(), nn.Linear(2 * 64, 3)),
    "layer norm": lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 4), nn.LayerNorm(4),
                                        nn.Linear(4, 3)),
    "conv after the linear part": lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 4),
                                                        nn.Unflatten(1, (1, 2, 2)),
                                                        nn.Conv2d(1, 1, 1)),
    # found by a hostile probe: each was accepted, and the first trained wrong models
    # (pooling over clients and samples) while the others failed only on the fast path
    "max pooling of the input": lambda: nn.Sequential(nn.MaxPool2d(2), nn.Flatten(),
                                                      nn.Linear(16, 10)),
    "linear before flatten": lambda: nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Flatten(),
                                                   nn.Linear(32, 10)),
    "linear on conv maps before flatten": lambda: nn.Sequential(
        nn.Conv2d(1, 2, 1), nn.ReLU(), nn.Linear(8, 4), nn.Flatten(), nn.Linear(64, 10)),
    "linear on conv maps, no flatten": lambda: nn.Sequential(nn.Conv2d(1, 2, 1),
                                                             nn.Linear(8, 10)),
}


def test_a_chain_starting_with_a_linear_layer_needs_flat_inputs():
    """A linear layer acts on its input's last axis; the chain reshaped any input to
    (K, b, F) and so trained on inputs the module itself refuses."""
    model = nn.Sequential(nn.Linear(64, 10))
    chain = compile_chain(model)
    assert chain is not None
    gen = torch.Generator().manual_seed(0)
    params = stacked(model, 2, gen)
    y = torch.zeros(2, 3, dtype=torch.long)
    chain.grads(params, torch.randn(2, 3, 64, generator=gen), y)
    for bad in (torch.randn(2, 3, 1, 8, 8, generator=gen), torch.randn(2, 3, 8, 8)):
        with pytest.raises(ValueError, match="last axis"):
            chain.grads(params, bad, y)
        with pytest.raises(ValueError, match="last axis"):
            chain.logits(params, bad)


def _with_buffer():
    m = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    m.register_buffer("scale", torch.ones(3))
    return m


BN_CHAINS = {
    "vgg-bn": (lambda: build_model("vgg", 10, 1, 8, width=0.25), (1, 8, 8), 10),
    "vgg-bn-cifar": (lambda: build_model("vgg", 10, 3, 32, width=0.125), (3, 32, 32), 10),
    "vgg-no-norm": (lambda: build_model("vgg", 10, 1, 8, width=0.25, norm="none"),
                    (1, 8, 8), 10),
    "vgg-bn-4px": (lambda: build_model("vgg", 4, 1, 4, width=0.25), (1, 4, 4), 4),
    "bn-eps-momentum": (lambda: nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3, eps=1e-3, momentum=0.3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3 * 16, 5)), (2, 8, 8), 5),
}


@pytest.mark.parametrize("K, b", [(3, 6), (1, 4), (4, 2)])
@pytest.mark.parametrize("name", list(BN_CHAINS))
def test_batch_norm_chains_equal_torch_func_with_their_statistics(name, K, b):
    """Per-client gradients and per-client running statistics after the step: the chain
    against torch.func.grad of the module, one client at a time."""
    build, shape, classes = BN_CHAINS[name]
    torch.manual_seed(0)
    model = build()
    chain = compile_chain(model)
    assert chain is not None
    gen = torch.Generator().manual_seed(1)
    params = stacked(model, K, gen)
    bufs = {k: torch.stack([v.detach().clone() + (0.1 * torch.rand(v.shape, generator=gen)
                                                  if v.is_floating_point() else 0)
                            for _ in range(K)]) for k, v in model.named_buffers()}
    x = torch.randn(K, b, *shape, generator=gen)
    y = torch.randint(0, classes, (K, b), generator=gen)

    def loss(p, bf, xk, yk):
        return F.cross_entropy(functional_call(model, (p, bf), (xk,)), yk)

    ref_bufs = {k: v.clone() for k, v in bufs.items()}
    # client by client: the module's own gradient and its own update of the statistics
    per = [grad(loss)({n: v[i] for n, v in params.items()},
                      {n: v[i] for n, v in ref_bufs.items()}, x[i], y[i]) for i in range(K)]
    ref = {n: torch.stack([g[n] for g in per]) for n in per[0]}
    got_bufs = {k: v.clone() for k, v in bufs.items()}
    got = chain.grads(params, x, y, None, got_bufs)
    assert set(got) == set(ref)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], atol=1e-5, rtol=1e-4, msg=k)
    for k in bufs:
        if bufs[k].is_floating_point() and b > 1:
            assert not torch.equal(got_bufs[k], bufs[k]), k  # the statistics moved
        torch.testing.assert_close(got_bufs[k], ref_bufs[k], atol=1e-6, rtol=1e-5, msg=k)
    if chain.has_bn:
        with pytest.raises(ValueError, match="needs the stacked buffers"):
            chain.grads(params, x, y)


@pytest.mark.parametrize("name", list(NOT_CHAINS))
def test_other_models_are_left_to_vmap(name):
    assert compile_chain(NOT_CHAINS[name]()) is None


def test_nhwc_first_convolution_is_a_cpu_layout_choice(monkeypatch):
    m = build_model("cnn", 10, 1, 8, width=0.5)
    torch.manual_seed(3)
    a = check(m, (1, 8, 8))
    monkeypatch.setattr(grouped, "NHWC_MAX_CHANNELS", 0)  # the NCHW route for the same net
    b = check(m, (1, 8, 8))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)


def test_batch_norm_with_one_value_a_channel_is_refused_as_by_torch():
    """At a 1x1 map with one sample a client, torch's module raises; the chain must too,
    not write NaN into the running variance."""
    model = build_model("vgg", 4, 1, 4, width=0.25)  # bn3, bn4 at 1x1 on 4x4 inputs
    chain = compile_chain(model)
    gen = torch.Generator().manual_seed(0)
    params = stacked(model, 2, gen)
    bufs = {k: torch.stack([v.detach().clone()] * 2) for k, v in model.named_buffers()}
    x, y = torch.randn(2, 1, 1, 4, 4, generator=gen), torch.randint(0, 4, (2, 1))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        model(x[0])
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        chain.grads(params, x, y, None, bufs)
