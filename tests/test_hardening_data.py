"""Dataset files are data, never code: restricted unpickling, content checks, one error line.

Every malformed-but-loadable file gives one :class:`DatasetInvalid` line (an AuditError, so
the CLI prints it and exits 2) that names the file; a hostile pickle runs nothing.
"""
import os
import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.errors import AuditError
from audit.fl import data as D


class _Hostile:
    """Unpickling this runs a shell command that writes a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def _pickle(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)


def _cifar100(root, train, test=None):
    base = root / "cifar-100-python"
    _pickle(base / "train", train)
    _pickle(base / "test", test if test is not None else
            {b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0, 1]})
    return root


def _one_line_naming(exc_info, path):
    msg = str(exc_info.value)
    assert "\n" not in msg and str(path) in msg
    return msg


@pytest.mark.parametrize("where", ["whole-file", "inside-dict"])
def test_a_hostile_cifar_pickle_runs_nothing(tmp_path, where):
    marker = tmp_path / "pwned"
    evil = _Hostile(marker)
    obj = evil if where == "whole-file" else {b"data": evil, b"fine_labels": [0]}
    root = _cifar100(tmp_path / "data", obj)
    with pytest.raises(D.DatasetNotFound) as err:
        D.load_cifar100(root)
    msg = _one_line_naming(err, root / "cifar-100-python" / "train")
    assert "refused to load" in msg and "system" in msg
    assert not marker.exists()
    assert isinstance(err.value, AuditError)


def test_other_globals_are_refused_too(tmp_path):
    # a pickle naming builtins.eval (protocol 0 text, so no class of ours is involved)
    payload = b"cbuiltins\neval\n(S'1+1'\ntR."
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    (base / "train").write_bytes(payload)
    (base / "test").write_bytes(payload)
    with pytest.raises(D.DatasetNotFound, match="refused to load builtins.eval"):
        D.load_cifar100(tmp_path)


def test_real_format_pickles_still_load(tmp_path):
    # numpy arrays at protocols 2 (Python 2 era files), 4 and 5, bytes keys, list labels
    for protocol in (2, 4, 5):
        root = tmp_path / f"p{protocol}"
        base = root / "cifar-10-batches-py"
        base.mkdir(parents=True)
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            with open(base / name, "wb") as fh:
                pickle.dump({b"batch_label": b"x", b"labels": [1, 9],
                             b"data": np.full((2, 3072), 255, np.uint8),
                             b"filenames": [b"a.png", b"b.png"]}, fh, protocol=protocol)
        ds = D.load_cifar10(root)
        assert ds.x_train.shape == (10, 3, 32, 32) and float(ds.x_train.max()) == 1.0
        assert ds.y_test.tolist() == [1, 9]


@pytest.mark.parametrize("content, message", [
    pytest.param([1, 2, 3], "not a dict", id="a-list"),
    pytest.param({b"data": np.zeros((2, 100), np.uint8), b"fine_labels": [0, 1]},
                 "N x 3072", id="wrong-width"),
    pytest.param({b"data": np.zeros((0, 3072), np.uint8), b"fine_labels": []},
                 "N x 3072", id="empty"),
    pytest.param({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0, 1, 2]},
                 "3 labels for 2 samples", id="label-count"),
    pytest.param({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0, 100]},
                 r"outside \[0, 99\]", id="label-too-big"),
    pytest.param({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [-1, 0]},
                 r"outside \[0, 99\]", id="label-negative"),
    pytest.param({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0.5, 1]},
                 "whole numbers", id="label-fraction"),
    pytest.param({b"data": np.full((2, 3072), 300, np.int64), b"fine_labels": [0, 1]},
                 r"\[0, 255\]", id="pixel-range"),
    pytest.param({b"data": np.array([["a"] * 3072] * 2), b"fine_labels": [0, 1]},
                 "numbers", id="pixel-strings"),
    # torchvision's CIFAR .data (N x 32 x 32 x 3, channels last) pickled again: its size
    # passes, and read as planes it would scramble every image
    pytest.param({b"data": np.zeros((2, 32, 32, 3), np.uint8), b"fine_labels": [0, 1]},
                 "channels last", id="channels-last"),
    # a label far outside the range is reported as it is, not as the int64 cast's wrap
    pytest.param({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0.0, 1e300]},
                 r"\[0.0, 1e\+300\]", id="label-huge"),
    pytest.param({b"data": np.zeros((2, 3072), np.uint8),
                  b"fine_labels": np.array([0, 2**64 - 1], np.uint64)},
                 r"\[0, 18446744073709551615\]", id="label-uint64"),
])
def test_malformed_cifar_content_is_one_line_naming_the_file(tmp_path, content, message):
    root = _cifar100(tmp_path, content)
    with pytest.raises(D.DatasetInvalid, match=message) as err:
        D.load_cifar100(root)
    _one_line_naming(err, root / "cifar-100-python" / "train")


@pytest.mark.parametrize("shape", [(2, 3, 32, 32), (2, 3, 1024)])
def test_cifar_data_may_come_as_channels_first_images(tmp_path, shape):
    x = np.arange(2 * 3072).reshape(2, 3072) % 251
    root = _cifar100(tmp_path, {b"data": x.astype(np.uint8).reshape(shape),
                                b"fine_labels": np.array([5, 99])})
    ds = D.load_cifar100(root)
    assert ds.y_train.tolist() == [5, 99]
    assert torch.equal(ds.x_train, torch.from_numpy(x.reshape(2, 3, 32, 32) / 255.0).float())


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 4), width=st.sampled_from([3072, 3071, 6144, 1]),
       labels=st.lists(st.integers(-3, 12), max_size=6))
def test_any_cifar10_content_loads_consistently_or_is_one_error_line(tmp_path_factory, n,
                                                                     width, labels):
    root = tmp_path_factory.mktemp("c10")
    base = root / "cifar-10-batches-py"
    base.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        _pickle(base / name, {b"data": np.zeros((n, width), np.uint8), b"labels": labels})
    try:
        ds = D.load_cifar10(root)
    except D.DatasetInvalid as exc:
        assert "\n" not in str(exc) and str(base) in str(exc)
        return
    assert width == 3072 and n == len(labels) >= 1 and all(0 <= y < 10 for y in labels)
    assert ds.x_train.shape == (5 * n, 3, 32, 32) and len(ds.y_train) == 5 * n


# ---------------------------------------------------------------------------- SVHN
def _svhn(root, X, y):
    import scipy.io

    for name in ("train_32x32.mat", "test_32x32.mat"):
        scipy.io.savemat(root / name, {"X": X, "y": y})
    return root


@pytest.mark.parametrize("X, y, message", [
    pytest.param(np.zeros((32, 32, 3), np.uint8), np.array([[1]]), "32 x 32 x 3 x N",
                 id="three-dims"),
    pytest.param(np.zeros((28, 28, 3, 2), np.uint8), np.array([[1], [2]]), "32 x 32 x 3 x N",
                 id="wrong-size"),
    pytest.param(np.zeros((32, 32, 3, 2), np.uint8), np.array([[1], [2], [3]]),
                 "3 labels for 2 samples", id="label-count"),
    pytest.param(np.zeros((32, 32, 3, 2), np.uint8), np.array([[1], [11]]),
                 r"outside \[0, 10\]", id="label-11"),
    pytest.param(np.zeros((32, 32, 3, 2), np.int16), np.array([[1], [-1]]),
                 r"outside \[0, 10\]", id="label-negative"),
])
def test_malformed_svhn_is_one_line_naming_the_file(tmp_path, X, y, message):
    _svhn(tmp_path, X, y)
    with pytest.raises(D.DatasetInvalid, match=message) as err:
        D.load_svhn(tmp_path)
    _one_line_naming(err, tmp_path / "train_32x32.mat")


# ---------------------------------------------------------------------- TinyImageNet
def _tiny(root, val_line="val_0.JPEG\tn02\t0\t0\t63\t63\n", val_size=64, wnids="n01\nn02\n"):
    from PIL import Image

    base = root / "tiny-imagenet-200"
    base.mkdir(parents=True)
    (base / "wnids.txt").write_text(wnids)
    for w in wnids.split():
        d = base / "train" / w / "images"
        d.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (64, 64)).save(d / f"{w}_0.JPEG")
    (base / "val" / "images").mkdir(parents=True)
    Image.new("RGB", (val_size, val_size)).save(base / "val" / "images" / "val_0.JPEG")
    (base / "val" / "val_annotations.txt").write_text(val_line)
    return base


@pytest.mark.parametrize("kw, message, file", [
    pytest.param({"val_line": "val_0.JPEG\tn99\t0\t0\t63\t63\n"}, "not in wnids.txt",
                 "val/val_annotations.txt", id="unknown-class"),
    pytest.param({"val_line": "../../x.JPEG\tn02\t0\n"}, "not a file name",
                 "val/val_annotations.txt", id="path-in-name"),
    pytest.param({"val_line": "missing.JPEG\tn02\t0\n"}, "cannot read image",
                 "val/images/missing.JPEG", id="missing-image"),
    pytest.param({"val_size": 32}, "not 64 x 64", "val/images/val_0.JPEG", id="image-size"),
    pytest.param({"val_line": ""}, "no validation image", "val/val_annotations.txt",
                 id="no-val"),
    pytest.param({"wnids": "n01\nn01\n"}, "distinct", "wnids.txt", id="repeated-wnid"),
    # spaces instead of tabs: refused, where the line used to be skipped without a word
    pytest.param({"val_line": "val_0.JPEG n02 0 0 63 63\n"}, "not tab-separated",
                 "val/val_annotations.txt", id="spaces-not-tabs"),
])
def test_malformed_tiny_imagenet_is_one_line_naming_the_file(tmp_path, kw, message, file):
    base = _tiny(tmp_path, **kw)
    with pytest.raises(D.DatasetInvalid, match=message) as err:
        D.load_tiny_imagenet(tmp_path)
    _one_line_naming(err, base / file)


def test_a_tiny_imagenet_file_that_is_not_an_image(tmp_path):
    base = _tiny(tmp_path)
    (base / "train" / "n01" / "images" / "n01_0.JPEG").write_bytes(b"GIF89a not really")
    with pytest.raises(D.DatasetInvalid, match="cannot read image") as err:
        D.load_tiny_imagenet(tmp_path)
    _one_line_naming(err, base / "train" / "n01" / "images" / "n01_0.JPEG")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("which", ["train/n01/images/n01_0.JPEG", "wnids.txt"])
def test_a_fifo_in_tiny_imagenet_is_refused_not_waited_on(tmp_path, which):
    """Reading a FIFO blocks until a writer comes; the loader must refuse it at once.
    The load runs in a thread, so a regression fails the test instead of hanging it."""
    import threading

    base = _tiny(tmp_path)
    (base / which).unlink()
    os.mkfifo(base / which)
    out = {}

    def load():
        try:
            D.load_tiny_imagenet(tmp_path)
        except Exception as exc:  # noqa: BLE001 (what it raised is the result)
            out["exc"] = exc

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # unblock the reader so the thread can end
        with open(base / which, "wb"):
            pass
        pytest.fail(f"the loader waited on a FIFO ({which})")
    assert isinstance(out.get("exc"), D.DatasetInvalid), out
    assert "not a regular file" in str(out["exc"]) and "\n" not in str(out["exc"])


# ------------------------------------------------------------------------------ PTB
@pytest.mark.parametrize("train, message", [
    pytest.param(b"", "fewer than one window", id="empty"),
    pytest.param(b"a b\n", "fewer than one window", id="too-short"),
    pytest.param(b"\xff\xfe\x00bad", "cannot read text", id="not-utf8"),
])
def test_malformed_ptb_is_one_line_naming_the_file(tmp_path, train, message):
    (tmp_path / "ptb.train.txt").write_bytes(train)
    for s in ("valid", "test"):
        (tmp_path / f"ptb.{s}.txt").write_text("a b c d e f\n")
    with pytest.raises(D.DatasetInvalid, match=message) as err:
        D.load_ptb(tmp_path, seq_len=4)
    _one_line_naming(err, tmp_path / "ptb.train.txt")


# ----------------------------------------------------------------------- fingerprints
def test_fingerprint_follows_content_not_location(tmp_path, monkeypatch):
    monkeypatch.delenv("AUDIT_DATA", raising=False)
    a = _cifar100(tmp_path / "a", {b"data": np.zeros((2, 3072), np.uint8),
                                   b"fine_labels": [0, 1]})
    b = _cifar100(tmp_path / "b", {b"data": np.zeros((2, 3072), np.uint8),
                                   b"fine_labels": [0, 1]})
    c = _cifar100(tmp_path / "c", {b"data": np.zeros((2, 3072), np.uint8),
                                   b"fine_labels": [0, 2]})
    cfg = {"sim": {"dataset": "CIFAR-100"}, "rounds": 3}
    fa, fb, fc = (D.data_fingerprint(cfg, r) for r in (a, b, c))
    assert list(fa) == ["cifar100"] and fa == fb != fc
    # a file changed in place (same size) changes it; digits reads no directory
    _pickle(a / "cifar-100-python" / "test", {b"data": np.ones((2, 3072), np.uint8),
                                              b"fine_labels": [0, 1]})
    assert D.data_fingerprint(cfg, a) != fa
    assert D.data_fingerprint({"dataset": "digits"}, a) == {}
    assert D.data_fingerprint(cfg, None) == {}
    monkeypatch.setenv("AUDIT_DATA", str(b))  # the loaders' fallback directory counts too
    assert D.data_fingerprint(cfg, None) == fb


# ----------------------------------------------------------------------- partitions
def test_a_split_the_data_cannot_give_is_one_audit_error():
    """Too few samples for the clients asked for: an AuditError (one line at the CLI),
    still a ValueError; the hopeless Dirichlet search ends in the same error."""
    rng = np.random.default_rng(0)
    with pytest.raises(D.PartitionError, match="cannot give 5 clients 10 samples each "
                                               "from 40") as err:
        D.dirichlet_partition(np.arange(40) % 4, 5, 0.1, rng)
    assert isinstance(err.value, AuditError) and isinstance(err.value, ValueError)
    with pytest.raises(D.PartitionError, match="in 50 tries"):  # one class: cuts of 12
        D.dirichlet_partition(np.zeros(60), 5, 0.5, rng, min_size=12, max_tries=50)
    ds = D.load_digits(seed=0)
    with pytest.raises(D.PartitionError, match="no training samples left"):
        D.make_federated(ds, [np.arange(10), np.arange(0)], 0.0, 0.5, rng)


def test_a_dirichlet_share_that_underflows_is_dealt_evenly_not_as_nan():
    """With alpha ~ 0.01 a draw can put every open client's share at exactly 0 (float
    underflow); the split then deals that class evenly among the open clients instead of
    cutting at NaN (which gave the whole class to the last client, with a warning)."""
    import warnings

    y = np.repeat(np.arange(40), 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the 0/0 was a RuntimeWarning
        # seed 12: at the last class only clients 3 and 4 are open, and both shares
        # underflow (the old cut gave client 4 all 30 images)
        parts = D.dirichlet_partition(y, 5, 0.01, np.random.default_rng(12), min_size=1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(y)))
    assert [int(np.sum(y[p] == 39)) for p in parts] == [0, 0, 0, 15, 15]
