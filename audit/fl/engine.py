"""The federated round loop: one template, hooks for algorithms, two training paths.

This module is the round loop (``run_federated``, progress, checkpoint resume); the
pieces it runs live beside it, and every name below is importable from here:

- ``audit.fl.config``: ``FLConfig`` and its mixed precision (``amp``);
- ``audit.fl.hooks``: the ``Algorithm`` hooks, ``FedProx`` and ``FedBN``;
- ``audit.fl.training``: local SGD on the sequential and batched paths (``_Trainer``
  and its planner), ``client_steps``, ``batched_path``;
- ``audit.fl.evaluation``: ``evaluate``, ``layer_stats`` and the run's ``History``;
- ``audit.fl.checkpoint``: ``save_atomic`` and ``resumable`` (the resume check of a saved
  run state).

Public API (stable; falsifiers import these names)
--------------------------------------------------
- ``FLConfig`` (frozen): rounds, clients_per_round (None = all), local_epochs,
  batch_size, lr, momentum, weight_decay, seed, device, eval_every, fast, ...
- ``Algorithm``: base class; every hook defaults to FedAvg and can be overridden
  alone (see its docstring for the call order and signatures).
- ``run_federated(model_fn, fed, algorithm, config, reference_round=None, checkpoint=None,
  checkpoint_every=5, on_round=None) -> History``
- ``History`` (frozen): per-round metric lists; ``to_dict()`` is JSON-serialisable.
- ``evaluate(model, state, x, y, batch_size=1024) -> (accuracy, loss)``: pure
  evaluation of a state dict (token accuracy / mean CE for language models).
- ``layer_stats(model, state, reference=None) -> (norm, zero_frac, cos)``: per-layer
  L2 norm, exact-zero fraction and cosine to ``reference`` (dicts keyed by layer).
- ``FedProx``, ``FedBN``: two small baselines built from the hooks.
- ``save_atomic(path, payload)``: ``torch.save`` that never leaves a half-written file
  (checkpoints; GENE-FL's finished clusters).
- ``on_rounds(fn)``: a context manager; inside it every ``run_federated`` calls
  ``fn(round, rounds)`` after each round (progress of long runs), unless the call has its
  own ``on_round`` (the runner's progress, passed by units from ``RunContext.on_round``).
- ``batched_path(model, config) -> "chain" | "stacked" | "vmap" | "sequential"``: which
  training path a run takes (reports and the bench record it).
- ``client_steps(n, config, round, client_id) -> [(epoch, indices), ...]``: the
  minibatch order of one client in one round (algorithms that probe with the same
  batches use it); ``budgeted_steps(n, config, round, client_id, algorithm)``: that
  order cut to the client's budget (``Algorithm.local_steps``), the steps it takes.

One round r (1-based) of ``run_federated``:

    ids      = sampled clients (all if clients_per_round is None), sorted
    algorithm.on_round_start(r, tuple(ids))
    for k in ids:
        recv_k  = algorithm.broadcast(global, k, r)
        start_k = algorithm.client_init(recv_k, client_state[k], k, r)
        steps_k = client_steps(n_k, config, r, k)[:algorithm.local_steps(k, r, planned)]
        after_k = local SGD from start_k over steps_k (hooks: param_lr_scale, regularizer)
        client_state[k] = algorithm.update_client_state(client_state[k], start_k, after_k, k, r)
        up_k    = algorithm.upload(start_k, after_k, k, r, n_samples=n_k)  # None: dropped
    arrived = [up_k that are not None], senders = their k
    if arrived:
        global = algorithm.aggregate(global, arrived, r)
        global = algorithm.server_post(global, r, server_rng)
    (else the round keeps the previous global model: nothing arrived to aggregate)
    metrics: algorithm.round_metrics(r, global, prev, arrived, senders) every round;
    evaluation every eval_every rounds

Client-side hooks, in short: ``on_round_start`` sees the sampled clients before any
trains; ``local_steps`` is a client's work budget (None: every planned step; k: the
first k minibatch steps of the planned order, cut inside an epoch if need be, on both
paths; 0: no training, ``after`` is the start state); ``upload`` returning None drops
the client's message. An algorithm that overrides ``update_client_state_batch`` gets
the round's updates in one call (all clients), then the uploads client by client.
With the grouped chain (``batched_path`` "chain"), the per-client personal evaluation
runs a chunk of clients at a time through one grouped forward (``evaluate_many``).
With every hook at its default a run is the same, bit for bit, as before these hooks
existed (tested).

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
  workload), and for the small Transformer LM one autograd pass over the stacked
  weights (``audit.fl.stacked``; 1.7x faster than vmap on FedTLU's smoke model). Which
  clients share a call is planned per round (``_Trainer._plan``
  in ``audit.fl.training``).
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
import time
from collections import defaultdict
from dataclasses import asdict
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn as nn

from .alloc import keep_freed_memory
from .checkpoint import resumable, save_atomic
from .config import AMP_MODES, FLConfig
from .data import FederatedData
from .evaluation import History, evaluate, evaluate_many, layer_stats
from .hooks import Algorithm, ClientUpdate, FedBN, FedProx, batched_override
from .models import layer_names
from .training import _Trainer, batched_path, budgeted_steps, client_steps

__all__ = [
    "AMP_MODES", "Algorithm", "FLConfig", "FedBN", "FedProx", "History", "batched_path",
    "budgeted_steps", "client_steps", "evaluate", "layer_stats", "on_rounds", "run_federated",
    "save_atomic",
]


def _rng_fork_devices(device: str) -> list:
    d = torch.device(device)
    if d.type == "cuda":
        return [d.index if d.index is not None else torch.cuda.current_device()]
    return []


def run_federated(model_fn: Callable[[], nn.Module], fed: FederatedData, algorithm: Algorithm,
                  config: FLConfig, reference_round: Optional[int] = None,
                  checkpoint: Optional[str] = None, checkpoint_every: int = 5,
                  on_round: Optional[Callable[[int, int], None]] = None) -> History:
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
        on_round: progress, called as ``on_round(round, rounds)`` after every round (the
            runner passes ``RunContext.on_round``); None: the function set by
            :func:`on_rounds`, if any.
    """
    if torch.device(config.device).type == "cpu":
        keep_freed_memory()  # no page faults for recycled activations (alloc.py)
    with torch.random.fork_rng(devices=_rng_fork_devices(config.device)), \
            _deterministic_cudnn(config.device):
        torch.manual_seed(config.seed)
        return _run(model_fn, fed, algorithm, config, reference_round, checkpoint,
                    max(1, int(checkpoint_every)), on_round)


_ROUND_CALLBACK: contextvars.ContextVar = contextvars.ContextVar("audit_round_callback",
                                                                 default=None)


@contextlib.contextmanager
def on_rounds(fn: Callable[[int, int], None]):
    """Within this context, ``run_federated`` calls ``fn(round, rounds)`` after every
    round, unless the call is given its own ``on_round``. Nested contexts replace it."""
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


def _run(model_fn, fed: FederatedData, alg: Algorithm, cfg: FLConfig, reference_round,
         checkpoint=None, checkpoint_every=5, on_round=None):
    t0 = time.perf_counter()
    dev = torch.device(cfg.device)
    model = model_fn().to(dev)
    model.train()
    fed = fed.to(dev)
    alg.setup(model, fed, cfg)
    trainer = _Trainer(model, alg, cfg)
    update_batch = batched_override(alg, "update_client_state", "update_client_state_batch")
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
        if (cfg.eval_personal or cfg.eval_val) and hasattr(trainer.chain, "logits"):
            # the chain path: a chunk of clients' personal states in one grouped forward
            # (the same numbers up to rounding; memory: one chunk of states at a time)
            step = cfg.client_chunk or n_clients
            for c0 in range(0, n_clients, step):
                ks = range(c0, min(n_clients, c0 + step))
                sts = [alg.personal_state(global_state, client_states[k], k, r) for k in ks]
                cs = [fed.clients[k] for k in ks]
                if cfg.eval_personal:
                    res = evaluate_many(model, sts, [(c.x_test, c.y_test) for c in cs],
                                        cfg.eval_batch_size, trainer.chain)
                    pa += [a for a, _ in res]
                    pl += [l for _, l in res]
                if cfg.eval_val:
                    pv += [a for a, _ in evaluate_many(
                        model, sts, [(c.x_val, c.y_val) for c in cs], cfg.eval_batch_size,
                        trainer.chain)]
        elif cfg.eval_personal or cfg.eval_val:
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
    resumed = resumable(checkpoint, cfg, alg, global_state, client_states, sample_rng,
                        server_rng, dev) if checkpoint else None
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
        alg.on_round_start(r, tuple(ids))
        starts = [alg.client_init(alg.broadcast(global_state, k, r), client_states[k], k, r)
                  for k in ids]
        if cfg.fast and len(ids) > 1:
            afters = trainer.train_many(starts, xs, ys, [offsets[k] for k in ids],
                                        [sizes[k] for k in ids], ids, r)
        else:
            afters = [trainer.train_one(s, fed.clients[k].x_train, fed.clients[k].y_train, k, r)
                      for s, k in zip(starts, ids)]
        uploads, senders = [], []
        if update_batch is not None:  # the round's updates in one call, then the uploads
            new = list(update_batch([ClientUpdate(client_states[k], s, a, k)
                                     for k, s, a in zip(ids, starts, afters)], r))
            if len(new) != len(ids):
                raise ValueError(f"{type(alg).__name__}.update_client_state_batch answered "
                                 f"{len(new)} updates of {len(ids)}")
            for k, st in zip(ids, new):
                client_states[k] = st
        for k, s, a in zip(ids, starts, afters):
            if update_batch is None:
                client_states[k] = alg.update_client_state(client_states[k], s, a, k, r)
            up = alg.upload(s, a, k, r, n_samples=sizes[k])
            if up is not None:  # None: the upload is dropped (see Algorithm.upload)
                uploads.append(up)
                senders.append(k)
        prev = global_state
        if uploads:
            global_state = alg.aggregate(prev, uploads, r)
            global_state = alg.server_post(global_state, r, server_rng)
        else:  # every upload dropped: nothing to aggregate, the global model stays
            global_state = dict(prev)
        rec["algo"].append({k: float(v) for k, v in alg.round_metrics(
            r, global_state, prev, uploads, senders).items()})
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
        callback = on_round if on_round is not None else _ROUND_CALLBACK.get()
        if callback is not None:
            callback(r, cfg.rounds)
    if checkpoint:
        import contextlib
        import os

        # finished: the result is cached by the runner; another process that ran the same
        # unit at the same time (two sweeps, two test workers) may have removed it already
        # (a folder planted at its name is left: the run never read or wrote it)
        with contextlib.suppress(OSError):
            os.remove(checkpoint)

    keys = ["rounds", "test_acc", "test_loss", "personal_acc", "personal_loss", "client_acc",
            "val_acc", "layer_norm", "layer_zero_frac", "layer_cos_ref", "algo"]
    return History(**{k: rec[k] for k in keys}, seconds=time.perf_counter() - t0,
                   config=asdict(cfg), algorithm=alg.name, reference_round=reference_round,
                   final_state=global_state, client_states=client_states)
