"""The bench runs end to end on a shortened workload (timings are reported, never asserted)."""

import json

from audit.fl.bench import reference_workload, run_bench


def test_reference_workload_matches_issue():
    fed = reference_workload()
    assert fed.n_clients == 20 and sum(len(c.y_train) for c in fed.clients) == 1437
    assert len(fed.y_test) == 360


def test_run_bench_short_returns_the_documented_keys():
    out = run_bench("cpu", rounds=2, threads=1)
    json.dumps(out)
    for k in ("seconds", "baseline_seconds", "ratio", "accuracy", "baseline_accuracy",
              "rounds_per_second", "floor_seconds", "max_ratio"):
        assert k in out
    assert out["workload"]["rounds"] == 2 and 0.0 <= out["accuracy"] <= 1.0
    assert out["max_ratio"] == out["baseline_seconds"] / out["floor_seconds"]
