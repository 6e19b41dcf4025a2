"""GENE-FL (arXiv 2504.14628v1): learnGene condensation for dynamic agnostic FL.

What the paper prints, restated below in our words (we have no code of the authors; none
was released):

- Clients are grouped once into K clusters (one-shot clustering by truncated-SVD
  subspaces of their data, the paper's ref. [20]); each cluster k has a model Theta_k.
- Local objective (Eqs. 4 and 8): cross-entropy + a smoothness term L_gen (the client
  stays close to Theta_k in L2) + a Fisher-weighted quadratic constraint L_elg (Eqs. 5-7:
  the diagonal Fisher of the client's data splits the parameters; the low-Fisher ones are
  held to Theta_k, the high-Fisher ones may move).
- Layer score (Eq. 9): xi_l = cos(theta_l, theta~_l) / dim(theta_l), normalised to sum 1,
  with theta~ the model before the local update; Algorithm 1 lines 11-13 sort xi in
  DESCENDING order and upload the top gamma layers (the learnGene).
- Server (Algorithm 2): per cluster, the uploaded layers are averaged (the layers nobody
  uploaded keep their value) and the FULL cluster model Theta_k is sent to the
  participating clients of the next round (line 7); an agnostic (new) client receives
  only its nearest cluster's learnGene Theta^G_k (line 10) and starts from
  theta = [theta_0 ; Theta^G_k] (fresh initial weights where the gene has no layer).

Local layers (issue 16, item 7): as printed, a participating client starts every round
from the FULL cluster model (Algorithm 1 line 4), so a layer that nobody uploads is reset
to its initial value every round and never learns; with top-gamma (the smallest layers)
that is nearly every weight of the network, and the known clients' models barely learn.
``local_layers="reset"`` is that literal reading. ``local_layers="keep"`` (the default
of the runs, our stated choice) is the partial-sharing reading: every client trains ALL
layers locally and keeps its own copy of them; what it receives overwrites only the
layers the cluster aggregated in the last round (those some client uploaded), so the
never-uploaded layers keep being trained locally. Uploads and aggregation are the same
in both readings.

The selection arms (issue 6) differ in ONE piece, :func:`select_layers`'s ``mode``:
``top`` (as printed), ``bottom``, ``random``; and ``use_dim`` of :func:`layer_score`
(``top-gamma-no-dim`` drops the 1/dim factor). The two fair controls of the reversal
(issue 30) are further modes of :func:`select_gene`: ``bottom-bytes`` (a bottom gene of
top-gamma's parameter count, :func:`select_bytes_matched`) and ``bottom-no-classifier``
(bottom-gamma among the layers other than the classifier, :func:`classifier_layer`).

A "layer" is a parameter-owning module (``audit.fl.models.layer_names``): a conv or
linear layer (weight and bias together) or a norm layer (scale and shift); its buffers
travel with it but are not scored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.fl.aggregate import Upload
from audit.fl.engine import Algorithm
from audit.fl.models import layer_names, layer_of

SELECTION_MODES = ("top", "bottom", "random")
#: every mode of a gene choice (:func:`select_gene`): the selection modes and the two fair
#: controls of the reversal (issue 30)
GENE_MODES = SELECTION_MODES + ("bottom-bytes", "bottom-no-classifier")
LOCAL_LAYERS = ("keep", "reset")


# ------------------------------------------------------------------------- the score
def layer_keys(model: nn.Module) -> dict[str, list[str]]:
    """layer -> its parameter keys, in depth order."""
    pkeys = [n for n, _ in model.named_parameters()]
    return {l: [k for k in pkeys if layer_of(k) == l] for l in layer_names(model)}


def layer_state_keys(model: nn.Module) -> dict[str, list[str]]:
    """layer -> its state-dict keys (parameters and buffers), what a learnGene carries."""
    skeys = list(model.state_dict().keys())
    return {l: [k for k in skeys if layer_of(k) == l] for l in layer_names(model)}


def _flat(state: Mapping[str, torch.Tensor], keys: Sequence[str]) -> torch.Tensor:
    return torch.cat([state[k].detach().reshape(-1).double() for k in keys])


def layer_cosines(after: Mapping[str, torch.Tensor], before: Mapping[str, torch.Tensor],
                  layers: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """cos(theta_l, theta~_l) per layer (parameters concatenated; 0 if a norm is 0)."""
    out = {}
    for l, keys in layers.items():
        a, b = _flat(after, keys), _flat(before, keys)
        den = float(a.norm() * b.norm())
        out[l] = float(a @ b) / den if den > 0 else 0.0
    return out


def layer_dims(state: Mapping[str, torch.Tensor],
               layers: Mapping[str, Sequence[str]]) -> dict[str, int]:
    return {l: int(sum(state[k].numel() for k in keys)) for l, keys in layers.items()}


def layer_score(after: Mapping[str, torch.Tensor], before: Mapping[str, torch.Tensor],
                layers: Mapping[str, Sequence[str]], use_dim: bool = True) -> dict[str, float]:
    """Eq. 9: xi_l = cos(theta_l, theta~_l) / dim(theta_l), normalised to sum 1.

    ``use_dim=False`` is the ``top-gamma-no-dim`` arm (the cosine alone, normalised).
    As printed, the normalisation divides by the plain sum (cosines could be negative;
    with trained layers they are all close to 1).
    """
    cos = layer_cosines(after, before, layers)
    dims = layer_dims(after, layers)
    raw = {l: cos[l] / dims[l] if use_dim else cos[l] for l in layers}
    tot = sum(raw.values())
    return {l: v / tot for l, v in raw.items()} if tot != 0 else raw


def select_layers(scores: Mapping[str, float], gamma: int, mode: str = "top",
                  rng: Optional[np.random.Generator] = None,
                  exclude: Sequence[str] = ()) -> list[str]:
    """The learnGene's layers: ``top`` = the gamma highest xi (Algorithm 1, as printed),
    ``bottom`` = the gamma lowest, ``random`` = gamma drawn uniformly (needs ``rng``).
    Ties are broken by depth order (stable sort). Returned in depth order.
    ``exclude``: layers never chosen (the candidates are the others, in depth order;
    gamma must fit them); empty by default, when nothing changes."""
    names = list(scores)
    if exclude:
        gone = set(exclude)
        names = [l for l in names if l not in gone]
    if not 1 <= gamma <= len(names):
        raise ValueError(f"gamma must lie in [1, {len(names)}], got {gamma}")
    if mode == "top":
        order = sorted(range(len(names)), key=lambda i: -scores[names[i]])
    elif mode == "bottom":
        order = sorted(range(len(names)), key=lambda i: scores[names[i]])
    elif mode == "random":
        if rng is None:
            raise ValueError("random selection needs an rng")
        order = list(rng.permutation(len(names)))
    else:
        raise ValueError(f"mode must be one of {SELECTION_MODES}, got {mode!r}")
    return [names[i] for i in sorted(order[:gamma])]


def select_bytes_matched(scores: Mapping[str, float], dims: Mapping[str, int],
                         target: int) -> list[str]:
    """A bottom gene of a given parameter count (the ``bottom-bytes`` control).

    The rule: walk the layers from the LOWEST score upward (ties in depth order) and take
    a layer, whole, exactly when it brings the gene's parameter count closer to
    ``target`` (|total + dim - target| < |total - target|, i.e. total + dim / 2 <
    target); a layer that would overshoot by more than it gains is skipped and the walk
    goes on. If no layer is taken (every layer alone is at least twice the target), the
    gene is the one layer whose size is nearest the target (the lower score among ties).
    Returned in depth order. Layers are never split, so the count matches only as
    closely as the layer sizes allow; where the only layers small enough are the top
    ones, the gene is the top gene itself (the caller reports that overlap)."""
    names = list(scores)
    if not names:
        raise ValueError("no layers to choose from")
    order = sorted(range(len(names)), key=lambda i: scores[names[i]])
    chosen, total = [], 0
    for i in order:
        d = int(dims[names[i]])
        if abs(total + d - target) < abs(total - target):
            chosen.append(i)
            total += d
    if not chosen:
        chosen = [min(order, key=lambda i: abs(int(dims[names[i]]) - target))]
    return [names[i] for i in sorted(chosen)]


def classifier_layer(model: nn.Module) -> str:
    """The classifier: the last linear layer in depth order (the last layer of any kind
    when the model has no linear one). The ``bottom-no-classifier`` control never
    chooses it, so its gene does not carry the known classes' classifier."""
    mods = dict(model.named_modules())
    names = layer_names(model)
    lin = [l for l in names if isinstance(mods.get(l), nn.Linear)]
    return lin[-1] if lin else names[-1]


def select_gene(scores: Mapping[str, float], gamma: int, mode: str = "top",
                rng: Optional[np.random.Generator] = None,
                dims: Optional[Mapping[str, int]] = None,
                classifier: Optional[str] = None) -> list[str]:
    """One client's gene under any mode of :data:`GENE_MODES`: the selection modes go to
    :func:`select_layers` unchanged; ``bottom-no-classifier`` is bottom-gamma among the
    layers other than ``classifier``; ``bottom-bytes`` is :func:`select_bytes_matched`
    with the target the parameter count (``dims``) of top-gamma on the SAME scores (the
    gene the printed rule would take from this very update)."""
    if mode in SELECTION_MODES:
        return select_layers(scores, gamma, mode, rng)
    if mode == "bottom-no-classifier":
        if classifier is None:
            raise ValueError("bottom-no-classifier needs the classifier layer's name")
        return select_layers(scores, gamma, "bottom", exclude=(classifier,))
    if mode == "bottom-bytes":
        if dims is None:
            raise ValueError("bottom-bytes needs the layer sizes (dims)")
        target = sum(int(dims[l]) for l in select_layers(scores, gamma, "top"))
        return select_bytes_matched(scores, dims, target)
    raise ValueError(f"mode must be one of {GENE_MODES}, got {mode!r}")


def gamma_from_fraction(n_layers: int, fraction: float) -> int:
    return int(min(n_layers, max(1, round(fraction * n_layers))))


# ------------------------------------------------------------------------ clustering
def data_subspace(x: torch.Tensor, d: int) -> np.ndarray:
    """The top-d left singular vectors of a client's data matrix (features x samples)."""
    a = x.reshape(len(x), -1).double().cpu().numpy().T
    # the left singular vectors of a are the eigenvectors of a a^T (features x features;
    # much cheaper than an SVD of the features x samples matrix), largest first
    gram = a @ a.T
    if len(gram) <= _DENSE_EIGH_MAX or d >= len(gram) - 1:
        w, v = np.linalg.eigh(gram)
    else:  # CIFAR's 3072 features: Lanczos for the top d only (5x faster than a full eigh,
        # same subspace to 1e-15; fixed start vector, so deterministic)
        from scipy.sparse.linalg import eigsh

        w, v = eigsh(gram, k=d, which="LA", v0=np.ones(len(gram)))
    return v[:, np.argsort(w)[::-1][:d]]


_DENSE_EIGH_MAX = 512  # features up to which a full eigendecomposition is used


def subspace_distance(u: np.ndarray, v: np.ndarray) -> float:
    """1 - mean squared cosine of the principal angles (0 = same subspace)."""
    s = np.linalg.svd(u.T @ v, compute_uv=False)
    return float(1.0 - np.mean(s ** 2))


def cluster_clients(xs: Sequence[torch.Tensor], k: int, d: int, seed: int) -> np.ndarray:
    """One-shot clustering of clients by their data subspaces (ref. [20] of the paper):
    agglomerative (average linkage) on the subspace distances. Deviation: the paper's
    exact linkage is not in our sources; average linkage is our choice."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    us = [data_subspace(x, d) for x in xs]
    n = len(us)
    dist = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            dist[i, j] = dist[j, i] = subspace_distance(us[i], us[j])
    if k >= n:
        return np.arange(n)
    z = linkage(squareform(dist, checks=False), method="average")
    lab = fcluster(z, t=k, criterion="maxclust") - 1
    # relabel by first appearance (deterministic, independent of scipy's numbering)
    order = {c: i for i, c in enumerate(dict.fromkeys(lab.tolist()))}
    return np.array([order[c] for c in lab])


def nearest_cluster(x: torch.Tensor, cluster_subspaces: Sequence[np.ndarray], d: int) -> int:
    """The cluster whose pooled data subspace is nearest to the new client's."""
    u = data_subspace(x, d)
    return int(np.argmin([subspace_distance(u, v) for v in cluster_subspaces]))


# ------------------------------------------------------------------------ the client
@dataclass
class ClientUpdate:
    """What one client did in one round (kept for the selection statistics)."""

    round: int
    client: int
    cos: dict
    xi: dict
    selected: list
    param_bytes: int


class GeneFL(Algorithm):
    """GENE-FL inside one cluster (Algorithms 1-2 for a fixed cluster k).

    Args:
        gamma: layers in a learnGene.
        mode: ``top`` (as printed), ``bottom`` or ``random`` (see :func:`select_layers`),
            or a fair control of the reversal, ``bottom-bytes`` or
            ``bottom-no-classifier`` (see :func:`select_gene`).
        use_dim: keep the 1/dim factor of Eq. 9 (False: the ``no-dim`` arm).
        lam_gen, lam_elg: weights of L_gen and L_elg.
        fisher_quantile: parameters whose diagonal Fisher lies below this quantile (per
            client, per round) are held to Theta_k by L_elg (Eq. 6's partition; the
            paper's threshold epsilon, expressed as a quantile here: our deviation, since
            the scale of the raw Fisher is not comparable across models).
        fisher_batches, fisher_batch_size: the diagonal Fisher is the mean over this many
            minibatches of the squared minibatch gradient of the cross-entropy at Theta_k
            (an empirical-Fisher shortcut: deviation from per-sample squared gradients).
        seed: for the random arm.
        local_layers: ``"keep"`` (clients keep their own copy of every layer and receive
            only the aggregated layers; default) or ``"reset"`` (Algorithm 1 line 4
            literally: start each round from the full cluster model). See the module
            docstring.
    """

    name = "genefl"

    def __init__(self, gamma: int, mode: str = "top", use_dim: bool = True,
                 lam_gen: float = 0.01, lam_elg: float = 0.1, fisher_quantile: float = 0.5,
                 fisher_batches: int = 1, fisher_batch_size: int = 32, seed: int = 0,
                 local_layers: str = "keep"):
        super().__init__()
        if local_layers not in LOCAL_LAYERS:
            raise ValueError(f"local_layers must be one of {LOCAL_LAYERS}, got {local_layers!r}")
        self.local_layers = local_layers
        self.shared: list[str] = []  # the layers aggregated in the last round
        if mode not in GENE_MODES:
            raise ValueError(f"mode must be one of {GENE_MODES}, got {mode!r}")
        self.classifier: Optional[str] = None  # set by setup (bottom-no-classifier)
        self.gamma, self.mode, self.use_dim = int(gamma), mode, bool(use_dim)
        self.lam_gen, self.lam_elg = float(lam_gen), float(lam_elg)
        self.fisher_quantile = float(fisher_quantile)
        self.fisher_batches, self.fisher_batch_size = fisher_batches, fisher_batch_size
        self.rng = np.random.default_rng([seed, 6])
        self.updates: list[ClientUpdate] = []

    def setup(self, model, fed, config):
        self.model, self.fed = model, fed
        self.layers = layer_keys(model)
        self.state_layers = layer_state_keys(model)
        self.pkeys = [n for n, _ in model.named_parameters()]
        self.classifier = classifier_layer(model)
        import copy

        self._fisher_net = copy.deepcopy(model)

    # Algorithm 2 line 7: the full cluster model goes down (the engine's default
    # broadcast). Algorithm 1 line 4: the client starts from it (``reset``, the default
    # client_init); ``keep``: the client's own layers, the aggregated ones replaced.
    def update_client_state(self, client_state, start, after, client_id, round):
        if self.local_layers == "reset":
            return client_state
        return {k: v.detach().clone() for k, v in after.items()}

    def client_init(self, received, client_state, client_id, round):
        if self.local_layers == "reset" or not isinstance(client_state, Mapping):
            return dict(received)
        out = dict(client_state)
        for l in self.shared:
            for k in self.state_layers[l]:
                out[k] = received[k]
        return out

    def _fisher(self, start, client_id):
        c = self.fed.clients[client_id]
        net = self._fisher_net
        net.load_state_dict(dict(start))
        net.eval()  # running statistics are not touched by the Fisher pass
        g2 = {k: torch.zeros_like(p) for k, p in net.named_parameters()}
        n, bs = len(c.y_train), self.fisher_batch_size
        nb = max(1, min(self.fisher_batches, -(-n // bs)))
        for b in range(nb):
            net.zero_grad()
            F.cross_entropy(net(c.x_train[b * bs:(b + 1) * bs]),
                            c.y_train[b * bs:(b + 1) * bs]).backward()
            for k, p in net.named_parameters():
                g2[k] += p.grad.detach() ** 2 / nb
        return g2

    def regularizer_context(self, start_state, client_id, round):
        fisher = self._fisher(start_state, client_id)
        flat = torch.cat([f.reshape(-1) for f in fisher.values()])
        eps = torch.quantile(flat.double(), self.fisher_quantile).to(flat.dtype)
        ctx = {}
        for k in self.pkeys:
            ctx["a/" + k] = start_state[k].detach()
            # Eq. 6-7: low-Fisher parameters (below epsilon) are held to Theta_k by L_elg
            ctx["w/" + k] = (fisher[k] <= eps).to(start_state[k].dtype)
        return ctx

    def regularizer(self, params, context):
        # L_gen (lam_gen/2 ||theta - Theta_k||^2) + L_elg (lam_elg/2 sum_i m_i (.)^2)
        tot = 0.0
        for k, p in params.items():
            d2 = (p - context["a/" + k]) ** 2
            tot = tot + 0.5 * self.lam_gen * d2.sum() + 0.5 * self.lam_elg * (
                context["w/" + k] * d2).sum()
        return tot

    def regularizer_grad(self, params, context):
        # the gradient of the two terms above, written out (it acts on stacked clients)
        return {k: (p - context["a/" + k]) * (self.lam_gen + self.lam_elg * context["w/" + k])
                for k, p in params.items()}

    def upload(self, before, after, client_id, round, n_samples):
        # Algorithm 1 lines 9-13: score every layer against the received model, keep gamma
        cos = layer_cosines(after, before, self.layers)
        xi = layer_score(after, before, self.layers, use_dim=self.use_dim)
        if self.mode in SELECTION_MODES:
            sel = select_layers(xi, self.gamma, self.mode, self.rng)
        else:  # the fair controls (issue 30)
            sel = select_gene(xi, self.gamma, self.mode, dims=layer_dims(after, self.layers),
                              classifier=self.classifier)
        keys = [k for l in sel for k in self.state_layers[l]]
        state = {k: after[k] for k in keys}
        pbytes = sum(after[k].numel() * after[k].element_size()
                     for l in sel for k in self.layers[l])
        self.updates.append(ClientUpdate(round, client_id, cos, xi, sel, int(pbytes)))
        return Upload(state, None, float(n_samples))

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        ups = [u for u in self.updates if u.round == round]
        # the layers the server averaged this round (some client uploaded them): what a
        # ``keep`` client takes from the cluster model next round
        up = {l for u in ups for l in u.selected}
        self.shared = [l for l in self.layers if l in up]
        total = sum(global_state[k].numel() * global_state[k].element_size()
                    for k in self.pkeys)
        mean_bytes = float(np.mean([u.param_bytes for u in ups])) if ups else float("nan")
        return {"learngene_param_bytes": mean_bytes,
                "learngene_fraction": mean_bytes / total}

    # -- checkpoints: the update log (the learnGene sizes, the selections and the last
    # round's scores all come from it) and the random arm's generator persist across
    # rounds; the Fisher network is reloaded from the received model every time.
    def state_dict(self) -> dict:
        """Every client update so far and the selection generator, as plain data."""
        return {"updates": [{"round": u.round, "client": u.client, "cos": dict(u.cos),
                             "xi": dict(u.xi), "selected": list(u.selected),
                             "param_bytes": u.param_bytes} for u in self.updates],
                "rng": self.rng.bit_generator.state, "shared": list(self.shared)}

    def load_state_dict(self, state) -> None:
        self.updates = [ClientUpdate(int(d["round"]), int(d["client"]), dict(d["cos"]),
                                     dict(d["xi"]), list(d["selected"]),
                                     int(d["param_bytes"])) for d in state["updates"]]
        self.rng.bit_generator.state = state["rng"]
        self.shared = list(state.get("shared", []))

    def cluster_gene(self, last_round: int) -> list[str]:
        """The cluster learnGene's layers: the gamma layers most often uploaded in
        ``last_round`` (ties by depth order). Our reading of Theta^G_k: the paper
        aggregates the shared layers; which layers form the gene sent to a new client
        when clients chose differently is not spelled out in our sources.

        The fair controls: ``bottom-no-classifier`` votes the same way among the layers
        other than the classifier; ``bottom-bytes`` (whose genes differ in length) takes
        the layer SET chosen by most clients of ``last_round`` (ties: the first such
        client's set), so the cluster's gene is one client's byte-matched gene."""
        if self.mode == "bottom-bytes":
            sets = [tuple(u.selected) for u in self.updates if u.round == last_round]
            if not sets:
                return []
            count = {t: sets.count(t) for t in sets}
            return list(max(sets, key=lambda t: count[t]))  # max keeps the first of ties
        if self.mode == "bottom-no-classifier":
            names = [l for l in self.layers if l != self.classifier]
            votes = {l: 0 for l in names}
            for u in self.updates:
                if u.round == last_round:
                    for l in u.selected:
                        votes[l] += 1
            order = sorted(range(len(names)), key=lambda i: -votes[names[i]])
            return [names[i] for i in sorted(order[:self.gamma])]
        votes = {l: 0 for l in self.layers}
        for u in self.updates:
            if u.round == last_round:
                for l in u.selected:
                    votes[l] += 1
        names = list(self.layers)
        order = sorted(range(len(names)), key=lambda i: -votes[names[i]])
        return [names[i] for i in sorted(order[:self.gamma])]


def inherit(theta0: Mapping[str, torch.Tensor], cluster_state: Mapping[str, torch.Tensor],
            gene_layers: Sequence[str], state_layers: Mapping[str, Sequence[str]]) -> dict:
    """theta = [theta_0 ; Theta^G_k]: the gene's layers (with their buffers) from the
    cluster model, every other tensor from the fresh initial weights theta_0."""
    out = {k: v.clone() for k, v in theta0.items()}
    for l in gene_layers:
        for k in state_layers[l]:
            out[k] = cluster_state[k].clone()
    return out


def finetune(model: nn.Module, state: Mapping[str, torch.Tensor], x: torch.Tensor,
             y: torch.Tensor, steps: int, lr: float, batch_size: int,
             rng: np.random.Generator) -> dict:
    """Plain SGD for a fixed number of steps (an agnostic client's local adaptation),
    on a copy of ``model`` in train mode (BatchNorm statistics update as usual)."""
    import copy

    net = copy.deepcopy(model)
    net.load_state_dict(dict(state))
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    order = np.array([], dtype=np.int64)
    for _ in range(steps):
        if len(order) < min(batch_size, len(y)):
            order = np.concatenate([order, rng.permutation(len(y))])
        idx, order = order[:batch_size], order[batch_size:]
        it = torch.as_tensor(idx)
        opt.zero_grad()
        F.cross_entropy(net(x[it]), y[it]).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def planted_accuracy(model: nn.Module, state: Mapping[str, torch.Tensor], x: torch.Tensor,
                     y: torch.Tensor, effect: float, num_classes: int,
                     rng: np.random.Generator) -> float:
    """Accuracy of ``state`` on (x, y) after a planted handicap of size ``effect``:
    k = round(effect x n) of the model's CORRECT test predictions, drawn at random, are
    relabelled to a random wrong class, so the accuracy falls by exactly k / n (``effect``
    up to one test example; fewer if the model has fewer correct predictions). Goes
    through the model's real predictions (issue 16, item 6)."""
    import copy

    net = copy.deepcopy(model)
    net.load_state_dict(dict(state))
    net.eval()
    with torch.no_grad():
        pred = net(x).argmax(1).cpu().numpy()
    yy = y.cpu().numpy()
    right = np.flatnonzero(pred == yy)
    k = min(len(right), int(round(max(effect, 0.0) * len(yy))))
    hit = rng.choice(right, size=k, replace=False) if k else np.array([], dtype=np.int64)
    pred = pred.copy()
    pred[hit] = (yy[hit] + rng.integers(1, num_classes, size=k)) % num_classes
    return float(np.mean(pred == yy))
