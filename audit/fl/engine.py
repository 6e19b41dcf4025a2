"""The federated round loop: one template, hooks for algorithms, two training paths.

Public API (stable; falsifiers import these names)
--------------------------------------------------
- ``FLConfig`` (frozen): rounds, clients_per_round (None = all), local_epochs,
  batch_size, lr, momentum, weight_decay, seed, device, eval_every, fast, ...
- ``Algorithm``: base class; every hook defaults to FedAvg and can be overridden
  alone (see its docstring for the call order and signatures).
- ``run_federated(model_fn, fed, algorithm, config, reference_round=None) -> History``
- ``History`` (frozen): per-round metric lists; ``to_dict()`` is JSON-serialisable.
- ``evaluate(model, state, x, y, batch_size=1024) -> (accuracy, loss)``: pure
  evaluation of a state dict (token accuracy / mean CE for language models).
- ``layer_stats(model, state, reference=None) -> (norm, zero_frac, cos)``: per-layer
  L2 norm, exact-zero fraction and cosine to ``reference`` (dicts keyed by layer).
- ``FedProx``, ``FedBN``: two small baselines built from the hooks.
- ``save_atomic(path, payload)``: ``torch.save`` that never leaves a half-written file
  (checkpoints; GENE-FL's finished clusters).
- ``on_rounds(fn)``: a context manager; inside it every ``run_federated`` calls
  ``fn(round, rounds)`` after each round (progress of long runs).
- ``batched_path(model, config) -> "chain" | "vmap" | "sequential"``: which training
  path a run takes (reports and the bench record it).
- ``client_steps(n, config, round, client_id) -> [(epoch, indices), ...]``: the
  minibatch order of one client in one round (algorithms that probe with the same
  batches use it).

One round r (1-based) of ``run_federated``:

    ids      = sampled clients (all if clients_per_round is None), sorted
    for k in ids:
        recv_k  = algorithm.broadcast(global, k, r)
        start_k = algorithm.client_init(recv_k, client_state[k], k, r)
        after_k = local SGD from start_k (hooks: param_lr_scale, regularizer)
        client_state[k] = algorithm.update_client_state(client_state[k], start_k, after_k, k, r)
        up_k    = algorithm.upload(start_k, after_k, k, r, n_samples=n_k)
    global = algorithm.aggregate(global, [up_k], r)
    global = algorithm.server_post(global, r, server_rng)
    metrics: algorithm.round_metrics(...) every round; evaluation every eval_every rounds

Local training is SGD as in ``torch.optim.SGD`` (dampening 0, no Nesterov):
g <- grad + wd * w; b <- momentum * b + g (b starts at 0, so b_1 = g_1); w <- w - lr * s * b,
with s the algorithm's per-parameter multiplier. Momentum buffers restart every round.

Two paths give the same numbers on the same minibatch order (tested):
- sequential (``fast=False``): one client after another, ``torch.func.grad`` on
  ``functional_call``;
- batched (``fast=True``): the sampled clients' parameters are stacked and one call
  computes a local step of many clients at once; clients that have finished their
  steps are skipped. The call is ``torch.func.vmap`` over ``grad`` (any model), or, on
  the CPU for plain layer chains such as the pFL CNNs, one grouped forward and one
  hand-written backward (``audit.fl.grouped``; about 1.4x faster on the reference
  workload). Which clients share a call is planned per round (``_Trainer._plan``).
BatchNorm running statistics are updated per client in both paths. Dropout draws
differ between the paths (vmap uses randomness="different").

Determinism (the same seed gives identical metrics on the CPU, and on one CUDA GPU with
cuDNN's deterministic kernels, which ``run_federated`` selects for its duration):
- initial model: ``model_fn()`` under ``torch.manual_seed(seed)`` inside ``fork_rng``;
- client sampling: ``np.random.default_rng([seed, 1])``;
- minibatch order of client k in round r: ``np.random.default_rng([seed, 2, r, k])``,
  one permutation per epoch (independent of the path and of the other clients);
- the ``rng`` handed to ``server_post``: ``np.random.default_rng([seed, 3])``;
- dropout: the torch global generator, seeded with ``seed`` inside ``fork_rng`` (the
  caller's RNG state is restored afterwards).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from .aggregate import Rule, State, Upload, chain, fedavg, keep_local, weighted_mean
from .alloc import keep_freed_memory
from .data import FederatedData
from .grouped import compile_chain
from .models import is_norm_key, layer_names

__all__ = [
    "Algorithm", "FLConfig", "FedBN", "FedProx", "History", "batched_path", "client_steps",
    "evaluate", "layer_stats", "on_rounds", "run_federated", "save_atomic",
]


@dataclass(frozen=True)
class FLConfig:
    """Settings of one federated run.

    Attributes:
        rounds: number of communication rounds R.
        clients_per_round: clients sampled per round without replacement (None = all).
        local_epochs, batch_size, lr, momentum, weight_decay: local SGD.
        seed: drives init, sampling, minibatch order, server rng, dropout.
        device: "cpu", "cuda", "cuda:0", ...
        eval_every: evaluate (global, personalised, layer metrics) every this many
            rounds and at the last round.
        fast: batched-clients path (True) or the sequential reference (False).
        drop_last: drop a client's last incomplete minibatch (unless it is the only one).
        eval_personal: evaluate every client's personal state on its own test split.
        eval_val: also evaluate personal states on the clients' validation splits.
        eval_init: also evaluate the initial model (recorded as round 0).
        layer_metrics: record per-layer norm / zero fraction / cosine to reference.
        eval_batch_size: batch size of evaluation forward passes.
        client_chunk: at most this many clients per vmap call in the batched path
            (bounds memory for large models or many clients; None = no limit).
        amp: None (float32 throughout) or "bf16": on CUDA, local training's forward
            pass runs under ``torch.autocast(dtype=torch.bfloat16)``; weights, gradients,
            the SGD step, aggregation, evaluation and normalisation layers stay float32
            (the last as in usual mixed-precision training). It has no effect on
            other devices (CPU runs stay float32, so CPU numbers do not depend on it).
            Claims use it only where it cannot change the verdict (never for byte
            counts or exact values).
    """

    rounds: int
    clients_per_round: Optional[int] = None
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "cpu"
    eval_every: int = 1
    fast: bool = True
    drop_last: bool = False
    eval_personal: bool = True
    eval_val: bool = False
    eval_init: bool = False
    layer_metrics: bool = True
    eval_batch_size: int = 1024
    client_chunk: Optional[int] = None
    amp: Optional[str] = None

    def __post_init__(self):
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp must be one of {AMP_MODES}, not {self.amp!r}")


AMP_MODES = (None, "bf16")
_AMP_DEVICES = ("cuda",)  # device types where ``amp`` applies (tests add "cpu")


def _amp_device(cfg: FLConfig) -> Optional[str]:
    """The device type to autocast on, or None (see ``FLConfig.amp``)."""
    dev = torch.device(cfg.device).type
    return dev if cfg.amp == "bf16" and dev in _AMP_DEVICES else None


def _autocast(cfg: FLConfig):
    """The training forward's precision context."""
    dev = _amp_device(cfg)
    if dev is None:
        return contextlib.nullcontext()
    return torch.autocast(dev, dtype=torch.bfloat16)


_NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def _float32_norms(model: nn.Module, device_type: str) -> None:
    """Normalisation layers run in float32 with autocast off (their input is cast up).

    Under ``vmap(grad(...))`` a bf16 input to batch norm fails in the backward pass
    (a float32 grad_output meets a bf16 kernel); float32 statistics are also what
    mixed-precision training keeps anyway. Patches this template model's instances."""
    for mod in model.modules():
        if isinstance(mod, _NORMS):
            def forward(x, _orig=mod.forward):
                with torch.autocast(device_type, enabled=False):
                    return _orig(x.float())
            mod.forward = forward


class Algorithm:
    """FedAvg, written as hooks; override any one of them alone.

    ``rule``: the aggregation rule (``audit.fl.aggregate``); set it in ``__init__``
    (an instance attribute), or override :meth:`aggregate`. None means FedAvg.
    """

    name: str = "fedavg"

    def __init__(self, rule: Optional[Rule] = None):
        self.rule = rule

    # -- run-level -------------------------------------------------------------------
    def setup(self, model: nn.Module, fed: FederatedData, config: FLConfig) -> None:
        """Called once before round 1 (the model is the template used by the engine,
        ``fed`` is already on ``config.device``). Default: nothing."""

    def init_client_state(self, client_id: int, global_state: State) -> Any:
        """Initial persistent per-client state. Default None (stateless clients)."""
        return None

    # -- client side -----------------------------------------------------------------
    def broadcast(self, global_state: State, client_id: int, round: int) -> State:
        """What the server sends to a client. Default: the whole global state."""
        return global_state

    def client_init(self, received: State, client_state: Any, client_id: int,
                    round: int) -> dict:
        """The client's starting state. Default: ``received``, overridden by the keys of
        ``client_state`` when it is a mapping (personal layers, FedBN norms)."""
        if isinstance(client_state, Mapping):
            return {**received, **client_state}
        return dict(received)

    def param_lr_scale(self, params: State, client_id: int, round: int, epoch: int,
                       last_grads: Optional[State]) -> Optional[Mapping[str, Any]]:
        """Per-parameter learning-rate multipliers (float or tensor broadcastable to the
        parameter), called at the start of every local epoch with the current
        parameters and the gradient of the client's previous step (None at the first).
        Default None: 1 everywhere."""
        return None

    def regularizer_context(self, start_state: State, client_id: int,
                            round: int) -> Optional[Mapping[str, torch.Tensor]]:
        """Tensors the regularizer needs for this client (e.g. the anchor weights);
        None (the default) disables the regularizer."""
        return None

    def regularizer(self, params: Mapping[str, torch.Tensor],
                    context: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Extra loss term; pure torch code (it runs under ``vmap`` in the fast path)."""
        raise NotImplementedError

    def update_client_state(self, client_state: Any, start: State, after: State,
                            client_id: int, round: int) -> Any:
        """Persistent state after local training. Default: unchanged."""
        return client_state

    def upload(self, before: State, after: State, client_id: int, round: int,
               n_samples: int) -> Upload:
        """The client's message. Default: full state, no mask, weight n_k."""
        return Upload(after, None, float(n_samples))

    # -- server side -----------------------------------------------------------------
    def aggregate(self, prev: State, uploads: Sequence[Upload], round: int) -> dict:
        """New global state. Default: ``self.rule`` or FedAvg's weighted mean."""
        return (self.rule or fedavg())(prev, uploads)

    def server_post(self, global_state: State, round: int, rng: np.random.Generator) -> dict:
        """After aggregation (masks, frozen blocks, noise). Default: identity."""
        return dict(global_state)

    # -- evaluation ------------------------------------------------------------------
    def personal_state(self, global_state: State, client_state: Any, client_id: int,
                       round: int) -> State:
        """The model a client would use now (evaluated on its own test split).
        Default: ``client_init(broadcast(global))`` for round ``round + 1``."""
        recv = self.broadcast(global_state, client_id, round + 1)
        return self.client_init(recv, client_state, client_id, round + 1)

    def round_metrics(self, round: int, global_state: State, prev_global: State,
                      uploads: Sequence[Upload], client_ids: Sequence[int]) -> dict:
        """Algorithm-specific metrics (name -> float), every round. Default: none."""
        return {}

    # -- checkpoints -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """State the algorithm carries from round to round (tensors, numbers, lists,
        dicts), saved in checkpoints. An algorithm that keeps such state on ``self``
        must return it here and restore it in :meth:`load_state_dict`, or a resumed run
        would differ from an uninterrupted one. Default: none."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


class FedProx(Algorithm):
    """FedProx (Li et al. 2020, arXiv 1812.06127, Eq. 2): local loss + mu/2 ||w - w_t||^2."""

    name = "fedprox"

    def __init__(self, mu: float, rule: Optional[Rule] = None):
        super().__init__(rule)
        self.mu = float(mu)

    def regularizer_context(self, start_state, client_id, round):
        return {k: v for k, v in start_state.items() if v.dtype.is_floating_point}

    def regularizer(self, params, context):
        return 0.5 * self.mu * sum(((params[k] - context[k]) ** 2).sum() for k in params)


class FedBN(Algorithm):
    """FedBN (Li et al. 2021, arXiv 2102.07623): norm layers stay local.

    Aggregation is ``chain(weighted_mean(), keep_local(is_norm))``; each client keeps
    its own norm parameters and running statistics between rounds."""

    name = "fedbn"

    def setup(self, model, fed, config):
        self.is_norm = is_norm_key(model)
        if self.rule is None:
            self.rule = chain(weighted_mean(), keep_local(self.is_norm))

    def update_client_state(self, client_state, start, after, client_id, round):
        return {k: v.clone() for k, v in after.items() if self.is_norm(k)}


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


# ----------------------------------------------------------------------------- evaluation

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


# ----------------------------------------------------------------------------- local SGD

def client_steps(n: int, cfg: FLConfig, round: int, client_id: int) -> list:
    """[(epoch, local index array), ...] for one client in one round."""
    rng = np.random.default_rng([cfg.seed, 2, round, client_id])
    steps = []
    for e in range(cfg.local_epochs):
        perm = rng.permutation(n)
        batches = [perm[i:i + cfg.batch_size] for i in range(0, n, cfg.batch_size)]
        if cfg.drop_last and len(batches) > 1 and len(batches[-1]) < cfg.batch_size:
            batches = batches[:-1]
        steps += [(e, b) for b in batches]
    return steps


def _sgd_(p, g, m, lr, cfg: FLConfig) -> None:
    """torch.optim.SGD's update (dampening 0, no Nesterov), in place on p and on the
    momentum buffer m; lr is a float or a tensor broadcastable to p.

    Rounded as ``p - lr * g`` (a product, then a difference) as before the update went
    in place, so earlier runs reproduce bit for bit. The fused ``p.add_(g, alpha=-lr)``
    differs in the last bit; over a run that acts like seed noise, and it moved LIPS's
    borderline smoke verdict (one equivalence test at p = 0.005 against 0.0125) from
    CONFIRMED to INCONCLUSIVE."""
    if cfg.weight_decay:
        g = g + cfg.weight_decay * p
    if cfg.momentum:
        m.mul_(cfg.momentum).add_(g)
        g = m
    torch.sub(p, lr * g, out=p)


def _lr_for(lr: float, scale, key: str, like: torch.Tensor):
    """lr times the algorithm's multiplier for ``key`` (moved to the parameter's device)."""
    if scale is None or key not in scale:
        return lr
    v = scale[key]
    if isinstance(v, torch.Tensor):
        return lr * v.to(device=like.device, dtype=like.dtype)
    return lr * float(v)


def _overrides(alg: Algorithm, name: str) -> bool:
    return getattr(type(alg), name) is not getattr(Algorithm, name)


def _has_batch_stats(model: nn.Module) -> bool:
    """True if a module normalises with batch statistics in training mode (BatchNorm)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _chain_for(model: nn.Module, cfg: FLConfig):
    """The grouped chain program of ``model`` when the batched path uses it, else None.
    Plain layer chains (the pFL CNNs) on the CPU, where it was measured; CUDA keeps
    ``vmap`` (3.7x a plain loop on an H200, ``audit bench --device cuda``)."""
    if not cfg.fast or torch.device(cfg.device).type != "cpu" or _amp_device(cfg):
        return None  # (autocast is vmap's: the chain is float32 only)
    return compile_chain(model)


def batched_path(model: nn.Module, config: FLConfig) -> str:
    """How ``run_federated`` trains the clients of a round for this model and config:
    "chain" (one grouped forward and hand-written backward, ``audit.fl.grouped``),
    "vmap" (``torch.func``), or "sequential" (``fast=False``)."""
    if not config.fast:
        return "sequential"
    return "chain" if _chain_for(model, config) is not None else "vmap"


class _Trainer:
    """Holds the template model and the functional loss; both paths use it.

    Batched path: at local step s every client that still has a step s takes it
    together. Without BatchNorm, shorter minibatches (a client's last one) are padded
    to the call's largest size with weight-0 samples, so the loss is the mean over the
    real samples and one call serves all active clients; on the CPU the clients' final
    partial minibatches may instead wait for the end of the round and run together,
    grouped by size (``_plan``), when that pads fewer rows. With BatchNorm (batch
    statistics would see the padding) clients are grouped by exact minibatch size.
    Every client still takes its own steps in its own order, so the plan changes
    which clients share a call, never what a client computes.
    """

    def __init__(self, model: nn.Module, alg: Algorithm, cfg: FLConfig):
        self.model, self.alg, self.cfg = model, alg, cfg
        self.pkeys = [n for n, _ in model.named_parameters()]
        self.bkeys = [n for n, _ in model.named_buffers()]
        self.use_lr_hook = _overrides(alg, "param_lr_scale")
        self.pad = not _has_batch_stats(model)
        self.defer_partial = self.pad and torch.device(cfg.device).type == "cpu"
        if _amp_device(cfg) is not None:
            _float32_norms(model, _amp_device(cfg))
        g = grad(self._loss)
        self._vgrad = vmap(g, in_dims=(0, 0, 0, 0, 0, 0), randomness="different")
        self._vgrad_noreg = vmap(g, in_dims=(0, 0, 0, 0, 0, None), randomness="different")
        self.chain = _chain_for(model, cfg)
        self._vgrad_reg = vmap(grad(lambda p, c: alg.regularizer(p, c)))

    def _loss(self, params, buffers, x, y, w, ctx):
        with _autocast(self.cfg):
            out = functional_call(self.model, (params, buffers), (x,))
        out = out.float()
        if w is None:
            loss, _ = _loss_and_correct(out, y)
        else:  # per-sample weights (0 = padding): mean over the real samples
            per, _ = _loss_and_correct(out, y, reduction="none")
            per = per.reshape(w.shape[0], -1)
            loss = (per * w[:, None]).sum() / (w.sum() * per.shape[1])
        if ctx is not None:
            loss = loss + self.alg.regularizer(params, ctx)
        return loss

    def _scale(self, params, cid, r, epoch, last_grads):
        if not self.use_lr_hook:
            return None
        return self.alg.param_lr_scale(params, cid, r, epoch, last_grads)

    # -- sequential reference -----------------------------------------------------------
    def train_one(self, start: State, x, y, cid: int, r: int):
        cfg = self.cfg
        params = {k: start[k].detach().clone() for k in self.pkeys}
        buffers = {k: start[k].detach().clone() for k in self.bkeys}
        mom = {k: torch.zeros_like(v) for k, v in params.items()}
        ctx = self.alg.regularizer_context(start, cid, r)
        gfn = grad(self._loss)
        scale, last_g, cur_epoch = None, None, -1
        for epoch, idx in client_steps(len(y), cfg, r, cid):
            if epoch != cur_epoch:
                cur_epoch = epoch
                scale = self._scale(params, cid, r, epoch, last_g)
            it = torch.as_tensor(idx, device=x.device)
            g = gfn(params, buffers, x[it], y[it], None, ctx)
            for k in self.pkeys:
                _sgd_(params[k], g[k], mom[k], _lr_for(cfg.lr, scale, k, params[k]), cfg)
            last_g = g
        return {**params, **buffers}

    # -- batched clients ------------------------------------------------------------------
    def _plan(self, steps: list) -> list:
        """The batched calls of one round, in order: [(b, js, ss)], where call c trains
        client js[i] on its local step ss[i], all minibatches padded to b (exactly b
        with batch statistics, which must not see padding)."""
        K, S = len(steps), max(len(st) for st in steps)

        def size(j, s):
            return len(steps[j][s][1])

        if not self.pad:
            calls = []
            for s in range(S):
                groups = defaultdict(list)
                for j in range(K):
                    if s < len(steps[j]):
                        groups[size(j, s)].append(j)
                calls += [(b, js, [s] * len(js)) for b, js in sorted(groups.items())]
            return calls
        aligned = []
        for s in range(S):
            act = [j for j in range(K) if s < len(steps[j])]
            aligned.append((max(size(j, s) for j in act), act, [s] * len(act)))
        if not self.defer_partial:
            return aligned
        # Alternative: every client's final, partial minibatch waits for the end of the
        # round and runs with partial minibatches of similar size, so that short ones are
        # not padded to a full batch. Kept when it costs less under a simple model: a
        # call costs its padded rows plus `full` rows of fixed overhead (on the CPU one
        # call of the reference CNN costs about as much as 25 rows).
        full = self.cfg.batch_size
        last = {j: len(steps[j]) - 1 for j in range(K)
                if steps[j] and size(j, len(steps[j]) - 1) < full}
        main = [len(steps[j]) - (j in last) for j in range(K)]
        deferred = []
        for s in range(max(main)):
            act = [j for j in range(K) if s < main[j]]
            deferred.append((max(size(j, s) for j in act), act, [s] * len(act)))
        tail = sorted(last, key=lambda j: -size(j, last[j]))
        t = [size(j, last[j]) for j in tail]
        best, cut = [0] + [math.inf] * len(t), [0] * (len(t) + 1)
        for i in range(1, len(t) + 1):  # best[i]: cheapest split of the i largest into calls
            for a in range(i):
                c = best[a] + t[a] * (i - a) + full
                if c < best[i]:
                    best[i], cut[i] = c, a
        bounds, i = [], len(t)
        while i > 0:
            bounds.append((cut[i], i))
            i = cut[i]
        for a, i in reversed(bounds):
            js = sorted(tail[a:i])
            deferred.append((t[a], js, [last[j] for j in js]))

        def cost(calls):
            return sum(b * len(js) + full for b, js, _ in calls)

        return deferred if cost(deferred) < cost(aligned) else aligned

    def _schedule(self, calls: list, steps: list, offsets: list) -> list:
        """[(b, js, ss, sample-index rows, weight rows)]: ``calls`` split into chunks of
        at most ``client_chunk`` clients, with every client's minibatch padded to b."""
        out = []
        chunk = self.cfg.client_chunk or max(len(js) for _, js, _ in calls)
        for b, js_all, ss_all in calls:
            for i in range(0, len(js_all), chunk):
                js, ss = js_all[i:i + chunk], ss_all[i:i + chunk]
                rows, wrows = [], []
                for j, s in zip(js, ss):
                    li = offsets[j] + steps[j][s][1]
                    n = len(li)
                    rows.append(np.concatenate([li, np.full(b - n, li[0])]))
                    wrows.append(np.concatenate([np.ones(n), np.zeros(b - n)]))
                out.append((b, js, ss, rows, wrows))
        return out

    def train_many(self, starts: list, xs: torch.Tensor, ys: torch.Tensor,
                   offsets: list, sizes: list, cids: list, r: int) -> list:
        """Train K clients at once. ``xs``/``ys``: all clients' training data
        concatenated; client j's samples are ``offsets[j] : offsets[j] + sizes[j]``."""
        cfg, dev = self.cfg, xs.device
        K = len(starts)
        steps = [client_steps(n, cfg, r, c) for n, c in zip(sizes, cids)]
        calls = self._plan(steps)
        # clients stacked by how many calls in a row, from the first, they take part in:
        # each of those calls then trains a leading range of the stacks (views, updated
        # in place) instead of a gathered copy
        lead = [0] * K
        for c, (_, js, _) in enumerate(calls):
            for j in js:
                lead[j] += lead[j] == c
        order = sorted(range(K), key=lambda j: -lead[j])
        at = {j: i for i, j in enumerate(order)}
        renamed = []
        for b, js, ss in calls:  # the same calls in stack positions, ascending
            pairs = sorted((at[j], s) for j, s in zip(js, ss))
            renamed.append((b, [i for i, _ in pairs], [s for _, s in pairs]))
        calls = renamed
        starts, steps = [starts[j] for j in order], [steps[j] for j in order]
        offsets, cids = [offsets[j] for j in order], [cids[j] for j in order]
        P = {k: torch.stack([s[k].detach() for s in starts]) for k in self.pkeys}
        B = {k: torch.stack([s[k].detach() for s in starts]) for k in self.bkeys}
        M = {k: torch.zeros_like(v) for k, v in P.items()} if cfg.momentum else None
        ctxs = [self.alg.regularizer_context(s, c, r) for s, c in zip(starts, cids)]
        C = None if ctxs[0] is None else {k: torch.stack([c[k] for c in ctxs]) for k in ctxs[0]}
        sched = self._schedule(calls, steps, offsets)
        # every index and weight of the round in one transfer
        all_idx = torch.as_tensor(np.concatenate([np.concatenate(g[3]) for g in sched]),
                                  device=dev)
        all_w = torch.as_tensor(np.concatenate([np.concatenate(g[4]) for g in sched]),
                                dtype=xs.dtype if xs.is_floating_point() else torch.float32,
                                device=dev)
        js_cache = {}
        scale = None  # dict name -> (K, ...) tensor, or None
        last_g = None
        pos = 0
        for b, js, ss, rows, _ in sched:
            n = len(js) * b
            idx, w = all_idx[pos:pos + n], all_w[pos:pos + n].reshape(len(js), b)
            pos += n
            if self.use_lr_hook:
                for j, s in zip(js, ss):
                    e = steps[j][s][0]
                    if s == 0 or steps[j][s - 1][0] != e:
                        scale = self._set_scale_row(scale, P, j, cids[j], r, e, last_g)
            x = xs[idx].reshape(len(js), b, *xs.shape[1:])
            y = ys[idx].reshape(len(js), b, *ys.shape[1:])
            lo, hi = js[0], js[-1] + 1
            if hi - lo == len(js):  # a range of the stacks: views, updated in place
                jt = None
                part = lambda d: None if d is None else {k: v[lo:hi]  # noqa: E731
                                                         for k, v in d.items()}
            else:
                jt = js_cache.get(tuple(js))
                if jt is None:
                    jt = js_cache[tuple(js)] = torch.as_tensor(js, device=dev)
                part = lambda d: None if d is None else {k: v.index_select(0, jt)  # noqa: E731
                                                         for k, v in d.items()}
            Pg, Bg, Mg, Cg = part(P), part(B), part(M), part(C)
            g = self._batched_grads(Pg, Bg, x, y, w, Cg)
            for k in self.pkeys:
                lr = cfg.lr
                if scale is not None and k in scale:
                    lr = cfg.lr * (scale[k][lo:hi] if jt is None else scale[k].index_select(0, jt))
                _sgd_(Pg[k], g[k], None if Mg is None else Mg[k], lr, cfg)
                if jt is not None:
                    P[k].index_copy_(0, jt, Pg[k])
                    if M is not None:
                        M[k].index_copy_(0, jt, Mg[k])
            if jt is not None:
                for k in self.bkeys:
                    B[k].index_copy_(0, jt, Bg[k])
            if self.use_lr_hook:
                if last_g is None:
                    last_g = {k: torch.zeros_like(v) for k, v in P.items()}
                for k in self.pkeys:
                    if jt is None:
                        last_g[k][lo:hi] = g[k]
                    else:
                        last_g[k].index_copy_(0, jt, g[k])
        out = [None] * K
        for i, j in enumerate(order):
            out[j] = {**{k: P[k][i] for k in self.pkeys}, **{k: B[k][i] for k in self.bkeys}}
        return out

    def _batched_grads(self, P, B, x, y, w, C):
        """name -> (K, ...) gradients of each client's loss (+ regularizer)."""
        if self.chain is None:
            if C is None:
                return self._vgrad_noreg(P, B, x, y, w, None)
            return self._vgrad(P, B, x, y, w, C)
        g = self.chain.grads(P, x, y, w)
        if C is not None:
            reg = self._vgrad_reg(P, C)
            g = {k: g[k] + reg[k] for k in g}
        return g

    def _set_scale_row(self, scale, P, j, cid, r, epoch, last_g):
        params_j = {k: v[j] for k, v in P.items()}
        grads_j = None if last_g is None else {k: v[j] for k, v in last_g.items()}
        sc = self.alg.param_lr_scale(params_j, cid, r, epoch, grads_j)
        if sc is None and scale is None:
            return None
        if scale is None:
            scale = {}
        K = next(iter(P.values())).shape[0]
        for k in self.pkeys:
            v = 1.0 if sc is None or k not in sc else sc[k]
            t = torch.as_tensor(v, dtype=P[k].dtype, device=P[k].device)
            if k not in scale:
                scale[k] = torch.ones((K,) + (1,) * (P[k].dim() - 1), dtype=P[k].dtype,
                                      device=P[k].device)
            if t.dim() > 0 and scale[k].shape[1:] != P[k].shape[1:]:
                scale[k] = scale[k].expand_as(P[k]).clone()
            scale[k][j] = t.expand(scale[k].shape[1:]) if t.dim() > 0 else t
        return scale


# ----------------------------------------------------------------------------- the loop

def _rng_fork_devices(device: str) -> list:
    d = torch.device(device)
    if d.type == "cuda":
        return [d.index if d.index is not None else torch.cuda.current_device()]
    return []


def run_federated(model_fn: Callable[[], nn.Module], fed: FederatedData, algorithm: Algorithm,
                  config: FLConfig, reference_round: Optional[int] = None,
                  checkpoint: Optional[str] = None, checkpoint_every: int = 5) -> History:
    """Run ``config.rounds`` rounds of ``algorithm`` on ``fed``; see the module docstring.

    Args:
        model_fn: builds the model (called once, under ``torch.manual_seed(seed)``).
        fed: the federated data (moved to ``config.device`` here).
        algorithm: hooks; ``Algorithm()`` is FedAvg.
        config: an :class:`FLConfig`.
        reference_round: record the per-layer cosine to the global weights at the end
            of this round (0 = the initial weights); None to skip.
        checkpoint: a file path; every ``checkpoint_every`` rounds the whole run state
            (global and client states, metrics so far, every RNG, the algorithm's
            ``state_dict``) is saved there atomically, and a run started with an existing
            checkpoint of the same config resumes after its round. A killed run thus
            loses at most ``checkpoint_every`` rounds; the resumed run gives the same
            numbers as an uninterrupted one (tested). The file is removed at the end.
    """
    if torch.device(config.device).type == "cpu":
        keep_freed_memory()  # no page faults for recycled activations (alloc.py)
    with torch.random.fork_rng(devices=_rng_fork_devices(config.device)), \
            _deterministic_cudnn(config.device):
        torch.manual_seed(config.seed)
        return _run(model_fn, fed, algorithm, config, reference_round, checkpoint,
                    max(1, int(checkpoint_every)))


_ROUND_CALLBACK: contextvars.ContextVar = contextvars.ContextVar("audit_round_callback",
                                                                 default=None)


@contextlib.contextmanager
def on_rounds(fn: Callable[[int, int], None]):
    """Within this context, ``run_federated`` calls ``fn(round, rounds)`` after every
    round (the runner shows it beside its progress bar). Nested contexts replace it."""
    token = _ROUND_CALLBACK.set(fn)
    try:
        yield
    finally:
        _ROUND_CALLBACK.reset(token)


@contextlib.contextmanager
def _deterministic_cudnn(device: str):
    """On CUDA, cuDNN picks deterministic kernels (no autotuning) for the run, so the same
    seed gives the same numbers on the same GPU; the caller's settings are restored."""
    if torch.device(device).type != "cuda":
        yield
        return
    cudnn = torch.backends.cudnn
    old = cudnn.deterministic, cudnn.benchmark
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    finally:
        cudnn.deterministic, cudnn.benchmark = old


def save_atomic(path: str, payload: dict) -> None:
    """``torch.save`` to a temporary file, then rename: a kill mid-write keeps the old file."""
    import os

    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: a kill during the write keeps the previous one


def _load_checkpoint(path: str, cfg: FLConfig, alg_name: str) -> Optional[dict]:
    import os

    if not path or not os.path.exists(path):
        return None
    try:
        payload = torch.load(path, map_location=cfg.device, weights_only=True)
    except Exception as exc:  # a corrupt checkpoint is reported and ignored
        import warnings

        warnings.warn(f"ignoring unreadable checkpoint {path} ({exc})", stacklevel=3)
        return None
    if payload.get("config") != asdict(cfg) or payload.get("algorithm") != alg_name:
        return None  # written by another run: start afresh
    return payload


def _run(model_fn, fed: FederatedData, alg: Algorithm, cfg: FLConfig, reference_round,
         checkpoint=None, checkpoint_every=5):
    t0 = time.perf_counter()
    dev = torch.device(cfg.device)
    model = model_fn().to(dev)
    model.train()
    fed = fed.to(dev)
    alg.setup(model, fed, cfg)
    trainer = _Trainer(model, alg, cfg)
    global_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    n_clients = fed.n_clients
    client_states = {k: alg.init_client_state(k, global_state) for k in range(n_clients)}
    sample_rng = np.random.default_rng([cfg.seed, 1])
    server_rng = np.random.default_rng([cfg.seed, 3])
    layers = layer_names(model)

    # all clients' training data concatenated (fast path indexes into it)
    xs = torch.cat([c.x_train for c in fed.clients])
    ys = torch.cat([c.y_train for c in fed.clients])
    sizes = [len(c.y_train) for c in fed.clients]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    rec = defaultdict(list)
    reference = {k: v.clone() for k, v in global_state.items()} if reference_round == 0 else None

    def do_eval(r):
        acc, loss = evaluate(model, global_state, fed.x_test, fed.y_test, cfg.eval_batch_size)
        rec["rounds"].append(r)
        rec["test_acc"].append(acc)
        rec["test_loss"].append(loss)
        pa, pl, pv = [], [], []
        if cfg.eval_personal or cfg.eval_val:
            for k, c in enumerate(fed.clients):
                st = alg.personal_state(global_state, client_states[k], k, r)
                if cfg.eval_personal:
                    a, l = evaluate(model, st, c.x_test, c.y_test, cfg.eval_batch_size)
                    pa.append(a)
                    pl.append(l)
                if cfg.eval_val:
                    pv.append(evaluate(model, st, c.x_val, c.y_val, cfg.eval_batch_size)[0])
        rec["personal_acc"].append(float(np.nanmean(pa)) if pa else float("nan"))
        rec["personal_loss"].append(float(np.nanmean(pl)) if pl else float("nan"))
        rec["client_acc"].append(pa)
        rec["val_acc"].append(float(np.nanmean(pv)) if pv else float("nan"))
        if cfg.layer_metrics:
            ref = reference if reference_round is not None and r >= reference_round else None
            nrm, zf, cs = layer_stats(model, global_state, ref, layers)
        else:
            nrm, zf, cs = {}, {}, {}
        rec["layer_norm"].append(nrm)
        rec["layer_zero_frac"].append(zf)
        rec["layer_cos_ref"].append(cs)

    first_round = 1
    resumed = _load_checkpoint(checkpoint, cfg, alg.name) if checkpoint else None
    if resumed is not None:
        first_round = int(resumed["round"]) + 1
        global_state = resumed["global_state"]
        client_states = resumed["client_states"]
        reference = resumed["reference"]
        sample_rng.bit_generator.state = resumed["sample_rng"]
        server_rng.bit_generator.state = resumed["server_rng"]
        torch.set_rng_state(resumed["torch_rng"].cpu())
        if dev.type == "cuda" and resumed["cuda_rng"].numel():
            torch.cuda.set_rng_state(resumed["cuda_rng"].cpu(), dev)
        alg.load_state_dict(resumed["algorithm_state"])
        for k, v in resumed["rec"].items():
            rec[k] = list(v)
    elif cfg.eval_init:
        do_eval(0)
    for r in range(first_round, cfg.rounds + 1):
        if cfg.clients_per_round is None or cfg.clients_per_round >= n_clients:
            ids = list(range(n_clients))
        else:
            ids = sorted(sample_rng.choice(n_clients, cfg.clients_per_round,
                                           replace=False).tolist())
        starts = [alg.client_init(alg.broadcast(global_state, k, r), client_states[k], k, r)
                  for k in ids]
        if cfg.fast and len(ids) > 1:
            afters = trainer.train_many(starts, xs, ys, [offsets[k] for k in ids],
                                        [sizes[k] for k in ids], ids, r)
        else:
            afters = [trainer.train_one(s, fed.clients[k].x_train, fed.clients[k].y_train, k, r)
                      for s, k in zip(starts, ids)]
        uploads = []
        for k, s, a in zip(ids, starts, afters):
            client_states[k] = alg.update_client_state(client_states[k], s, a, k, r)
            uploads.append(alg.upload(s, a, k, r, n_samples=sizes[k]))
        prev = global_state
        global_state = alg.aggregate(prev, uploads, r)
        global_state = alg.server_post(global_state, r, server_rng)
        rec["algo"].append({k: float(v) for k, v in
                            alg.round_metrics(r, global_state, prev, uploads, ids).items()})
        if reference_round is not None and r == reference_round:
            reference = {k: v.clone() for k, v in global_state.items()}
        if r % cfg.eval_every == 0 or r == cfg.rounds:
            do_eval(r)
        if checkpoint and r % checkpoint_every == 0 and r < cfg.rounds:
            save_atomic(checkpoint, {
                "round": r, "config": asdict(cfg), "algorithm": alg.name,
                "global_state": global_state, "client_states": client_states,
                "reference": reference, "rec": dict(rec),
                "sample_rng": sample_rng.bit_generator.state,
                "server_rng": server_rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": (torch.cuda.get_rng_state(dev) if dev.type == "cuda"
                             else torch.empty(0, dtype=torch.uint8)),
                "algorithm_state": alg.state_dict()})
        callback = _ROUND_CALLBACK.get()
        if callback is not None:
            callback(r, cfg.rounds)
    if checkpoint:
        import os

        if os.path.exists(checkpoint):
            os.remove(checkpoint)  # finished: the result is cached by the runner

    keys = ["rounds", "test_acc", "test_loss", "personal_acc", "personal_loss", "client_acc",
            "val_acc", "layer_norm", "layer_zero_frac", "layer_cos_ref", "algo"]
    return History(**{k: rec[k] for k in keys}, seconds=time.perf_counter() - t0,
                   config=asdict(cfg), algorithm=alg.name, reference_round=reference_round,
                   final_state=global_state, client_states=client_states)
