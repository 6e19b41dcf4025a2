"""Paper scale from a local dataset in the real on-disk format, with a tiny round count.

The test writes a small CIFAR-100 in torchvision's python-pickle layout, then runs the
FLAYER falsifier at ``--scale paper`` (ResNet-18, CIFAR-100 loader) through the CLI for one
round, and checks the report; a missing dataset is one clear error.
"""
import json
import pickle

import numpy as np
import pytest

from audit.cli import main

pytestmark = pytest.mark.slow


def write_cifar100(root, n_train=80, n_test=20, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    base = root / "cifar-100-python"
    base.mkdir(parents=True)
    for name, n in (("train", n_train), ("test", n_test)):
        labels = rng.integers(0, classes, n).tolist()
        rows = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        with open(base / name, "wb") as fh:
            pickle.dump({b"data": rows, b"fine_labels": labels}, fh)
    return root


def test_flayer_at_paper_scale_runs_from_a_local_cifar100(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    # two clients of 40 images: ResNet-18 on the CPU costs about a second a step, and the
    # point is the paper config and the real loader, not the training
    data = write_cifar100(tmp_path / "data", n_train=40, n_test=10)
    out = tmp_path / "reports"
    argv = ["run", "flayer-masked-zero", "--scale", "paper", "--data-dir", str(data),
            "--seed-list", "0,1", "--set", "rounds=1", "--set", "n_clients=2",
            "--set", "eval_every=1", "--out", str(out), "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    report = json.loads((out / "flayer-masked-zero.json").read_text())
    assert report["scale"] == "paper" and report["seeds"] == [0, 1]
    assert report["config"]["model"] == "resnet18" and report["config"]["rounds"] == 1
    assert report["command"].endswith("--set n_clients=2 --set rounds=1 --set eval_every=1") \
        or "--set rounds=1" in report["command"]
    assert {p["id"] for p in report["parts"]} >= {"structural", "collapse"}


def test_paper_scale_without_the_dataset_is_one_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    argv = ["run", "flayer-masked-zero", "--scale", "paper", "--data-dir",
            str(tmp_path / "empty"), "--seed-list", "0,1", "--out", str(tmp_path / "r"),
            "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cifar-100-python" in err[0]


def write_cifar10(root, n_per_batch=60, n_test=40, seed=0):
    rng = np.random.default_rng(seed)
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    names = [(f"data_batch_{i}", n_per_batch) for i in range(1, 6)] + [("test_batch", n_test)]
    for name, n in names:
        with open(base / name, "wb") as fh:
            pickle.dump({b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         b"labels": rng.integers(0, 10, n).tolist()}, fh)
    return root


def test_genefl_simulated_run_at_paper_scale_reads_a_local_cifar10(tmp_path):
    """The paper config's class split leaves a non-empty agnostic pool (it once did not),
    and the simulated run goes through the real CIFAR-10 loader (a small CNN, one round,
    to keep the test short; the paper's ResNet-18 is the same code path)."""
    from audit import claims
    from audit.claims import RunSpec
    from audit.runner import make_context

    claim = claims.get("genefl-uplink-bytes")
    sim = {**claim.scales["paper"]["sim"], "model": "cnn2", "rounds": 1, "n_known": 4,
           "clusters": 2, "n_agnostic": 2, "finetune_steps": 1, "agnostic_min_size": 5}
    ctx = make_context(claim, "paper", data_dir=str(write_cifar10(tmp_path / "data")),
                       overrides={"sim": sim})
    out = claim.run(RunSpec("simulated-run"), ctx)
    assert out["n_layers"] > 1 and len(out["clusters"]) == 2
    assert all(c["comm_up_per_round"][0] > 0 for c in out["clusters"])


def test_genefl_on_a_partial_cifar10_names_the_classes_that_fall_short(tmp_path):
    """A copy without the agnostic classes (7-9 here) cannot give the agnostic clients
    their images: one AuditError naming both pools, not a ValueError from deep in the
    split (through the CLI on the local backend it was a traceback)."""
    from audit import claims
    from audit.claims import AuditError, RunSpec
    from audit.runner import make_context

    root = tmp_path / "data"
    write_cifar10(root)
    rng = np.random.default_rng(1)
    for p in (root / "cifar-10-batches-py").iterdir():  # labels 0..6 only
        with open(p, "rb") as fh:
            d = pickle.load(fh)
        d[b"labels"] = rng.integers(0, 7, len(d[b"labels"])).tolist()
        with open(p, "wb") as fh:
            pickle.dump(d, fh)
    claim = claims.get("genefl-uplink-bytes")
    sim = {**claim.scales["paper"]["sim"], "model": "cnn2", "rounds": 1}
    ctx = make_context(claim, "paper", data_dir=str(root), overrides={"sim": sim})
    with pytest.raises(AuditError, match=r"0 of the agnostic classes") as err:
        claim.run(RunSpec("simulated-run"), ctx)
    assert "\n" not in str(err.value) and "training images of the known classes" in \
        str(err.value)


def test_genefl_agnostic_split_failure_names_both_pools(tmp_path, monkeypatch):
    """The agnostic clients' train/test split fails with the same one-line context as the
    known clients' (it was outside the wrapper: the bare PartitionError, without the
    pool sizes)."""
    from audit import claims
    from audit.claims import AuditError, RunSpec
    from audit.fl import data as D
    from audit.runner import make_context

    real, calls = D.make_federated, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the agnostic clients' split
            raise D.PartitionError("a client has no training samples left (stub)")
        return real(*args, **kwargs)

    monkeypatch.setattr(D, "make_federated", second_fails)
    claim = claims.get("genefl-uplink-bytes")
    sim = {**claim.scales["paper"]["sim"], "model": "cnn2", "rounds": 1, "n_known": 4,
           "clusters": 2, "n_agnostic": 2, "finetune_steps": 1, "agnostic_min_size": 5}
    ctx = make_context(claim, "paper", data_dir=str(write_cifar10(tmp_path / "data")),
                       overrides={"sim": sim})
    with pytest.raises(AuditError, match=r"of the agnostic classes .* \(stub\)$") as err:
        claim.run(RunSpec("simulated-run"), ctx)
    assert len(calls) == 2 and "training images of the known classes" in str(err.value)


def test_fedtlu_with_fewer_ptb_windows_than_clients_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    words = " ".join(f"w{i % 7}" for i in range(40))
    for s in ("train", "valid", "test"):
        (tmp_path / f"ptb.{s}.txt").write_text((words + "\n") * 4)
    argv = ["run", "fedtlu-lower-bound", "--scale", "paper", "--data-dir", str(tmp_path),
            "--seed-list", "0,1", "--set", "rounds=1", "--out", str(tmp_path / "r"),
            "--quiet", "--no-eta", "--backend", "local"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "training windows" in err[0] and "10 clients" in err[0], err
