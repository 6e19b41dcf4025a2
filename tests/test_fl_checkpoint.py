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
