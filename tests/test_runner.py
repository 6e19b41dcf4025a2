"""The runner: seeds, contexts, the on-disk cache, resuming an interrupted sweep."""
import json
import warnings

import pytest

from audit.claims import AuditError, RunSpec
from audit.runner import Cache, CacheWarning, execute, make_context, resolve_seeds


def _ctx(toy, **kw):
    return make_context(toy.CLAIM, kw.pop("scale", "smoke"), **kw)


def test_seeds_default_count_and_list(toy):
    assert resolve_seeds(toy.CLAIM, None) == tuple(range(8))  # the toy's default_seeds
    assert resolve_seeds(toy.CLAIM, 3) == (0, 1, 2)
    assert resolve_seeds(toy.CLAIM, [7, 9]) == (7, 9)


@pytest.mark.parametrize("seeds, message", [
    pytest.param(1, "at least 2 seeds", id="one-seed"),
    pytest.param([3], "at least 2 seeds", id="one-listed"),
    pytest.param([1, 1], "repeats", id="repeat"),
    pytest.param([-1, 2], "non-negative", id="negative"),
])
def test_bad_seeds_are_one_clear_error(toy, seeds, message):
    with pytest.raises(AuditError, match=message):
        resolve_seeds(toy.CLAIM, seeds)


def test_bad_context_inputs(toy, tmp_path):
    with pytest.raises(AuditError, match="unknown scale 'huge'"):
        _ctx(toy, scale="huge")
    with pytest.raises(AuditError, match="has no 'paper' scale"):
        _ctx(toy, scale="paper")
    with pytest.raises(AuditError, match="does not exist"):
        _ctx(toy, data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(AuditError, match="unknown device"):
        _ctx(toy, device="tpu")


def test_same_seed_same_numbers_and_cache_hits(toy, tmp_path):
    cache = Cache(tmp_path / "c")
    first = execute(toy.CLAIM, _ctx(toy), cache=cache, progress=False)
    units = 2 * 8  # two arms x the toy's eight default seeds
    assert first.computed == units and first.cached == 0
    second = execute(toy.CLAIM, _ctx(toy), cache=cache, progress=False)
    assert second.computed == 0 and second.cached == units
    assert second.verdict == first.verdict
    fresh = execute(toy.CLAIM, _ctx(toy), cache=Cache(tmp_path / "c", enabled=False),
                    progress=False)
    assert fresh.computed == units
    assert fresh.verdict.estimates == first.verdict.estimates


def test_interrupted_sweep_resumes_without_redoing_finished_runs(toy, tmp_path):
    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy)
    done = []

    def dies_after_four(spec):
        if len(done) == 4:
            raise KeyboardInterrupt
        done.append(spec)
        return toy.run(spec, ctx)

    with pytest.raises(KeyboardInterrupt):
        execute(toy.CLAIM, ctx, cache=cache, progress=False, runner=dies_after_four)
    toy.CALLS.clear()
    resumed = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert resumed.cached == 4 and resumed.computed == 2 * 8 - 4
    assert not set(done) & set(toy.CALLS)  # the finished four were not recomputed


def test_corrupt_cache_entry_is_reported_and_recomputed(toy, tmp_path):
    cache = Cache(tmp_path / "c")
    ctx = _ctx(toy)
    execute(toy.CLAIM, ctx, cache=cache, progress=False)
    entries = sorted((tmp_path / "c" / "toy-claim").glob("*.json"))
    entries[0].write_text("{not json")
    entry = json.loads(entries[1].read_text())
    entry["result"]["score"] = 123.0  # tampered: checksum no longer matches
    entries[1].write_text(json.dumps(entry))
    toy.CALLS.clear()
    with pytest.warns(CacheWarning, match="corrupt cache entry"):
        res = execute(toy.CLAIM, ctx, cache=cache, progress=False)
    assert res.computed == 2 and len(toy.CALLS) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: no warning the next time
        assert execute(toy.CLAIM, ctx, cache=cache, progress=False).computed == 0


def test_cache_key_depends_on_config_and_seed(toy, tmp_path):
    cache = Cache(tmp_path)
    a = cache.key_material("toy-claim", RunSpec("base", 0), _ctx(toy), "v1")
    b = cache.key_material("toy-claim", RunSpec("base", 1), _ctx(toy), "v1")
    c = cache.key_material("toy-claim", RunSpec("base", 0), _ctx(toy, scale="full"), "v1")
    d = cache.key_material("toy-claim", RunSpec("base", 0), _ctx(toy), "v2")
    assert len({cache.path(m) for m in (a, b, c, d)}) == 4


def test_round_postfix_is_throttled_but_shows_the_last_round():
    from audit.runner import _round_postfix

    class Bar:
        def __init__(self):
            self.shown = []

        def set_postfix_str(self, text):
            self.shown.append(text)

    bar = Bar()
    show = _round_postfix(bar, every_s=3600)
    for r in range(1, 6):
        show(r, 5)
    assert bar.shown == ["round 1/5", "round 5/5"]


@pytest.mark.parametrize("boot", [0.0, 1.5, 59.0, 1e6], ids=["at-boot", "secs", "mins", "days"])
def test_round_postfix_does_not_depend_on_the_clock_origin(boot):
    """A machine booted minutes ago reads a small monotonic clock; the first round shows."""
    from audit.runner import _round_postfix

    class Bar:
        def __init__(self):
            self.shown = []

        def set_postfix_str(self, text):
            self.shown.append(text)

    now = [boot]
    bar = Bar()
    show = _round_postfix(bar, every_s=3600, clock=lambda: now[0])
    for r in range(1, 6):
        show(r, 5)
        now[0] += 1.0
    assert bar.shown == ["round 1/5", "round 5/5"]
    now[0] += 3600
    show(1, 5)
    assert bar.shown[-1] == "round 1/5"
