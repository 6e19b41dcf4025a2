"""Flower (flwr) strategies of the audited rules, held against Flower's own code.

- FedAvg: ours equals Flower's ``aggregate`` and the Message-API FedAvg's
  ``aggregate_arrayrecords`` on generated inputs (shapes, dtypes, weights, clients with
  zero samples). Tolerance: Flower sums in the arrays' own dtype, ours in float64 with one
  rounding to the dtype at the end, so they agree to (clients + 2) * eps(dtype) * max|x|;
  integer arrays: ours is Flower's (float) mean rounded to the nearest integer. With a
  total weight of zero ours raises ValueError, Flower's ``aggregate`` returns NaN and
  ``aggregate_arrayrecords`` raises ZeroDivisionError (pinned below).
- Every rule, driven in-process through the strategy and the ClientApp (no Ray): the
  engine's final model, bit for bit.
- Flower's simulation (``run_simulation``, Ray) on the bench's reference workload: the
  engine's final model to float tolerance (the engine's batched path and Ray's
  single-threaded workers round differently in the last bits) and the same accuracy.
- The README's example, run as printed.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict  # noqa: E402
from flwr.server.strategy.aggregate import aggregate as flower_aggregate  # noqa: E402
from flwr.serverapp.strategy import FedAvg as FlowerFedAvg  # noqa: E402
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from audit.papers.flayer.algorithm import make_algorithm  # noqa: E402
from audit.fl.aggregate import Upload, fedavg  # noqa: E402
from audit.fl.bench import _model, reference_workload, run_bench  # noqa: E402
from audit.fl.data import FederatedData  # noqa: E402
from audit.fl.engine import Algorithm, FedBN, FLConfig, run_federated  # noqa: E402
from audit.fl.flower import (RULES, AuditStrategy, client_app, initial_state,  # noqa: E402
                             server_app, upload_content)
from audit.fl.models import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _task_identity():
    """Flower's Message needs a run identity; the simulation sets it, tests set one."""
    for attr in ("task_id", "run_id", "node_id"):
        try:
            getattr(TaskIdentity, attr)
        except RuntimeError:
            setattr(TaskIdentity, attr, 1)
    yield


# ----------------------------------------------------------------------------- FedAvg
_DTYPES = [np.float32, np.float64, np.float16, np.int64]
_BOUND = {np.float32: 1e3, np.float64: 1e3, np.float16: 8.0, np.int64: 1000}


@st.composite
def _fedavg_inputs(draw):
    k = draw(st.integers(1, 4))
    weights = draw(st.lists(st.integers(0, 1000), min_size=k, max_size=k)
                   .filter(lambda w: sum(w) > 0))  # zero-sample clients allowed
    tensors = []
    for _ in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(_DTYPES))
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
        b = _BOUND[dtype]
        if dtype is np.int64:
            elems = st.integers(-b, b)
        else:
            elems = st.floats(-b, b, width=np.finfo(dtype).bits, allow_nan=False)
        tensors.append([draw(hnp.arrays(dtype, shape, elements=elems)) for _ in range(k)])
    return weights, tensors  # tensors[t][client]


def _ours(weights, tensors):
    names = [f"t{i}" for i in range(len(tensors))]
    prev = {n: torch.from_numpy(np.zeros_like(t[0])) for n, t in zip(names, tensors)}
    ups = [Upload({n: torch.from_numpy(t[c].copy()) for n, t in zip(names, tensors)}, None, w)
           for c, w in enumerate(weights)]
    out = fedavg()(prev, ups)
    return [out[n].numpy() for n in names]


def _close(ours, theirs, client_arrays):
    dtype = client_arrays[0].dtype
    assert ours.dtype == dtype and ours.shape == client_arrays[0].shape
    theirs = np.asarray(theirs, dtype=np.float64)
    if np.issubdtype(dtype, np.integer):
        # ours rounds the mean to the nearest integer; Flower returns the float mean
        assert np.all(np.abs(ours.astype(np.float64) - theirs) <= 0.5 + 1e-9)
        return
    scale = max([float(np.abs(a.astype(np.float64)).max(initial=0.0)) for a in client_arrays])
    # each rounding moves a result by at most an ulp: eps * |x| for normal numbers, and
    # the fixed subnormal spacing below the normal range (float16's starts at 6.1e-5)
    info = np.finfo(dtype)
    tol = (len(client_arrays) + 2) * (float(info.eps) * scale + float(info.smallest_subnormal))
    assert np.all(np.abs(ours.astype(np.float64) - theirs) <= tol + 1e-300)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fedavg_inputs())
@example(([281, 218, 1000], [[np.array(1e-05, np.float16), np.array(0.0, np.float16),
                              np.array(0.0, np.float16)]]))  # a float16 subnormal (CI)
def test_fedavg_equals_flowers_aggregate(inp):
    weights, tensors = inp
    ours = _ours(weights, tensors)
    legacy = flower_aggregate([([t[c] for t in tensors], w) for c, w in enumerate(weights)])
    records = [RecordDict({
        "arrays": ArrayRecord({f"t{i}": flwr.app.Array(t[c]) for i, t in enumerate(tensors)}),
        "metrics": flwr.app.MetricRecord({"num-examples": w})}) for c, w in enumerate(weights)]
    message_api = aggregate_arrayrecords(records, "num-examples")
    for i, t in enumerate(tensors):
        _close(ours[i], legacy[i], t)
        _close(ours[i], message_api[f"t{i}"].numpy(), t)


def test_zero_total_weight_is_an_error_here_and_nan_or_an_error_in_flower():
    x = [np.ones(3, np.float32), np.full(3, 2.0, np.float32)]
    with pytest.raises(ValueError, match="positive sum"):
        _ours([0, 0], [x])
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(flower_aggregate([([x[0]], 0), ([x[1]], 0)])[0]).all()
    recs = [RecordDict({"arrays": ArrayRecord({"t": flwr.app.Array(a)}),
                        "metrics": flwr.app.MetricRecord({"num-examples": 0})}) for a in x]
    with pytest.raises(ZeroDivisionError):
        aggregate_arrayrecords(recs, "num-examples")


def _replies(states, weights, masks=None):
    out = []
    for k, (s, w) in enumerate(zip(states, weights)):
        up = Upload(s, None if masks is None else masks[k], float(w))
        out.append(Message(upload_content(up, k), dst_node_id=100 + k, message_type="train"))
    return out


def test_fedavg_strategy_equals_flowers_fedavg_strategy():
    g = torch.Generator().manual_seed(0)
    states = [{"w": torch.randn(4, 3, generator=g), "b": torch.randn(3, generator=g)}
              for _ in range(5)]
    weights = [10, 0, 7, 31, 2]
    ours = AuditStrategy("fedavg")
    ours._prev = {k: torch.zeros_like(v) for k, v in states[0].items()}
    mine, _ = ours.aggregate_train(1, _replies(states, weights))
    theirs, _ = FlowerFedAvg().aggregate_train(1, _replies(states, weights))
    for k in states[0]:
        np.testing.assert_allclose(mine[k].numpy(), theirs[k].numpy(), rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- errors
def _one_line_error(exc_info):
    msg = str(exc_info.value)
    assert msg and "\n" not in msg
    return msg


def test_bad_input_is_one_clear_line():
    with pytest.raises(ValueError) as e:
        AuditStrategy("fedprox")
    assert "unknown aggregation rule 'fedprox'" in _one_line_error(e)
    with pytest.raises(ValueError) as e:
        AuditStrategy("fedbn")
    assert "norm=" in _one_line_error(e)
    with pytest.raises(ValueError) as e:
        AuditStrategy(3)
    _one_line_error(e)

    states = [{"w": torch.ones(2)}, {"w": torch.zeros(2)}]
    for rule in ("carry-over", "selector-mean", "masked-delta"):
        s = AuditStrategy(rule)
        s._prev = {"w": torch.zeros(2)}
        with pytest.raises(ValueError) as e:
            s.aggregate_train(1, _replies(states, [1, 1]))
        assert "needs each client's masks" in _one_line_error(e)
        masks = [{"w": torch.tensor([True, False])}] * 2
        assert s.aggregate_train(1, _replies(states, [1, 1], masks))[0] is not None
    s = AuditStrategy("literal")  # the printed rule uses no masks
    s._prev = {"w": torch.zeros(2)}
    assert s.aggregate_train(1, _replies(states, [1, 1]))[0] is not None

    bad = _replies(states, [1, 1])
    bad[1] = Message(Error(code=0, reason="Traceback ...\nKeyError: 'x'"), reply_to=bad[1])
    with pytest.raises(RuntimeError) as e:
        s.aggregate_train(3, bad)
    assert "1 of 2 clients failed in round 3: KeyError: 'x'" == _one_line_error(e)


def test_core_package_does_not_import_flwr():
    code = ("import sys, audit, audit.cli, audit.runner, audit.fl.engine, audit.fl.bench, "
            "audit.papers.flayer.algorithm; assert 'flwr' not in sys.modules, 'flwr imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_bench_against_flower_without_the_extra_is_one_line(monkeypatch):
    from audit.errors import AuditError

    monkeypatch.setitem(sys.modules, "audit.fl.flower", None)
    with pytest.raises(AuditError, match=r"needs the flower extra"):
        run_bench(rounds=1, repeats=1, against="flower")
    with pytest.raises(ValueError, match="against"):
        run_bench(rounds=1, repeats=1, against="tff")


# ----------------------------------------------------------------------------- every rule
class _Grid:  # what FedAvg.configure_train asks of a Grid: the node ids
    def __init__(self, n):
        self.n = n

    def get_node_ids(self):
        return list(range(100, 100 + self.n))


@functools.lru_cache(maxsize=None)
def _small(n=5):
    fed = reference_workload()
    return FederatedData(fed.clients[:n], fed.x_test, fed.y_test, fed.num_classes, fed.name)


def _drive(strategy, model_fn, data_fn, cfg, algorithm):
    """Flower's round loop (Strategy.start) in this process, without Ray: the strategy
    configures and aggregates, the ClientApp answers every message."""
    app = client_app(model_fn, data_fn, cfg, algorithm)
    n = data_fn().n_clients
    ctx = {100 + k: Context(run_id=1, node_id=100 + k, node_config={"partition-id": k},
                            state=RecordDict(), run_config={}) for k in range(n)}
    arrays = ArrayRecord.from_torch_state_dict(initial_state(model_fn, cfg.seed))
    for r in range(1, cfg.rounds + 1):
        msgs = strategy.configure_train(r, arrays, ConfigRecord(), _Grid(n))
        arrays, _ = strategy.aggregate_train(
            r, [app(m, ctx[m.metadata.dst_node_id]) for m in msgs])
    return arrays.to_torch_state_dict()


class _LateGrid(_Grid):
    """A simulation whose nodes register while the ServerApp already runs: no node for
    the first ``late`` look-ups, then all of them. ``send_and_receive`` answers every
    message with the ClientApp in this process."""

    def __init__(self, n, late, app):
        super().__init__(n)
        self.late, self.looks, self.app = late, 0, app
        self.ctx = {100 + k: Context(run_id=1, node_id=100 + k, node_config={"partition-id": k},
                                     state=RecordDict(), run_config={}) for k in range(n)}

    def get_node_ids(self):
        self.looks += 1
        return [] if self.looks <= self.late else super().get_node_ids()

    def send_and_receive(self, messages, timeout=None):
        return [self.app(m, self.ctx[m.metadata.dst_node_id]) for m in messages]


def test_server_app_waits_for_every_node_before_the_first_round():
    """FedAvg sizes a round's sample from the nodes connected when it configures the
    round, and Flower's simulation registers its supernodes while the ServerApp runs:
    without the wait a busy machine trained 2 of 20 clients in round 1 (CI, max |diff|
    0.0068 against the engine). Here nodes appear after 5 look-ups."""
    cfg = FLConfig(rounds=2, seed=3, fast=False, eval_personal=False, layer_metrics=False)
    strategy = AuditStrategy("fedavg")
    server, outcome = server_app(strategy, _model, cfg, _small)
    grid = _LateGrid(5, late=5, app=client_app(_model, _small, cfg, Algorithm))
    server(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    assert outcome.clients_per_round == {1: 5, 2: 5}
    hist = run_federated(_model, _small(), Algorithm(), cfg)
    for k, v in hist.final_state.items():
        assert torch.equal(outcome.final_state[k], v), k


def test_without_the_wait_flower_samples_the_early_nodes_only():
    """The failure the wait prevents, shown on Flower's own FedAvg sampling: asked for
    every node while none has registered, it trains min_train_nodes (2) of them."""
    grid = _LateGrid(5, late=1, app=None)
    msgs = list(AuditStrategy("fedavg").configure_train(1, ArrayRecord(), ConfigRecord(), grid))
    assert len(msgs) == 2


def test_wait_for_nodes_gives_up_with_a_clear_error():
    from audit.fl.flower import wait_for_nodes

    assert wait_for_nodes(_Grid(3), 3) == 3
    with pytest.raises(RuntimeError, match="only 2 of 3 Flower nodes connected"):
        wait_for_nodes(_Grid(2), 3, timeout=0.0)
    with pytest.raises(ValueError, match="num_nodes must be a positive int"):
        server_app(AuditStrategy("fedavg"), _model, FLConfig(rounds=1), num_nodes=0)


_BN_MODEL = functools.partial(build_model, "vgg", 10, 1, 8, width=0.125)


def _fedbn_strategy():
    return AuditStrategy("fedbn", norm=_BN_MODEL())


@pytest.mark.parametrize("rule", ["fedavg", "literal", "carry-over", "selector-mean",
                                  "masked-delta", "fedbn"])
def test_every_rule_through_strategy_and_client_app_equals_the_engine(rule):
    cfg = FLConfig(rounds=2, seed=3, fast=False, eval_personal=False, layer_metrics=False)
    if rule == "fedavg":
        model, alg, strategy = _model, Algorithm, AuditStrategy("fedavg")
    elif rule == "fedbn":
        model, alg, strategy = _BN_MODEL, FedBN, _fedbn_strategy()
    else:
        model, alg = _model, functools.partial(make_algorithm, rule)
        strategy = AuditStrategy(rule)
    flower_state = _drive(strategy, model, _small, cfg, alg)
    hist = run_federated(model, _small(), alg(), cfg)
    assert flower_state.keys() == hist.final_state.keys()
    for k, v in hist.final_state.items():
        assert torch.equal(flower_state[k], v), k
    if rule == "fedbn":  # the norm layers stayed at their initial values on the server
        init = initial_state(model, cfg.seed)
        assert torch.equal(flower_state["bn1.weight"], init["bn1.weight"])


def test_rules_are_the_audit_pieces():
    from audit.papers.flayer.algorithm import SERVER_RULES

    for name, rule in SERVER_RULES.items():
        assert RULES[name] is rule and AuditStrategy(name).rule is rule


# ----------------------------------------------------------------------------- simulation
@pytest.mark.slow
@pytest.mark.ray  # Flower's simulation starts a local Ray instance
def test_reference_workload_in_flower_simulation_equals_the_engine_and_bench_reports_it():
    """The bench's reference FedAvg workload, 3 of its 50 rounds (the full run is
    ``audit bench --against flower``), all 20 clients: ``run_bench(against="flower")``
    runs it through the engine and through Flower's run_simulation in one process."""
    out = run_bench("cpu", rounds=3, threads=1, repeats=1, against="flower")
    assert out["flower_clients_per_round"] == [20, 20, 20]
    assert out["flower_max_abs_diff"] <= 1e-5
    assert out["flower_accuracy"] == out["accuracy"]
    assert out["flower_ratio"] == out["flower_seconds"] / out["seconds"]
    assert out["flower_version"] == flwr.__version__ and out["flower_supernodes"] == 20
    assert 0 < out["flower_rounds_seconds"] <= out["flower_seconds"]


EXAMPLE = '''\
from functools import partial

from flwr.simulation import run_simulation

from audit.papers.flayer.algorithm import make_algorithm    # FLAYER's clients, as printed
from audit.fl.bench import reference_workload         # digits, 20 clients, Dirichlet(0.1)
from audit.fl.engine import FLConfig
from audit.fl.flower import AuditStrategy, client_app, server_app
from audit.fl.models import build_model

model = partial(build_model, "cnn", 10, 1, 8)
config = FLConfig(rounds=2, batch_size=32, lr=0.05, seed=0)
outcomes = {}
for rule in ("literal", "masked-delta"):  # Algorithm 1 line 12 as printed; a correction
    server, outcomes[rule] = server_app(AuditStrategy(rule), model, config, reference_workload)
    client = client_app(model, reference_workload, config, partial(make_algorithm, rule))
    run_simulation(server_app=server, client_app=client, num_supernodes=20,
                   backend_config={"client_resources": {"num_cpus": 1}})
    print(rule, "test accuracy", outcomes[rule].accuracy)
'''


@pytest.mark.slow
@pytest.mark.ray  # the example runs Flower's simulation (a local Ray instance)
def test_readme_example_runs(capsys):
    readme = (ROOT / "README.md").read_text()
    if "AuditStrategy(rule)" in readme:  # the README's copy is this one
        blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
        assert EXAMPLE in blocks, "README's Flower example differs from tests/test_flower.py"
    ns: dict = {"__name__": "readme_example"}
    exec(compile(EXAMPLE, "README-flower-example", "exec"), ns)
    outcomes = ns["outcomes"]
    printed = capsys.readouterr().out
    for rule in ("literal", "masked-delta"):  # (equality with the engine: tests above)
        assert f"{rule} test accuracy" in printed and 0 <= outcomes[rule].accuracy <= 1
    a, b = (outcomes[r].final_state for r in ("literal", "masked-delta"))
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the rules differ


def test_client_hooks_the_flower_path_cannot_honour_are_refused_not_ignored():
    from audit.fl.engine import Algorithm
    from audit.fl.flower import client_app, upload_content

    class SeesTheRound(Algorithm):
        def on_round_start(self, round, sampled_client_ids):
            self.seen = sampled_client_ids

    model = functools.partial(build_model, "cnn", 10, 1, 8)
    config = FLConfig(rounds=1, batch_size=32, lr=0.05, seed=0)
    with pytest.raises(ValueError, match="on_round_start"):
        client_app(model, reference_workload, config, SeesTheRound)
    client_app(model, reference_workload, config, Algorithm)  # the default is fine
    with pytest.raises(ValueError, match="dropped message"):
        upload_content(None, 0)
