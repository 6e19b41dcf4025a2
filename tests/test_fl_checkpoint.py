"""Checkpoints: a run killed midway resumes where it stopped, with the same numbers."""
import numpy as np
import pytest
import torch

from audit.fl import data as D
from audit.fl.engine import FLConfig, run_federated
from audit.fl.models import build_model
from fl_stubs import CountingFedAvg, Killed

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fed():
    ds = D.load_digits(seed=0)
    parts = D.dirichlet_partition(ds.y_train, 5, 0.5, np.random.default_rng(1), min_size=20)
    parts = [p[:40] for p in parts]
    return D.make_federated(ds, parts, 0.1, 0.2, np.random.default_rng(1))


def vgg():
    return build_model("vgg", 10, 1, 8, width=0.25, dropout_middle=0.3)  # dropout: torch RNG


def _strip(h):
    d = h.to_dict()
    d.pop("seconds")
    return d


def test_killed_run_resumes_to_the_uninterrupted_numbers(fed, tmp_path):
    cfg = FLConfig(rounds=6, clients_per_round=3, batch_size=16, seed=5)
    full = run_federated(vgg, fed, CountingFedAvg(), cfg)
    ckpt = str(tmp_path / "run.pt")
    with pytest.raises(Killed):
        run_federated(vgg, fed, CountingFedAvg(kill_at=5), cfg, checkpoint=ckpt,
                      checkpoint_every=2)
    saved = torch.load(ckpt, weights_only=True)
    assert saved["round"] == 4  # rounds 1-4 survive the kill at round 5
    import warnings

    with warnings.catch_warnings():  # resumed, not restarted: no checkpoint is ignored
        warnings.simplefilter("error", UserWarning)
        resumed = run_federated(vgg, fed, CountingFedAvg(), cfg, checkpoint=ckpt,
                                checkpoint_every=2)
    assert _strip(resumed) == _strip(full)
    assert not (tmp_path / "run.pt").exists()  # removed once the run finished


def test_checkpoint_of_another_config_is_not_used(fed, tmp_path):
    ckpt = str(tmp_path / "run.pt")
    cfg = FLConfig(rounds=4, clients_per_round=3, batch_size=16, seed=5)
    with pytest.raises(Killed):
        run_federated(vgg, fed, CountingFedAvg(kill_at=3), cfg, checkpoint=ckpt,
                      checkpoint_every=2)
    other = FLConfig(rounds=4, clients_per_round=3, batch_size=16, seed=6)
    fresh = run_federated(vgg, fed, CountingFedAvg(), other)
    resumed = run_federated(vgg, fed, CountingFedAvg(), other, checkpoint=ckpt)
    assert _strip(resumed) == _strip(fresh)


def test_corrupt_checkpoint_is_reported_and_ignored(fed, tmp_path):
    ckpt = tmp_path / "run.pt"
    ckpt.write_bytes(b"not a checkpoint")
    cfg = FLConfig(rounds=2, clients_per_round=3, batch_size=16, seed=5)
    with pytest.warns(UserWarning, match="ignoring unreadable checkpoint"):
        h = run_federated(vgg, fed, CountingFedAvg(), cfg, checkpoint=str(ckpt))
    assert _strip(h) == _strip(run_federated(vgg, fed, CountingFedAvg(), cfg))


def _killed_checkpoint(fed, tmp_path, cfg):
    ckpt = str(tmp_path / "run.pt")
    with pytest.raises(Killed):
        run_federated(vgg, fed, CountingFedAvg(kill_at=3), cfg, checkpoint=ckpt,
                      checkpoint_every=2)
    return ckpt


def _broken(saved: dict, field: str) -> dict:
    bad = dict(saved)
    if field == "no reference":
        bad.pop("reference")
    elif field == "sample_rng":
        bad["sample_rng"] = {}
    elif field == "torch_rng":
        bad["torch_rng"] = torch.zeros(3, dtype=torch.uint8)
    elif field == "global_state":
        bad["global_state"] = {}
    elif field == "client_states":
        bad["client_states"] = []
    elif field == "shapes":
        bad["global_state"] = {k: torch.zeros(2, *v.shape) for k, v in
                               saved["global_state"].items()}
    return bad


@pytest.mark.parametrize("field", ["no reference", "sample_rng", "torch_rng", "global_state",
                                   "client_states", "shapes"])
def test_a_checkpoint_that_cannot_be_restored_starts_afresh(fed, tmp_path, field):
    """A readable run state with one field wrong (of this config and algorithm) raised
    KeyError, ValueError, RuntimeError or IndexError on resume, on every later run, until
    the file was deleted by hand (found by a hostile probe)."""
    cfg = FLConfig(rounds=4, clients_per_round=3, batch_size=16, seed=5)
    ckpt = _killed_checkpoint(fed, tmp_path, cfg)
    torch.save(_broken(torch.load(ckpt, weights_only=True), field), ckpt)
    with pytest.warns(UserWarning, match="ignoring checkpoint"):
        h = run_federated(vgg, fed, CountingFedAvg(), cfg, checkpoint=ckpt)
    assert _strip(h) == _strip(run_federated(vgg, fed, CountingFedAvg(), cfg))


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_a_checkpoint_name_that_is_not_a_file_is_ignored(fed, tmp_path, kind):
    """A FIFO at the checkpoint's name made torch.load wait forever; a folder there made
    the finished run fail in os.remove and lose its result."""
    import os

    ckpt = tmp_path / "run.pt"
    if kind == "fifo":
        os.mkfifo(ckpt)
    elif kind == "folder":
        ckpt.mkdir()
    else:
        (tmp_path / "elsewhere.pt").write_bytes(b"x")
        ckpt.symlink_to(tmp_path / "elsewhere.pt")
    cfg = FLConfig(rounds=2, clients_per_round=3, batch_size=16, seed=5)
    with pytest.warns(UserWarning, match="not a regular file"):
        h = run_federated(vgg, fed, CountingFedAvg(), cfg, checkpoint=str(ckpt))
    assert _strip(h) == _strip(run_federated(vgg, fed, CountingFedAvg(), cfg))
