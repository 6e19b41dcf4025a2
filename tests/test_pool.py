"""The process-pool backend (audit.pool): the same result unit by unit as the one-at-a-time
local backend, the cache filled as results arrive, sequential looks on one pool, plugin
claims and claims whose ``run`` lives in another module, one torch thread a worker."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from audit import claims as claims_mod
from audit.claims import AuditError, RunSpec
from audit.pool import PoolBackend, PoolWarning, choose_backend, parallel_units
from audit.report import to_json
from audit.runner import (Cache, LocalBackend, environment, execute, execute_sequential,
                          make_context, usable_cores)
from test_external_claims import CLAIM_ID, plugin  # noqa: F401  (a fixture)


@pytest.fixture(autouse=True)
def _fixed_code_version(monkeypatch):
    """One code version for the whole test (work elsewhere in the tree may change the
    source meanwhile, and with it every cache key)."""
    import audit.keys as keys
    import audit.runner as runner

    # keys: every cache and checkpoint key; runner: the reports' environment field
    monkeypatch.setattr(keys, "code_version", lambda: "0.0.0+test-pool")
    monkeypatch.setattr(runner, "code_version", lambda: "0.0.0+test-pool")


@pytest.fixture(scope="module")
def pool():
    with PoolBackend(workers=2) as backend:
        yield backend


def _units(claim, ctx, cache: Cache) -> dict:
    """Every unit's cached result, by spec label, read from the entries the runner stored
    (not recomputed from the code version: other work in the tree may change it)."""
    out = {}
    for path in sorted((cache.root / claim.id).glob("*.json")):
        entry = json.loads(path.read_text())
        assert entry["key"]["config"] == dict(ctx.config)
        out[RunSpec(**entry["key"]["spec"]).label()] = entry["result"]
    assert len(out) == len(claim.unit_specs(ctx))
    return out


def _comparable(result):
    data = to_json(result)
    return json.dumps({k: data[k] for k in ("id", "verdict", "seeds", "estimates", "parts",
                                            "arms")}, sort_keys=True)


def test_the_pool_gives_the_local_result_unit_by_unit(toy, tmp_path, pool):
    ctx = make_context(toy.CLAIM, "smoke")
    local = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "a"), progress=False)
    par = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "b"), progress=False, backend=pool)
    units = 2 * len(toy.CLAIM.default_seeds)  # two arms x the toy's eight default seeds
    assert par.computed == units and local.computed == units
    a, b = _units(toy.CLAIM, ctx, Cache(tmp_path / "a")), _units(toy.CLAIM, ctx,
                                                                 Cache(tmp_path / "b"))
    assert None not in a.values() and json.dumps(a, sort_keys=True) == json.dumps(
        b, sort_keys=True)
    assert _comparable(par) == _comparable(local)
    assert par.environment["backend"] == ("in parallel in 2 local worker processes (pool "
                                          "backend; 1 torch thread a unit)")
    # resumed from the cache: nothing computed again
    again = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "b"), progress=False, backend=pool)
    assert again.computed == 0 and again.cached == units


def test_a_federated_claim_is_bitwise_the_same_in_the_pool(tmp_path, pool):
    """The backends themselves, unit by unit (the claim's analysis is not under test)."""
    claim = claims_mod.get("flayer-masked-zero")
    tiny = {"rounds": 2, "eval_every": 2, "depth_sweep": [], "cpr_sweep": [5],
            "layer_sweep": [], "lr_x20_sweep": False, "sweep_arms": ["literal"],
            "sweep_seeds": 1}
    ctx = make_context(claim, "smoke", seeds=2, overrides=tiny)
    specs = claim.unit_specs(ctx)
    assert len(specs) >= 5
    seen = []
    # a progress callback: called here by the local backend, left out of the workers
    ctx = dataclasses.replace(ctx, on_round=lambda r, n: seen.append(r))
    a = dict(LocalBackend().imap(claim, ctx, specs))
    b = dict(pool.imap(claim, ctx, specs))
    assert seen and set(a) == set(b) == set(specs)
    # every number but the unit's own wall-clock time, bit for bit
    for units in (a, b):
        for result in units.values():
            assert isinstance(result.pop("seconds"), float)
    assert json.dumps({s.label(): a[s] for s in specs}, sort_keys=True) == json.dumps(
        {s.label(): b[s] for s in specs}, sort_keys=True)


def test_a_failed_unit_keeps_the_finished_ones_and_the_rerun_fills_the_gap(
        toy, tmp_path, monkeypatch):
    ctx = make_context(toy.CLAIM, "smoke")
    cache = Cache(tmp_path / "c")
    monkeypatch.setenv("TOY_FAIL_SEED", "3")  # a fresh pool: its workers see it
    with PoolBackend(workers=2) as failing:
        with pytest.raises(AuditError, match=r"2 run\(s\) of toy-claim failed in the process "
                                             r"pool \(the others are cached\)"):
            execute(toy.CLAIM, ctx, cache=cache, progress=False, backend=failing)
    units = 2 * len(toy.CLAIM.default_seeds)  # seed 3 fails in both arms
    assert len(list((tmp_path / "c" / "toy-claim").glob("*.json"))) == units - 2
    monkeypatch.delenv("TOY_FAIL_SEED")
    rerun = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert rerun.cached == units - 2 and rerun.computed == 2


def test_sequential_looks_reuse_one_pool_and_match_the_local_run(toy, tmp_path, pool):
    from audit.sequential import Plan

    plan = Plan(looks=(3, 6, 10))
    ctx = make_context(toy.CLAIM, "smoke", overrides={"effect": 0.01})
    started = []
    original = pool._pool

    def spy():
        ex = original()
        started.append(id(ex))
        return ex

    pool._pool = spy
    try:
        par = execute_sequential(toy.CLAIM, ctx, plan, cache=Cache(tmp_path / "p"),
                                 progress=False, backend=pool)
    finally:
        del pool._pool
    local = execute_sequential(toy.CLAIM, ctx, plan, cache=Cache(tmp_path / "l"),
                               progress=False)
    assert len(par.verdict.looks) >= 2 and len(set(started)) == 1
    assert par.verdict.looks == local.verdict.looks and par.computed == local.computed
    assert _comparable(par) == _comparable(local)


def _threads_run(spec, ctx):
    """A run defined here, not in the claim's module: reports the worker's threads."""
    import torch

    return {"score": float(spec.seed) + (0.5 if spec.arm == "better" else 0.0),
            "curve": [0.0, 0.0, 0.0], "threads": torch.get_num_threads(),
            "omp": os.environ.get("OMP_NUM_THREADS"), "pid": os.getpid()}


def test_a_run_from_another_module_runs_in_workers_with_one_thread(toy, tmp_path, pool):
    claim = dataclasses.replace(toy.CLAIM, run=_threads_run)
    ctx = make_context(claim, "smoke")
    cache = Cache(tmp_path / "t")
    res = execute(claim, ctx, cache=cache, progress=False, backend=pool)
    units = _units(claim, ctx, cache)
    assert res.computed == 2 * len(toy.CLAIM.default_seeds)
    assert "in parallel" in res.environment["backend"]
    assert {u["threads"] for u in units.values()} == {1}
    assert {u["omp"] for u in units.values()} == {"1"}
    assert os.getpid() not in {u["pid"] for u in units.values()}


def test_a_run_that_cannot_be_pickled_runs_here_and_the_report_says_so(toy, tmp_path):
    def local_run(spec, ctx):  # a closure: no worker can import it
        return toy.run(spec, ctx)

    claim = dataclasses.replace(toy.CLAIM, run=local_run)
    ctx = make_context(claim, "smoke")
    backend = PoolBackend(workers=2)
    with pytest.warns(PoolWarning, match="cannot be sent to a worker"):
        res = execute(claim, ctx, cache=Cache(tmp_path / "x"), progress=False,
                      backend=backend)
    units = 2 * len(toy.CLAIM.default_seeds)
    assert res.computed == units and len(toy.CALLS) == units and backend._executor is None
    assert res.environment["backend"].startswith("one after another in this process")


def test_a_plugin_claim_runs_in_the_pool_through_the_cli(plugin, tmp_path, capsys):  # noqa: F811
    from audit.cli import main

    out = tmp_path / "out"
    assert main(["run", CLAIM_ID, "--out", str(out), "--quiet", "--backend", "pool",
                 "--workers", "2"]) == 0
    data = json.loads((out / f"{CLAIM_ID}.json").read_text())
    assert "local worker processes (pool backend" in data["environment"]["backend"]
    local_out = tmp_path / "local"
    assert main(["run", CLAIM_ID, "--out", str(local_out), "--quiet", "--backend", "local",
                 "--no-cache"]) == 0
    ref = json.loads((local_out / f"{CLAIM_ID}.json").read_text())
    assert ref["environment"]["backend"].endswith("(local backend)")
    assert data["estimates"] == ref["estimates"] and data["verdict"] == ref["verdict"]


def test_auto_is_the_pool_on_two_or_more_cores_and_local_otherwise(monkeypatch):
    import audit.runner as runner

    monkeypatch.setattr(runner, "usable_cores", lambda: 4)
    assert isinstance(choose_backend("auto"), PoolBackend)
    assert choose_backend("auto").workers == 4 and choose_backend("pool", workers=3).workers == 3
    assert isinstance(choose_backend("auto", device="cuda"), LocalBackend)
    assert isinstance(choose_backend("local"), LocalBackend)
    assert parallel_units("auto") == 4 and parallel_units("local") == 1
    monkeypatch.setattr(runner, "usable_cores", lambda: 1)
    assert isinstance(choose_backend("auto"), LocalBackend)
    assert parallel_units("auto") == 1
    with pytest.raises(AuditError, match="unknown backend"):
        choose_backend("threads")


def test_usable_cores_follow_the_affinity_mask(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert usable_cores() == 1
    assert "1 of" in environment("cpu", 1)["device"] or os.cpu_count() == 1


def test_cli_backend_option(monkeypatch):
    from audit.cli import _parser as build_parser

    args = build_parser().parse_args(["run", "x"])
    assert args.backend in ("auto", os.environ.get("AUDIT_BACKEND")) and args.workers is None
    args = build_parser().parse_args(["run", "x", "--backend", "local", "--workers", "3"])
    assert args.backend == "local" and args.workers == 3
