"""The algorithm hooks of the round loop (:class:`Algorithm`: FedAvg, every hook
overridable alone) and two small baselines built from them, :class:`FedProx` and
:class:`FedBN`. The order in which :func:`audit.fl.engine.run_federated` calls the hooks
is in that module's docstring.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from .aggregate import Rule, State, Upload, chain, fedavg, keep_local, weighted_mean
from .config import FLConfig
from .data import FederatedData
from .models import is_norm_key

__all__ = ["Algorithm", "ClientUpdate", "FedBN", "FedProx", "ScaleRequest", "batched_override"]


class ScaleRequest(NamedTuple):
    """One client's call of :meth:`Algorithm.param_lr_scale`, as the batched path
    gathers them (:meth:`Algorithm.param_lr_scale_batch`)."""

    params: State
    client_id: int
    epoch: int
    last_grads: Optional[State]


class ClientUpdate(NamedTuple):
    """One client's call of :meth:`Algorithm.update_client_state`, as the engine gathers
    them for :meth:`Algorithm.update_client_state_batch`."""

    client_state: Any
    start: State
    after: State
    client_id: int


def batched_override(alg: "Algorithm", single: str, batch: str):
    """``alg``'s own override of the batched hook ``batch`` (bound), or None: where the
    class keeps :class:`Algorithm`'s default, or where the one-client hook ``single`` it
    uses comes from a class before the one whose batched override it uses, in the
    method resolution order (a subclass or a mixin with a newer rule: the batched
    override answers for its own class's rule, not the newer one)."""
    mro = type(alg).__mro__
    one = next(c for c in mro if single in vars(c))
    many = next(c for c in mro if batch in vars(c))
    if many is Algorithm or mro.index(one) < mro.index(many):
        return None
    return getattr(alg, batch)


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

    def on_round_start(self, round: int, sampled_client_ids: Sequence[int]) -> None:
        """Called once per round, after the clients are sampled and before any of them
        receives the model or trains: ``sampled_client_ids`` are the round's clients,
        sorted (a tuple). A client-side claim decides here what the round's clients do
        (which of them straggle, drop out, get a smaller budget), from the round and its
        own seed, so the choice is the same on both training paths. Anything it keeps
        on ``self`` beyond the round belongs in :meth:`state_dict`. Default: nothing."""

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

    def param_lr_scale_batch(self, requests: Sequence[ScaleRequest],
                             round: int) -> list:
        """:meth:`param_lr_scale` for several clients at once: the answers, in the order
        of ``requests``. The batched path calls this once for the clients of one batched
        call that start an epoch at that step (at a round's first step: all of them, or
        each group that shares a call: one minibatch size with batch norm, one client
        chunk), so an algorithm whose multipliers need a forward and backward pass of
        its own (a gradient probe) can run one batched pass for those clients instead of
        one per client. The sequential path asks with one request at a time. Default:
        :meth:`param_lr_scale` for each request in turn; an override must answer what
        :meth:`param_lr_scale` would, up to rounding. A subclass that overrides
        :meth:`param_lr_scale` below the class that overrides this method gets the
        default back (the engine calls its :meth:`param_lr_scale` request by request),
        so the batched override cannot hide the newer rule."""
        return [self.param_lr_scale(q.params, q.client_id, round, q.epoch, q.last_grads)
                for q in requests]

    def regularizer_context(self, start_state: State, client_id: int,
                            round: int) -> Optional[Mapping[str, torch.Tensor]]:
        """Tensors the regularizer needs for this client (e.g. the anchor weights);
        None (the default) disables the regularizer."""
        return None

    def regularizer(self, params: Mapping[str, torch.Tensor],
                    context: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Extra loss term; pure torch code (it runs under ``vmap`` in the fast path)."""
        raise NotImplementedError

    def regularizer_grad(self, params: Mapping[str, torch.Tensor],
                         context: Mapping[str, torch.Tensor]) -> dict:
        """The gradient of :meth:`regularizer` with respect to every tensor of
        ``params``, written out, for the grouped chain's path: the engine calls it with
        the clients' stacked tensors (a leading client dimension on ``params`` and
        ``context`` alike), so it must act on each client's slice alone (elementwise,
        as the gradient of a sum of squares does). Not overridden: the engine takes
        ``vmap(grad(regularizer))``. An override must equal that up to rounding; as with
        the batched hooks, a subclass that overrides :meth:`regularizer` below the class
        with this override gets ``vmap`` back."""
        raise NotImplementedError

    def local_steps(self, client_id: int, round: int, planned: int) -> Optional[int]:
        """How many of its ``planned`` minibatch steps this client takes in this round
        (its work budget). ``planned`` counts the steps of ``local_epochs`` epochs in the
        engine's order (``client_steps``); a budget k < planned keeps the first k of
        them, cutting an epoch short if need be, on both training paths, and the later
        minibatches are never computed. None (the default): every planned step; a
        number above ``planned`` means the same. 0: the client trains not at all, so
        its ``after`` is its start state; :meth:`upload` then decides whether that
        unchanged model is sent (the default sends it) or the client counts as a
        straggler whose upload is dropped (return None there). Called once per sampled
        client and round, in ascending client order, after :meth:`client_init`."""
        return None

    def update_client_state(self, client_state: Any, start: State, after: State,
                            client_id: int, round: int) -> Any:
        """Persistent state after local training. Default: unchanged."""
        return client_state

    def update_client_state_batch(self, updates: Sequence[ClientUpdate],
                                  round: int) -> list:
        """:meth:`update_client_state` for all the round's clients at once: the new
        states, in the order of ``updates`` (ascending client ids), so that work the
        hook does per client (an evaluation of the trained model) can run as one
        batched call. An algorithm that overrides it gets the round's end in two
        passes: this, then :meth:`upload` client by client; one that does not keeps the
        one-client hooks interleaved (update, upload, next client). An override must
        answer what :meth:`update_client_state` would, up to rounding. As with
        :meth:`param_lr_scale_batch`, a subclass that overrides the one-client hook
        below the class with the batched override gets the default back."""
        return [self.update_client_state(u.client_state, u.start, u.after, u.client_id,
                                         round) for u in updates]

    def upload(self, before: State, after: State, client_id: int, round: int,
               n_samples: int) -> Optional[Upload]:
        """The client's message. Default: full state, no mask, weight n_k.

        None drops it: the server never sees this client this round (a straggler past
        the deadline, a client that dropped out). Aggregation, ``round_metrics`` and the
        weights see only the uploads that arrived; a round in which every upload is
        dropped keeps the previous global model (the engine calls neither
        :meth:`aggregate` nor :meth:`server_post` then). ``update_client_state`` has
        already run: what the client learnt stays with it."""
        return Upload(after, None, float(n_samples))

    # -- server side -----------------------------------------------------------------
    def aggregate(self, prev: State, uploads: Sequence[Upload], round: int) -> dict:
        """New global state from the uploads that arrived (never an empty list: a round
        without uploads keeps ``prev``). Default: ``self.rule`` or FedAvg's weighted
        mean."""
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
        """Algorithm-specific metrics (name -> float), every round. ``uploads`` are the
        uploads that arrived and ``client_ids`` their senders, in the same order (the
        sampled clients when none is dropped); both may be empty. Default: none."""
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

    def regularizer_grad(self, params, context):
        return {k: self.mu * (params[k] - context[k]) for k in params}


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
