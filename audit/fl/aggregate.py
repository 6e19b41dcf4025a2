"""Server aggregation rules as small composable pieces (optax style).

A client's message is an :class:`Upload` ``(state, mask, weight)``: a dict name ->
tensor, an optional dict name -> bool tensor saying which coordinates the client
selected (``None`` = all), and its aggregation weight (usually n_k).

A *piece* is a factory returning a pure function

    piece(prev: State, uploads: Sequence[Upload], proposed: State) -> State

where ``prev`` is the previous global state and ``proposed`` is what the pieces
before it produced (``chain`` starts from ``prev``). :func:`chain` composes pieces
into a *rule* ``rule(prev, uploads) -> State``. So the rules the FLAYER audit
compares differ in one visible piece each (arXiv 2412.07062, Algorithm 1 line 12):

    literal       = chain(weighted_mean())                # zeros of masked uploads enter
    carry-over    = chain(weighted_mean(), carry_over())  # unselected keep prev
    selector-mean = chain(selector_mean())                # mean over selectors, else prev
    masked-delta  = chain(masked_delta())                 # prev + mean_k(w_k M_k dW_k)
    FedAvg        = chain(weighted_mean())                # with unmasked uploads
    FedBN         = chain(weighted_mean(), keep_local(is_norm_key(model)))

FedAvg: McMahan et al. 2017 (arXiv 1602.05629), Alg. 1: w <- sum_k (n_k / n) w_k.
FedBN: Li et al. 2021 (arXiv 2102.07623): normalisation layers are not averaged.

Numerics: means accumulate in float64 and are cast back to each tensor's dtype, so
the weighted mean of identical tensors returns those tensors exactly; integer
buffers (BatchNorm's ``num_batches_tracked``) are rounded back to integers.
Keys present in ``prev`` but in no upload keep their previous value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import torch

__all__ = [
    "MASKED_COMPOSITIONS", "Piece", "Rule", "State", "Upload",
    "carry_over", "chain", "fedavg", "keep_local", "masked_delta", "selector_mean",
    "weighted_mean",
]

State = Mapping[str, torch.Tensor]


@dataclass(frozen=True, eq=False)
class Upload:
    """One client's upload.

    Attributes:
        state: name -> tensor (already masked to zero where the client masked, if the
            algorithm says so; the rules never apply ``mask`` to ``state`` themselves,
            except :func:`masked_delta`, which multiplies the delta by it).
        mask: name -> bool tensor of selected coordinates, or None (all selected).
            A name missing from a non-None mask means "all selected" for that name.
        weight: aggregation weight (n_k for FedAvg); must be >= 0.
    """

    state: Mapping[str, torch.Tensor]
    mask: Optional[Mapping[str, torch.Tensor]] = None
    weight: float = 1.0

    def selected(self, name: str) -> Optional[torch.Tensor]:
        """Bool mask for ``name``, or None when every coordinate is selected."""
        if self.mask is None or name not in self.mask:
            return None
        return self.mask[name].bool()


Piece = Callable[[State, Sequence[Upload], State], dict]
Rule = Callable[[State, Sequence[Upload]], dict]


def _weights(uploads: Sequence[Upload]) -> list[float]:
    w = [float(u.weight) for u in uploads]
    if any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError(f"upload weights must be >= 0 with a positive sum, got {w}")
    return w


def _cast(x64: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.dtype.is_floating_point or like.dtype.is_complex:
        return x64.to(like.dtype)
    return x64.round().to(like.dtype)


def _holders(name: str, uploads: Sequence[Upload]) -> list[int]:
    return [i for i, u in enumerate(uploads) if name in u.state]


def _held(proposed: State, uploads: Sequence[Upload]):
    """``(name, holders, weights)`` for every tensor that some upload carries."""
    for name in proposed:
        hold = _holders(name, uploads)
        if hold:
            yield name, hold, _weights([uploads[i] for i in hold])


def chain(*pieces: Piece) -> Rule:
    """Compose pieces left to right into a rule ``(prev, uploads) -> new state``."""

    def rule(prev: State, uploads: Sequence[Upload]) -> dict:
        if not uploads:
            return dict(prev)
        out = dict(prev)
        for piece in pieces:
            out = piece(prev, uploads, out)
        return out

    return rule


def weighted_mean() -> Piece:
    """FedAvg's weighted mean of the uploaded states: sum_k w_k x_k / sum_k w_k.

    Masks are ignored: when the uploaded states are masked to zero (FLAYER's
    ``theta * M`` upload), those zeros enter the mean (Algorithm 1 line 12 as printed).
    """

    def piece(prev: State, uploads: Sequence[Upload], proposed: State) -> dict:
        out = dict(proposed)
        for name, hold, w in _held(proposed, uploads):
            x = torch.stack([uploads[i].state[name] for i in hold]).double()
            wt = torch.tensor(w, dtype=torch.float64, device=x.device)
            acc = torch.tensordot(wt, x, dims=1)  # sum_k w_k x_k, one call for all clients
            out[name] = _cast(acc / sum(w), proposed[name])
        return out

    return piece


def _any_selected(name: str, uploads: Sequence[Upload], like: torch.Tensor):
    """Union of the selection masks (None when some upload selects everything)."""
    union = torch.zeros(like.shape, dtype=torch.bool, device=like.device)
    for u in uploads:
        if name not in u.state:
            continue
        m = u.selected(name)
        if m is None:
            return None
        union |= m
    return union


def carry_over() -> Piece:
    """Coordinates that no client selected keep the previous global value."""

    def piece(prev: State, uploads: Sequence[Upload], proposed: State) -> dict:
        out = dict(proposed)
        for name in proposed:
            union = _any_selected(name, uploads, prev[name])
            if union is not None:
                out[name] = torch.where(union, proposed[name], prev[name])
        return out

    return piece


def selector_mean() -> Piece:
    """Per coordinate, the weighted mean over the clients that selected it
    (sum_k w_k M_k x_k / sum_k w_k M_k); where no client did, the previous value."""

    def piece(prev: State, uploads: Sequence[Upload], proposed: State) -> dict:
        out = dict(proposed)
        for name, hold, w in _held(proposed, uploads):
            num = torch.zeros(prev[name].shape, dtype=torch.float64, device=prev[name].device)
            den = torch.zeros_like(num)
            for wi, i in zip(w, hold):
                m = uploads[i].selected(name)
                mk = torch.ones_like(num) if m is None else m.double()
                num += wi * mk * uploads[i].state[name].double()
                den += wi * mk
            mean = num / den.clamp_min(1e-300)
            out[name] = torch.where(den > 0, _cast(mean, prev[name]), prev[name])
        return out

    return piece


def masked_delta() -> Piece:
    """prev + sum_k w_k M_k (x_k - prev) / sum_k w_k  (sparse-update aggregation).

    Only the selected part of each client's change is applied; unselected
    coordinates contribute a zero delta (so they shrink nothing)."""

    def piece(prev: State, uploads: Sequence[Upload], proposed: State) -> dict:
        out = dict(proposed)
        for name, hold, w in _held(proposed, uploads):
            p64 = prev[name].double()
            acc = torch.zeros_like(p64)
            for wi, i in zip(w, hold):
                m = uploads[i].selected(name)
                d = uploads[i].state[name].double() - p64
                acc += wi * (d if m is None else d * m)
            out[name] = _cast(p64 + acc / sum(w), prev[name])
        return out

    return piece


def keep_local(predicate: Callable[[str], bool]) -> Piece:
    """Names matching ``predicate`` are not aggregated: the global keeps ``prev``
    (FedBN: the clients keep their own normalisation layers)."""

    def piece(prev: State, uploads: Sequence[Upload], proposed: State) -> dict:
        return {k: (prev[k] if predicate(k) else v) for k, v in proposed.items()}

    return piece


def fedavg() -> Rule:
    """The FedAvg rule, ``chain(weighted_mean())``."""
    return chain(weighted_mean())


#: The four ways of aggregating masked uploads, named compositions of the pieces above,
#: each built once: an algorithm's arm and a Flower strategy that name one get the same
#: rule object (FLAYER's four server arms, arXiv 2412.07062 Algorithm 1 line 12 and its
#: fixes, are these, and so are ``audit.fl.flower.RULES``' entries of these names).
#:
#:     literal        the weighted mean of the uploads as sent (masked zeros enter)
#:     carry-over     that mean, and coordinates no client selected keep prev
#:     selector-mean  per coordinate the mean over the clients that selected it, else prev
#:     masked-delta   prev + the weighted mean of the selected part of each change
MASKED_COMPOSITIONS: dict[str, Rule] = {
    "literal": chain(weighted_mean()),
    "carry-over": chain(weighted_mean(), carry_over()),
    "selector-mean": chain(selector_mean()),
    "masked-delta": chain(masked_delta()),
}
