"""LIPS on FedBN, its ablations and the regularisation controls of the LIPS audit.

LIPS: "layer-wise inertia" + "periodic sparsity", arXiv 2506.00932v1 (Sec. 4). In
low-data federated learning the middle layers of the global model stop moving; every
``k`` rounds, after aggregation, the server zeroes the lowest-sensitivity fraction
``tau(t) = tau0 * (1 - t / T)`` of each middle layer's weights, with the sensitivity of
a weight ``s = |dw * w|`` (its change times its value); local training stays dense.
The method is built on FedBN (Li et al. 2021, arXiv 2102.07623): norm layers stay local.

Everything here is one server-side *perturbation piece* plugged into one algorithm
class, so that the audit's arms differ in one visible piece each (optax style):

    fedbn                 FedBNProbe()                                   (no piece)
    lips                  FedBNProbe(post=prune(update_sensitivity, middle, printed))
    lips-random           ...      post=prune(random_score,  middle, printed)
    lips-all-layers       ...      post=prune(update_sensitivity, ALL weight layers)
    lips-as-released      ...      post=prune(grad_sensitivity, middle, released schedule)
    fedbn-noise-middle    FedBNProbe(post=gaussian_noise(middle, printed schedule))
    fedbn-dropout-middle  FedBNProbe() with the model option ``dropout_middle=p``
    fedbn-weight-decay    FedBNProbe() with local SGD weight decay
    fedbn-freeze-middle   FedBNProbe(freeze_after=f): middle layers get no update after
                          round f (the paper's Table 1 freeze test)
    lips-outer-layers     FedBNProbe(post=prune(update_sensitivity, OUTER layers, printed)):
                          the first and the last weight layer instead of the middle ones

``FedBNProbe`` also records, every round, the cosine similarity of each middle layer of
the global model to its weights at the end of round 2 (the paper's inertia measure,
Sec. 3) and the fraction of exact zeros in the middle layers; with ``curve_every=e``,
also every e rounds the clients' personalised accuracy on their own training and test
splits (each averaged over clients as the engine averages the test accuracy), so that
train minus test accuracy measures overfitting per round and the test curve gives the
best round.

The clients' data follow the paper's split (``dataset`` and ``build_clients``: each
client draws its own label proportions from Dir(alpha), then its training, validation
and test samples).

Deliberate deviations from the printed method are commented where they happen.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch
from torch.func import functional_call

from audit.errors import AuditError
from audit.fl.engine import FedBN
from audit.fl.evaluation import evaluate_many
from audit.fl.models import middle_layers, weight_layers
from audit.fl.training import grouped_chain

__all__ = [
    "FedBNProbe", "Schedule", "build_clients", "dataset", "gaussian_noise", "grad_sensitivity",
    "lowest_fraction_mask", "printed_schedule", "prune", "random_score", "released_schedule",
    "update_sensitivity",
]

State = Mapping[str, torch.Tensor]


# ------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class Schedule:
    """When the server acts and how strongly: at rounds ``t`` with ``t % k == 0`` and
    ``t < T``, with strength ``s0 * (1 - t / T)`` (LIPS, Sec. 4: tau(t) = tau0 (1 - t/T))."""

    s0: float
    k: int
    T: int

    def __post_init__(self):
        if self.k < 1 or self.T < 1:
            raise ValueError(f"period k and horizon T must be >= 1, got k={self.k}, T={self.T}")
        if not 0.0 <= self.s0:
            raise ValueError(f"strength must be >= 0, got {self.s0}")

    def strength(self, t: int) -> float:
        """0 on rounds where the server does nothing, else s0 * (1 - t / T)."""
        if t % self.k != 0 or t >= self.T:
            return 0.0
        return self.s0 * (1.0 - t / self.T)


def printed_schedule(s0: float, k: int, rounds: int) -> Schedule:
    """The paper's schedule: T is the run's number of rounds."""
    return Schedule(s0, k, rounds)


def released_schedule(s0: float, k: int, rounds: int, T: int = 300) -> Schedule:
    """The released code's schedule (CLAIMS.md section 4): rounds divisible by k with a
    fixed T = 300, whatever the run's length (so a short run barely decays tau). The
    release's own runs last 300 rounds (T / R = 1); pass ``T=rounds`` for that ratio in a
    shorter run (the falsifier's ``lips-released-score`` arm does)."""
    del rounds  # the release does not tie T to the run length; callers choose T
    return Schedule(s0, k, T)


# ----------------------------------------------------------------------------- scores
# A score function maps (key, w_new, w_prev, grad_or_None, generator) -> tensor of scores;
# the lowest scores are pruned.
Score = Callable[[str, torch.Tensor, torch.Tensor, Optional[torch.Tensor], torch.Generator],
                 torch.Tensor]


def update_sensitivity(key, w, w_prev, g, gen):
    """LIPS's printed sensitivity s = |dw * w| (Sec. 4), dw = this round's global change
    (aggregated weights minus the previous global weights)."""
    return ((w - w_prev) * w).abs()


def grad_sensitivity(key, w, w_prev, g, gen):
    """The released score |grad * w|, with the gradient of the last local minibatch
    (CLAIMS.md section 4); ``g`` is supplied by :class:`FedBNProbe` on pruning rounds."""
    if g is None:
        raise ValueError(f"grad_sensitivity needs the last-batch gradient of {key!r}")
    return (g * w).abs()


def random_score(key, w, w_prev, g, gen):
    """Uniform random scores: a random mask of the same size (the paper's Table 4
    "LIPS-Random" ablation)."""
    return torch.rand(w.shape, generator=gen, dtype=torch.float64).to(w.device)


def lowest_fraction_mask(score: torch.Tensor, fraction: float) -> torch.Tensor:
    """Bool tensor, True on the ``floor(fraction * n)`` entries with the lowest score
    (ties broken by position: a stable sort), False elsewhere."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
    flat = score.reshape(-1)
    m = int(np.floor(fraction * flat.numel()))
    out = torch.zeros(flat.numel(), dtype=torch.bool, device=score.device)
    if m > 0:
        idx = torch.argsort(flat.double(), stable=True)[:m]
        out[idx] = True
    return out.reshape(score.shape)


# ------------------------------------------------------------------------------ pieces
@dataclass(frozen=True)
class prune:
    """Zero the lowest-``score`` fraction ``schedule.strength(t)`` of each chosen layer's
    weight tensor, after aggregation (LIPS, Sec. 4 / Algorithm 1)."""

    score: Score
    schedule: Schedule
    layers: str = "middle"  # "middle" (LIPS), "all" (every conv / linear weight) or
    # "outer" (the first and the last conv / linear weight: the outer-layer ablation)
    needs_grad: bool = False

    def __call__(self, state: dict, prev: State, keys: Sequence[str], t: int,
                 gen: torch.Generator, grads: Optional[State]) -> dict:
        tau = self.schedule.strength(t)
        if tau <= 0:
            return state
        out = dict(state)
        for key in keys:
            g = None if grads is None else grads[key]
            s = self.score(key, state[key], prev[key], g, gen)
            out[key] = torch.where(lowest_fraction_mask(s, tau), torch.zeros_like(state[key]),
                                   state[key])
        return out


@dataclass(frozen=True)
class gaussian_noise:
    """Control: add N(0, (sigma(t) * std(w))^2) to each chosen weight tensor on the same
    rounds as LIPS prunes, sigma(t) from the same decaying schedule (matched period)."""

    schedule: Schedule
    layers: str = "middle"
    needs_grad: bool = False

    def __call__(self, state, prev, keys, t, gen, grads):
        sigma = self.schedule.strength(t)
        if sigma <= 0:
            return state
        out = dict(state)
        for key in keys:
            w = state[key]
            noise = torch.randn(w.shape, generator=gen, dtype=torch.float64).to(w)
            out[key] = w + sigma * w.detach().double().std().to(w) * noise
        return out


# --------------------------------------------------------------------------- algorithm
def _layer_weight_keys(model: torch.nn.Module, layers: Sequence[str]) -> list[str]:
    # deviation: only the ``weight`` tensor of a layer is pruned; biases are left dense
    # (the paper speaks of weights; conv biases are a negligible share of parameters).
    names = set(layers)
    return [k for k, _ in model.named_parameters() if k.endswith(".weight")
            and k.rsplit(".", 1)[0] in names]


class FedBNProbe(FedBN):
    """FedBN + an optional server-side perturbation piece + an inertia probe.

    Args:
        post: a piece (:class:`prune` or :class:`gaussian_noise`) applied after
            aggregation; None is plain FedBN.
        freeze_after: when set, middle layers receive no update after that round (local
            learning rate 0; the paper's Table 1 freeze test).
        reference_round: the round whose global middle weights the cosine refers to
            (the paper uses round 2).
        curve_every: when set, every ``curve_every`` rounds and at the last, record
            ``curve_train_acc`` and ``curve_test_acc``: each client's personalised model
            (the global weights with its own norm layers, as the engine evaluates it) on
            its own training split and on its own test split, each the mean over
            clients. Every client that has trained so far counts (all of them every
            round under full participation, as in the LIPS audit). Cheaper than the
            engine's evaluation (one forward per client, no validation or global test).
    """

    name = "fedbn-probe"

    def __init__(self, post=None, freeze_after: Optional[int] = None,
                 reference_round: int = 2, curve_every: Optional[int] = None):
        super().__init__()
        self.post = post
        self.freeze_after = freeze_after
        self.reference_round = reference_round
        if curve_every is not None and int(curve_every) < 1:
            raise ValueError(f"curve_every must be >= 1, got {curve_every}")
        self.curve_every = None if curve_every is None else int(curve_every)

    def setup(self, model, fed, config):
        super().setup(model, fed, config)
        self.model, self.fed, self.config = model, fed, config
        self.middle = middle_layers(model)
        self.middle_keys = _layer_weight_keys(model, self.middle)
        wl = weight_layers(model)
        self.all_keys = _layer_weight_keys(model, wl)
        self.outer_keys = _layer_weight_keys(model, [wl[0], wl[-1]] if wl else [])
        self._client_states: dict = {}
        self.freeze_keys = [k for k, _ in model.named_parameters()
                            if k.rsplit(".", 1)[0] in set(self.middle)]
        self.reference: Optional[dict] = None
        self._prev: Optional[State] = None
        self._grads: list = []
        self._gen = None
        self._chain = grouped_chain(model, config)  # the curve probe's grouped forward

    # -- local training: the freeze test --------------------------------------------------
    def param_lr_scale(self, params, client_id, round, epoch, last_grads):
        if self.freeze_after is None or round <= self.freeze_after:
            return None
        return {k: 0.0 for k in self.freeze_keys}

    # -- the clients' norm layers, kept for the accuracy-curve probe ---------------------
    def update_client_state(self, client_state, start, after, client_id, round):
        out = super().update_client_state(client_state, start, after, client_id, round)
        if self.curve_every is not None:
            self._client_states[client_id] = out
        return out

    def _curve_accuracies(self, global_state, round) -> tuple[float, float]:
        """(train, test) personalised accuracy, each the mean over clients (``nanmean``,
        as the engine averages its personalised test accuracy). Eval mode: norm layers
        use their running statistics, so an image's output does not depend on the other
        images in its batch. Where the engine trains on the grouped chain, every
        client's splits go through its eval-mode forward (``evaluate_many``); else the
        clients' training and test images go through together, all clients in one
        ``vmap`` call when their splits have equal sizes (the test half equals the
        engine's evaluation; tested against the per-client loop)."""
        ids = sorted(self._client_states)
        if not ids:
            return float("nan"), float("nan")
        clients = [self.fed.clients[k] for k in ids]
        states = [self.personal_state(global_state, self._client_states[k], k, round)
                  for k in ids]
        if hasattr(self._chain, "logits"):  # the engine's grouped chain, eval mode
            chunk = self.config.client_chunk or len(states)
            tr, te = ([a for a, _ in evaluate_many(self.model, states, sets,
                                                   chain=self._chain, chunk=chunk)]
                      for sets in ([(c.x_train, c.y_train) for c in clients],
                                   [(c.x_test, c.y_test) for c in clients]))
            return float(np.nanmean(tr)), float(np.nanmean(te))
        was = self.model.training
        self.model.eval()
        with torch.no_grad():
            sizes = {(len(c.y_train), len(c.y_test)) for c in clients}
            if len(sizes) == 1 and len(clients) > 1:
                ok = self._correct_batched(states, clients)
            else:
                ok = [self._correct_one(st, c) for st, c in zip(states, clients)]
        self.model.train(was)
        tr, te = [], []
        for o, c in zip(ok, clients):
            n = len(c.y_train)
            tr.append(float(o[:n].mean()) if n else float("nan"))
            te.append(float(o[n:].mean()) if len(c.y_test) else float("nan"))
        return float(np.nanmean(tr)), float(np.nanmean(te))

    def _correct_one(self, state, c) -> torch.Tensor:
        x, y = torch.cat([c.x_train, c.x_test]), torch.cat([c.y_train, c.y_test])
        return (functional_call(self.model, dict(state), (x,)).argmax(-1) == y).double()

    def _correct_batched(self, states, clients, chunk: int = 64) -> list:
        from torch.func import vmap

        shared = {k: v for k, v in states[0].items() if not self.is_norm(k)}
        own = [k for k in states[0] if self.is_norm(k)]

        def logits(norm, x):
            return functional_call(self.model, {**shared, **norm}, (x,))

        out = []
        for i in range(0, len(states), chunk):
            sl = slice(i, i + chunk)
            norm = {k: torch.stack([st[k] for st in states[sl]]) for k in own}
            x = torch.stack([torch.cat([c.x_train, c.x_test]) for c in clients[sl]])
            y = torch.stack([torch.cat([c.y_train, c.y_test]) for c in clients[sl]])
            ok = (vmap(logits)(norm, x).argmax(-1) == y).double()
            out += list(ok)
        return out

    def _curve_round(self, round) -> bool:
        return round % self.curve_every == 0 or round == self.config.rounds

    # -- the released score needs each client's last-minibatch gradient -------------------
    def upload(self, before, after, client_id, round, n_samples):
        up = super().upload(before, after, client_id, round, n_samples)
        if self.post is not None and self.post.needs_grad and \
                self.post.schedule.strength(round) > 0:
            self._grads.append((float(n_samples), self._last_batch_grad(after, client_id,
                                                                        round)))
        return up

    def _last_batch_grad(self, after: State, client_id: int, round: int) -> dict:
        from audit.fl.engine import client_steps  # the engine's minibatch order

        c = self.fed.clients[client_id]
        idx = torch.as_tensor(client_steps(len(c.y_train), self.config, round,
                                            client_id)[-1][1], device=c.x_train.device)
        pkeys = [k for k, _ in self.model.named_parameters()]
        params = {k: after[k].detach().clone().requires_grad_(True) for k in pkeys}
        buffers = {k: v.detach().clone() for k, v in after.items() if k not in params}
        with torch.enable_grad():
            out = functional_call(self.model, (params, buffers), (c.x_train[idx],))
            loss = torch.nn.functional.cross_entropy(out, c.y_train[idx])
            keys = self.keys_for(self.post.layers)
            # deviation: the gradient is taken at the client's weights after its last step
            # (the release reads the gradient left from that step, i.e. before the update).
            g = dict(zip(keys, torch.autograd.grad(loss, [params[k] for k in keys])))
        return {k: g[k] for k in self.keys_for(self.post.layers)}

    def keys_for(self, layers: str) -> list[str]:
        if layers == "middle":
            return self.middle_keys
        if layers == "all":
            return self.all_keys
        if layers == "outer":
            return self.outer_keys
        raise ValueError(f"layers must be 'middle', 'all' or 'outer', not {layers!r}")

    # -- server side ----------------------------------------------------------------------
    def aggregate(self, prev, uploads, round):
        self._prev = prev
        return super().aggregate(prev, uploads, round)

    def server_post(self, global_state, round, rng):
        out = dict(global_state)
        if self._gen is None:  # one torch generator per run, seeded from the server rng
            self._gen = torch.Generator().manual_seed(int(rng.integers(2 ** 62)))
        if self.post is not None:
            grads = None
            if self._grads:
                w = [a for a, _ in self._grads]
                grads = {k: sum(wi * g[k] for wi, (_, g) in zip(w, self._grads)) / sum(w)
                         for k in self._grads[0][1]}
                self._grads = []
            out = self.post(out, self._prev, self.keys_for(self.post.layers), round,
                            self._gen, grads)
        if round == self.reference_round:
            self.reference = {k: out[k].detach().clone() for k in self.middle_keys}
        return out

    # -- checkpoints: what the probe carries from round to round -------------------------
    # ``_prev`` and ``_grads`` are set and consumed within one round; the round-2
    # reference and the pruning / noise generator persist, so a resumed run needs them.
    def state_dict(self) -> dict:
        return {"reference": self.reference,
                "gen_state": None if self._gen is None else self._gen.get_state()}

    def load_state_dict(self, state) -> None:
        ref = state.get("reference")
        self.reference = None if ref is None else {k: v.clone() for k, v in ref.items()}
        g = state.get("gen_state")
        self._gen = None if g is None else torch.Generator()
        if g is not None:
            self._gen.set_state(g.cpu())

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        m = {"middle_zero_frac": float(np.mean(
            [(global_state[k] == 0).double().mean().item() for k in self.middle_keys]))}
        if self.reference is not None:
            cos = [torch.nn.functional.cosine_similarity(
                global_state[k].reshape(-1).double(), self.reference[k].reshape(-1).double(),
                dim=0, eps=1e-300).item() for k in self.middle_keys]
            for k, c in zip(self.middle_keys, cos):
                m[f"cos:{k.rsplit('.', 1)[0]}"] = c
            m["middle_cos"] = float(np.mean(cos))
        if self.curve_every is not None and self._curve_round(round):
            m["curve_train_acc"], m["curve_test_acc"] = self._curve_accuracies(global_state,
                                                                               round)
        return m


# ------------------------------------------------------------------------ the split
@functools.lru_cache(maxsize=4)
def _digits_like(name: str, kw: tuple = ()):
    from audit.fl.data import load_dataset

    # one fixed train/test split; the seeds vary clients
    return load_dataset(name, seed=0, **dict(kw))


def dataset(cfg: Mapping, data_dir: str | None = None):
    """The data set a scale's config names (``dataset``, ``dataset_kw``): digits or
    synthetic blobs in one fixed split (the seeds vary the clients, not the split), else
    the paper-scale copy under ``data_dir``."""
    from audit.fl.data import load_dataset

    name = cfg["dataset"]
    if name in ("digits", "synthetic"):
        # synthetic: Gaussian blobs in digits' 8 x 8 shape, made as hard as dataset_kw's
        # noise says (audit.fl.data.synthetic_classification)
        return _digits_like(name, tuple(sorted(dict(cfg.get("dataset_kw") or {}).items())))
    # the clients are drawn from it; a missing copy raises DatasetNotFound (an AuditError)
    return load_dataset(name, data_dir=data_dir)


def build_clients(ds, cfg: Mapping, seed: int):
    """The LIPS split (arXiv 2506.00932, Sec. 5): each client draws class proportions
    q_k ~ Dir(alpha) and then its own samples, independently of the other clients
    (clients may share images). Per client: ``n_train`` training and ``n_val``
    validation images from the training pool (disjoint within the client), and
    ``n_test`` test images drawn with the same q_k from the held-out test set.

    Deviation: the paper's per-client test data is not specified beyond the label skew;
    we draw it from the dataset's test split so no client ever trained on a test image.
    """
    from audit.fl.data import ClientData, FederatedData

    rng = np.random.default_rng([seed, 11])
    ytr, yte = ds.y_train.numpy(), ds.y_test.numpy()
    C = ds.num_classes
    pool_tr = [np.flatnonzero(ytr == c) for c in range(C)]
    pool_te = [np.flatnonzero(yte == c) for c in range(C)]

    def draw(pools, counts, split, draw_name, exclude=()):
        out = []
        for c, (pool, m) in enumerate(zip(pools, counts)):
            if m:
                if not len(pool):  # a small or partial copy of the data set
                    raise AuditError(
                        f"{ds.name}: class {c} has no {split} images, and a client's "
                        f"{draw_name} draw asks for {m}; the LIPS split needs every class "
                        f"in both splits (is the copy under --data-dir complete?)")
                if len(exclude):
                    left = np.setdiff1d(pool, exclude, assume_unique=True)
                    if not len(left):
                        raise AuditError(
                            f"{ds.name}: class {c} has only {len(pool)} training images, "
                            f"all taken by a client's training draw, and its "
                            f"{draw_name} draw asks for {m} more (n_train + n_val is "
                            f"large for this copy of the data set)")
                    pool = left
                out.append(rng.choice(pool, size=m, replace=m > len(pool)))
        if not out:  # no images asked for (n_val = 0, say)
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate(out)).astype(np.int64)

    clients = []
    for _ in range(cfg["n_clients"]):
        q = rng.dirichlet(np.full(C, cfg["alpha"]))
        tr = draw(pool_tr, rng.multinomial(cfg["n_train"], q), "training", "training")
        va = draw(pool_tr, rng.multinomial(cfg["n_val"], q), "training", "validation",
                  exclude=tr)
        te = draw(pool_te, rng.multinomial(cfg["n_test"], q), "test", "test")
        t = torch.from_numpy
        clients.append(ClientData(ds.x_train[t(tr)], ds.y_train[t(tr)], ds.x_train[t(va)],
                                  ds.y_train[t(va)], ds.x_test[t(te)], ds.y_test[t(te)]))
    return FederatedData(clients, ds.x_test, ds.y_test, C, ds.name)
