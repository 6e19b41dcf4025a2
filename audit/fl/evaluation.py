"""Evaluation of a run's states and the record of a run.

- :func:`evaluate`: (accuracy, mean cross-entropy) of a state dict, pure (eval mode, no
  grad); token accuracy / mean CE for language models.
- :func:`evaluate_many`: :func:`evaluate` for several states, each on its own data, in
  one grouped forward a chunk of clients when the model is a plain layer chain.
- :func:`layer_stats`: per-layer L2 norm, exact-zero fraction and cosine to a reference.
- :class:`History`: the per-round metrics :func:`audit.fl.engine.run_federated` returns.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from .aggregate import State
from .models import layer_names

__all__ = ["History", "evaluate", "evaluate_many", "layer_stats"]


@dataclass(frozen=True)
class History:
    """Metrics of one run. Lists indexed like ``rounds`` (evaluation rounds), except
    ``algo`` which has one dict per round 1..R.

    Attributes:
        rounds: rounds at which evaluation ran (0 = the initial model).
        test_acc, test_loss: global model on the global test set.
        personal_acc, personal_loss: mean over clients of the personal state's accuracy
            / loss on the client's own test split (unweighted mean; NaN if disabled).
        client_acc: per-client personal test accuracy.
        val_acc: mean personal accuracy on validation splits (if ``eval_val``).
        layer_norm, layer_zero_frac, layer_cos_ref: per-layer dicts (layer name -> value);
            the cosine is to the global weights at the end of ``reference_round``
            (None before it, or when no reference round was given).
        algo: ``algorithm.round_metrics`` for every round.
        seconds: wall-clock time of the run.
        config: the FLConfig as a dict; algorithm: its name; reference_round.
        final_state: the last global state (not serialised); client_states: the final
            persistent client states (not serialised).
    """

    rounds: list
    test_acc: list
    test_loss: list
    personal_acc: list
    personal_loss: list
    client_acc: list
    val_acc: list
    layer_norm: list
    layer_zero_frac: list
    layer_cos_ref: list
    algo: list
    seconds: float
    config: dict
    algorithm: str
    reference_round: Optional[int]
    final_state: dict = field(repr=False)
    client_states: dict = field(repr=False)

    def to_dict(self) -> dict:
        """Plain floats / lists / dicts (NaN -> None), ready for ``json.dumps``."""
        skip = {"final_state", "client_states"}
        return {k: _plain(getattr(self, k)) for k in self.__dataclass_fields__ if k not in skip}


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, torch.Tensor):
        return _plain(x.tolist())
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, np.integer):
        return int(x)
    return x


def _loss_and_correct(out: torch.Tensor, y: torch.Tensor, reduction: str = "mean"):
    if out.dim() == 3:  # language model: B x T x V against B x T
        out, y = out.flatten(0, 1), y.flatten()
    return F.cross_entropy(out, y, reduction=reduction), (out.argmax(-1) == y)


def evaluate(model: nn.Module, state: State, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``state`` on (x, y), eval mode, no grad.
    Returns (nan, nan) for an empty set."""
    if len(y) == 0:
        return float("nan"), float("nan")
    was = model.training
    model.eval()
    tot_loss = torch.zeros((), dtype=torch.float64, device=x.device)
    tot_ok = torch.zeros((), dtype=torch.float64, device=x.device)
    count = 0
    with torch.no_grad():
        for i in range(0, len(y), batch_size):
            out = functional_call(model, dict(state), (x[i:i + batch_size],))
            loss, ok = _loss_and_correct(out, y[i:i + batch_size], reduction="sum")
            tot_loss += loss.double()
            tot_ok += ok.sum().double()
            count += ok.numel()
    model.train(was)
    return float(tot_ok / count), float(tot_loss / count)


#: the largest input (elements a sample) for which :func:`evaluate_many` takes the grouped
#: forward: measured at one thread on 20 clients, the grouped forward took 0.011 s against
#: the loop's 0.015 s on 8x8 digits (CNN; VGG 0.013 against 0.024), but 0.39 s against
#: 0.15 s on 3x32x32 (CNN; cnn2 0.93 against 0.57): for larger inputs the plain loop
GROUPED_EVAL_MAX_INPUT = 256
#: samples of each client in one grouped forward: fixed, so that a client's numbers do not
#: depend on how many clients share the forward (a kernel's blocking follows the batch)
GROUPED_EVAL_STEP = 64


def evaluate_many(model: nn.Module, states: Sequence[State],
                  sets: Sequence[tuple], batch_size: int = 1024, chain=None,
                  chunk: int = 100) -> list:
    """``[evaluate(model, s, x, y, batch_size) for s, (x, y) in zip(states, sets)]``,
    equal up to rounding. With ``chain`` (:func:`audit.fl.grouped.compile_chain` of
    ``model``) and small inputs (:data:`GROUPED_EVAL_MAX_INPUT`), up to ``chunk`` clients
    go through one grouped eval-mode forward (:meth:`~audit.fl.grouped.Chain.logits`)
    :data:`GROUPED_EVAL_STEP` samples a client at a time, the clients with samples left
    at each step only; each client's loss is then summed as :func:`evaluate` sums it
    (float32 sums of ``batch_size`` samples, added in float64). On the reference CNN a
    number then does not depend on which or how many clients share a forward (tested);
    where a grouped convolution's kernel blocks by the group count (VGG's), that count
    can move the last bit of a logit. Without a chain (or with a program that has no
    ``logits``), for larger inputs, for one non-empty set, or for a language model's
    targets, the plain loop."""
    if len(states) != len(sets):
        raise ValueError(f"{len(states)} states for {len(sets)} data sets")
    rows = [i for i, (_, y) in enumerate(sets) if len(y)]
    if getattr(chain, "logits", None) is None or len(rows) < 2 or \
            any(sets[i][1].dim() != 1 for i in rows) or \
            sets[rows[0]][0][0].numel() > GROUPED_EVAL_MAX_INPUT:
        return [evaluate(model, st, x, y, batch_size) for st, (x, y) in zip(states, sets)]
    out = [(float("nan"), float("nan"))] * len(states)
    rows.sort(key=lambda i: -len(sets[i][1]))  # longest first: a step's clients: a prefix
    pkeys = [n for n, _ in model.named_parameters()]
    bkeys = [n for n, b in model.named_buffers() if b.dtype.is_floating_point]
    step = max(1, int(chunk))
    for c0 in range(0, len(rows), step):
        part = rows[c0:c0 + step]
        for i, res in zip(part, _evaluate_grouped(chain, pkeys, bkeys,
                                                  [states[i] for i in part],
                                                  [sets[i] for i in part], batch_size)):
            out[i] = res
    return out


def _evaluate_grouped(chain, pkeys, bkeys, states, sets, batch_size) -> list:
    """The clients' (accuracy, loss), their sets sorted longest first."""
    K = len(states)
    n = [len(y) for _, y in sets]
    width = n[0]
    x0 = sets[0][0]
    X = x0.new_zeros((K, width, *x0.shape[1:]))
    for k, (x, _) in enumerate(sets):
        X[k, :n[k]] = x
    P = {k: torch.stack([s[k].detach() for s in states]) for k in pkeys}
    B = {k: torch.stack([s[k].detach() for s in states]) for k in bkeys}
    logits = None
    step = min(batch_size, GROUPED_EVAL_STEP)  # samples a client a forward, whatever K
    for j in range(0, width, step):
        m = sum(1 for v in n if v > j)  # the clients with samples at j: the first m
        o = chain.logits({k: v[:m] for k, v in P.items()}, X[:m, j:j + step],
                         {k: v[:m] for k, v in B.items()})
        if logits is None:
            logits = o.new_zeros((K, width, o.shape[-1]))
        logits[:m, j:j + step] = o
    res = []
    for k, (_, y) in enumerate(sets):
        tot_loss = torch.zeros((), dtype=torch.float64, device=x0.device)
        for i in range(0, n[k], batch_size):
            e = min(n[k], i + batch_size)
            tot_loss += F.cross_entropy(logits[k, i:e], y[i:e], reduction="sum").double()
        ok = (logits[k, :n[k]].argmax(-1) == y).sum().double()
        res.append(torch.stack([ok, tot_loss]))
    vals = torch.stack(res).cpu().tolist()
    return [(ok / n[k], loss / n[k]) for k, (ok, loss) in enumerate(vals)]


def layer_stats(model: nn.Module, state: State, reference: Optional[State] = None,
                layers: Optional[Sequence[str]] = None):
    """Per layer (parameters of the module, concatenated): L2 norm, exact-zero fraction,
    and cosine to ``reference`` (None without a reference; 0 if a norm is 0)."""
    layers = layers if layers is not None else layer_names(model)
    pkeys = {n for n, _ in model.named_parameters()}
    by_layer = defaultdict(list)
    for k in state:
        if k in pkeys:
            by_layer[k.rsplit(".", 1)[0] if "." in k else ""].append(k)
    norms, zeros, coss = {}, {}, {}
    for name in layers:
        keys = by_layer.get(name, [])
        if not keys:
            continue
        v = torch.cat([state[k].detach().reshape(-1).double() for k in keys])
        norms[name] = v.norm()
        zeros[name] = (v == 0).double().mean()
        if reference is not None:
            r = torch.cat([reference[k].detach().reshape(-1).double() for k in keys])
            den = v.norm() * r.norm()
            coss[name] = torch.where(den > 0, (v @ r) / den.clamp_min(1e-300), 0.0)
        else:
            coss[name] = None
    # one transfer for all values (no per-layer .item() syncs on CUDA)
    vals = torch.stack(list(norms.values()) + list(zeros.values())
                       + [c for c in coss.values() if c is not None]).cpu().tolist()
    n = len(norms)
    norm_d = dict(zip(norms, vals[:n]))
    zero_d = dict(zip(zeros, vals[n:2 * n]))
    it = iter(vals[2 * n:])
    cos_d = {k: (next(it) if c is not None else None) for k, c in coss.items()}
    return norm_d, zero_d, cos_d
