"""A fifth hostile round (a probe of the engine's paths, the backends and `audit bench`):
a pool never starts more workers than a claim has units and says how many ran, a local
Ray instance gets the usable cores, and bad thread or chunk settings are one error."""
from __future__ import annotations

import pytest

from audit.fl.bench import MAX_THREADS, thread_counts
from audit.fl.config import FLConfig
from audit.pool import PoolBackend, PoolWarning, choose_backend
from audit.runner import Cache, execute, make_context, usable_cores


@pytest.fixture(autouse=True)
def _fixed_code_version(monkeypatch):
    import audit.keys as keys
    import audit.runner as runner

    monkeypatch.setattr(keys, "code_version", lambda: "0.0.0+test-round5")
    monkeypatch.setattr(runner, "code_version", lambda: "0.0.0+test-round5")


def test_a_large_pool_starts_at_most_one_worker_a_unit(toy, tmp_path):
    """``--workers 1000`` started a process for every unit submitted (22 on two cores)
    and the report said "in 1000 local worker processes"."""
    ctx = make_context(toy.CLAIM, "smoke", seeds=[0, 1])
    with PoolBackend(workers=1000) as pool:
        res = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "c"), progress=False,
                      backend=pool)
        units = len(toy.CLAIM.unit_specs(ctx))
        assert res.computed == units and pool._size == units
        assert len(pool._executor._processes) <= units
    assert res.environment["backend"].startswith(f"in parallel in {units} local worker")


def test_more_workers_than_cores_is_said(monkeypatch):
    with pytest.warns(PoolWarning, match="share the cores"):
        choose_backend("pool", workers=usable_cores() + 1)


def test_a_local_ray_instance_gets_the_usable_cores(monkeypatch):
    pytest.importorskip("ray")
    import audit.runner as runner

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(runner, "usable_cores", lambda: 1)  # as under `taskset -c 0`
    assert choose_backend("ray").num_cpus == 1  # Ray itself would count the machine's
    assert choose_backend("ray", ray_address="10.0.0.1:6379").num_cpus is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert choose_backend("ray").num_cpus is None  # joins that cluster: its own size


@pytest.mark.parametrize("text", ["99999999999", str(MAX_THREADS + 1), "²", "1,0"])
def test_thread_counts_out_of_range_are_refused(text):
    with pytest.raises(ValueError, match="whole numbers from 1"):
        thread_counts(text)
    assert thread_counts(f"1,{MAX_THREADS}") == [1, MAX_THREADS]


@pytest.mark.parametrize("chunk", [2.5, "2", True, -1])
def test_client_chunk_must_be_a_whole_number(chunk):
    """A float or string passed the check and failed mid-run in ``range``."""
    with pytest.raises(ValueError, match="client_chunk"):
        FLConfig(rounds=1, client_chunk=chunk)
