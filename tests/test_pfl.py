"""Apple's pfl-research as a peer of ``audit bench`` (``audit.fl.pflsim``, the ``pfl`` extra):
the reference workload through pfl's simulation must equal the engine's, and the bench must
report it beside Flower's from one run."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from audit.fl.bench import format_table, peer_names, run_bench, run_bench_threads

ROOT = Path(__file__).resolve().parents[1]


def test_peer_names_parse_a_comma_list_in_order_without_repeats():
    assert peer_names(None) == ()
    assert peer_names("pfl") == ("pfl",)
    assert peer_names("flower,pfl") == ("flower", "pfl")
    assert peer_names(" PFL , flower,pfl") == ("pfl", "flower")
    for bad in ("tff", "flower,,pfl", "", "pfl;rm"):
        with pytest.raises(ValueError, match="against must name peers"):
            peer_names(bad)


def test_bench_against_pfl_without_the_extra_is_one_line(monkeypatch):
    from audit.errors import AuditError

    monkeypatch.setitem(sys.modules, "audit.fl.pflsim", None)
    with pytest.raises(AuditError, match=r"needs the pfl extra"):
        run_bench(rounds=1, repeats=1, against="pfl")


def test_cli_refuses_an_unknown_peer_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "audit", "bench", "--against", "flower,tff"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "against must name peers" in proc.stderr and "Traceback" not in proc.stderr


def test_core_package_does_not_import_pfl():
    code = ("import sys, audit, audit.cli, audit.runner, audit.fl.engine, audit.fl.bench; "
            "assert 'pfl' not in sys.modules, 'pfl imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_table_has_a_column_per_peer():
    rows = [{"threads": 1, "seconds": 1.0, "pfl_seconds": 3.25},
            {"threads": 2, "seconds": 0.5, "pfl_seconds": 2.0}]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["threads", "engine", "s", "pfl", "s"]
    assert lines[1].split() == ["1", "1.00", "3.25"]


@pytest.mark.slow
def test_reference_workload_in_pfl_equals_the_engine_and_bench_reports_it():
    """3 of the workload's 50 rounds, all 20 clients, at one and at two threads: pfl's
    FedAvg (weighted by data points, central SGD of rate 1) around the engine's own
    local SGD ends where the engine does, up to float rounding."""
    pytest.importorskip("pfl", reason="needs the pfl extra (pip install -e '.[pfl]')")
    out = run_bench_threads("cpu", threads="1,2", repeats=1, rounds=3, against="pfl")
    assert [r["threads"] for r in out["table"]] == [1, 2]
    for row, run in zip(out["table"], out["runs"]):
        assert run["pfl_clients_per_round"] == [20, 20, 20]
        assert run["pfl_max_abs_diff"] <= 1e-5
        assert run["pfl_accuracy"] == run["accuracy"]
        assert run["pfl_ratio"] == run["pfl_seconds"] / run["seconds"]
        assert row["pfl_seconds"] == run["pfl_seconds"] > 0 and run["pfl_setup_seconds"] > 0
        assert run["pfl_version"].startswith("0.")
    assert "pfl s" in format_table(out["table"]) and "pfl/engine" in format_table(out["table"])


def test_a_peer_that_skipped_a_client_in_a_round_is_refused():
    import torch

    from audit.fl.bench import WORKLOAD, _peer_checked

    n = WORKLOAD["n_clients"]
    mine = {"w": torch.zeros(3)}
    theirs = {"w": torch.tensor([0.0, -2e-6, 1e-6])}
    per_round, diff = _peer_checked("pfl", {1: n, 2: n}, 2, mine, theirs)
    assert per_round == [n, n] and diff == pytest.approx(2e-6)
    for seen in ({1: n, 2: n - 1}, {1: n}, {1: n, 2: -n}):
        with pytest.raises(RuntimeError, match="comparison would be meaningless"):
            _peer_checked("pfl", seen, 2, mine, theirs)
