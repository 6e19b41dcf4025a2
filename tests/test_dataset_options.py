"""A dataset option its loader does not take is one line, before any training: from the
engine's ``load_dataset`` and from ``audit run ... --set dataset_kw=...``."""
from __future__ import annotations

import pytest

from audit.cli import main
from audit.fl.data import DatasetOptionError, load_dataset


@pytest.mark.parametrize("name, kw, bad, known", [
    ("digits", {"bogus": 1}, "bogus", "test_fraction"),
    ("synthetic", {"noise": 2.0, "nosie": 3.0}, "nosie", "num_classes"),
    ("cifar10", {"seq_len": 5}, "seq_len", "none"),
    ("stdlib-chars", {"root": "x"}, "root", "seq_len"),
])
def test_an_option_the_loader_does_not_take_names_it_and_the_known_ones(name, kw, bad, known):
    with pytest.raises(DatasetOptionError) as err:
        load_dataset(name, **kw)
    text = str(err.value)
    assert "\n" not in text and f"option(s) {bad};" in text and known in text


def test_options_the_loader_takes_pass_through():
    ds = load_dataset("synthetic", seed=3, n=50, noise=0.5)
    assert len(ds.y_train) + len(ds.y_test) == 50


def test_audit_run_with_a_bad_dataset_option_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    argv = ["run", "lips-dropout-control", "--seeds", "2", "--set",
            'dataset_kw={"bogus": 1}', "--out", str(tmp_path / "r"), "--quiet",
            "--backend", "local"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "takes no option(s) bogus" in err[0], err
    assert not (tmp_path / "r" / "lips-dropout-control.json").exists()
