"""Datasets, partitions, per-client splits, and each on-disk loader on tiny real-format files."""

import json
import pickle

import numpy as np
import pytest
import torch

from audit.fl import data as D


@pytest.fixture(scope="module")
def digits():
    return D.load_digits(seed=0)


def test_digits_shape_scale_and_stratified_split(digits):
    # sklearn's digits: 1797 images; 20 % test -> 360 (train_test_split rounds up the test part)
    assert digits.x_train.shape == (1437, 1, 8, 8) and digits.x_test.shape == (360, 1, 8, 8)
    assert digits.x_train.dtype == torch.float32 and digits.y_train.dtype == torch.int64
    assert 0.0 <= digits.x_train.min() and digits.x_train.max() <= 1.0
    tr = torch.bincount(digits.y_train, minlength=10).float() / len(digits.y_train)
    te = torch.bincount(digits.y_test, minlength=10).float() / len(digits.y_test)
    assert (tr - te).abs().max() < 0.01
    assert torch.equal(D.load_digits(seed=0).y_test, digits.y_test)


def test_synthetic_is_seeded():
    a, b = D.synthetic_classification(3, 200, 4, (1, 4, 4)), D.synthetic_classification(3, 200, 4, (1, 4, 4))
    assert torch.equal(a.x_train, b.x_train) and a.x_train.shape[1:] == (1, 4, 4)
    assert a.num_classes == 4 and len(a.y_train) + len(a.y_test) == 200


def _classes_per_client(parts, y):
    return np.mean([len(np.unique(y[p])) for p in parts])


def test_dirichlet_partition_disjoint_cover_min_size_and_skew(digits):
    y = digits.y_train.numpy()
    parts = D.dirichlet_partition(y, 20, 0.1, np.random.default_rng(0), min_size=10)
    allidx = np.concatenate(parts)
    assert len(allidx) == len(y) and len(np.unique(allidx)) == len(y)
    assert min(len(p) for p in parts) >= 10
    iid = D.dirichlet_partition(y, 20, 100.0, np.random.default_rng(0))
    assert _classes_per_client(parts, y) < 5 < _classes_per_client(iid, y)
    again = D.dirichlet_partition(y, 20, 0.1, np.random.default_rng(0), min_size=10)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_dirichlet_fixed_size_partition(digits):
    y = digits.y_train.numpy()
    parts = D.dirichlet_fixed_size_partition(y, 50, 20, 0.1, np.random.default_rng(1))
    assert len(parts) == 50 and all(len(p) == 20 for p in parts)
    assert all(len(np.unique(p)) == 20 for p in parts)  # no repeat within a client
    assert _classes_per_client(parts, y) < 4
    again = D.dirichlet_fixed_size_partition(y, 50, 20, 0.1, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_shard_partition(digits):
    y = digits.y_train.numpy()
    parts = D.shard_partition(y, 10, 2, np.random.default_rng(0))
    assert len(np.unique(np.concatenate(parts))) == len(y)
    assert _classes_per_client(parts, y) <= 4


def test_iid_and_contiguous():
    p = D.iid_partition(10, 3, np.random.default_rng(0))
    assert sorted(np.concatenate(p).tolist()) == list(range(10))
    assert [q.tolist() for q in D.contiguous_partition(5, 2)] == [[0, 1, 2], [3, 4]]


def test_make_federated_splits_each_client_and_keeps_global_test(digits):
    parts = D.dirichlet_partition(digits.y_train, 10, 0.1, np.random.default_rng(0))
    fed = D.make_federated(digits, parts, 0.1, 0.2, np.random.default_rng(0))
    assert torch.equal(fed.x_test, digits.x_test)
    for c, p in zip(fed.clients, parts):
        n = len(p)
        assert len(c.y_test) == int(np.floor(0.2 * n)) and len(c.y_val) == int(np.floor(0.1 * n))
        assert len(c.y_train) + len(c.y_val) + len(c.y_test) == n
        # the client's test labels come from its own (skewed) pool
        assert set(c.y_test.tolist()) <= set(digits.y_train[p].tolist())
    s = fed.summary()
    json.dumps(s)
    assert s["n_clients"] == 10 and s["n_train_total"] == sum(len(c.y_train) for c in fed.clients)


# ---------------------------------------------------------------- on-disk loaders

def _pickle(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def test_cifar10_pickle_format(tmp_path):
    rng = np.random.default_rng(0)
    base = tmp_path / "cifar-10-batches-py"
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        _pickle(base / name, {b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8),
                              b"labels": [1, 2, 3]})
    ds = D.load_cifar10(tmp_path)
    assert ds.x_train.shape == (15, 3, 32, 32) and ds.x_test.shape == (3, 3, 32, 32)
    assert ds.y_train.tolist()[:3] == [1, 2, 3] and ds.num_classes == 10
    # channel-major rows: pixel (c=1, h=0, w=0) is byte 1024 of the row
    raw = pickle.load(open(base / "data_batch_1", "rb"), encoding="bytes")[b"data"]
    assert ds.x_train[0, 1, 0, 0].item() == pytest.approx(raw[0, 1024] / 255.0)


def test_cifar100_pickle_format(tmp_path):
    base = tmp_path / "cifar-100-python"
    for name in ("train", "test"):
        _pickle(base / name, {b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [7, 99]})
    ds = D.load_cifar100(tmp_path)
    assert ds.num_classes == 100 and ds.y_test.tolist() == [7, 99]


def test_svhn_mat_format(tmp_path):
    import scipy.io
    X = np.random.default_rng(0).integers(0, 256, (32, 32, 3, 4), dtype=np.uint8)
    for name in ("train_32x32.mat", "test_32x32.mat"):
        scipy.io.savemat(tmp_path / name, {"X": X, "y": np.array([[10], [1], [2], [10]])})
    ds = D.load_svhn(tmp_path)
    assert ds.x_train.shape == (4, 3, 32, 32) and ds.y_train.tolist() == [0, 1, 2, 0]
    assert ds.x_train[1, 2, 3, 4].item() == pytest.approx(X[3, 4, 2, 1] / 255.0)


def test_tiny_imagenet_folder_format(tmp_path):
    from PIL import Image
    base = tmp_path / "tiny-imagenet-200"
    wnids = ["n01443537", "n01629819"]
    base.mkdir()
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    for i, w in enumerate(wnids):
        d = base / "train" / w / "images"
        d.mkdir(parents=True)
        for j in range(2):
            Image.new("RGB", (64, 64), (40 * i, 0, 0)).save(d / f"{w}_{j}.JPEG")
    (base / "val" / "images").mkdir(parents=True)
    Image.new("RGB", (64, 64)).save(base / "val" / "images" / "val_0.JPEG")
    (base / "val" / "val_annotations.txt").write_text("val_0.JPEG\tn01629819\t0\t0\t63\t63\n")
    ds = D.load_tiny_imagenet(tmp_path)
    assert ds.x_train.shape == (4, 3, 64, 64) and ds.y_train.tolist() == [0, 0, 1, 1]
    assert ds.y_test.tolist() == [1] and ds.num_classes == 2


def test_ptb_text_format(tmp_path):
    (tmp_path / "ptb.train.txt").write_text(" the cat sat \n the dog <unk> \n")
    (tmp_path / "ptb.valid.txt").write_text(" the cat \n")
    (tmp_path / "ptb.test.txt").write_text(" the zebra sat \n")  # zebra -> <unk>
    ds = D.load_ptb(tmp_path, seq_len=3)
    vocab = sorted({"the", "cat", "sat", "dog", "<unk>", "<eos>"})
    assert ds.num_classes == len(vocab)
    ids = [vocab.index(w) for w in ["the", "cat", "sat", "<eos>", "the", "dog", "<unk>", "<eos>"]]
    assert ds.x_train.tolist() == [ids[0:3], ids[3:6]]
    assert ds.y_train.tolist() == [ids[1:4], ids[4:7]]


@pytest.mark.parametrize("loader, layout", [
    (D.load_cifar10, "cifar-10-batches-py"), (D.load_cifar100, "cifar-100-python"),
    (D.load_svhn, "train_32x32.mat"), (D.load_tiny_imagenet, "wnids.txt"),
    (D.load_ptb, "ptb.train.txt"),
])
def test_missing_or_wrong_layout_is_one_clear_error(tmp_path, loader, layout):
    with pytest.raises(D.DatasetNotFound, match=layout):
        loader(tmp_path)
    with pytest.raises(D.DatasetNotFound, match="not a directory"):
        loader(tmp_path / "nope")


def test_no_data_dir_names_env_variable(monkeypatch):
    monkeypatch.delenv("AUDIT_DATA", raising=False)
    with pytest.raises(D.DatasetNotFound, match="AUDIT_DATA"):
        D.load_dataset("cifar10")


def test_corrupt_pickle_is_dataset_not_found(tmp_path):
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    for name in ("train", "test"):
        (base / name).write_bytes(b"not a pickle")
    with pytest.raises(D.DatasetNotFound, match="cannot read"):
        D.load_cifar100(tmp_path)


def test_stdlib_chars_is_deterministic():
    a = D.load_stdlib_chars(seq_len=16, max_chars=5000)
    b = D.load_stdlib_chars(seq_len=16, max_chars=5000)
    assert torch.equal(a.x_train, b.x_train) and a.x_train.shape[1] == 16
    assert torch.equal(a.x_train[:, 1:], a.y_train[:, :-1])
    assert int(a.x_train.max()) < a.num_classes


def test_load_dataset_reads_audit_data_env(tmp_path, monkeypatch):
    base = tmp_path / "cifar-100-python"
    for name in ("train", "test"):
        _pickle(base / name, {b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [3]})
    monkeypatch.setenv("AUDIT_DATA", str(tmp_path))
    assert D.load_dataset("CIFAR-100").y_train.tolist() == [3]
    assert D.load_dataset("digits").name == "digits"
    with pytest.raises(ValueError, match="unknown dataset"):
        D.load_dataset("mnist-but-not-here")


def test_a_missing_dataset_is_a_user_facing_audit_error(tmp_path):
    # Every claim run that meets a missing dataset thereby gives the CLI's one-line error.
    from audit.errors import AuditError

    with pytest.raises(AuditError, match="cifar-100-python"):
        D.load_dataset("cifar100", data_dir=tmp_path)
