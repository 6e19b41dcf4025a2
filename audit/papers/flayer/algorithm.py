"""FLAYER (arXiv 2412.07062v3) built from the engine's hooks, with the arms of the audit.

The three client-side mechanisms, as printed:

- Eq. 2, head initialisation: the last ``s`` layers start from
  ``A_l * local + A_g * global`` with ``A_g = 1 - A_l`` and ``A_l`` the client's recent
  local accuracy (here: the accuracy of its last local model on its validation split).
- Eq. 4, layer-wise learning rate: ``eta_i = eta * (1 + log(1 + 1/||g_i||_2) * i / L)``
  for tensor ``i`` of ``L`` (1-based, input to output).
- Eqs. 5-9, upload masks: tensor ``i`` uploads its coordinates with the largest
  ``|change during local training|``, a share ``UP_i`` of them, where ``UP_i`` is i/L
  floored at 0.1 and capped at 1; the upload is ``theta * M``.

The server (Algorithm 1 line 12) is a rule of :mod:`audit.fl.aggregate`; the arms differ
only in that one piece, declared with each arm in :data:`ARMS` (the four server arms are
also :data:`SERVER_RULES`; they are the engine's named compositions,
``audit.fl.aggregate.MASKED_COMPOSITIONS``):

    literal       chain(weighted_mean())                 line 12 as printed: zeros enter
    carry-over    chain(weighted_mean(), carry_over())   unselected keep the old value
    selector-mean chain(selector_mean())                 mean over selectors, else old
    masked-delta  chain(masked_delta())                  old + mean_k(w_k M_k dtheta_k)

``as-released`` re-implements, from a description of the authors' release (its rules are
listed with the arm below; no code of the authors' repository is used), the server and
mask rules of the released code; every place where it departs from the printed equations is marked
``# as-released:`` on its line. ``fedavg`` is plain FedAvg (McMahan et al. 2017) on the
same model, data and seeds.

What "layer" means: the paper indexes layers ``i = 1..L`` and does not say whether a
layer is a parameter tensor or a module. ``Options.layer_unit`` makes it a stated choice:
``"tensor"`` (the default, every ``model.named_parameters()`` entry is one layer, so a
conv's weight and bias are two layers) or ``"module"`` (every module that owns parameters,
conv, linear or norm, is one layer; its weight and bias share i). On the smoke CNN
(3 modules, 6 tensors) the first weight keeps 1/6 of its coordinates under "tensor" and
1/3 under "module": the tensor reading masks more, so it is the harsher one for the
printed server rule (it pushes towards a collapse of the literal arm); the audit runs
the module reading as a sweep.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import torch
import torch.nn as nn
from torch.func import functional_call, grad, vmap

from audit.fl.aggregate import (MASKED_COMPOSITIONS, Rule, State, Upload, chain,
                                selector_mean)
from audit.fl.engine import Algorithm, evaluate
from audit.fl.evaluation import evaluate_many
from audit.fl.models import layer_names, layer_of, weight_layers
from audit.fl.training import grouped_chain

__all__ = [
    "ARMS", "CORRECTED", "FLAYER", "FedAvgTracked", "FlayerArm", "SERVER_RULES",
    "eq4_multiplier",
    "A_MAPS", "LAYER_UNITS", "head_mix", "kernel_slice_mask", "make_algorithm", "structure_metrics",
    "topk_mask",
    "upload_fraction",
]

@dataclass(frozen=True)
class FlayerArm:
    """What one arm of the audit runs: the server rule (Algorithm 1 line 12 or its fix)
    and whether the client takes the as-released pieces (``Options.released``).
    ``server`` None: plain FedAvg (:class:`FedAvgTracked`), no FLAYER piece."""

    server: Optional[Rule]
    released: bool = False


#: Every arm with the one piece in which it differs, in the audit's order; the four server
#: arms are the engine's named compositions (``audit.fl.aggregate.MASKED_COMPOSITIONS``,
#: the same objects the Flower strategies use).
ARMS: dict[str, FlayerArm] = {
    "literal": FlayerArm(MASKED_COMPOSITIONS["literal"]),  # line 12 as printed: zeros enter
    "carry-over": FlayerArm(MASKED_COMPOSITIONS["carry-over"]),
    "selector-mean": FlayerArm(MASKED_COMPOSITIONS["selector-mean"]),
    "masked-delta": FlayerArm(MASKED_COMPOSITIONS["masked-delta"]),
    # as-released: selector-mean + carry-over on the server (not line 12), and the
    # release's client pieces
    "as-released": FlayerArm(chain(selector_mean()), released=True),
    "fedavg": FlayerArm(None),
}
#: The server rules of the four arms that differ from each other only on the server.
SERVER_RULES: dict[str, Rule] = {name: arm.server for name, arm in ARMS.items()
                                 if arm.server is not None and not arm.released}
CORRECTED = ("carry-over", "selector-mean", "masked-delta")

GRAD_NORM_FLOOR = 1e-12  # see eq4_multiplier
LAYER_UNITS = ("tensor", "module")


# ----------------------------------------------------------------------------- equations
def upload_fraction(i: int, L: int, floor: float = 0.1, cap: float = 1.0) -> float:
    """Eq. 9 (with Eqs. 5-8): UP_i = min(max(i / L, floor), cap); printed: 0.1 and 1."""
    if not 1 <= i <= L:
        raise ValueError(f"layer index must lie in 1..{L}, got {i}")
    return min(max(i / L, floor), cap)


def eq4_multiplier(grad_norm: float, i: int, L: int,
                   floor: float = GRAD_NORM_FLOOR) -> float:
    """Eq. 4's factor eta_i / eta = 1 + log(1 + 1/||g_i||) * i / L.

    As ||g|| -> 0 it grows like (i/L) * log(1/||g||), without bound. ``floor`` clamps
    the norm from below (deviation: the printed equation divides by ||g|| unguarded, so
    a zero gradient gives an infinite rate and 0 * inf = NaN weights); pass ``floor=0``
    for the printed value (inf at 0)."""
    g = max(float(grad_norm), floor)
    if g == 0.0:
        return math.inf
    return 1.0 + math.log1p(1.0 / g) * i / L


def topk_mask(change: torch.Tensor, frac: float) -> torch.Tensor:
    """Eqs. 5-8: bool mask of the ceil(frac * n) coordinates with the largest |change|.

    The count is rounded up (the paper says "top UP_i fraction"; rounding up keeps at
    least one coordinate of every tensor). Ties at the cut are resolved by
    ``torch.topk`` (deterministic on one device)."""
    flat = change.detach().reshape(-1).abs()
    n = flat.numel()
    k = min(n, max(1, math.ceil(frac * n - 1e-9)))
    mask = torch.zeros(n, dtype=torch.bool, device=change.device)
    mask[torch.topk(flat, k, sorted=False).indices] = True
    return mask.reshape(change.shape)


def kernel_slice_mask(change: torch.Tensor, frac: float) -> torch.Tensor:
    """as-released: a conv weight (out, in, k, k) is masked per k x k kernel slice,
    keeping int(frac * k * k) entries of each slice (so a 1x1 conv keeps none)."""
    out_c, in_c, kh, kw = change.shape
    per = kh * kw
    keep = int(frac * per)  # as-released: truncation, per slice (not top-k over the layer)
    flat = change.detach().reshape(out_c * in_c, per).abs()
    mask = torch.zeros_like(flat, dtype=torch.bool)
    if keep > 0:
        order = torch.sort(flat, dim=1, descending=True, stable=True).indices[:, :keep]
        mask.scatter_(1, order, True)
    return mask.reshape(change.shape)


def head_mix(local: torch.Tensor, global_: torch.Tensor, a_local: float) -> torch.Tensor:
    """Eq. 2: A_l * local + A_g * global with A_g = 1 - A_l."""
    return a_local * local + (1.0 - a_local) * global_


# ----------------------------------------------------------------------------- metrics
def structure_metrics(new: State, prev: State, uploads: Sequence[Upload],
                      keys: Sequence[str], layers: Mapping[str, Sequence[str]]) -> dict:
    """Per-round facts of the aggregation over the parameter tensors ``keys``.

    p_c = (weight of the clients that selected coordinate c) / (weight of all uploads).
    - ``unselected_frac``: fraction of coordinates with p = 0;
    - ``unselected_nonzero``: how many of those are not exactly 0 in the new global;
    - ``shrunk_frac``: fraction with 0 < p < 1; ``mean_p``: mean p over p > 0;
    - ``literal_identity_err``: max over coordinates of |new - p * selector_mean| /
      max|p * selector_mean| (0 up to float rounding exactly when the new global is
      Algorithm 1 line 12 applied to masked uploads);
    - ``zero_frac``, ``norm``: exact-zero fraction and L2 norm of the new global's
      parameters; ``zero:<layer>``, ``norm:<layer>`` per layer.
    """
    total = unsel = unsel_nz = shrunk = 0
    p_sum = 0.0
    err = 0.0
    scale = 0.0
    sq = 0.0
    zeros = 0
    out: dict[str, float] = {}
    w = torch.tensor([float(u.weight) for u in uploads], dtype=torch.float64)
    W = float(w.sum())
    for k in keys:
        ref = new[k]
        sel_w = torch.zeros(ref.shape, dtype=torch.float64, device=ref.device)
        num = torch.zeros_like(sel_w)
        for wi, u in zip(w.tolist(), uploads):
            m = u.selected(k)
            mk = torch.ones_like(sel_w) if m is None else m.double()
            sel_w += wi * mk
            num += wi * mk * u.state[k].double()
        p = sel_w / W
        expected = num / W  # = p * selector_mean
        g = ref.double()
        total += g.numel()
        none = p == 0
        unsel += int(none.sum())
        unsel_nz += int((g[none] != 0).sum())
        shrunk += int(((p > 0) & (p < 1)).sum())
        p_sum += float(p[p > 0].sum())
        err = max(err, float((g - expected).abs().max()))
        scale = max(scale, float(expected.abs().max()))
        sq += float((g * g).sum())
        zeros += int((g == 0).sum())
    selected = total - unsel
    out.update({
        "unselected_frac": unsel / total,
        "unselected_nonzero": float(unsel_nz),
        "shrunk_frac": shrunk / total,
        "mean_p": p_sum / selected if selected else float("nan"),
        "literal_identity_err": err / scale if scale > 0 else err,
        "zero_frac": zeros / total,
        "norm": math.sqrt(sq),
    })
    for layer, lkeys in layers.items():
        v = torch.cat([new[k].detach().reshape(-1).double() for k in lkeys])
        out[f"norm:{layer}"] = float(v.norm())
        out[f"zero:{layer}"] = float((v == 0).double().mean())
    return out


class _Tracked:
    """Shared bookkeeping: parameter keys in depth order, layers, per-round metrics."""

    def _track_setup(self, model: nn.Module) -> None:
        self.pkeys = [n for n, _ in model.named_parameters()]
        by_layer: dict[str, list[str]] = {}
        for k in self.pkeys:
            by_layer.setdefault(layer_of(k), []).append(k)
        self.layers = {n: by_layer[n] for n in layer_names(model) if n in by_layer}
        self._max_mult = 1.0

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        out = structure_metrics(global_state, prev_global, uploads, self.pkeys, self.layers)
        out["max_lr_mult"] = self._max_mult
        self._max_mult = 1.0
        return out


class FedAvgTracked(_Tracked, Algorithm):
    """Plain FedAvg (McMahan et al. 2017, Alg. 1) with FLAYER's per-round metrics."""

    name = "fedavg"

    def setup(self, model, fed, config):
        self._track_setup(model)


# ----------------------------------------------------------------------------- FLAYER
@dataclass(frozen=True)
class Options:
    """FLAYER's knobs; ``released=True`` switches on the as-released client pieces.

    head_layers: s of Eq. 2, counted in weight layers (conv / linear) from the output.
    up_floor, up_cap: the clamp of Eq. 9 (printed 0.1 and 1).
    released: as-released masks (kernel slices, unmasked 2-D Linear weights and last two
        tensors, cap 0.9), A_l from the test split, the rate recomputed every epoch.
    released_lr_factor: the release's extra factor on the CNN's rates (x20 there); 1 by
        default (see FLAYER.param_lr_scale).
    probe_samples: how many of a client's training samples give the gradient of Eq. 4
        (0: the local batch size, i.e. the client's first minibatch-sized slice).
    layer_unit: what i and L of Eqs. 4 and 9 count: "tensor" (every parameter tensor) or
        "module" (every module owning parameters; weight and bias share i). See the module
        docstring: the paper does not say.
    write_back: as-released: the masks are written into the client's own model (the
        release masks a shared-memory view on the CPU), so the local model the client
        keeps for Eq. 2 is theta * M, not theta.
    """

    head_layers: int = 1
    up_floor: float = 0.1
    up_cap: float = 1.0
    released: bool = False
    released_lr_factor: float = 1.0
    probe_samples: int = 0
    layer_unit: str = "tensor"
    write_back: bool = False
    a_map: str = "identity"

    def __post_init__(self):
        if self.layer_unit not in LAYER_UNITS:
            raise ValueError(f"layer_unit must be one of {LAYER_UNITS}; got {self.layer_unit!r}")
        if self.a_map not in A_MAPS:
            raise ValueError(f"a_map must be one of {A_MAPS}; got {self.a_map!r}")


#: Readings of how Eq. 2 turns a client's recent local accuracy into A_l (the paper does
#: not say; the record's major comment 2): ``identity`` A_l = acc (ours, and the release's);
#: ``relative`` A_l = acc / (acc + acc_g), acc_g the received global model's accuracy on the
#: same split (the local model weighted by how it compares with the global one);
#: ``half`` A_l = 1/2 whatever the accuracy (the accuracy unused: plain averaging).
A_MAPS = ("identity", "relative", "half")


class FLAYER(_Tracked, Algorithm):
    """FLAYER's client (Eqs. 2, 4, 5-9) with a pluggable server rule (Alg. 1 line 12)."""

    name = "flayer"

    def __init__(self, rule: Rule, options: Options = Options(), name: str = "flayer"):
        super().__init__(rule)
        self.opt = options
        self.name = name

    # -- run-level -------------------------------------------------------------------
    def setup(self, model, fed, config):
        self._track_setup(model)
        self.model, self.fed, self.cfg = model, fed, config
        self.bkeys = [n for n, _ in model.named_buffers()]
        self.tindex = {k: i for i, k in enumerate(self.pkeys, 1)}  # tensor positions
        if self.opt.layer_unit == "module":
            mods = list(self.layers)  # weight-bearing modules, input to output
            self.index = {k: mods.index(layer_of(k)) + 1 for k in self.pkeys}
            L = len(mods)
        else:
            self.index = dict(self.tindex)  # i of Eqs. 4 and 9
            L = len(self.pkeys)
        self.L = L
        cap = 0.9 if self.opt.released else self.opt.up_cap  # as-released: cap 0.9, not 1
        self.up = {k: upload_fraction(i, L, self.opt.up_floor, cap)
                   for k, i in self.index.items()}
        heads = weight_layers(model)[-self.opt.head_layers:]
        self.head_keys = [k for k in model.state_dict() if layer_of(k) in heads]
        self._lr_cache: dict = {}
        self._masks: dict = {}  # (client, round) -> the write-back masks, for upload
        self.probe = self.opt.probe_samples or config.batch_size
        self._vprobe = vmap(grad(self._probe_loss), randomness="different")
        self._chain = grouped_chain(model, config)  # batched evaluation, where trained so
        self._has_dropout = any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0
                                for m in model.modules())

    def init_client_state(self, client_id, global_state):
        return {"local": None, "a_local": 0.0}

    # -- client side -----------------------------------------------------------------
    def client_init(self, received, client_state, client_id, round):
        """Eq. 2 on the head; the body is the received global model."""
        start = dict(received)
        local = client_state["local"] if client_state else None
        if local is not None:
            a = self._a_local(client_state["a_local"], received, client_id)
            for k in self.head_keys:
                if start[k].dtype.is_floating_point:
                    start[k] = head_mix(local[k], received[k], a)
        return start

    def _a_local(self, acc: float, received: State, client_id: int) -> float:
        """A_l of Eq. 2 from the client's recent accuracy, under the chosen reading."""
        if self.opt.a_map == "identity":
            return acc
        if self.opt.a_map == "half":
            return 0.5
        c = self.fed.clients[client_id]
        x, y = (c.x_test, c.y_test) if self.opt.released else (c.x_val, c.y_val)
        acc_g, _ = evaluate(self.model, received, x, y)
        acc_g = 0.0 if math.isnan(acc_g) else acc_g
        return acc / (acc + acc_g) if acc + acc_g > 0 else 0.5

    def _grad_norms(self, params: State, client_id: int) -> dict:
        """||g_i|| for every tensor: the gradient of the client's training loss on its
        first ``probe`` training samples (one minibatch) at ``params``. Our reading of
        g_i: the printed equation does not say on which batch it is taken."""
        c = self.fed.clients[client_id]
        x, y = c.x_train[:self.probe], c.y_train[:self.probe]
        p = {k: params[k].detach().requires_grad_(True) for k in self.pkeys}
        # BatchNorm in train mode normalises by batch statistics; its running-stat
        # buffers get a throwaway copy so that this extra pass changes nothing
        b = {k: v.detach().clone() for k, v in self.model.named_buffers()}
        with torch.enable_grad():
            loss = nn.functional.cross_entropy(functional_call(self.model, (p, b), (x,)), y)
            g = torch.autograd.grad(loss, [p[k] for k in self.pkeys], allow_unused=True)
        norms = torch.stack([torch.zeros((), device=x.device) if gi is None else gi.norm()
                             for gi in g]).tolist()
        return dict(zip(self.pkeys, norms))

    def _grad_norms_batch(self, params: Sequence[State], client_ids: Sequence[int]) -> list:
        """:meth:`_grad_norms` for several clients: one batched pass for every group of
        clients with the same probe size (the engine's grouped chain where it trains on
        it, else ``vmap``; one client alone takes the plain pass).
        Equal to the client-by-client probe up to rounding. A model with dropout is
        probed client by client, in order: ``vmap`` would draw the masks in another
        order, so the probe and the training after it would see other masks."""
        if self._has_dropout:
            return [self._grad_norms(p, c) for p, c in zip(params, client_ids)]
        out: list = [None] * len(client_ids)
        groups: dict = {}
        for i, cid in enumerate(client_ids):
            n = min(self.probe, len(self.fed.clients[cid].y_train))
            groups.setdefault(n, []).append(i)
        for n, rows in groups.items():
            if len(rows) == 1 or n == 0:
                for i in rows:
                    out[i] = self._grad_norms(params[i], client_ids[i])
                continue
            x = torch.stack([self.fed.clients[client_ids[i]].x_train[:n] for i in rows])
            y = torch.stack([self.fed.clients[client_ids[i]].y_train[:n] for i in rows])
            p = {k: torch.stack([params[i][k].detach() for i in rows]) for k in self.pkeys}
            # throwaway running statistics, one copy a client (see _grad_norms)
            b = {k: v.detach().unsqueeze(0).repeat(len(rows), *([1] * v.dim())).contiguous()
                 for k, v in self.model.named_buffers()}
            if self._chain is not None:  # the engine's grouped chain: the same gradients
                g = self._chain.grads(p, x, y, None, b)
            else:
                g = self._vprobe(p, b, x, y)
            norms = torch.stack([g[k].reshape(len(rows), -1).norm(dim=1)
                                 for k in self.pkeys], dim=1).tolist()
            for i, row in zip(rows, norms):
                out[i] = dict(zip(self.pkeys, row))
        return out

    def _probe_loss(self, p, b, x, y):
        return nn.functional.cross_entropy(functional_call(self.model, (p, b), (x,)), y)

    def _probes(self, epoch: int, last_grads) -> bool:
        """Whether Eq. 4's rate for this epoch needs the gradient probe."""
        if epoch > 0 and not self.opt.released:
            return False  # printed: the rate of the round's first epoch is kept
        return not (epoch > 0 and last_grads is not None)

    def param_lr_scale(self, params, client_id, round, epoch, last_grads):
        """Eq. 4 per tensor: 1 + log(1 + 1/||g_i||) * i / L."""
        norms = self._grad_norms(params, client_id) if self._probes(epoch, last_grads) else None
        return self._eq4(client_id, round, epoch, last_grads, norms)

    def param_lr_scale_batch(self, requests, round):
        """Eq. 4 for several clients, their gradient probes in one batched pass."""
        probe = [i for i, q in enumerate(requests) if self._probes(q.epoch, q.last_grads)]
        norms = dict(zip(probe, self._grad_norms_batch(
            [requests[i].params for i in probe], [requests[i].client_id for i in probe])))
        return [self._eq4(q.client_id, round, q.epoch, q.last_grads, norms.get(i))
                for i, q in enumerate(requests)]

    def _eq4(self, client_id, round, epoch, last_grads, norms):
        L = self.L
        if epoch > 0 and not self.opt.released:
            # printed: one rate per tensor for the round (set when local training starts)
            return self._lr_cache.get((client_id, round))
        if norms is None:  # as-released, a later epoch: the last step's gradient
            norms = {k: float(last_grads[k].norm()) for k in self.pkeys}
        scale = {k: eq4_multiplier(norms[k], self.index[k], L) for k in self.pkeys}
        if self.opt.released and self.opt.released_lr_factor != 1.0:
            # as-released: the release multiplies the CNN's rates by 20; off by default
            scale = {k: v * self.opt.released_lr_factor for k, v in scale.items()}
        self._max_mult = max(self._max_mult, max(scale.values()))
        self._lr_cache[(client_id, round)] = scale
        return scale

    def _acc_split(self, client_id: int) -> tuple:
        c = self.fed.clients[client_id]
        if self.opt.released:
            return c.x_test, c.y_test  # as-released: A_l from the client's test split
        return c.x_val, c.y_val

    def update_client_state(self, client_state, start, after, client_id, round):
        """Keep the trained model as the client's local model; A_l = its accuracy."""
        acc, _ = evaluate(self.model, after, *self._acc_split(client_id))
        return self._keep(start, after, client_id, round, acc)

    def update_client_state_batch(self, updates, round):
        """:meth:`update_client_state` for the round's clients, their accuracies in one
        grouped evaluation where the engine trains on the grouped chain."""
        res = evaluate_many(self.model, [u.after for u in updates],
                            [self._acc_split(u.client_id) for u in updates],
                            chain=self._chain, chunk=self.cfg.client_chunk or len(updates))
        return [self._keep(u.start, u.after, u.client_id, round, acc)
                for u, (acc, _) in zip(updates, res)]

    def _keep(self, start, after, client_id, round, acc):
        acc = 0.0 if math.isnan(acc) else acc  # no samples: take the global head
        self._lr_cache.pop((client_id, round), None)
        local = {k: v.detach().clone() for k, v in after.items()}
        if self.opt.released and self.opt.write_back:
            # as-released: the masks are written into the client's own model, so the
            # local model kept for Eq. 2 is theta * M (A_l above is taken before masking:
            # our reading of the order)
            masks = {k: self._mask(k, after[k] - start[k]) for k in self.pkeys}
            for k, m in masks.items():
                if m is not None:
                    local[k] = local[k] * m
            # upload takes the same masks (the same change), not computed twice; entries
            # of earlier rounds (an upload that never came: a dropped client) go
            if any(r != round for _, r in self._masks):
                self._masks = {key: v for key, v in self._masks.items() if key[1] == round}
            self._masks[(client_id, round)] = (start, after, masks)
        return {"local": local, "a_local": acc}

    def _mask(self, k: str, change: torch.Tensor) -> Optional[torch.Tensor]:
        frac = self.up[k]
        if not self.opt.released:
            return topk_mask(change, frac)
        L = len(self.pkeys)
        if self.tindex[k] > L - 2:
            return None  # as-released: the last two tensors (head) always go up in full
        if change.dim() == 2:
            return None  # as-released: 2-D Linear weights are never masked
        if change.dim() == 4:
            return kernel_slice_mask(change, frac)  # as-released: per kernel slice
        return topk_mask(change, frac)

    def upload(self, before, after, client_id, round, n_samples):
        """Eq. 9: theta * M for every parameter tensor; buffers go up unmasked (the paper
        does not mention BatchNorm statistics; our choice)."""
        state, mask = dict(after), {}
        kept = self._masks.pop((client_id, round), None)
        if kept is not None and (kept[0] is not before or kept[1] is not after):
            kept = None  # another pair of states: compute afresh
        for k in self.pkeys:
            m = kept[2][k] if kept is not None else self._mask(k, after[k] - before[k])
            if m is None:
                continue
            state[k] = after[k] * m
            mask[k] = m
        if self.opt.released:
            # as-released: the server counts a coordinate as selected when its uploaded
            # value is non-zero (the selector-mean rule divides by that count)
            mask = {k: state[k] != 0 for k in self.pkeys}
        return Upload(state, mask, float(n_samples))


def make_algorithm(arm: str, head_layers: int = 1, released_lr_factor: float = 1.0,
                   layer_unit: str = "tensor", write_back: bool = True,
                   a_map: str = "identity") -> Algorithm:
    """The algorithm of one arm of the audit (see the module docstring).

    ``released_lr_factor`` and ``write_back`` apply to ``as-released`` only (the release
    multiplies the CNN's rates by 20: the caller passes 20 for a CNN); ``layer_unit``
    and ``a_map`` (the reading of Eq. 2's A_l, :data:`A_MAPS`) to every FLAYER arm."""
    if arm not in ARMS:
        raise ValueError(f"unknown FLAYER arm {arm!r}; arms: {', '.join(ARMS)}")
    piece = ARMS[arm]
    if piece.server is None:
        return FedAvgTracked()
    if piece.released:
        return FLAYER(piece.server,
                      Options(head_layers=head_layers, released=True,
                              released_lr_factor=released_lr_factor,
                              layer_unit=layer_unit, write_back=write_back,
                              a_map=a_map), name=arm)
    return FLAYER(piece.server, Options(head_layers=head_layers, layer_unit=layer_unit,
                                        a_map=a_map), name=arm)
