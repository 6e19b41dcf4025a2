"""Client-side hooks of the engine: a client's work budget (``Algorithm.local_steps``),
the round's sampled clients before training (``on_round_start``), dropped uploads
(``upload`` returning None), and the defaults leaving every run as it was."""

import numpy as np
import pytest
import torch

from audit.fl import data as D
from audit.fl import training
from audit.fl.aggregate import Upload
from audit.fl.engine import Algorithm, FLConfig, client_steps, run_federated
from audit.fl.models import build_model

torch.set_num_threads(1)  # tests are small; avoid OpenMP spinning on a shared CPU


@pytest.fixture(scope="module")
def fed():
    ds = D.load_digits(seed=0)
    parts = D.dirichlet_partition(ds.y_train, 6, 0.3, np.random.default_rng(0), min_size=20)
    parts = [p[:48] for p in parts]  # 48 samples: 3 minibatches of 16 an epoch
    return D.make_federated(ds, parts, 0.1, 0.2, np.random.default_rng(0))


def cnn():
    return build_model("cnn", 10, 1, 8, width=0.5)


def _equal(a, b):
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


class Budget(Algorithm):
    """A fixed budget per client (missing: None, every step); records what each client
    ended the round with and every hook call."""

    name = "budget"

    def __init__(self, budgets=None, drop_idle=False):
        super().__init__()
        self.budgets = dict(budgets or {})
        self.drop_idle = drop_idle
        self.calls, self.after, self.metrics_seen = [], {}, []

    def on_round_start(self, round, sampled_client_ids):
        self.calls.append(("start", round, sampled_client_ids))

    def broadcast(self, global_state, client_id, round):
        self.calls.append(("broadcast", round, client_id))
        return global_state

    def local_steps(self, client_id, round, planned):
        self.calls.append(("steps", round, client_id, planned))
        return self.budgets.get(client_id)

    def update_client_state(self, client_state, start, after, client_id, round):
        self.after[client_id] = {k: v.detach().clone() for k, v in after.items()}
        return client_state

    def upload(self, before, after, client_id, round, n_samples):
        if self.drop_idle and self.budgets.get(client_id) == 0:
            return None  # a straggler: its message never arrives
        return super().upload(before, after, client_id, round, n_samples)

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        self.metrics_seen.append((round, len(uploads), tuple(client_ids)))
        return {"arrived": len(uploads)}


def _hand_client(fed, cfg, k, budget):
    """Client k's round-1 training by hand: nn.Module + torch.optim.SGD over the first
    ``budget`` minibatches of the engine's order (the independent reference)."""
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        m = cnn()
    opt = torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    c = fed.clients[k]
    steps = client_steps(len(c.y_train), cfg, 1, k)
    for _, idx in steps[:budget]:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(c.x_train[idx]), c.y_train[idx]).backward()
        opt.step()
    return m.state_dict(), len(steps)


# budgets: none, one step, the first epoch exactly, inside the second epoch, all, more
BUDGETS = {0: 0, 1: 1, 2: 3, 3: 4, 4: None, 5: 99}


@pytest.mark.parametrize("path", ["sequential", "chain", "vmap"])
def test_budget_cuts_the_steps_inside_an_epoch_on_every_path(fed, path, monkeypatch):
    if path == "vmap":  # the general batched path also for the chain model
        monkeypatch.setattr(training, "_chain_for", lambda model, cfg: None)
    cfg = FLConfig(rounds=1, batch_size=16, lr=0.1, momentum=0.9, local_epochs=2, seed=5,
                   fast=path != "sequential", eval_personal=False, layer_metrics=False)
    alg = Budget(BUDGETS)
    run_federated(cnn, fed, alg, cfg)
    for k, budget in BUDGETS.items():
        want, planned = _hand_client(fed, cfg, k, budget)
        assert planned == 6  # 2 epochs of 3 minibatches
        for name, v in want.items():
            torch.testing.assert_close(alg.after[k][name], v, atol=1e-5, rtol=1e-4,
                                       msg=f"client {k}, budget {budget}: {name}")
    assert _equal(alg.after[0], _hand_client(fed, cfg, 0, 0)[0])  # budget 0: the start


@pytest.mark.parametrize("fast", [False, True])
def test_a_budget_of_one_epoch_is_bitwise_a_one_epoch_run(fed, fast):
    """Exact reference: the first epoch's minibatches do not depend on how many epochs
    are planned, so two planned epochs cut to the first epoch's 3 steps are a one-epoch
    run, bit for bit, on either path."""
    base = dict(rounds=2, batch_size=16, lr=0.05, momentum=0.5, seed=2, fast=fast,
                clients_per_round=4)
    cut = run_federated(cnn, fed, Budget({k: 3 for k in range(6)}),
                        FLConfig(local_epochs=2, **base))
    one = run_federated(cnn, fed, Algorithm(), FLConfig(local_epochs=1, **base))
    assert _equal(cut.final_state, one.final_state)
    assert cut.test_acc == one.test_acc


@pytest.mark.parametrize("fast", [False, True])
def test_zero_budgets_train_nothing_and_the_model_stays(fed, fast):
    cfg = FLConfig(rounds=2, batch_size=16, seed=1, fast=fast, eval_personal=False)
    alg = Budget({k: 0 for k in range(6)})
    h = run_federated(cnn, fed, alg, cfg)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        init = cnn().state_dict()
    assert _equal(h.final_state, init)  # the mean of identical uploads is exact
    assert all(_equal(alg.after[k], init) for k in range(6))


def test_on_round_start_sees_the_sampled_clients_before_any_work(fed):
    alg = Budget()
    cfg = FLConfig(rounds=3, clients_per_round=3, batch_size=16, seed=4, eval_personal=False)
    run_federated(cnn, fed, alg, cfg)
    for r in (1, 2, 3):
        calls = [c for c in alg.calls if c[1] == r]
        assert [c[0] for c in calls].count("start") == 1 and calls[0][0] == "start"
        sampled = calls[0][2]
        assert isinstance(sampled, tuple) and list(sampled) == sorted(sampled)
        assert len(sampled) == 3
        assert [c[2] for c in calls if c[0] == "broadcast"] == list(sampled)
        assert [c[2] for c in calls if c[0] == "steps"] == list(sampled)  # once each
        assert [m[2] for m in alg.metrics_seen if m[0] == r] == [sampled]


@pytest.mark.parametrize("fast", [False, True])
def test_a_round_whose_uploads_are_all_dropped_keeps_the_global_model(fed, fast):
    """Before the engine filtered dropped uploads, a None upload reached the mean
    (``aggregate._holders`` reads ``upload.state``) and the run raised."""

    class DropRound2(Budget):
        def upload(self, before, after, client_id, round, n_samples):
            return None if round == 2 else super().upload(before, after, client_id,
                                                            round, n_samples)

        def server_post(self, global_state, round, rng):
            self.calls.append(("post", round))
            return dict(global_state)

    base = dict(batch_size=16, seed=3, fast=fast, clients_per_round=4, eval_personal=False)
    alg = DropRound2()
    two = run_federated(cnn, fed, alg, FLConfig(rounds=2, **base))
    one = run_federated(cnn, fed, Algorithm(), FLConfig(rounds=1, **base))
    assert _equal(two.final_state, one.final_state)
    assert ("post", 2) not in alg.calls and ("post", 1) in alg.calls
    assert [m[1:] for m in alg.metrics_seen] == [(4, alg.metrics_seen[0][2]), (0, ())]
    assert [a["arrived"] for a in two.algo] == [4.0, 0.0]
    three = run_federated(cnn, fed, DropRound2(), FLConfig(rounds=3, **base))
    assert not _equal(three.final_state, two.final_state)  # round 3 trains on


def test_stragglers_dropped_the_mean_is_over_the_uploads_that_arrived(fed):
    cfg = FLConfig(rounds=1, batch_size=16, seed=0, eval_personal=False)
    alg = Budget({0: 0, 3: 0}, drop_idle=True)
    h = run_federated(cnn, fed, alg, cfg)
    arrived = [1, 2, 4, 5]
    assert alg.metrics_seen == [(1, 4, tuple(arrived))]
    w = np.array([len(fed.clients[k].y_train) for k in arrived], dtype=float)
    for name, v in h.final_state.items():
        mean = sum(wi * alg.after[k][name].double() for wi, k in zip(w, arrived)) / w.sum()
        torch.testing.assert_close(v, mean.to(v.dtype), atol=1e-6, rtol=1e-6)


def test_a_budget_must_be_none_or_a_whole_number(fed):
    cfg = FLConfig(rounds=1, batch_size=16, fast=False)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="local_steps returned"):
            run_federated(cnn, fed, Budget({0: bad}), cfg)


class ExplicitDefaults(Algorithm):
    """Every new hook overridden with what the default means."""

    def on_round_start(self, round, sampled_client_ids):
        pass

    def local_steps(self, client_id, round, planned):
        return planned  # every planned step, through the cutting code

    def upload(self, before, after, client_id, round, n_samples):
        return Upload(after, None, float(n_samples))


@pytest.mark.parametrize("path", ["sequential", "chain", "vmap"])
def test_default_hooks_leave_a_run_bitwise_as_before(fed, path, monkeypatch):
    """A run with the new hooks at their defaults, one that overrides them with the same
    meaning, and one whose steps come straight from ``client_steps`` (the engine's step
    source before budgets existed) give the same bits on every path."""
    if path == "vmap":
        monkeypatch.setattr(training, "_chain_for", lambda model, cfg: None)
    cfg = FLConfig(rounds=3, clients_per_round=4, batch_size=16, momentum=0.9,
                   local_epochs=2, seed=7, fast=path != "sequential")
    default = run_federated(cnn, fed, Algorithm(), cfg)
    explicit = run_federated(cnn, fed, ExplicitDefaults(), cfg)
    with monkeypatch.context() as m:
        m.setattr(training, "budgeted_steps",
                  lambda n, cfg, r, cid, alg: client_steps(n, cfg, r, cid))
        plain = run_federated(cnn, fed, Algorithm(), cfg)
    for h in (explicit, plain):
        assert _equal(h.final_state, default.final_state)
        assert h.test_acc == default.test_acc and h.personal_loss == default.personal_loss


# ------------------------------------------------------------- the guide's worked example
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "straggler_budget.py"


def test_the_guide_includes_its_client_side_example_verbatim_and_short():
    import re

    guide = (ROOT / "docs" / "WRITING_A_CLAIM.md").read_text()
    code = EXAMPLE.read_text()
    assert code in re.findall(r"```python\n(.*?)```", guide, re.S), \
        "docs/WRITING_A_CLAIM.md's client-side example differs from " + EXAMPLE.name
    assert len(code.splitlines()) <= 150


def test_the_guide_client_side_example_runs(tmp_path):
    """The worked example at a tiny size: 2 seeds (a stochastic claim needs at least 2),
    3 rounds; it gets a verdict (INCONCLUSIVE: the rule decides nothing below 6 pairs)."""
    import importlib.util

    from audit.runner import Cache, execute, make_context

    spec = importlib.util.spec_from_file_location("straggler_budget_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    claim = module.CLAIM
    ctx = make_context(claim, "smoke", seeds=[0, 1], overrides={"rounds": 3})
    res = execute(claim, ctx, cache=Cache(tmp_path / "cache"), progress=False)
    assert res.verdict.verdict.value == "INCONCLUSIVE"
    assert [p.id for p in res.verdict.parts] == ["gap"]
    assert "fewer than 6" in res.verdict.parts[0].reason or "n = 2" in res.verdict.parts[0].reason
    # the piece itself: a share of the sampled clients get a cut budget, the rest all steps
    alg = module.Stragglers(share=0.8, fraction=0.25, seed=0)
    alg.on_round_start(1, (0, 2, 5, 6, 9))
    assert len(alg.slow) == 4
    assert sorted(map(str, (alg.local_steps(k, 1, 8) for k in (0, 2, 5, 6, 9)))) == \
        ["2", "2", "2", "2", "None"]
