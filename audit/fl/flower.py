"""The audited aggregation rules as Flower strategies, and the engine's clients as a
Flower ``ClientApp`` (needs the optional extra: ``pip install -e '.[flower]'``).

Nothing in the core package imports this module; it imports ``flwr`` (>= 1.42, the
Message API of ``flwr.serverapp`` / ``flwr.clientapp``) at the top.

Public API
----------
- ``RULES``: rule names -> what they are built from (``audit.fl.aggregate``'s pieces;
  the four masked ones are ``audit.fl.aggregate.MASKED_COMPOSITIONS``, the same objects
  FLAYER's server arms use):

      fedavg         chain(weighted_mean())
      literal        chain(weighted_mean())                 FLAYER Alg. 1 line 12 as printed
      carry-over     chain(weighted_mean(), carry_over())   needs masks
      selector-mean  chain(selector_mean())                 needs masks
      masked-delta   chain(masked_delta())                  needs masks
      fedbn          chain(weighted_mean(), keep_local(norm))   (``norm=`` a model or predicate)

- ``AuditStrategy(rule="fedavg", *, norm=None, needs_masks=None, **fedavg_kwargs)``: a
  subclass of ``flwr.serverapp.strategy.FedAvg`` whose ``aggregate_train`` applies the
  rule to the round's replies (``rule`` is a name of ``RULES`` or any
  ``audit.fl.aggregate.Rule``). Sampling, messages and metric averaging are Flower's
  FedAvg's. ``fraction_evaluate`` defaults to 0 (the audits evaluate centrally).
- ``client_app(model_fn, data_fn, config, algorithm=Algorithm) -> ClientApp``: every
  node runs the client side of an engine ``Algorithm`` (``client_init``, the engine's
  own sequential local SGD ``_Trainer.train_one``, ``update_client_state``, ``upload``)
  on partition ``node_config["partition-id"]`` of ``data_fn()``.
- ``server_app(strategy, model_fn, config, data_fn=None, num_nodes=None) ->
  (ServerApp, FlowerOutcome)``: starts from the engine's initial model (``model_fn()``
  under ``manual_seed(seed)``), waits until ``num_nodes`` nodes are connected (default:
  ``data_fn()``'s client count), runs ``config.rounds`` rounds of ``strategy`` and fills
  the outcome (final state, global test accuracy on ``data_fn()``'s test set, seconds,
  clients sampled per round).

  The wait matters: Flower's simulation registers its supernodes while the ServerApp
  already runs, and FedAvg sizes a round's sample from the nodes connected at that
  moment (at least ``min_train_nodes``, 2 by default). On a busy machine the first
  round could otherwise train 2 of 20 clients, and the run would silently differ from
  the engine's.
- ``simulate(...) -> FlowerOutcome``: the two above through ``flwr.simulation.run_simulation``.
- ``upload_content(upload, partition_id)`` / ``upload_of(content)``: the wire format.

Wire format (one reply ``RecordDict`` per client and round)
-----------------------------------------------------------
The server sends Flower FedAvg's ``{"arrays": ArrayRecord, "config": ConfigRecord}``
(``config["server-round"]``). A client replies with

    "arrays":  ArrayRecord   the upload's state (already masked, e.g. FLAYER's theta * M)
    "masks":   ArrayRecord   bool arrays, name -> selected coordinates; only when the
                             client selects (a name it omits counts as all selected)
    "metrics": MetricRecord  {"num-examples": the upload's weight n_k}
    "client":  ConfigRecord  {"partition-id": k, "server-round": r,
                              "received-sha256": digest of the global state it started from}

The masks are a second ArrayRecord of the same message, so they travel with the
parameters. (Flower's stock FedAvg refuses such a reply: it wants exactly one
ArrayRecord, so a masked upload cannot be averaged by it unnoticed.) Replies are
aggregated in the order of their partition ids, as the engine orders its clients.

Bad input raises ``ValueError`` with a one-line message: an unknown rule name; ``fedbn``
without ``norm``; a masked rule given a reply without masks; a reply without arrays or
weight. A client that failed (an error reply) raises ``RuntimeError`` at aggregation:
the audits need every sampled client.

Equality with the engine (``tests/test_flower.py``): with every client in every round
(``clients_per_round=None``), Flower's simulation gives the engine's final model. Each
client trains with the engine's own per-client function on the engine's minibatch order
(``client_steps(n, config, round, k)``), and the server applies the same rule to the
uploads in the same order. Differences: Flower samples clients with Python's ``random``
(the engine with its own generator), so partial participation picks other clients; the
client state starts from ``init_client_state(k, global)`` at a client's first round
(the engine calls it before round 1); it persists in the node's ``context.state``
(``torch.save`` bytes, loaded with ``weights_only=True``, as engine checkpoints).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Union

import torch
import torch.nn as nn
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from audit.fl.alloc import keep_freed_memory
from audit.fl.aggregate import (MASKED_COMPOSITIONS, Rule, State, Upload, chain, fedavg,
                                keep_local, weighted_mean)
from audit.fl.data import FederatedData
from audit.fl.engine import Algorithm, FLConfig, _Trainer, evaluate
from audit.fl.models import is_norm_key

__all__ = [
    "MASKED_RULES", "RULES", "AuditStrategy", "FlowerOutcome", "client_app", "initial_state",
    "server_app", "simulate", "upload_content", "upload_of",
]

ARRAYS, MASKS, METRICS, CLIENT = "arrays", "masks", "metrics", "client"
WEIGHT_KEY, PARTITION_KEY, ROUND_KEY = "num-examples", "partition-id", "server-round"
RECEIVED_KEY = "received-sha256"

# name -> rule; "fedbn" is built per model (its predicate), see AuditStrategy
RULES: dict[str, Optional[Rule]] = {"fedavg": fedavg(), **MASKED_COMPOSITIONS, "fedbn": None}
MASKED_RULES = ("carry-over", "selector-mean", "masked-delta")


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# ----------------------------------------------------------------------------- wire format
def _record(state: Mapping[str, torch.Tensor]) -> ArrayRecord:
    return ArrayRecord.from_torch_state_dict({k: v.detach().cpu() for k, v in state.items()})


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes of a state (order-independent)."""
    h = hashlib.sha256()
    for k in sorted(state):
        v = state[k].detach().cpu().contiguous()
        h.update(f"{k}|{v.dtype}|{tuple(v.shape)}|".encode())
        h.update(v.numpy().tobytes())
    return h.hexdigest()


def upload_content(upload: Upload, partition_id: int, server_round: Optional[int] = None,
                   received: Optional[str] = None) -> RecordDict:
    """An engine ``Upload`` as a reply's ``RecordDict`` (see the module docstring)."""
    if upload is None:
        raise ValueError("the algorithm's upload returned None (a dropped message), which "
                         "the Flower path does not support: every sampled client replies; "
                         "run it on the engine (run_federated)")
    client = {PARTITION_KEY: int(partition_id)}
    if server_round is not None:
        client[ROUND_KEY] = int(server_round)
    if received is not None:
        client[RECEIVED_KEY] = received
    content = RecordDict({
        ARRAYS: _record(upload.state),
        METRICS: MetricRecord({WEIGHT_KEY: float(upload.weight)}),
        CLIENT: ConfigRecord(client),
    })
    if upload.mask is not None:
        content[MASKS] = _record({k: m.bool() for k, m in upload.mask.items()})
    return content


def upload_of(content: RecordDict, weight_key: str = WEIGHT_KEY,
              arrays_key: str = ARRAYS) -> Upload:
    """The ``Upload`` a reply carries (inverse of :func:`upload_content`)."""
    if arrays_key not in content.array_records:
        raise ValueError(f"a reply has no ArrayRecord {arrays_key!r} "
                         f"(records: {sorted(content.keys())})")
    metrics = [m for m in content.metric_records.values() if weight_key in m]
    if not metrics:
        raise ValueError(f"a reply has no MetricRecord with its weight {weight_key!r}")
    state = content.array_records[arrays_key].to_torch_state_dict()
    mask = None
    if MASKS in content.array_records:
        mask = {k: v.bool() for k, v in content.array_records[MASKS].to_torch_state_dict().items()}
    return Upload(state, mask, float(metrics[0][weight_key]))


def _partition(content: RecordDict) -> Optional[int]:
    rec = content.config_records.get(CLIENT)
    return None if rec is None or PARTITION_KEY not in rec else int(rec[PARTITION_KEY])


# ----------------------------------------------------------------------------- strategy
class AuditStrategy(FedAvg):
    """Flower's FedAvg with its aggregation replaced by an ``audit.fl.aggregate`` rule.

    Args:
        rule: a name of :data:`RULES` or a ``Rule`` ``(prev, uploads) -> state``.
        norm: for ``"fedbn"``: the model (its normalisation layers stay local) or a
            predicate on state-dict keys.
        needs_masks: refuse replies without masks (default: True for the rules of
            :data:`MASKED_RULES`, False otherwise).
        **kwargs: ``flwr.serverapp.strategy.FedAvg``'s (``fraction_train``,
            ``min_available_nodes``, ...); ``fraction_evaluate`` defaults to 0.
    """

    def __init__(self, rule: Union[str, Rule] = "fedavg", *,
                 norm: Union[nn.Module, Callable[[str], bool], None] = None,
                 needs_masks: Optional[bool] = None, **kwargs):
        if isinstance(rule, str):
            if rule not in RULES:
                raise ValueError(f"unknown aggregation rule {rule!r}; rules: "
                                 f"{', '.join(RULES)}")
            self.rule_name = rule
            if rule == "fedbn":
                if norm is None:
                    raise ValueError("rule 'fedbn' needs norm= (the model, or a predicate "
                                     "on state-dict keys for its normalisation layers)")
                pred = is_norm_key(norm) if isinstance(norm, nn.Module) else norm
                self.rule = chain(weighted_mean(), keep_local(pred))
            else:
                self.rule = RULES[rule]
            default_masks = rule in MASKED_RULES
        elif callable(rule):
            self.rule_name, self.rule, default_masks = getattr(rule, "__name__", "rule"), rule, False
        else:
            raise ValueError(f"rule must be a name ({', '.join(RULES)}) or a callable, "
                             f"not {type(rule).__name__}")
        self.needs_masks = default_masks if needs_masks is None else bool(needs_masks)
        kwargs.setdefault("fraction_evaluate", 0.0)
        super().__init__(**kwargs)
        self._prev: Optional[dict] = None
        self.sampled: dict[int, int] = {}  # server round -> clients sent a train message

    def configure_train(self, server_round, arrays, config, grid):
        """Flower FedAvg's, remembering the global state the round starts from."""
        self._prev = arrays.to_torch_state_dict()
        self._prev_digest = state_digest(self._prev)
        messages = list(super().configure_train(server_round, arrays, config, grid))
        self._sent = len(messages)
        self.sampled[server_round] = len(messages)
        return messages

    def uploads(self, server_round: int, replies) -> list[Upload]:
        """The replies as ``Upload``s in partition order, after the checks."""
        replies = list(replies)
        failed = [m for m in replies if m.has_error()]
        sent = getattr(self, "_sent", None)
        if sent is not None and len(replies) < sent:
            raise RuntimeError(f"only {len(replies)} of the {sent} sampled clients replied in "
                               f"round {server_round} (a Flower timeout?)")
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(replies)} clients failed in round "
                               f"{server_round}: {_one_line(failed[0].error.reason)}")
        contents = [m.content for m in replies]
        order = sorted(range(len(contents)), key=lambda i: (
            _partition(contents[i]) is None, _partition(contents[i]) or 0,
            replies[i].metadata.src_node_id))
        contents = [contents[i] for i in order]
        for c in contents:
            rec = c.config_records.get(CLIENT)
            if rec is not None and ROUND_KEY in rec and int(rec[ROUND_KEY]) != server_round:
                raise RuntimeError(f"a reply of round {int(rec[ROUND_KEY])} arrived in round "
                                   f"{server_round} (partition {_partition(c)})")
            sent_digest = getattr(self, "_prev_digest", None)
            if (rec is not None and RECEIVED_KEY in rec and sent_digest is not None
                    and rec[RECEIVED_KEY] != sent_digest):
                raise RuntimeError(f"partition {_partition(c)} trained in round {server_round} "
                                   f"from another model than the round's global one")
        if self.needs_masks:
            missing = [i for i, c in enumerate(contents) if MASKS not in c.array_records]
            if missing:
                who = ", ".join(str(_partition(contents[i])) for i in missing[:5])
                raise ValueError(f"rule {self.rule_name!r} needs each client's masks (an "
                                 f"ArrayRecord {MASKS!r} in its reply); {len(missing)} of "
                                 f"{len(contents)} replies in round {server_round} have none "
                                 f"(partition ids: {who})")
        return [upload_of(c, self.weighted_by_key, self.arrayrecord_key) for c in contents]

    def aggregate_train(self, server_round: int, replies):
        """The rule applied to (global state sent this round, uploads); metrics as
        Flower's FedAvg averages them (weighted by ``num-examples``)."""
        replies = list(replies)
        if not replies and not getattr(self, "_sent", 0):
            return None, None
        ups = self.uploads(server_round, replies)
        prev = self._prev
        if prev is None:
            raise ValueError("aggregate_train before configure_train: no global state "
                             "for this round")
        new = self.rule(prev, ups)
        metrics = self.train_metrics_aggr_fn([m.content for m in replies],
                                             self.weighted_by_key)
        return _record(new), metrics


# ----------------------------------------------------------------------------- client
def initial_state(model_fn: Callable[[], nn.Module], seed: int) -> dict:
    """The engine's initial global state: ``model_fn()`` under ``manual_seed(seed)``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_fn()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class _Worker:
    """One process's copy of the data, template model, algorithm and trainer."""

    def __init__(self, model_fn, data_fn, config: FLConfig, algorithm):
        self.cfg = dataclasses.replace(config, fast=False)  # the sequential reference
        dev = torch.device(self.cfg.device)
        if dev.type == "cpu":
            keep_freed_memory()  # as run_federated: no page faults for recycled activations
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.seed)
            self.model = model_fn().to(dev)
        self.model.train()
        self.fed = data_fn().to(dev)
        self.alg = algorithm()
        self.alg.setup(self.model, self.fed, self.cfg)
        self.trainer = _Trainer(self.model, self.alg, self.cfg)
        self.device = dev
        # one client at a time per process: the template model, swapped by
        # functional_call, and the algorithm are shared by every call in this process
        self.lock = threading.Lock()


_WORKERS: dict[str, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _state_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _worker(spec) -> _Worker:
    """This process's worker for ``spec`` (built on first use). Module-level, so that
    the pickled ClientApp refers to this module's cache instead of carrying a copy."""
    token = spec[0]
    with _WORKERS_LOCK:
        w = _WORKERS.get(token)
        if w is None:
            w = _WORKERS[token] = _Worker(*spec[1:])
    return w


def _client_state(w: _Worker, context: Context, k: int, received: State):
    saved = context.state.config_records.get("audit")
    if saved is None:
        return w.alg.init_client_state(k, received)
    return torch.load(io.BytesIO(saved["client-state"]), map_location=w.device,
                      weights_only=True)


def _received(w: _Worker, msg: Message) -> dict:
    return {key: v.to(w.device) for key, v in msg.content["arrays"].to_torch_state_dict().items()}


def _incoming(w, msg: Message, context: Context):
    """What every client call starts from: this node's partition ``k``, the server round
    ``r``, the state received (digest-checked) and the client's own carried state."""
    k = int(context.node_config[PARTITION_KEY])
    r = int(msg.content["config"]["server-round"])
    received = _received(w, msg)
    return k, r, received, _client_state(w, context, k, received)


def _train(spec, msg: Message, context: Context) -> Message:
    w = _worker(spec)
    with w.lock:
        k, r, received, cstate = _incoming(w, msg, context)
        start = w.alg.client_init(w.alg.broadcast(received, k, r), cstate, k, r)
        c = w.fed.clients[k]
        after = w.trainer.train_one(start, c.x_train, c.y_train, k, r)
        cstate = w.alg.update_client_state(cstate, start, after, k, r)
        context.state["audit"] = ConfigRecord({"client-state": _state_bytes(cstate)})
        up = w.alg.upload(start, after, k, r, n_samples=len(c.y_train))
        return Message(upload_content(up, k, r, state_digest(received)), reply_to=msg)


def _evaluate(spec, msg: Message, context: Context) -> Message:
    w = _worker(spec)
    with w.lock:
        k, r, received, cstate = _incoming(w, msg, context)
        st = w.alg.personal_state(received, cstate, k, r)
        c = w.fed.clients[k]
        acc, loss = evaluate(w.model, st, c.x_test, c.y_test)
        n = len(c.y_test)
        return Message(RecordDict({METRICS: MetricRecord(
            {"accuracy": acc if n else 0.0, "loss": loss if n else 0.0, WEIGHT_KEY: n})}),
            reply_to=msg)


def client_app(model_fn: Callable[[], nn.Module], data_fn: Callable[[], FederatedData],
               config: FLConfig, algorithm: Callable[[], Algorithm] = Algorithm) -> ClientApp:
    """A ``ClientApp`` running the client side of ``algorithm()`` (an engine ``Algorithm``;
    default FedAvg) with the engine's local SGD on partition ``partition-id``.

    ``data_fn()`` builds the federated data once per process (Flower's Ray workers);
    ``model_fn`` and ``data_fn`` should be importable functions or picklable objects.
    The reply carries ``algorithm.upload(...)`` (see the module docstring).

    Of the engine's client-side hooks, ``local_steps`` is honoured (the same training
    code); ``on_round_start`` is not (a Flower client sees only its own round), so an
    algorithm that overrides it is refused here rather than silently run without it; an
    ``upload`` of None (a dropped message) is refused when the client replies."""
    probe = algorithm()
    if type(probe).on_round_start is not Algorithm.on_round_start:
        raise ValueError(f"{type(probe).__name__} overrides on_round_start, which the Flower "
                         f"path does not call (a client sees only its own round); run it on "
                         f"the engine (run_federated)")
    spec = (uuid.uuid4().hex, model_fn, data_fn, config, algorithm)
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return _train(spec, msg, context)

    @app.evaluate()
    def evaluate_(msg: Message, context: Context) -> Message:
        return _evaluate(spec, msg, context)

    return app


# ----------------------------------------------------------------------------- server
@dataclass
class FlowerOutcome:
    """What a Flower run of :func:`server_app` produced (filled when it ends)."""

    final_state: Optional[dict] = field(default=None, repr=False)
    accuracy: Optional[float] = None
    loss: Optional[float] = None
    rounds_seconds: Optional[float] = None  # the strategy's rounds, inside the ServerApp
    seconds: Optional[float] = None  # the whole run_simulation call (simulate only)
    train_metrics: dict = field(default_factory=dict, repr=False)
    clients_per_round: dict = field(default_factory=dict)  # round -> clients sampled


NODE_WAIT_SECONDS = 300.0  # how long server_app waits for the nodes to connect


def wait_for_nodes(grid: Grid, n: int, timeout: float = NODE_WAIT_SECONDS,
                   poll: float = 0.05) -> int:
    """Block until ``grid`` lists at least ``n`` nodes; their count. ``RuntimeError``
    after ``timeout`` seconds (a simulation started with fewer supernodes than clients)."""
    waited = 0.0
    while (have := len(list(grid.get_node_ids()))) < n:
        if waited >= timeout:
            raise RuntimeError(f"only {have} of {n} Flower nodes connected after "
                               f"{timeout:.0f} s (num_supernodes smaller than the client "
                               f"count?)")
        time.sleep(poll)
        waited += poll
    return have


def server_app(strategy: FedAvg, model_fn: Callable[[], nn.Module], config: FLConfig,
               data_fn: Optional[Callable[[], FederatedData]] = None,
               num_nodes: Optional[int] = None):
    """``(ServerApp, FlowerOutcome)``: ``config.rounds`` rounds of ``strategy`` from the
    engine's initial model, once ``num_nodes`` nodes (default: ``data_fn()``'s client
    count; no wait without either) are connected; at the end, the global test accuracy
    on ``data_fn()``."""
    if num_nodes is not None and (isinstance(num_nodes, bool) or not isinstance(num_nodes, int)
                                  or num_nodes < 1):
        raise ValueError(f"num_nodes must be a positive int, not {num_nodes!r}")
    outcome = FlowerOutcome()
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        fed = data_fn() if data_fn is not None else None
        n = num_nodes if num_nodes is not None else (fed.n_clients if fed is not None else 0)
        if n:
            wait_for_nodes(grid, n)
        init = initial_state(model_fn, config.seed)
        t0 = time.perf_counter()
        result = strategy.start(grid=grid, initial_arrays=_record(init),
                                num_rounds=config.rounds)
        outcome.rounds_seconds = time.perf_counter() - t0
        final = result.arrays.to_torch_state_dict()
        outcome.final_state = final
        outcome.train_metrics = dict(result.train_metrics_clientapp)
        outcome.clients_per_round = dict(getattr(strategy, "sampled", {}))
        if fed is not None:
            outcome.accuracy, outcome.loss = evaluate(model_fn(), final, fed.x_test,
                                                      fed.y_test)

    return app, outcome


def simulate(strategy: FedAvg, model_fn: Callable[[], nn.Module],
             data_fn: Callable[[], FederatedData], config: FLConfig,
             algorithm: Callable[[], Algorithm] = Algorithm, num_supernodes: Optional[int] = None,
             num_cpus: float = 1.0, quiet: bool = True) -> FlowerOutcome:
    """Run ``strategy`` with the clients of ``algorithm`` in Flower's simulation
    (``run_simulation``, Ray backend, ``num_cpus`` per client) and return the outcome.
    ``quiet`` lowers Flower's log level to WARNING for the run, silences warnings and
    keeps the Ray workers' output off this process's stdout."""
    import logging
    import warnings

    from flwr.simulation import run_simulation

    n = num_supernodes or data_fn().n_clients
    server, outcome = server_app(strategy, model_fn, config, data_fn, num_nodes=n)
    client = client_app(model_fn, data_fn, config, algorithm)
    logger = logging.getLogger("flwr")
    level = logger.level
    if quiet:
        logger.setLevel(logging.WARNING)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            backend = {"client_resources": {"num_cpus": num_cpus, "num_gpus": 0.0}}
            if quiet:  # the workers' log lines would otherwise reach this stdout
                backend["init_args"] = {"log_to_driver": False}
            run_simulation(server_app=server, client_app=client, num_supernodes=n,
                           backend_config=backend)
    finally:
        logger.setLevel(level)
    outcome.seconds = time.perf_counter() - t0
    if outcome.final_state is None:
        raise RuntimeError("the Flower simulation ended without a final model (see its log)")
    return outcome
