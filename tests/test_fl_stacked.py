"""The stacked Transformer program (audit.fl.stacked) against torch.func on the module."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad

from audit.fl.config import FLConfig
from audit.fl.models import build_lm, build_model
from audit.fl.stacked import StackedLM, compile_stacked
from audit.fl.training import batched_path


def _stack(model, K, seed):
    g = torch.Generator().manual_seed(seed)
    return {k: v.detach().unsqueeze(0).repeat(K, *([1] * v.dim()))
            + 0.05 * torch.randn((K, *v.shape), generator=g)
            for k, v in model.named_parameters()}


def _reference(model, P, x, y, w):
    """Client by client: torch.func.grad of the engine's weighted token loss."""
    def loss(p, xk, yk, wk):
        out = functional_call(model, p, (xk,))
        per = F.cross_entropy(out.flatten(0, 1), yk.flatten(), reduction="none")
        per = per.view(xk.shape[0], -1).mean(1)
        return (per * wk).sum() / wk.sum()
    K = x.shape[0]
    rows = [grad(loss)({k: v[i] for k, v in P.items()}, x[i], y[i], w[i]) for i in range(K)]
    return {k: torch.stack([r[k] for r in rows]) for k in P}


@pytest.mark.parametrize("d,heads,layers,t,b", [(16, 2, 4, 16, 17), (8, 1, 1, 5, 3),
                                                (12, 3, 2, 9, 1)])
def test_stacked_gradients_equal_the_modules(d, heads, layers, t, b):
    torch.manual_seed(d + layers)
    model = build_lm(vocab_size=23, max_len=t + 3, d_model=d, n_heads=heads,
                     n_layers=layers)
    prog = compile_stacked(model)
    assert isinstance(prog, StackedLM)
    K = 4
    P = _stack(model, K, seed=layers)
    x = torch.randint(0, 23, (K, b, t))
    y = torch.randint(0, 23, (K, b, t))
    w = torch.ones(K, b)
    if b > 1:
        w[1, -1] = 0.0  # a padded sample counts for nothing
    got = prog.grads(P, x, y, w)
    want = _reference(model, P, x, y, w)
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-6, msg=k)
    # w None means every sample counts
    plain = prog.grads(P, x, y)
    ones = _reference(model, P, x, y, torch.ones(K, b))
    for k in ones:
        torch.testing.assert_close(plain[k], ones[k], rtol=1e-4, atol=1e-6, msg=k)


def test_outputs_equal_the_modules_forward():
    torch.manual_seed(0)
    model = build_lm(vocab_size=11, max_len=8, d_model=8, n_heads=2, n_layers=2)
    P = _stack(model, 3, seed=1)
    x = torch.randint(0, 11, (3, 2, 6))
    got = compile_stacked(model).outputs(P, x)
    for i in range(3):
        want = functional_call(model, {k: v[i] for k, v in P.items()}, (x[i],))
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)


def test_only_the_plain_language_model_takes_the_stacked_path():
    assert compile_stacked(build_model("cnn", 10, 1, 8)) is None
    assert compile_stacked(build_lm(vocab_size=9, max_len=4, d_model=8, n_heads=2,
                                    n_layers=1, dropout=0.1)) is None  # dropout: vmap
    lm = build_lm(vocab_size=9, max_len=4, d_model=8, n_heads=2, n_layers=1)
    assert batched_path(lm, FLConfig(rounds=1)) == "stacked"
    assert batched_path(lm, FLConfig(rounds=1, fast=False)) == "sequential"
    assert batched_path(lm, FLConfig(rounds=1, device="cuda")) == "vmap"

    class Sub(type(lm)):
        pass
    assert compile_stacked(Sub(9, d_model=8, n_heads=2, n_layers=1, max_len=4)) is None
    tied = build_lm(vocab_size=9, max_len=4, d_model=8, n_heads=2, n_layers=1)
    tied.head.weight = tied.tok_emb.weight  # weight tying: vmap handles it, not this path
    assert compile_stacked(tied) is None
    swapped = build_lm(vocab_size=9, max_len=4, d_model=8, n_heads=2, n_layers=1)
    swapped.blocks[0].mlp.fc1 = torch.nn.Linear(8, 32, bias=False)
    assert compile_stacked(swapped) is None
