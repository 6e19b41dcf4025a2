"""Byte accounting: every transfer of a federated run, counted from the tensors sent.

Public API (stable; falsifiers import these names)
--------------------------------------------------
- ``TensorBytes`` (frozen): one tensor of one message: name, kind ("param" / "buffer"),
  element count, element size, the coordinates actually sent (``nnz``), the encoding
  ("dense" or "sparse") and the bytes on the wire.
- ``dense_bytes(t)``: ``t.element_size() * t.numel()``.
- ``sparse_bytes(values_element_size, nnz, index_bytes=4)``: values + flat indices,
  ``nnz * (values_element_size + index_bytes)``.
- ``tensor_bytes(name, t, kind, mask=None, encoding="auto", index_bytes=4)``: counts one
  tensor. Without a mask (or ``encoding="dense"``) the tensor is sent dense. With a
  mask, ``encoding="sparse"`` sends the selected values and their flat indices,
  ``"auto"`` sends whichever of dense / sparse is smaller (what a sensible protocol
  would do; ties go to dense).
- ``message(state, param_names=None, mask=None, encoding="auto", index_bytes=4)``:
  the tensors of one message (a state dict, or any name -> tensor mapping). Names in
  ``param_names`` are parameters, the others buffers; ``param_names=None`` means all
  parameters.
- ``Transfer`` (frozen): direction ("up" or "down"), round, client, tensors; ``bytes``,
  ``param_bytes``, ``buffer_bytes``, ``names``.
- ``CommLog``: an append-only list of transfers with ``record(...)``, ``total(direction=None,
  kind=None)``, ``per_round()`` -> {round: {"up": bytes, "down": bytes}},
  ``per_client()``, ``rows()`` (one JSON-able row per transfer) and ``summary()``.
- ``metered(algorithm, log, param_names, encoding="auto")``: makes an engine
  ``Algorithm`` record every ``broadcast`` (down) and ``upload`` (up) it performs (see
  its docstring for evaluation calls and checkpoints).
- ``CommLog.state_dict()`` / ``load_state_dict(state)``: the transfers as plain lists,
  tuples and numbers (what ``torch.load(weights_only=True)`` reads back); loading
  REPLACES the log's transfers, so a run resumed from a checkpoint counts every round
  once.

Conventions. Bytes are exact integers. Tensors on the ``meta`` device count like real
ones (their element size and count are known), so the paper-size protocol of a
ResNet-18 can be counted without allocating it. An upload that leaves a key out sends
nothing for it; a mask that selects nothing of a tensor sends nothing for it under
``"sparse"`` / ``"auto"`` (0 values, 0 indices). Flat indices default to 4 bytes
(int32, enough for any tensor under 2**31 elements); pass ``index_bytes=8`` for int64.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping, Optional

import torch

__all__ = [
    "CommLog", "TensorBytes", "Transfer", "dense_bytes", "message", "metered",
    "sparse_bytes", "tensor_bytes",
]

DIRECTIONS = ("up", "down")
ENCODINGS = ("dense", "sparse", "auto")


def dense_bytes(t: torch.Tensor) -> int:
    """Bytes of ``t`` sent as a dense array: element size x element count."""
    return int(t.element_size()) * int(t.numel())


def sparse_bytes(values_element_size: int, nnz: int, index_bytes: int = 4) -> int:
    """Bytes of ``nnz`` selected values sent with one flat index each."""
    if nnz < 0 or values_element_size <= 0 or index_bytes <= 0:
        raise ValueError(f"bad sparse size: nnz={nnz}, element={values_element_size}, "
                         f"index={index_bytes}")
    return int(nnz) * (int(values_element_size) + int(index_bytes))


@dataclass(frozen=True)
class TensorBytes:
    """One tensor of one message.

    Attributes:
        name: the tensor's key (state-dict name).
        kind: "param" or "buffer".
        numel, element_size, dtype: of the full tensor.
        nnz: coordinates sent (numel when dense).
        encoding: "dense" or "sparse".
        bytes: bytes on the wire for this tensor.
        dense: bytes it would take dense (element_size x numel), for comparison.
    """

    name: str
    kind: str
    numel: int
    element_size: int
    dtype: str
    nnz: int
    encoding: str
    bytes: int

    @property
    def dense(self) -> int:
        return self.numel * self.element_size


def tensor_bytes(name: str, t: torch.Tensor, kind: str = "param",
                 mask: Optional[torch.Tensor] = None, encoding: str = "auto",
                 index_bytes: int = 4) -> TensorBytes:
    """Count one tensor (see the module docstring for the encodings)."""
    if kind not in ("param", "buffer"):
        raise ValueError(f"kind must be 'param' or 'buffer', got {kind!r}")
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    numel, es = int(t.numel()), int(t.element_size())
    dense = numel * es
    if mask is None or encoding == "dense":
        return TensorBytes(name, kind, numel, es, str(t.dtype).replace("torch.", ""),
                           numel, "dense", dense)
    if tuple(mask.shape) != tuple(t.shape):
        raise ValueError(f"mask of {name!r} has shape {tuple(mask.shape)}, tensor "
                         f"{tuple(t.shape)}")
    nnz = int(mask.bool().sum())
    sparse = sparse_bytes(es, nnz, index_bytes)
    if encoding == "auto" and dense <= sparse:
        return TensorBytes(name, kind, numel, es, str(t.dtype).replace("torch.", ""),
                           numel, "dense", dense)
    return TensorBytes(name, kind, numel, es, str(t.dtype).replace("torch.", ""),
                       nnz, "sparse", sparse)


def message(state: Mapping[str, torch.Tensor], param_names: Optional[Iterable[str]] = None,
            mask: Optional[Mapping[str, torch.Tensor]] = None, encoding: str = "auto",
            index_bytes: int = 4) -> tuple[TensorBytes, ...]:
    """The tensors of one message, in the mapping's order.

    ``mask`` maps names to bool tensors of the selected coordinates; a name absent from
    it (or ``mask=None``) is sent whole and dense.
    """
    params = None if param_names is None else set(param_names)
    out = []
    for name, t in state.items():
        kind = "param" if params is None or name in params else "buffer"
        m = None if mask is None else mask.get(name)
        out.append(tensor_bytes(name, t, kind, m, encoding, index_bytes))
    return tuple(out)


@dataclass(frozen=True)
class Transfer:
    """One message: who sent what to whom, in which round."""

    direction: str
    round: int
    client: int
    tensors: tuple[TensorBytes, ...]
    label: str = ""  # what the message is in the protocol (e.g. "cluster model")

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)

    @property
    def param_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors if t.kind == "param")

    @property
    def buffer_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors if t.kind == "buffer")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    def row(self) -> dict:
        return {"direction": self.direction, "round": self.round, "client": self.client,
                "label": self.label, "tensors": list(self.names), "bytes": self.bytes,
                "param_bytes": self.param_bytes, "buffer_bytes": self.buffer_bytes}


_TENSOR_FIELDS = tuple(f.name for f in fields(TensorBytes))


class CommLog:
    """Every transfer of a run, in the order recorded."""

    def __init__(self) -> None:
        self.transfers: list[Transfer] = []

    def __len__(self) -> int:
        return len(self.transfers)

    def record(self, direction: str, round: int, client: int,
               state: Mapping[str, torch.Tensor], *, param_names=None, mask=None,
               encoding: str = "auto", index_bytes: int = 4, label: str = "") -> Transfer:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
        tr = Transfer(direction, int(round), int(client),
                      message(state, param_names, mask, encoding, index_bytes), label)
        self.transfers.append(tr)
        return tr

    def add(self, transfer: Transfer) -> None:
        if transfer.direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'up' or 'down', got {transfer.direction!r}")
        self.transfers.append(transfer)

    def total(self, direction: Optional[str] = None, kind: Optional[str] = None,
              label: Optional[str] = None) -> int:
        """Bytes over all transfers, optionally of one direction / tensor kind / label."""
        tot = 0
        for tr in self.transfers:
            if direction is not None and tr.direction != direction:
                continue
            if label is not None and tr.label != label:
                continue
            tot += tr.bytes if kind is None else sum(
                t.bytes for t in tr.tensors if t.kind == kind)
        return tot

    def per_round(self, kind: Optional[str] = None) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = defaultdict(lambda: {"up": 0, "down": 0})
        for tr in self.transfers:
            out[tr.round][tr.direction] += tr.bytes if kind is None else sum(
                t.bytes for t in tr.tensors if t.kind == kind)
        return {r: dict(v) for r, v in sorted(out.items())}

    def per_client(self) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = defaultdict(lambda: {"up": 0, "down": 0})
        for tr in self.transfers:
            out[tr.client][tr.direction] += tr.bytes
        return {c: dict(v) for c, v in sorted(out.items())}

    def rows(self) -> list[dict]:
        return [tr.row() for tr in self.transfers]

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Every transfer as plain data (saved in engine checkpoints): one dict per
        transfer, its tensors as tuples in :class:`TensorBytes` field order."""
        return {"transfers": [
            {"direction": tr.direction, "round": tr.round, "client": tr.client,
             "label": tr.label,
             "tensors": [tuple(getattr(t, f) for f in _TENSOR_FIELDS) for t in tr.tensors]}
            for tr in self.transfers]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned. The log's transfers are REPLACED
        (not extended): the saved log already holds every round up to the checkpoint."""
        self.transfers = [
            Transfer(d["direction"], int(d["round"]), int(d["client"]),
                     tuple(TensorBytes(*row) for row in d["tensors"]), d["label"])
            for d in state["transfers"]]

    def summary(self) -> dict:
        return {"transfers": len(self.transfers),
                "up": self.total("up"), "down": self.total("down"),
                "up_params": self.total("up", "param"),
                "up_buffers": self.total("up", "buffer"),
                "down_params": self.total("down", "param"),
                "down_buffers": self.total("down", "buffer"),
                "per_round": {str(r): v for r, v in self.per_round().items()}}


def _metered_broadcast(self, global_state, client_id, round):
    sent = super(self._comm_base, self).broadcast(global_state, client_id, round)
    if self._comm_paused:  # an evaluation, not a transfer
        return sent
    log, params, enc, ib = self._comm
    log.record("down", round, client_id, sent, param_names=params, encoding=enc,
               index_bytes=ib, label="broadcast")
    return sent


def _metered_upload(self, before, after, client_id, round, n_samples):
    up = super(self._comm_base, self).upload(before, after, client_id, round,
                                             n_samples=n_samples)
    log, params, enc, ib = self._comm
    log.record("up", round, client_id, up.state, param_names=params, mask=up.mask,
               encoding=enc, index_bytes=ib, label="upload")
    return up


def _metered_personal_state(self, global_state, client_state, client_id, round):
    self._comm_paused = True
    try:
        return super(self._comm_base, self).personal_state(global_state, client_state,
                                                           client_id, round)
    finally:
        self._comm_paused = False


def _metered_state_dict(self):
    base = super(self._comm_base, self).state_dict()
    return {"algorithm": base, "comm_log": self._comm[0].state_dict()}


def _metered_load_state_dict(self, state):
    super(self._comm_base, self).load_state_dict(state["algorithm"])
    self._comm[0].load_state_dict(state["comm_log"])


def metered(algorithm: Any, log: CommLog, param_names: Optional[Iterable[str]] = None,
            encoding: str = "auto", index_bytes: int = 4) -> Any:
    """Make ``algorithm`` log every broadcast (down) and upload (up); returns it.

    The algorithm's class is swapped IN PLACE for a subclass whose ``broadcast`` and
    ``upload`` call the original ones and record what they return, so every other hook,
    attribute and ``type(...)`` check of the engine behaves as before. A ``broadcast``
    made inside ``personal_state`` (the engine's evaluation of a client's model) is not
    a transfer and is not recorded.

    ``param_names``: the model's parameter names (``dict(model.named_parameters())``),
    so that buffers are listed apart; None counts every tensor as a parameter.

    Checkpoints: ``state_dict()`` returns ``{"algorithm": <the original state_dict>,
    "comm_log": log.state_dict()}`` and ``load_state_dict`` restores both, replacing the
    log's transfers with the saved ones; a run resumed by the engine thus ends with the
    same log as an uninterrupted run (no round lost, none counted twice).
    """
    base = type(algorithm)
    if getattr(algorithm, "_comm", None) is not None:
        raise ValueError("algorithm is already metered")
    cls = type(f"Metered{base.__name__}", (base,),
               {"broadcast": _metered_broadcast, "upload": _metered_upload,
                "personal_state": _metered_personal_state,
                "state_dict": _metered_state_dict,
                "load_state_dict": _metered_load_state_dict, "_comm_base": None})
    cls._comm_base = cls
    algorithm._comm = (log, None if param_names is None else frozenset(param_names),
                       encoding, index_bytes)
    algorithm._comm_paused = False
    algorithm.__class__ = cls
    return algorithm
