"""The runner against bad inputs and odd states: data identity in the cache and checkpoint
keys, odd cache entries, the recorded thread count, diverged runs, --set and --seeds checks,
progress on a stream that is not a terminal."""
import dataclasses
import io
import json
import math
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import claims as claims_mod
from audit.claims import AuditError, RunSpec
from audit.cli import main
from audit.runner import (MAX_SEEDS, Cache, CacheWarning, _progress, execute, make_context,
                          resolve_seeds)
from audit.verdict import Outcome


def _ctx(claim, **kw):
    return make_context(claim, kw.pop("scale", "smoke"), **kw)


# ------------------------------------------------------------- data identity (item 2)
def _write_cifar10(root, label_shift=0):
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    for i, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        with open(base / name, "wb") as fh:
            pickle.dump({b"data": np.full((2, 3072), i, np.uint8),
                         b"labels": [(i + label_shift) % 10, 3]}, fh)
    return root


@pytest.fixture
def cifar_toy(toy):
    """The toy claim on a config that names CIFAR-10; its runs read the labels."""
    from audit.fl.data import load_dataset

    def run(spec, ctx):
        toy.CALLS.append(spec)
        ds = load_dataset(ctx.config["dataset"], data_dir=ctx.data_dir)
        value = float(ds.y_train.float().mean()) / 10 + spec.seed * 0.01
        value += ctx.config["effect"] if spec.arm == "better" else 0.0
        return {"score": value, "curve": [value, value, value]}

    return dataclasses.replace(toy.CLAIM, scales={"smoke": {"effect": 1.0, "noise": 0.05,
                                                            "dataset": "cifar10"}}, run=run)


def test_another_copy_of_the_data_is_recomputed_not_served_from_the_cache(cifar_toy, toy,
                                                                           tmp_path):
    cache = Cache(tmp_path / "c")
    a = _write_cifar10(tmp_path / "a")
    b = _write_cifar10(tmp_path / "b", label_shift=4)  # same layout, other content
    same_as_a = _write_cifar10(tmp_path / "a2")  # byte-identical copy elsewhere
    first = execute(cifar_toy, _ctx(cifar_toy, data_dir=str(a)), cache=cache, progress=False)
    units = 2 * len(cifar_toy.default_seeds)  # two arms x the toy's default seeds
    assert (first.computed, first.cached) == (units, 0)
    other = execute(cifar_toy, _ctx(cifar_toy, data_dir=str(b)), cache=cache, progress=False)
    assert (other.computed, other.cached) == (units, 0)
    again = execute(cifar_toy, _ctx(cifar_toy, data_dir=str(same_as_a)), cache=cache,
                    progress=False)
    assert (again.computed, again.cached) == (0, units)


def test_runs_without_a_data_directory_keep_a_stable_key(toy, tmp_path):
    cache = Cache(tmp_path)
    spec = RunSpec("base", 0)
    plain = cache.key_material("toy-claim", spec, _ctx(toy.CLAIM), "v1")
    assert plain["data"] == {}
    # the toy config names no data set: a data directory does not change its key
    with_dir = cache.key_material("toy-claim", spec, _ctx(toy.CLAIM, data_dir=str(tmp_path)),
                                  "v1")
    assert cache.path(plain) == cache.path(with_dir)
    assert cache.path(plain) == cache.path(cache.key_material("toy-claim", spec,
                                                              _ctx(toy.CLAIM), "v1"))


def test_checkpoint_key_covers_data_and_code_version(cifar_toy, tmp_path, monkeypatch):
    import audit.keys as keys  # the code version every key carries (audit.runner re-exports it)

    a, b = _write_cifar10(tmp_path / "a"), _write_cifar10(tmp_path / "b", label_shift=1)
    spec = RunSpec("base", 0)

    def ckpt(root):
        ctx = dataclasses.replace(_ctx(cifar_toy, data_dir=str(root)),
                                  checkpoint_dir=str(tmp_path / "ck"))
        return ctx.checkpoint(spec)

    assert ckpt(a) == ckpt(a) != ckpt(b)
    before = ckpt(a)
    monkeypatch.setattr(keys, "code_version", lambda: "0.0+changed")
    assert ckpt(a) != before  # a run killed before a code change starts afresh


# ---------------------------------------------------------------- odd entries (item 3)
def _entries(tmp_path):
    return sorted((tmp_path / "c" / "toy-claim").glob("*.json"))


def test_a_directory_where_an_entry_should_be_is_reported_and_recomputed(toy, tmp_path):
    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy.CLAIM)
    execute(toy.CLAIM, ctx, cache=cache, progress=False)
    target = _entries(tmp_path)[0]
    target.unlink()
    target.mkdir()  # a directory in the entry's place
    for _ in range(2):  # every rerun: a warning and a result, never IsADirectoryError
        toy.CALLS.clear()
        with pytest.warns(CacheWarning) as record:
            res = execute(toy.CLAIM, ctx, cache=cache, progress=False)
        assert res.computed == 1 and len(toy.CALLS) == 1
        text = " ".join(str(w.message) for w in record)
        assert "corrupt cache entry" in text and "cannot store cache entry" in text
    assert target.is_dir()  # left alone: the cache never deletes what it did not write


@pytest.mark.parametrize("mangle", [
    pytest.param(lambda e: {**e, "result": [1, 2]}, id="result-is-a-list"),
    pytest.param(lambda e: {**e, "result": "x"}, id="result-is-a-string"),
    pytest.param(lambda e: [e], id="entry-is-a-list"),
    pytest.param(lambda e: {"key": e["key"], "result": e["result"]}, id="no-checksum"),
    pytest.param(lambda e: {**e, "key": {"claim": "toy-claim"}}, id="key-lacks-fields"),
])
def test_a_wrong_shaped_entry_with_a_valid_checksum_is_recomputed(toy, tmp_path, mangle):
    import hashlib

    from audit.runner import _canonical

    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy.CLAIM)
    first = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    target = _entries(tmp_path)[0]
    entry = mangle(json.loads(target.read_text()))
    if isinstance(entry, dict) and "checksum" in entry:
        entry["checksum"] = hashlib.sha256(_canonical(entry["result"]).encode()).hexdigest()
    target.write_text(json.dumps(entry))
    toy.CALLS.clear()
    with pytest.warns(CacheWarning, match="corrupt cache entry"):
        res = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert res.computed == 1 and res.verdict == first.verdict
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired
        assert execute(toy.CLAIM, ctx, cache=cache, progress=False).computed == 0


def test_a_result_missing_its_fields_under_a_valid_checksum_is_recomputed(toy, tmp_path):
    import hashlib

    from audit.runner import _canonical

    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy.CLAIM)
    first = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    target = _entries(tmp_path)[3]
    entry = json.loads(target.read_text())
    entry["result"] = {"nothing": 1}  # a dict, well formed, with a correct checksum
    entry["checksum"] = hashlib.sha256(_canonical(entry["result"]).encode()).hexdigest()
    target.write_text(json.dumps(entry))
    toy.CALLS.clear()
    with pytest.warns(CacheWarning, match="wrong shape"):
        res = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert len(toy.CALLS) == 1 and res.verdict == first.verdict
    assert (res.computed, res.cached) == (1, 2 * len(toy.CLAIM.default_seeds) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired on disk
        assert execute(toy.CLAIM, ctx, cache=cache, progress=False).computed == 0


# ------------------------------------------------------------------- threads (item 4)
def test_recorded_thread_count_does_not_depend_on_the_cache(toy, tmp_path):
    import torch

    before = torch.get_num_threads()
    ctx = _ctx(toy.CLAIM)

    def single_threaded(spec):  # what the experiments do in their run()
        torch.set_num_threads(1)
        return toy.run(spec, ctx)

    cache = Cache(tmp_path / "c")
    try:
        torch.set_num_threads(3)
        fresh = execute(toy.CLAIM, ctx, cache=cache, progress=False, runner=single_threaded)
        assert torch.get_num_threads() == 3  # restored after the units
        cached = execute(toy.CLAIM, ctx, cache=cache, progress=False, runner=single_threaded)
        units = 2 * len(toy.CLAIM.default_seeds)
        assert (fresh.computed, cached.cached) == (units, units)
        assert fresh.environment["torch_threads"] == cached.environment["torch_threads"] == 3
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ diverged (item 5)
@pytest.fixture
def diverging_toy(toy):
    def run(spec, ctx):
        out = toy.run(spec, ctx)
        if spec.arm == "better" and spec.seed >= 2:
            out["curve"] = [out["curve"][0]] + [math.nan] * 2  # diverges from round index 1
            out["score"] = math.nan
        return out

    return dataclasses.replace(toy.CLAIM, run=run)


def test_a_diverged_run_is_reported_inconclusive_with_arm_seeds_and_round(diverging_toy,
                                                                          tmp_path):
    from audit import report

    cache = Cache(tmp_path / "c")
    ctx = _ctx(diverging_toy)
    res = execute(diverging_toy, ctx, cache=cache, progress=False)
    toy_seeds = list(ctx.seeds)
    assert res.verdict.verdict == Outcome.INCONCLUSIVE
    (part,) = res.verdict.parts
    assert part.id == "diverged" and part.verdict == Outcome.INCONCLUSIVE
    # arm `better` diverges at seeds 2.. of the toy's default seeds
    units, bad = 2 * len(toy_seeds), len([s for s in toy_seeds if s >= 2])
    assert f"{bad} of {units} unit(s)" in part.reason and "arm `better`" in part.reason
    assert "seed 2 from index 1 (`curve[1]`)" in part.reason and "seed 4" in part.reason
    assert "arm `base`" not in part.reason and part.needs
    assert [e.name for e in res.analysis.estimates] == ["diverged_units"]
    assert res.analysis.estimates[0].value == bad
    again = execute(diverging_toy, ctx, cache=cache, progress=False)  # from the cache: same
    assert again.cached == units and again.verdict == res.verdict
    data = report.to_json(res)
    json.dumps(data, allow_nan=False)  # the report JSON holds no NaN
    md = report.render_markdown(data)
    assert "diverged" in md and "INCONCLUSIVE" in md


def test_a_diverged_run_through_the_cli(diverging_toy, toy, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(toy, "CLAIM", diverging_toy)
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    assert "toy-claim: INCONCLUSIVE" in capsys.readouterr().out
    data = json.loads((out / "toy-claim.json").read_text())
    assert [p["id"] for p in data["parts"]] == ["diverged"]


def test_nan_inside_numpy_values_and_nested_lists_is_found_and_inf_is_not():
    from audit.runner import non_finite_units

    res = {RunSpec("a", 0): {"x": np.array([1.0, np.inf, np.nan]), "ok": [1, 2]},
           RunSpec("a", 1): {"per_round": [{"n": 1.0}, {"n": 2.0}, {"n": np.float32("nan")}]},
           RunSpec("a", 2): {"loss": float("nan"), "flag": True, "name": "nan"},
           RunSpec("a", 3): {"fine": [0.1, 0.2], "none": None},
           # an infinity alone is a value, not divergence (FedTLU's score of a constant
           # update is +inf by definition, in every smoke run)
           RunSpec("a", 4): {"score_constant": math.inf, "low": [-math.inf, 1.0]},
           # an exact unit's NaN is its finding (FedTLU's score at a zero update)
           RunSpec("exact"): {"score": math.nan}}
    found = non_finite_units(res)
    assert found == {RunSpec("a", 0): "index 2 (`x[2]`)",
                     RunSpec("a", 1): "index 2 (`per_round[2].n`)",
                     RunSpec("a", 2): "`loss`"}


# --------------------------------------------------------------------- --set (item 6)
@pytest.mark.parametrize("overrides, message", [
    pytest.param({"rounds": 3}, "no config key", id="unknown-key"),
    pytest.param({"noise": "abc"}, "must be a number", id="string-for-number"),
    pytest.param({"noise": True}, "must be a number", id="bool-for-number"),
    pytest.param({"noise": -0.5}, "must not be negative", id="negative"),
    pytest.param({"noise": math.nan}, "finite", id="nan"),
    pytest.param({"noise": math.inf}, "finite", id="inf"),
    pytest.param({"noise": [1]}, "must be a number", id="list-for-number"),
])
def test_bad_set_values_on_the_toy_are_one_audit_error(toy, overrides, message):
    with pytest.raises(AuditError, match=message):
        _ctx(toy.CLAIM, overrides=overrides)


@pytest.mark.parametrize("key, value, message", [
    ("rounds", "abc", "must be a whole number"),
    ("rounds", -5, "must be positive"),
    ("rounds", 0, "must be positive"),
    ("rounds", 2.5, "must be a whole number"),
    ("rounds", True, "must be a whole number"),
    ("lr", 0, "must be positive"),
    ("lr", -0.1, "must be positive"),
    ("model_kw", 3, "must be an object"),
    ("model_kw", {"width": -1.0}, "model_kw.width must be positive"),
    ("model", 5, "must be a string"),
])
def test_bad_set_values_on_a_real_claim(key, value, message):
    claim = claims_mod.get("flayer-masked-zero")
    with pytest.raises(AuditError, match=message) as err:
        make_context(claim, "smoke", overrides={key: value})
    assert "\n" not in str(err.value)


def test_good_set_values_pass():
    claim = claims_mod.get("flayer-masked-zero")
    ctx = make_context(claim, "smoke", overrides={"rounds": 1, "lr": 1e9, "model_kw": {},
                                                   "model": "cnn", "eval_every": 1})
    assert ctx.config["lr"] == 1e9 and ctx.config["rounds"] == 1
    lips = claims_mod.get("lips-dropout-control")
    with pytest.raises(AuditError, match=r"fraction and must lie in \[0, 1\]"):
        make_context(lips, "smoke", overrides={"freeze_fraction": 1.5})
    assert make_context(lips, "smoke", overrides={"momentum": 0.9}).config["momentum"] == 0.9
    # a Dirichlet concentration or a significance level of 0 is no ablation: refused
    with pytest.raises(AuditError, match="alpha must be positive"):
        make_context(lips, "smoke", overrides={"alpha": 0})
    with pytest.raises(AuditError, match="alpha_family must be positive"):
        make_context(lips, "smoke", overrides={"alpha_family": 0.0})
    genefl = claims_mod.get("genefl-inverted-cosine")
    assert make_context(genefl, "smoke", overrides={"lam_gen": 0.0}).config["lam_gen"] == 0.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(["rounds", "lr", "batch_size", "model_kw", "model", "alpha",
                            "eval_every", "nope"]), value=json_values)
def test_any_set_value_is_accepted_with_the_right_type_or_refused_in_one_line(key, value):
    claim = claims_mod.get("flayer-masked-zero")
    default = claim.scales["smoke"].get(key)
    try:
        ctx = make_context(claim, "smoke", overrides={key: value})
    except AuditError as exc:
        assert "\n" not in str(exc)
        return
    assert key in claim.scales["smoke"]
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        assert not isinstance(value, bool) and math.isfinite(value) and value > 0
        assert isinstance(value, int) or isinstance(default, float)
    assert ctx.config[key] == value


@pytest.mark.parametrize("argv, message", [
    (["--set", "noise=abc"], "must be a number"),
    (["--set", "noise=-1"], "must not be negative"),
    (["--seeds", "-3"], "seed count must be positive, got -3"),
    (["--seeds", "100000"], f"at most {MAX_SEEDS}"),
    (["--seed-list", ",".join(map(str, range(MAX_SEEDS + 1)))], f"at most {MAX_SEEDS}"),
])
def test_cli_bad_set_and_seeds_are_one_line_exit_2(toy, tmp_path, capsys, argv, message):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not out.exists() and toy.CALLS == []


# -------------------------------------------------------------------- seeds (item 7)
def test_seed_counts_and_lists_are_bounded(toy, monkeypatch):
    monkeypatch.delenv("AUDIT_MAX_SEEDS", raising=False)
    with pytest.raises(AuditError, match="got -3"):
        resolve_seeds(toy.CLAIM, -3)
    with pytest.raises(AuditError, match=f"100000 seeds asked for; at most {MAX_SEEDS}"):
        resolve_seeds(toy.CLAIM, 100_000)
    with pytest.raises(AuditError, match=f"{MAX_SEEDS + 1} seeds listed"):
        resolve_seeds(toy.CLAIM, list(range(MAX_SEEDS + 1)))
    with pytest.raises(AuditError, match="at most 4294967295"):
        resolve_seeds(toy.CLAIM, [0, 2**32])
    assert len(resolve_seeds(toy.CLAIM, MAX_SEEDS)) == MAX_SEEDS
    assert resolve_seeds(toy.CLAIM, [np.int64(3), 4]) == (3, 4)
    monkeypatch.setenv("AUDIT_MAX_SEEDS", "300")  # the escape hatch
    assert len(resolve_seeds(toy.CLAIM, 250)) == 250
    monkeypatch.setenv("AUDIT_MAX_SEEDS", "lots")
    with pytest.raises(AuditError, match="AUDIT_MAX_SEEDS"):
        resolve_seeds(toy.CLAIM, 3)


# ----------------------------------------------------------------- progress (item 8)
class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_on_a_stream_that_is_not_a_terminal_writes_plain_lines():
    stream = _Stream(tty=False)
    bar = _progress(3, "toy-claim", True, stream=stream)
    for k in range(3):
        bar.set_postfix_str("round 1/2")
        bar.set_postfix_str(f"base/seed={k}")
        bar.update(1)
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text.splitlines() == [f"toy-claim: {k}/3 run(s) done (base/seed={k - 1})"
                                 for k in range(1, 4)]
    assert _progress(3, "x", False, stream=stream) is None


def test_progress_on_a_terminal_is_a_live_bar():
    bar = _progress(3, "toy-claim", True, stream=_Stream(tty=True))
    try:
        assert type(bar).__name__ == "tqdm" or "tqdm" in type(bar).__module__
    finally:
        bar.close()


def test_a_run_logged_to_a_file_holds_no_carriage_returns(toy, tmp_path, capsys):
    execute(toy.CLAIM, _ctx(toy.CLAIM), cache=Cache(tmp_path / "c"), progress=True)
    err = capsys.readouterr().err  # pytest's capture is not a terminal
    assert "\r" not in err and err.count("run(s) done") == 2 * len(toy.CLAIM.default_seeds)


def test_an_odd_cache_entry_is_recomputed_once_across_sequential_looks(toy, tmp_path):
    # a look repairs it on disk; the later looks read the repaired entry, not a copy the
    # run held from before
    import hashlib

    from audit.runner import _canonical, execute_sequential
    from audit.sequential import plan

    cache = Cache(tmp_path / "c")
    ctx = make_context(toy.CLAIM, "smoke", overrides={"effect": 0.02, "noise": 0.5})
    execute(toy.CLAIM, dataclasses.replace(ctx, seeds=tuple(range(10))), cache=cache,
            progress=False)  # look 1's units, cached
    target = _entries(tmp_path)[3]
    entry = json.loads(target.read_text())
    entry["result"] = {"nothing": 1}
    entry["checksum"] = hashlib.sha256(_canonical(entry["result"]).encode()).hexdigest()
    target.write_text(json.dumps(entry))
    toy.CALLS.clear()
    with pytest.warns(CacheWarning, match="wrong shape") as caught:
        res = execute_sequential(toy.CLAIM, ctx, plan(40), cache=cache, progress=False)
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert [lk["n"] for lk in res.verdict.looks] == [10, 20, 40]
    assert len(toy.CALLS) == 1 + 60  # the odd unit once, and the 60 new ones
    assert (res.computed, res.cached) == (61, 19)


def test_the_local_backend_runs_a_unit_with_one_blas_thread(toy):
    # as a pool worker does: a unit's numpy products sum in one order on either backend
    from threadpoolctl import threadpool_info

    from audit.runner import LocalBackend

    seen = []

    class Probe:
        def run(self, spec, ctx):
            seen.append({i["num_threads"] for i in threadpool_info()
                         if i["user_api"] == "blas"})
            return {}

    list(LocalBackend().imap(Probe(), None, [RunSpec("a", 0)]))
    assert seen and seen[0] <= {1}


def test_analysis_sees_the_units_in_spec_order_whatever_order_they_finished(toy, tmp_path):
    # a pool or a cluster finishes units in any order; a float sum over the results must
    # not depend on it, so the analysis gets them in the specs' order on every backend
    import dataclasses

    from audit.runner import FunctionBackend

    class Reversed(FunctionBackend):
        def imap(self, claim, ctx, specs):
            for spec in reversed(list(specs)):
                yield spec, self.fn(spec)

    seen = []

    def analyse(results, ctx):
        seen.append(list(results))
        return toy.analyse(results, ctx)

    claim = dataclasses.replace(toy.CLAIM, analyse=analyse)
    ctx = make_context(claim, "smoke")
    run = lambda spec: toy.run(spec, ctx)  # noqa: E731
    firsts = []  # each run's analysis (the stability check's re-decisions come after it)
    for name, backend in (("a", Reversed(run)), ("b", FunctionBackend(run))):
        seen.clear()
        execute(claim, ctx, cache=Cache(tmp_path / name), progress=False, backend=backend)
        firsts.append(seen[0])
    assert firsts[0] == firsts[1] == list(claim.unit_specs(ctx))


def test_a_unit_run_here_gets_a_worker_s_threads_and_they_are_restored(toy):
    # one BLAS and one torch thread, as in a pool worker, also where the pool runs a unit
    # in this process; the process's own counts come back afterwards
    import torch
    from threadpoolctl import threadpool_info

    from audit.pool import PoolBackend

    seen = []

    class Probe:
        id = "probe"

        def run(self, spec, ctx):
            seen.append((torch.get_num_threads(), {i["num_threads"] for i in threadpool_info()
                                                   if i["user_api"] == "blas"}))
            return {}

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ctx = make_context(toy.CLAIM, "smoke")
        list(PoolBackend(workers=2)._here_imap(Probe(), ctx, [RunSpec("a", 0)], "test"))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen and seen[0][0] == 1 and seen[0][1] <= {1}


def test_a_wrong_shape_entry_of_a_one_unit_arm_is_computed_again(tmp_path):
    # no other unit of its arm to tell it apart: every cached unit is a suspect, and the
    # run computes them again instead of ending in a KeyError
    import hashlib

    from audit import claims as claims_mod
    from audit.runner import CacheWarning, _canonical

    claim = claims_mod.get("genefl-uplink-bytes")
    ctx = make_context(claim, "smoke")
    cache = Cache(tmp_path / "c")
    first = execute(claim, ctx, cache=cache, progress=False)
    entries = sorted((tmp_path / "c").rglob("*.json"))
    assert entries
    target = entries[0]
    entry = json.loads(target.read_text())
    entry["result"] = {"nothing": 1}
    entry["checksum"] = hashlib.sha256(_canonical(entry["result"]).encode()).hexdigest()
    target.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="wrong shape"):
        again = execute(claim, ctx, cache=cache, progress=False)
    assert again.verdict.verdict == first.verdict.verdict
    assert [e.value for e in again.analysis.estimates] == [
        e.value for e in first.analysis.estimates]


@pytest.mark.parametrize("count", ["-3", "0"])
def test_a_bad_seed_count_is_refused_for_an_exact_claim_too(tmp_path, capsys, count):
    # an exact claim runs no seeds, but a bad count is still a mistake to name, not ignore
    out = tmp_path / "r"
    assert main(["run", "genefl-uplink-bytes", "--out", str(out), "--quiet",
                 "--seeds", count]) == 2
    assert f"seed count must be positive, got {count}" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------- the machine a cached unit ran on
def test_cache_entries_record_the_machine_that_computed_them(toy, tmp_path):
    """A rerun from the cache counts its units as computed here only where their entries
    record this machine (kernel fields and device kind); an entry from another machine,
    an older entry without the record, or one with a malformed record counts as computed
    elsewhere; a cluster backend records no machine."""
    from audit.runner import machine_identity

    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy.CLAIM)
    units = 2 * len(toy.CLAIM.default_seeds)
    first = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert (first.computed, first.cached, first.cached_elsewhere) == (units, 0, 0)
    entries = sorted((tmp_path / "c" / toy.CLAIM.id).glob("*.json"))
    assert len(entries) == units
    here = machine_identity(ctx.device)
    assert set(here) == {"python", "torch", "numpy", "scipy", "cpu", "libc", "device"}
    assert all(json.loads(p.read_text())["machine"] == here for p in entries)
    again = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert (again.computed, again.cached, again.cached_elsewhere) == (0, units, 0)
    # another machine, no record, a malformed record: three units from elsewhere
    for path, machine in zip(entries, ({**here, "cpu": "another"}, None, ["x"])):
        entry = json.loads(path.read_text())
        if machine is None:
            del entry["machine"]
        else:
            entry["machine"] = machine
        path.write_text(json.dumps(entry))
    mixed = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert (mixed.computed, mixed.cached, mixed.cached_elsewhere) == (0, units, 3)
    assert mixed.verdict == again.verdict  # the results themselves are used as before
    from audit import report

    assert report.to_json(mixed)["runs"] == {"computed": 0, "cached": units,
                                             "cached_elsewhere": 3}


def test_a_cluster_backend_stores_no_machine(toy, tmp_path):
    from audit.runner import LocalBackend

    class Cluster(LocalBackend):
        runs_here = False  # as RayBackend: units on other machines

    cache = Cache(tmp_path / "c")
    execute(toy.CLAIM, _ctx(toy.CLAIM), cache=cache, progress=False, backend=Cluster())
    entries = list((tmp_path / "c" / toy.CLAIM.id).glob("*.json"))
    assert entries and all("machine" not in json.loads(p.read_text()) for p in entries)
    again = execute(toy.CLAIM, _ctx(toy.CLAIM), cache=cache, progress=False)
    assert again.cached_elsewhere == again.cached == len(entries)


def test_a_diverged_run_of_a_claim_with_questions_answers_every_one(diverging_toy, toy,
                                                                    tmp_path, monkeypatch,
                                                                    capsys):
    """`--set lr=1e9` on a built-in claim was a KeyError traceback: its questions asked
    for parts the diverged analysis does not compute. Every question is INCONCLUSIVE
    with the diverged reason, and the report is written."""
    from audit.questions import Question

    asked = dataclasses.replace(diverging_toy, questions=(
        Question("gain", "does better beat base?", ("falsifier",), ("gain",)),))
    monkeypatch.setattr(toy, "CLAIM", asked)
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    assert "toy-claim: INCONCLUSIVE" in capsys.readouterr().out
    data = json.loads((out / "toy-claim.json").read_text())
    (q,) = data["questions"]
    assert q["verdict"] == "INCONCLUSIVE" and q["reason"].startswith("diverged: ")
    assert q["needs"] and "diverged" in (out / "toy-claim.md").read_text()


def test_all_parts_never_counts_a_measurement():
    from audit.verdict import ALL_PARTS, Part

    exp = Part("e", Outcome.CONFIRMED, "r", "x")
    meas = Part("m", Outcome.INCONCLUSIVE, "r", "x", kind="measurement")
    assert ALL_PARTS([exp, meas]) == Outcome.CONFIRMED
