"""The Ray backend: same verdict as the local backend; a stopped sweep loses nothing."""
import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from audit.claims import AuditError  # noqa: E402
from audit.distributed import RayBackend  # noqa: E402
from audit.report import to_json  # noqa: E402
from audit.runner import Cache, execute, make_context  # noqa: E402
from raylock import one_ray_at_a_time  # noqa: E402

pytestmark = pytest.mark.ray
TESTS_DIR = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    env = {"env_vars": {"PYTHONPATH": TESTS_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
                        "TOY_FAIL_SEED": ""}}
    with one_ray_at_a_time(tmp_path_factory):  # no other worker's Ray meanwhile
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=env)
        yield
        ray.shutdown()


def _comparable(result):
    data = to_json(result)
    return {k: data[k] for k in ("id", "verdict", "seeds", "estimates", "parts", "arms")}


def test_ray_sweep_gives_the_local_verdict_seeds_and_estimates(toy, tmp_path, local_ray):
    ctx = make_context(toy.CLAIM, "smoke")
    local = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "a"), progress=False)
    remote = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "b"), progress=False,
                     backend=RayBackend(num_cpus=2))
    assert remote.computed == 2 * len(toy.CLAIM.default_seeds)
    assert json.dumps(_comparable(remote)) == json.dumps(_comparable(local))
    # the report says where the units ran, and with how many torch threads each
    assert local.environment["backend"].endswith("(local backend)")
    assert remote.environment["backend"].startswith("in parallel on Ray (local instance; 1 CPU "
                                                    "and 1 torch thread a unit)")
    from audit.report import render_markdown

    assert "units ran in parallel on Ray (local instance" in render_markdown(to_json(remote))


def test_a_failed_unit_keeps_the_finished_ones_and_the_rerun_fills_the_gap(
        toy, tmp_path, local_ray, monkeypatch):
    ctx = make_context(toy.CLAIM, "smoke")
    cache = Cache(tmp_path / "c")
    failing = RayBackend(runtime_env={"env_vars": {"PYTHONPATH": TESTS_DIR,
                                                   "TOY_FAIL_SEED": "3"}})
    with pytest.raises(AuditError, match=r"2 run\(s\) of toy-claim failed on Ray"):
        execute(toy.CLAIM, ctx, cache=cache, progress=False, backend=failing)
    stored = list((tmp_path / "c" / "toy-claim").glob("*.json"))
    units = 2 * len(toy.CLAIM.default_seeds)  # seed 3 fails in both arms
    assert len(stored) == units - 2  # every finished unit was cached before the error surfaced
    rerun = execute(toy.CLAIM, ctx, cache=cache, progress=False, backend=RayBackend())
    assert rerun.cached == units - 2 and rerun.computed == 2
