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
        assert res.computed == units and pool._running == units
        assert len(pool._executor._processes) <= units  # the executor's own processes
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


# ------------------------------------------------ a probe of interruption and the cache
def test_a_cached_value_of_the_wrong_type_is_recomputed(toy, tmp_path):
    """A number stored as a string (checksum recomputed) made the analysis raise
    ValueError, a traceback on every run; a missing key was already recomputed."""
    import hashlib
    import json

    from audit.runner import CacheWarning, _canonical

    cache = Cache(tmp_path / "c")
    ctx = make_context(toy.CLAIM, "smoke")
    first = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    target = sorted((tmp_path / "c" / "toy-claim").glob("*.json"))[0]
    entry = json.loads(target.read_text())
    entry["result"]["score"] = "zero"
    entry["checksum"] = hashlib.sha256(_canonical(entry["result"]).encode()).hexdigest()
    target.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="wrong shape"):
        res = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert res.verdict == first.verdict and res.computed >= 1


@pytest.mark.parametrize("kind", ["file", "devnull"])
def test_a_cache_root_that_is_no_folder_is_one_error_before_the_run(toy, tmp_path, capsys,
                                                                   monkeypatch, kind):
    """$AUDIT_CACHE at a file failed each checkpointing unit after it ran (NotADirectoryError,
    and "the others are cached" when none was) and left an empty --out behind."""
    from audit.cli import main

    root = tmp_path / "cachefile"
    if kind == "file":
        root.write_text("x")
    monkeypatch.setenv("AUDIT_CACHE", str(root) if kind == "file" else "/dev/null")
    toy.CALLS.clear()
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "as the run cache" in err and "--no-cache" in err
    assert not out.exists() and not toy.CALLS
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", "--no-cache"]) == 0


def test_no_checkpoint_is_written_through_a_linked_folder(tmp_path):
    """A link at <cache>/checkpoints sent a killed unit's checkpoint outside the cache."""
    from audit.claims import RunContext, RunSpec

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache" / "checkpoints"
    root.parent.mkdir()
    root.symlink_to(outside, target_is_directory=True)
    ctx = RunContext("flayer-masked-zero", "smoke", {}, (0,), checkpoint_dir=str(root))
    with pytest.warns(UserWarning, match="no checkpoint"):
        assert ctx.checkpoint(RunSpec("fedavg", 0)) is None
    assert not any(outside.iterdir())
    root.unlink()
    root.mkdir()
    (root / "flayer-masked-zero").symlink_to(outside, target_is_directory=True)
    with pytest.warns(UserWarning, match="no checkpoint"):
        assert ctx.checkpoint(RunSpec("fedavg", 0)) is None
    (root / "flayer-masked-zero").unlink()
    assert ctx.checkpoint(RunSpec("fedavg", 0)).startswith(str(root / "flayer-masked-zero"))


@pytest.mark.parametrize("kind", ["folder at the report", "unreadable regime map"])
def test_what_would_stop_the_report_is_refused_before_the_units(toy, tmp_path, capsys, kind):
    from audit.cli import main

    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    (out / "toy-claim.json").unlink()
    if kind == "folder at the report":
        (out / "toy-claim.json").mkdir()
    else:
        (out / "toy-claim").mkdir(exist_ok=True)
        (out / "toy-claim" / "regime.json").write_text("{bad")
    toy.CALLS.clear()
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", "--no-cache"]) == 2
    assert not toy.CALLS  # nothing ran
    err = capsys.readouterr().err
    assert ("is a folder" in err) if kind.startswith("folder") else ("regime map" in err)


def test_a_real_value_error_of_a_cached_claim_recomputes_nothing(toy, tmp_path, monkeypatch):
    """A first fix of the case above recomputed every cached unit on any ValueError of an
    analysis (hours at full scale) before raising the same error again (review of the
    change): only units whose values are of another kind than their arm's are suspects."""
    cache = Cache(tmp_path / "c")
    ctx = make_context(toy.CLAIM, "smoke")
    execute(toy.CLAIM, ctx, cache=cache, progress=False)

    def broken(results, ctx):
        raise ValueError("a real problem of the analysis")

    import dataclasses

    claim = dataclasses.replace(toy.CLAIM, analyse=broken)
    toy.CALLS.clear()
    with pytest.raises(ValueError, match="a real problem"):
        execute(claim, ctx, cache=cache, progress=False)
    assert toy.CALLS == []


def test_a_pool_that_ran_one_unit_does_not_say_parallel():
    pool = PoolBackend(workers=2)
    pool._running = 1
    assert pool.describe().startswith("in 1 local worker process (")
    pool._running = 2
    assert pool.describe().startswith("in parallel in 2 local worker processes")
