"""The bench runs end to end on a shortened workload (timings are reported, never asserted)."""

import json
import os
import platform
import subprocess
import sys

import pytest

from audit.fl.bench import reference_workload, run_bench


def test_reference_workload_matches_issue():
    fed = reference_workload()
    assert fed.n_clients == 20 and sum(len(c.y_train) for c in fed.clients) == 1437
    assert len(fed.y_test) == 360


def test_run_bench_short_returns_the_documented_keys():
    out = run_bench("cpu", rounds=2, threads=1, repeats=2)
    json.dumps(out)
    for k in ("seconds", "baseline_seconds", "ratio", "accuracy", "baseline_accuracy",
              "rounds_per_second", "floor_seconds", "max_ratio", "malloc"):
        assert k in out
    assert out["workload"]["rounds"] == 2 and 0.0 <= out["accuracy"] <= 1.0
    assert out["max_ratio"] == out["baseline_seconds"] / out["floor_seconds"]
    assert out["floor_ratio"] == out["seconds"] / out["floor_seconds"]
    samples = [out[f"{k}_samples"] for k in ("seconds", "baseline_seconds", "floor_seconds")]
    assert all(len(s) == 2 for s in samples)
    ratios = [b / e for e, b in zip(samples[0], samples[1])]
    mid = ratios.index(min(ratios))  # the lower median of two
    assert [out["seconds"], out["baseline_seconds"], out["floor_seconds"]] == \
        [s[mid] for s in samples]
    assert out["ratio"] == out["baseline_seconds"] / out["seconds"]
    assert out["batched_path"] == "chain" and out["repeats"] == 2
    with pytest.raises(ValueError, match="repeats"):
        run_bench("cpu", rounds=1, repeats=0)


_PROBE = ("from audit.fl.alloc import keep_freed_memory, malloc_setting;"
          "print(keep_freed_memory(), keep_freed_memory(), malloc_setting())")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
@pytest.mark.parametrize("env, expected", [
    ({}, "True True tuned"),
    ({"AUDIT_MALLOC": "default"}, "False False default"),
    ({"MALLOC_MMAP_THRESHOLD_": "1048576"}, "False False environment"),
])
def test_malloc_tuning_is_applied_once_and_can_be_declined(env, expected):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("AUDIT_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_thread_counts_follow_the_usable_cores(monkeypatch):
    from audit.fl import cores
    from audit.fl.bench import thread_counts

    # the bench reads the torch-free low module (audit.fl.cores), as the runner does
    monkeypatch.setattr(cores, "usable_cores", lambda: 3)
    assert thread_counts("1") == [1] and thread_counts("all") == [3]
    assert thread_counts("1,all") == [1, 3] and thread_counts("3,all") == [3]
    for bad in ("0", "x", "1,", "-1"):
        with pytest.raises(ValueError, match="thread counts"):
            thread_counts(bad)


def test_one_table_at_one_thread_and_at_two_with_the_load_beside_each():
    from audit.fl.bench import format_table, run_bench_threads

    out = run_bench_threads("cpu", threads="1,2", repeats=1, rounds=1)
    assert [r["threads"] for r in out["runs"]] == [1, 2]
    assert [r["threads"] for r in out["table"]] == [1, 2]
    for row, run in zip(out["table"], out["runs"]):
        assert row["seconds"] == run["seconds"] and row["load"] == run["load"]
        assert run["load_samples"] == [run["load"]] and run["cores"] >= 1
    text = format_table(out["table"])
    assert text.splitlines()[0].split()[:3] == ["threads", "engine", "s"]
    assert "engine/floor" in text.splitlines()[0]
    assert len(text.splitlines()) == 3
    single = run_bench_threads("cpu", threads="1", repeats=1, rounds=1)
    assert single["threads"] == 1 and "table" not in single


def test_the_cpu_client_chunk_default_changes_no_number():
    """Chunks of clients change no number: 50 clients in one call, in chunks of 20 and
    with the CPU default (100: one call here), bitwise."""
    import numpy as np
    import torch

    from audit.fl import data as D
    from audit.fl.config import CPU_CLIENT_CHUNK
    from audit.fl.engine import Algorithm, FLConfig, run_federated
    from audit.fl.models import build_model

    assert FLConfig(rounds=1).client_chunk == CPU_CLIENT_CHUNK == 100
    assert FLConfig(rounds=1, device="cuda").client_chunk == 0  # no limit off the CPU
    assert FLConfig(rounds=1, client_chunk=0).client_chunk == 0
    with pytest.raises(ValueError, match="client_chunk"):
        FLConfig(rounds=1, client_chunk=-1)
    ds = D.load_digits(seed=0)
    fed = D.make_federated(ds, D.iid_partition(len(ds.y_train), 50, np.random.default_rng(0)),
                           0.0, 0.2, np.random.default_rng(0))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        hs = [run_federated(lambda: build_model("cnn", 10, 1, 8, width=0.5), fed, Algorithm(),
                            FLConfig(rounds=1, batch_size=16, seed=1, momentum=0.9,
                                     client_chunk=chunk)) for chunk in (0, 20, None)]
    finally:
        torch.set_num_threads(before)
    for h in hs[1:]:
        assert all(torch.equal(hs[0].final_state[k], h.final_state[k])
                   for k in hs[0].final_state)
        assert hs[0].test_acc == h.test_acc and hs[0].personal_acc == h.personal_acc
