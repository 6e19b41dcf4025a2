"""Datasets, partitions and per-client splits for the federated simulations.

Public API (stable; falsifiers import these names)
--------------------------------------------------
Datasets (all return :class:`Dataset`, tensors on the CPU):

- ``load_digits(seed=0, test_fraction=0.2)``: scikit-learn's 8x8 digits, pixels
  scaled to [0, 1], shape ``N x 1 x 8 x 8``, stratified train/test split seeded by
  ``seed``. Offline, the default at smoke scale.
- ``synthetic_classification(seed, n, num_classes, shape, test_fraction=0.2,
  noise=1.0)``: Gaussian class means plus isotropic noise, for property tests.
- ``load_cifar10(root)``, ``load_cifar100(root)``: the torchvision on-disk pickle
  format (``cifar-10-batches-py/data_batch_1..5, test_batch`` and
  ``cifar-100-python/train, test``).
- ``load_svhn(root)``: ``train_32x32.mat`` / ``test_32x32.mat`` (label 10 means 0).
- ``load_tiny_imagenet(root)``: ``tiny-imagenet-200/{wnids.txt, train/<wnid>/images/
  *.JPEG, val/images/*.JPEG, val/val_annotations.txt}``; the labelled val split is
  the test set.
- ``load_stdlib_chars(seq_len=64, max_chars=200_000)``: a character-level corpus read
  deterministically from the ``.py`` files of Python's standard library directory
  (sorted by name); no download on any machine.
- ``load_ptb(root, seq_len=35)``: word-level Penn Treebank from ``ptb.train.txt``,
  ``ptb.valid.txt``, ``ptb.test.txt`` (``<eos>`` appended to each line).
- ``load_dataset(name, data_dir=None, seed=0, **kw)``: dispatcher; paper-scale sets
  read ``data_dir`` or the ``AUDIT_DATA`` environment variable.
- ``DatasetNotFound``: the one error for a missing path or a wrong layout; its
  message names the expected layout. ``DatasetInvalid`` (a subclass): a file is there
  but its content is not what the format holds; one line naming the file.
- ``data_fingerprint(config, data_dir)``, ``dataset_fingerprint(name, root)``,
  ``dataset_files(name, root)``: the identity of the data a run reads (sha256 over
  relative path, size and content of each file), for the run cache and checkpoint keys.

Reading is safe on files from anywhere: CIFAR pickles go through a restricted unpickler
that builds only dicts, lists, bytes, numbers and numpy arrays (any other global, such
as ``os.system``, is refused before it is called); every loader checks shapes, label
counts and label ranges (and image sizes, text length) before use.

Language-model datasets hold token ids: ``x`` is ``N x T`` (int64) and ``y`` is the
next-token sequence ``N x T``; ``num_classes`` is the vocabulary size.

Partitions (each returns ``list[np.ndarray]`` of indices into the labels given,
one array per client, all driven by an explicit ``numpy.random.Generator``):

- ``dirichlet_partition(labels, n_clients, alpha, rng, min_size=10)``: per class,
  proportions ~ Dir(alpha) over clients, resampled until every client holds at
  least ``min_size`` samples (the usual pFL split, Hsu et al. 2019, arXiv 1909.06335;
  clients are disjoint).
- ``dirichlet_fixed_size_partition(labels, n_clients, n_per_client, alpha, rng)``:
  the LIPS split: each client draws its own class proportions q ~ Dir(alpha) and
  then ``n_per_client`` samples independently (clients may share samples).
- ``shard_partition(labels, n_clients, shards_per_client, rng)``: McMahan et al.
  2017 (arXiv 1602.05629): sort by label, cut into shards, deal shards out.
- ``iid_partition(n, n_clients, rng)`` and ``contiguous_partition(n, n_clients)``
  (the latter for text, where each client gets a contiguous stretch).

Federated container:

- ``ClientData(x_train, y_train, x_val, y_val, x_test, y_test)``
- ``FederatedData(clients, x_test, y_test, num_classes, name)`` with ``summary()``
- ``make_federated(dataset, partition, val_fraction, test_fraction, rng)`` splits
  EACH client's pool (indices into ``dataset.x_train``) into train / val / test, so
  a client's test split shares its label skew; the dataset's global test set is kept.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from audit.errors import AuditError

__all__ = [
    "ClientData",
    "Dataset",
    "DatasetInvalid",
    "DatasetNotFound",
    "FederatedData",
    "contiguous_partition",
    "dirichlet_fixed_size_partition",
    "dirichlet_partition",
    "iid_partition",
    "load_cifar10",
    "load_cifar100",
    "load_dataset",
    "load_digits",
    "load_ptb",
    "load_stdlib_chars",
    "load_svhn",
    "load_tiny_imagenet",
    "data_fingerprint",
    "dataset_files",
    "dataset_fingerprint",
    "make_federated",
    "resolve_data_dir",
    "shard_partition",
    "stdlib_text",
    "synthetic_classification",
    "DatasetOptionError",
]


class DatasetNotFound(AuditError):
    """A dataset path is missing or does not have the expected on-disk layout.

    An :class:`~audit.errors.AuditError`: wherever a run meets it, the CLI prints its
    message (which names the layout expected) as one line."""


class DatasetInvalid(DatasetNotFound):
    """A dataset file is there but its content is not what the format holds (a shape, a
    label count, a label out of range, a global a pickle may not name). One line that
    names the file; a :class:`DatasetNotFound`, so callers that catch that catch this."""


class PartitionError(AuditError, ValueError):
    """A split the data cannot give: too few samples for the clients asked for (a small
    or partial local copy, or a ``--set`` that asks for more clients). An AuditError, so
    the CLI prints one line; a ValueError, as these errors were before."""


class DatasetOptionError(AuditError):
    """A dataset was asked for with an option its loader does not take (``load_dataset``'s
    keywords, e.g. a claim's ``--set dataset_kw={...}``). One line naming the option and
    the ones the loader takes."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A centralised dataset.

    Attributes:
        x_train, x_test: float32 ``N x C x H x W`` images, or int64 ``N x T`` tokens.
        y_train, y_test: int64 labels ``N`` (or next tokens ``N x T``).
        num_classes: number of classes (vocabulary size for text).
        name: short identifier used in reports.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    name: str

    @property
    def in_channels(self) -> int:
        return int(self.x_train.shape[1]) if self.x_train.dim() == 4 else 0

    @property
    def image_size(self) -> int:
        return int(self.x_train.shape[-1]) if self.x_train.dim() == 4 else 0


@dataclass(frozen=True, eq=False)
class ClientData:
    """One client's private train / validation / test splits (tensors on one device)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor

    def to(self, device: str | torch.device) -> "ClientData":
        return ClientData(*(t.to(device) for t in (self.x_train, self.y_train, self.x_val,
                                                   self.y_val, self.x_test, self.y_test)))


@dataclass(frozen=True, eq=False)
class FederatedData:
    """Clients plus the global (centralised) test set."""

    clients: list[ClientData]
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    name: str = ""

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    def to(self, device: str | torch.device) -> "FederatedData":
        return FederatedData([c.to(device) for c in self.clients], self.x_test.to(device),
                             self.y_test.to(device), self.num_classes, self.name)

    def summary(self) -> dict:
        """Samples and classes per client, JSON-serialisable, for reports."""
        rows = []
        for k, c in enumerate(self.clients):
            y = c.y_train.reshape(len(c.y_train), -1)[:, 0] if c.y_train.dim() > 1 else c.y_train
            counts = torch.bincount(y.cpu(), minlength=self.num_classes) if c.y_train.dim() == 1 \
                else None
            rows.append({
                "client": k,
                "n_train": int(len(c.y_train)),
                "n_val": int(len(c.y_val)),
                "n_test": int(len(c.y_test)),
                "n_classes": int((counts > 0).sum()) if counts is not None else None,
                "class_counts": counts.tolist() if counts is not None else None,
            })
        n_train = [r["n_train"] for r in rows]
        return {
            "name": self.name,
            "n_clients": self.n_clients,
            "num_classes": self.num_classes,
            "n_global_test": int(len(self.y_test)),
            "n_train_total": int(sum(n_train)),
            "n_train_min": int(min(n_train)) if rows else 0,
            "n_train_max": int(max(n_train)) if rows else 0,
            "clients": rows,
        }


# ----------------------------------------------------------------------------- small sets

def _split_stratified(y: np.ndarray, test_fraction: float, rng: np.random.Generator):
    """Per-class shuffled split; returns (train_idx, test_idx), both sorted."""
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(len(idx) * test_fraction))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_digits(seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, 10 classes), scaled to [0, 1].

    The split is stratified and seeded: ``sklearn.model_selection.train_test_split(
    stratify=y, random_state=seed)`` (1437 train / 360 test at 0.2).
    """
    from sklearn.datasets import load_digits as _sk_digits
    from sklearn.model_selection import train_test_split

    d = _sk_digits()
    x = (d.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    idx_tr, idx_te = train_test_split(np.arange(len(y)), test_size=test_fraction,
                                      stratify=y, random_state=seed)
    return Dataset(torch.from_numpy(x[idx_tr]), torch.from_numpy(y[idx_tr]),
                   torch.from_numpy(x[idx_te]), torch.from_numpy(y[idx_te]), 10, "digits")


def synthetic_classification(seed: int, n: int = 1000, num_classes: int = 10,
                             shape: Sequence[int] = (1, 8, 8), test_fraction: float = 0.2,
                             noise: float = 1.0) -> Dataset:
    """Gaussian blobs: class means ~ N(0, I), samples = mean + noise * N(0, I)."""
    rng = np.random.default_rng(seed)
    dim = int(np.prod(shape))
    means = rng.standard_normal((num_classes, dim)).astype(np.float32)
    y = np.arange(n) % num_classes
    y = rng.permutation(y).astype(np.int64)
    x = means[y] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    x = x.reshape((n, *shape)).astype(np.float32)
    tr, te = _split_stratified(y, test_fraction, rng)
    return Dataset(torch.from_numpy(x[tr]), torch.from_numpy(y[tr]), torch.from_numpy(x[te]),
                   torch.from_numpy(y[te]), num_classes, f"synthetic{num_classes}")


# ----------------------------------------------------------------------------- partitions

def _as_labels(labels) -> np.ndarray:
    if isinstance(labels, torch.Tensor):
        labels = labels.cpu().numpy()
    return np.asarray(labels).astype(np.int64)


def dirichlet_partition(labels, n_clients: int, alpha: float, rng: np.random.Generator,
                        min_size: int = 10, max_tries: int = 10_000) -> list[np.ndarray]:
    """Disjoint label-skew split: per class c, p_c ~ Dir(alpha * 1_K) over clients.

    The usual pFL recipe (Hsu et al. 2019; Li et al. 2021 "NIID-Bench"): classes are
    dealt one at a time; a client already holding N/K samples gets no more of the
    current class (the balancing step of NIID-Bench); the whole draw is repeated
    until every client has at least ``min_size`` samples.
    """
    y = _as_labels(labels)
    n = len(y)
    if n_clients * min_size > n:
        raise PartitionError(f"cannot give {n_clients} clients {min_size} samples each "
                             f"from {n}")
    classes = np.unique(y)
    for _ in range(max_tries):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            p = rng.dirichlet(np.full(n_clients, alpha))
            sizes = np.array([len(q) for q in parts])
            open_ = sizes < n / n_clients  # NIID-Bench balancing step
            p = p * open_
            if not p.sum() > 0:
                # every open client's share underflowed (alpha ~ 0.01): deal the class
                # evenly among the open clients rather than cut it by 0/0 (NaNs)
                p = open_ if open_.any() else np.ones(n_clients)
            p = p / p.sum()
            cuts = (np.cumsum(p) * len(idx)).astype(int)[:-1]
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(q) for q in parts) >= min_size:
            return [np.sort(np.asarray(q, dtype=np.int64)) for q in parts]
    raise PartitionError(f"no Dirichlet({alpha}) draw gave each of {n_clients} clients "
                         f"{min_size} samples from {n} in {max_tries} tries (an alpha too "
                         f"small for this many clients per class, or too few samples)")


def dirichlet_fixed_size_partition(labels, n_clients: int, n_per_client: int, alpha: float,
                                   rng: np.random.Generator) -> list[np.ndarray]:
    """LIPS-style split (arXiv 2506.00932, Sec. 5): every client independently draws
    class proportions q_k ~ Dir(alpha * 1_C), class counts ~ Multinomial(n, q_k), and
    then that many samples of each class without replacement within the client
    (with replacement only if a class is smaller than its count). Different clients
    may hold the same sample.
    """
    y = _as_labels(labels)
    classes = np.unique(y)
    by_class = [np.flatnonzero(y == c) for c in classes]
    parts = []
    for _ in range(n_clients):
        q = rng.dirichlet(np.full(len(classes), alpha))
        counts = rng.multinomial(n_per_client, q)
        chosen = []
        for pool, m in zip(by_class, counts):
            if m:
                chosen.append(rng.choice(pool, size=m, replace=m > len(pool)))
        parts.append(np.sort(np.concatenate(chosen)).astype(np.int64))
    return parts


def shard_partition(labels, n_clients: int, shards_per_client: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """McMahan et al. 2017 (arXiv 1602.05629, Sec. 3): sort by label, cut into
    ``n_clients * shards_per_client`` equal shards, give each client random shards."""
    y = _as_labels(labels)
    order = np.argsort(y, kind="stable")
    shards = np.array_split(order, n_clients * shards_per_client)
    deal = rng.permutation(len(shards))
    return [np.sort(np.concatenate([shards[s] for s in
                                    deal[k * shards_per_client:(k + 1) * shards_per_client]]))
            for k in range(n_clients)]


def iid_partition(n: int, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniformly random disjoint split into (almost) equal parts."""
    return [np.sort(p) for p in np.array_split(rng.permutation(n), n_clients)]


def contiguous_partition(n: int, n_clients: int) -> list[np.ndarray]:
    """Consecutive blocks (for text: each client reads its own stretch of the corpus)."""
    return [np.asarray(p, dtype=np.int64) for p in np.array_split(np.arange(n), n_clients)]


def make_federated(dataset: Dataset, partition: Sequence[np.ndarray], val_fraction: float,
                   test_fraction: float, rng: np.random.Generator) -> FederatedData:
    """Split each client's pool (indices into ``dataset.x_train``) into train/val/test.

    Each pool is shuffled by ``rng``; the first ``floor(n*test_fraction)`` go to the
    client's test split, the next ``floor(n*val_fraction)`` to validation, the rest to
    training (at least one sample). The dataset's own test set stays the global test.
    """
    if not 0 <= val_fraction + test_fraction < 1:
        raise ValueError("val_fraction + test_fraction must lie in [0, 1)")
    clients = []
    for idx in partition:
        idx = rng.permutation(np.asarray(idx, dtype=np.int64))
        n_te = int(np.floor(len(idx) * test_fraction))
        n_va = int(np.floor(len(idx) * val_fraction))
        te, va, tr = idx[:n_te], idx[n_te:n_te + n_va], idx[n_te + n_va:]
        if len(tr) == 0:
            raise PartitionError(f"a client has no training samples left ({len(idx)} "
                                 f"samples, {n_te} to test and {n_va} to validation; "
                                 f"{sum(len(p) for p in partition)} samples over "
                                 f"{len(partition)} clients)")
        t = torch.from_numpy
        xs, ys = dataset.x_train, dataset.y_train
        clients.append(ClientData(xs[t(tr)], ys[t(tr)], xs[t(va)], ys[t(va)],
                                  xs[t(te)], ys[t(te)]))
    return FederatedData(clients, dataset.x_test, dataset.y_test, dataset.num_classes,
                         dataset.name)


# ----------------------------------------------------------------------------- paper scale

_LAYOUTS = {
    "cifar10": "<root>/cifar-10-batches-py/{data_batch_1..data_batch_5, test_batch} "
               "(torchvision's python pickle format: dicts with b'data' uint8 N x 3072, "
               "b'labels')",
    "cifar100": "<root>/cifar-100-python/{train, test} (python pickles: b'data' uint8 "
                "N x 3072, b'fine_labels')",
    "svhn": "<root>/{train_32x32.mat, test_32x32.mat} (MATLAB: X 32x32x3xN uint8, "
            "y Nx1 with 10 meaning digit 0)",
    "tinyimagenet": "<root>/tiny-imagenet-200/{wnids.txt, train/<wnid>/images/*.JPEG, "
                    "val/images/*.JPEG, val/val_annotations.txt}",
    "ptb": "<root>/{ptb.train.txt, ptb.valid.txt, ptb.test.txt} (one sentence per line, "
           "space-separated words)",
}


def resolve_data_dir(data_dir: str | os.PathLike | None, name: str) -> Path:
    """``data_dir`` if given, else ``$AUDIT_DATA``; raises :class:`DatasetNotFound`."""
    root = data_dir if data_dir is not None else os.environ.get("AUDIT_DATA")
    if root is None:
        raise DatasetNotFound(f"{name}: no data directory given (pass --data-dir or set "
                              f"AUDIT_DATA); expected layout: {_LAYOUTS[name]}")
    root = Path(root)
    if not root.is_dir():
        raise DatasetNotFound(f"{name}: {root} is not a directory; expected layout: "
                              f"{_LAYOUTS[name]}")
    return root


def _require(paths: Sequence[Path], name: str) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise DatasetNotFound(f"{name}: missing {', '.join(missing)}; expected layout: "
                              f"{_LAYOUTS[name]}")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _invalid(name: str, path: Path, what: str) -> "DatasetInvalid":
    return DatasetInvalid(f"{name}: {path}: {_one_line(what)}; expected layout: "
                          f"{_LAYOUTS[name]}")


def _numpy_globals() -> dict[tuple[str, str], object]:
    """The only globals a dataset pickle may name: numpy's array, dtype and scalar
    reconstruction (under numpy 1's and numpy 2's module names) and ``_codecs.encode``
    (how a protocol-2 pickle written by Python 3 spells ``bytes``)."""
    import _codecs

    try:
        from numpy._core import multiarray as ma, numeric as nu
    except ImportError:  # numpy < 2
        from numpy.core import multiarray as ma, numeric as nu  # type: ignore[no-redef]
    table: dict[tuple[str, str], object] = {("_codecs", "encode"): _codecs.encode,
                                            ("numpy", "ndarray"): np.ndarray,
                                            ("numpy", "dtype"): np.dtype}
    for prefix in ("numpy.core", "numpy._core"):
        table[(f"{prefix}.multiarray", "_reconstruct")] = ma._reconstruct
        table[(f"{prefix}.multiarray", "scalar")] = ma.scalar
        if hasattr(nu, "_frombuffer"):
            table[(f"{prefix}.numeric", "_frombuffer")] = nu._frombuffer
    return table


class _DataUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only: any other global (``os.system``,
    ``builtins.eval``, a class with a ``__reduce__``) is refused before it is called, so
    reading a dataset file never runs code from it."""

    allowed = None  # filled on first use

    def find_class(self, module: str, name: str):
        if _DataUnpickler.allowed is None:
            _DataUnpickler.allowed = _numpy_globals()
        try:
            return _DataUnpickler.allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refused to load {module}.{name}: a dataset pickle may hold only "
                f"lists, dicts, bytes, numbers and numpy arrays") from None


def _unpickle(path: Path, name: str) -> dict:
    """A dataset pickle read with :class:`_DataUnpickler` (nothing in it is executed)."""
    try:
        with open(path, "rb") as f:
            out = _DataUnpickler(f, encoding="bytes").load()
    except Exception as e:  # corrupt, wrong or hostile file: same single error type
        raise DatasetNotFound(f"{name}: cannot read {path} ({_one_line(e)}); expected "
                              f"layout: {_LAYOUTS[name]}") from None
    if not isinstance(out, dict):
        raise _invalid(name, path, f"holds a {type(out).__name__}, not a dict")
    return out


def _check_labels(labels, n: int, num_classes: int, name: str, path: Path,
                  low: int = 0) -> np.ndarray:
    """Labels as int64, checked: one per sample, whole numbers in [low, num_classes)."""
    try:
        y = np.asarray(labels)
    except Exception as e:  # ragged lists and the like
        raise _invalid(name, path, f"labels are not an array ({e})") from None
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_
                           or (np.issubdtype(y.dtype, np.floating)
                               and bool(np.all(np.isfinite(y)))
                               and bool(np.all(y == np.round(y))))):
        raise _invalid(name, path, f"labels must be whole numbers in one column, got "
                                   f"{y.dtype} of shape {y.shape}")
    if len(y) != n:
        raise _invalid(name, path, f"{len(y)} labels for {n} samples")
    if n:  # before the cast, which would wrap or saturate a far-off label
        lo_v, hi_v = y.min(), y.max()
        if lo_v < low or hi_v >= num_classes:
            raise _invalid(name, path, f"labels range over [{lo_v}, {hi_v}], outside "
                                       f"[{low}, {num_classes - 1}]")
    return y.astype(np.int64)


def _check_pixels(x, name: str, path: Path) -> np.ndarray:
    """Pixel values as uint8, checked to be whole numbers in [0, 255]."""
    x = np.asarray(x)
    if x.dtype == np.uint8:
        return x
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise _invalid(name, path, f"pixels must be numbers, got {x.dtype}")
    if x.size and (not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 255
                   or not np.all(x == np.round(x))):
        raise _invalid(name, path, "pixels must be whole numbers in [0, 255]")
    return x.astype(np.uint8)


def _cifar_arrays(files: Sequence[Path], label_key: bytes, num_classes: int, name: str):
    xs, ys = [], []
    for p in files:
        d = _unpickle(p, name)
        if b"data" not in d or label_key not in d:
            raise DatasetNotFound(f"{name}: {p} lacks b'data' or {label_key!r}; expected "
                                  f"layout: {_LAYOUTS[name]}")
        try:
            x = np.asarray(d[b"data"])
        except Exception as e:  # a ragged list
            raise _invalid(name, p, f"b'data' is not an array ({e})") from None
        if x.ndim < 1 or len(x) == 0 \
                or x.size != len(x) * 3072:
            shape = getattr(x, "shape", type(x).__name__)
            raise _invalid(name, p, f"b'data' must be an N x 3072 array (N >= 1), got "
                                    f"{shape}")
        # channels last passes the size check, and read as planes every image would be
        # scrambled: refused (N x 3 x 1024 and N x 3 x 32 x 32, channels first, are fine)
        if x.shape[1:] in ((32, 32, 3), (1024, 3)):
            raise _invalid(name, p, f"b'data' is {tuple(x.shape)}, channels last (as "
                                    f"torchvision's .data); the pickle layout is N x 3072, "
                                    f"each row the red, green and blue planes")
        x = _check_pixels(x, name, p).reshape(-1, 3, 32, 32)
        xs.append(x)
        ys.append(_check_labels(d[label_key], len(x), num_classes, name, p))
    x = torch.from_numpy(np.concatenate(xs).astype(np.float32) / 255.0)
    return x, torch.from_numpy(np.concatenate(ys))


def _cifar(root, folder, train_files, test_files, label_key, num_classes, name) -> Dataset:
    base = resolve_data_dir(root, name) / folder
    tr = [base / f for f in train_files]
    te = [base / f for f in test_files]
    _require(tr + te, name)
    x_tr, y_tr = _cifar_arrays(tr, label_key, num_classes, name)
    x_te, y_te = _cifar_arrays(te, label_key, num_classes, name)
    return Dataset(x_tr, y_tr, x_te, y_te, num_classes, name)


def load_cifar10(root: str | os.PathLike | None = None) -> Dataset:
    """CIFAR-10 (Krizhevsky 2009) from torchvision's on-disk pickle files, in [0, 1]."""
    return _cifar(root, "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)],
                  ["test_batch"], b"labels", 10, "cifar10")


def load_cifar100(root: str | os.PathLike | None = None) -> Dataset:
    """CIFAR-100 (fine labels) from torchvision's on-disk pickle files, in [0, 1]."""
    return _cifar(root, "cifar-100-python", ["train"], ["test"], b"fine_labels", 100,
                  "cifar100")


def load_svhn(root: str | os.PathLike | None = None) -> Dataset:
    """SVHN cropped digits (Netzer et al. 2011) from the .mat files; label 10 -> 0."""
    import scipy.io

    base = resolve_data_dir(root, "svhn")
    files = [base / "train_32x32.mat", base / "test_32x32.mat"]
    _require(files, "svhn")
    out = []
    for p in files:
        try:  # MATLAB v5 files: loadmat builds arrays, it runs nothing from the file
            m = scipy.io.loadmat(str(p))
            x, y = m["X"], m["y"]
        except Exception as e:
            raise DatasetNotFound(f"svhn: cannot read {p} ({_one_line(e)}); expected "
                                  f"layout: {_LAYOUTS['svhn']}") from None
        x = np.asarray(x)
        if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] == 0:
            raise _invalid("svhn", p, f"X must be 32 x 32 x 3 x N (N >= 1), got {x.shape}")
        x = _check_pixels(x, "svhn", p)
        y = _check_labels(y, x.shape[3], 11, "svhn", p) % 10  # 10 (or 0) is digit 0
        x = torch.from_numpy(np.transpose(x, (3, 2, 0, 1)).astype(np.float32) / 255.0)
        out += [x, torch.from_numpy(y)]
    return Dataset(out[0], out[1], out[2], out[3], 10, "svhn")


def _read_image(path: Path, name: str = "tinyimagenet", size: int = 64) -> np.ndarray:
    """One RGB image of ``size`` x ``size`` pixels; anything else is one error line."""
    from PIL import Image

    from audit.safeio import open_regular

    try:
        fh = open_regular(path, "data file")  # a FIFO or device: refused, never a hang
    except AuditError as e:
        raise _invalid(name, path, f"cannot read image ({e})") from None
    try:
        with fh, Image.open(fh) as im:
            if im.size != (size, size):
                raise ValueError(f"image is {im.size[0]} x {im.size[1]}, not {size} x {size}")
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except Image.UnidentifiedImageError:  # its text names the file object, not the path
        raise _invalid(name, path, "cannot read image (not an image Pillow can "
                                   "identify)") from None
    except Exception as e:  # not an image, wrong size, decompression bomb
        raise _invalid(name, path, f"cannot read image ({e})") from None


def _read_text(path: Path, name: str) -> str:
    from audit.safeio import open_regular

    try:
        with open_regular(path, "data file") as fh:  # a FIFO or device: refused
            text = fh.read().decode("utf-8")
    except (AuditError, OSError, UnicodeDecodeError) as e:
        raise _invalid(name, path, f"cannot read text ({e})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text's newlines


def load_tiny_imagenet(root: str | os.PathLike | None = None) -> Dataset:
    """TinyImageNet-200 (64x64, 200 classes); the labelled ``val`` split is the test set."""
    name = "tinyimagenet"
    base = resolve_data_dir(root, name) / "tiny-imagenet-200"
    ann = base / "val" / "val_annotations.txt"
    _require([base / "wnids.txt", base / "train", base / "val" / "images", ann], name)
    wnids = [w.strip() for w in _read_text(base / "wnids.txt", name).split() if w.strip()]
    if any(w in (".", "..") or "/" in w or "\\" in w for w in wnids):
        raise _invalid(name, base / "wnids.txt", "class ids must be plain names")
    if not wnids or len(set(wnids)) != len(wnids):
        raise _invalid(name, base / "wnids.txt", f"needs distinct class ids, one a line; "
                                                 f"got {len(wnids)} ids, "
                                                 f"{len(set(wnids))} distinct")
    index = {w: i for i, w in enumerate(wnids)}
    xs, ys = [], []
    for w in wnids:
        files = sorted((base / "train" / w / "images").glob("*.JPEG"))
        if not files:
            raise DatasetNotFound(f"{name}: no images under {base / 'train' / w / 'images'}; "
                                  f"expected layout: {_LAYOUTS[name]}")
        xs += [_read_image(f) for f in files]
        ys += [index[w]] * len(files)
    xv, yv = [], []
    for line in sorted(_read_text(ann, name).splitlines()):
        parts = line.split("\t")
        if not line.strip():
            continue
        if len(parts) < 2:  # the real file: name, class, box, tab-separated
            raise _invalid(name, ann, f"line {line[:80]!r} is not tab-separated "
                                      f"(image name, class id, ...)")
        if parts[1] not in index:
            raise _invalid(name, ann, f"class {parts[1]!r} of {parts[0]!r} is not in "
                                      f"wnids.txt")
        if parts[0] in ("", ".", "..") or "/" in parts[0] or "\\" in parts[0]:
            raise _invalid(name, ann, f"image name {parts[0]!r} is not a file name")
        xv.append(_read_image(base / "val" / "images" / parts[0]))
        yv.append(index[parts[1]])
    if not xv:
        raise _invalid(name, ann, "lists no validation image")

    def to_t(a):
        return torch.from_numpy(np.stack(a).transpose(0, 3, 1, 2).astype(np.float32) / 255.0)

    return Dataset(to_t(xs), torch.tensor(ys), to_t(xv), torch.tensor(yv), len(wnids), name)


# ----------------------------------------------------------------------------- text

def _windows(ids: np.ndarray, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping windows: x = ids[i:i+T], y = ids[i+1:i+T+1]."""
    n = (len(ids) - 1) // seq_len
    x = ids[: n * seq_len].reshape(n, seq_len)
    y = ids[1: n * seq_len + 1].reshape(n, seq_len)
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def stdlib_text(max_chars: int = 200_000) -> str:
    """Concatenated source of the top-level ``.py`` files of the stdlib, sorted by name.

    Deterministic for a given Python installation; differs across Python versions.
    """
    lib = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for p in sorted(lib.glob("*.py")):
        try:
            t = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        chunks.append(t)
        total += len(t)
        if total >= max_chars:
            break
    return "".join(chunks)[:max_chars]


def load_stdlib_chars(seq_len: int = 64, max_chars: int = 200_000,
                      test_fraction: float = 0.1) -> Dataset:
    """Character-level LM corpus from Python's standard library source (no download).

    Vocabulary = sorted set of characters; the last ``test_fraction`` of the text is
    the test set (contiguous, so test windows never overlap training text).
    """
    text = stdlib_text(max_chars)
    vocab = sorted(set(text))
    lut = {c: i for i, c in enumerate(vocab)}
    ids = np.fromiter((lut[c] for c in text), dtype=np.int64, count=len(text))
    cut = int(len(ids) * (1 - test_fraction))
    x_tr, y_tr = _windows(ids[:cut], seq_len)
    x_te, y_te = _windows(ids[cut:], seq_len)
    return Dataset(x_tr, y_tr, x_te, y_te, len(vocab), f"stdlib-chars-py{sys.version_info[0]}"
                   f"{sys.version_info[1]}")


def load_ptb(root: str | os.PathLike | None = None, seq_len: int = 35,
             split_for_test: str = "test") -> Dataset:
    """Word-level Penn Treebank (Mikolov's preprocessing): vocabulary from the train
    file, ``<eos>`` appended to each line; ``split_for_test`` is "test" or "valid"."""
    name = "ptb"
    base = resolve_data_dir(root, name)
    files = {s: base / f"ptb.{s}.txt" for s in ("train", "valid", "test")}
    _require(list(files.values()), name)

    def words(p: Path) -> list[str]:
        out = [w for line in _read_text(p, name).splitlines()
               for w in line.split() + ["<eos>"]]
        if len(out) <= seq_len:
            raise _invalid(name, p, f"{len(out)} tokens, fewer than one window of "
                                    f"{seq_len} + 1")
        return out

    train_words = words(files["train"])
    vocab = sorted(set(train_words))
    lut = {w: i for i, w in enumerate(vocab)}
    unk = lut.get("<unk>")

    def encode(ws):
        try:
            return np.array([lut[w] if unk is None else lut.get(w, unk) for w in ws])
        except KeyError as e:
            raise DatasetNotFound(f"ptb: word {e} absent from train vocabulary; expected "
                                  f"layout: {_LAYOUTS[name]}") from e

    x_tr, y_tr = _windows(encode(train_words), seq_len)
    x_te, y_te = _windows(encode(words(files[split_for_test])), seq_len)
    return Dataset(x_tr, y_tr, x_te, y_te, len(vocab), "ptb")


# ----------------------------------------------------------------------------- identity

_PAPER_SCALE = ("cifar10", "cifar100", "svhn", "tinyimagenet", "ptb")
_FILE_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime_ns, inode, device) -> sha256


def _dataset_key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def dataset_files(name: str, root: str | os.PathLike) -> list[Path]:
    """The files ``load_dataset(name, root)`` reads, as paths under ``root`` (some may be
    missing). TinyImageNet: every file under ``tiny-imagenet-200/`` (a superset of those
    read). Sets read from no directory (digits, synthetic, stdlib-chars): none."""
    key, root = _dataset_key(name), Path(root)
    if key == "cifar10":
        base = root / "cifar-10-batches-py"
        return [base / f"data_batch_{i}" for i in range(1, 6)] + [base / "test_batch"]
    if key == "cifar100":
        return [root / "cifar-100-python" / "train", root / "cifar-100-python" / "test"]
    if key == "svhn":
        return [root / "train_32x32.mat", root / "test_32x32.mat"]
    if key == "tinyimagenet":
        base = root / "tiny-imagenet-200"
        return sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else \
            [base / "wnids.txt"]
    if key == "ptb":
        return [root / f"ptb.{s}.txt" for s in ("train", "valid", "test")]
    return []


def _file_digest(path: Path) -> str:
    """sha256 of a file's content, memoised per (path, size, mtime_ns, inode, device) so
    that a process hashes each file once while it is unchanged."""
    import stat as _stat

    from audit.safeio import open_regular

    st = path.stat()
    if not _stat.S_ISREG(st.st_mode):  # a FIFO would hang the hash, /dev/zero never end
        raise AuditError(f"data file {path} is not a regular file (a FIFO, device, socket "
                         "or folder); refusing to read it")
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    if memo not in _FILE_DIGESTS:
        h = hashlib.sha256()
        with open_regular(path, "data file") as f:  # checked again on the open file
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_DIGESTS[memo] = h.hexdigest()
    return _FILE_DIGESTS[memo]


def dataset_fingerprint(name: str, root: str | os.PathLike) -> str:
    """A hash over (relative path, size, sha256 of the content) of every file
    :func:`dataset_files` lists; a missing or unreadable file enters as such (the run
    that reads it fails anyway). Two copies with the same bytes share a fingerprint,
    wherever they lie; any changed byte changes it."""
    root = Path(root)
    h = hashlib.sha256(_dataset_key(name).encode())
    for path in dataset_files(name, root):
        rel = path.relative_to(root).as_posix()
        try:
            entry = f"{rel}\0{path.stat().st_size}\0{_file_digest(path)}"
        except OSError as e:
            entry = f"{rel}\0unreadable\0{type(e).__name__}"
        h.update(entry.encode("utf-8", "surrogateescape") + b"\n")
    return "sha256:" + h.hexdigest()[:32]


def _named_datasets(config) -> set[str]:
    """Every value of a ``dataset`` / ``datasets`` key anywhere in a (nested) config."""
    found: set[str] = set()
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("dataset", "datasets"):
                    found.update([v] if isinstance(v, str) else
                                 [x for x in v if isinstance(x, str)]
                                 if isinstance(v, (list, tuple)) else [])
                stack.append(v)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return found


def data_fingerprint(config, data_dir: str | os.PathLike | None) -> dict[str, str]:
    """The identity of the data a run with ``config`` reads: for each paper-scale data set
    the config names (``dataset`` keys at any depth), its :func:`dataset_fingerprint`
    under ``data_dir`` (or ``$AUDIT_DATA``). Empty when the config reads no directory
    (digits, synthetic, stdlib-chars) or none is given, so such keys stay as they were."""
    root = data_dir if data_dir is not None else os.environ.get("AUDIT_DATA")
    if root is None or not Path(root).is_dir():
        return {}
    names = sorted({_dataset_key(n) for n in _named_datasets(config)} & set(_PAPER_SCALE))
    return {n: dataset_fingerprint(n, root) for n in names}


def check_present(config, data_dir: str | os.PathLike | None) -> None:
    """Raise the :class:`DatasetNotFound` a run with ``config`` would raise at its first
    unit (no data directory, or a file of a paper-scale data set missing under it), now:
    the CLI calls it before it creates ``--out`` or computes anything. The files' contents
    are the loaders' to check, where they are read."""
    root = data_dir if data_dir is not None else os.environ.get("AUDIT_DATA")
    for name in sorted({_dataset_key(n) for n in _named_datasets(config)}
                       & set(_PAPER_SCALE)):
        _require(dataset_files(name, resolve_data_dir(root, name)), name)


def load_dataset(name: str, data_dir: str | os.PathLike | None = None, seed: int = 0,
                 **kw) -> Dataset:
    """Dispatch by name: digits, synthetic, cifar10, cifar100, svhn, tinyimagenet,
    stdlib-chars, ptb."""
    key = name.lower().replace("_", "").replace("-", "")
    if key == "digits":
        return load_digits(seed=seed, **_options(name, load_digits, kw, ("seed",)))
    if key == "synthetic":
        return synthetic_classification(seed=seed, **_options(
            name, synthetic_classification, kw, ("seed",)))
    if key == "stdlibchars":
        return load_stdlib_chars(**_options(name, load_stdlib_chars, kw))
    loaders = {"cifar10": load_cifar10, "cifar100": load_cifar100, "svhn": load_svhn,
               "tinyimagenet": load_tiny_imagenet, "ptb": load_ptb}
    if key not in loaders:
        raise ValueError(f"unknown dataset {name!r}")
    fn = loaders[key]
    return fn(data_dir, **_options(name, fn, kw, ("root", "data_dir")))


def _options(name: str, loader, kw: dict, taken: Sequence[str] = ()) -> dict:
    """``kw`` when ``loader`` takes every one of its keywords (``taken``: those
    ``load_dataset`` passes itself), else one :class:`DatasetOptionError` line."""
    import inspect

    params = inspect.signature(loader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kw
    known = [n for n, p in params.items() if n not in taken and p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    bad = sorted(str(k) for k in kw if k not in known)
    if bad:
        raise DatasetOptionError(f"dataset {name!r} takes no option(s) {', '.join(bad)}; "
                                 f"its options: {', '.join(known) or 'none'}")
    return kw
