"""GENE-FL pieces (audit/algorithms/genefl.py): Eq. 9's score, the selection arms."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.algorithms import genefl as G

# two layers of 2 and 4 parameters: hand-checkable cosines
LAYERS = {"a": ["a.w"], "b": ["b.w"]}


def test_score_hand_values():
    before = {"a.w": torch.tensor([1.0, 0.0]), "b.w": torch.tensor([1.0, 0.0, 0.0, 0.0])}
    after = {"a.w": torch.tensor([1.0, 1.0]), "b.w": torch.tensor([2.0, 0.0, 0.0, 0.0])}
    # cos_a = 1/sqrt(2) = 0.70711, cos_b = 1; raw xi: 0.70711/2 = 0.35355, 1/4 = 0.25;
    # normalised: 0.35355/0.60355 = 0.58579, 0.25/0.60355 = 0.41421
    xi = G.layer_score(after, before, LAYERS)
    assert xi["a"] == pytest.approx(0.585786, abs=1e-6)
    assert xi["b"] == pytest.approx(0.414214, abs=1e-6)
    # without 1/dim: 0.70711/1.70711 = 0.41421 and 1/1.70711 = 0.58579
    nd = G.layer_score(after, before, LAYERS, use_dim=False)
    assert nd["a"] == pytest.approx(0.414214, abs=1e-6)
    # the moved layer a scores higher with 1/dim, lower without: the size decides
    assert G.select_layers(xi, 1, "top") == ["a"]
    assert G.select_layers(nd, 1, "top") == ["b"]
    assert G.select_layers(xi, 1, "bottom") == ["b"]


def test_select_errors_and_random_is_seeded():
    xi = {"a": 0.1, "b": 0.5, "c": 0.4}
    with pytest.raises(ValueError, match="gamma"):
        G.select_layers(xi, 0)
    with pytest.raises(ValueError, match="rng"):
        G.select_layers(xi, 1, "random")
    r1 = G.select_layers(xi, 2, "random", np.random.default_rng(3))
    r2 = G.select_layers(xi, 2, "random", np.random.default_rng(3))
    assert r1 == r2 and len(r1) == 2
    assert G.select_layers(xi, 2, "top") == ["b", "c"]  # depth order


@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(2, 50), min_size=2, max_size=8), st.integers(0, 2 ** 31 - 1))
def test_untouched_equal_size_layer_always_outscores_perturbed(sizes, seed):
    # Reviewer's perturbation test as a property: with equal sizes, a layer moved off its
    # own direction has cos < 1 and scores below an untouched one. (Size >= 2: hypothesis
    # found that a one-element layer has cosine +-1 whatever the move, and that the
    # printed normalisation divides by zero when cosines cancel.)
    g = torch.Generator().manual_seed(seed)
    n = sizes[0]
    before = {f"l{i}.w": torch.randn(n, generator=g) + 0.1 for i in range(len(sizes))}
    after = {k: v.clone() for k, v in before.items()}
    after["l0.w"] = after["l0.w"] + 0.5 * after["l0.w"].norm() * torch.randn(n, generator=g) \
        / np.sqrt(n)
    layers = {f"l{i}": [f"l{i}.w"] for i in range(len(sizes))}
    xi = G.layer_score(after, before, layers)
    assert xi["l0"] < xi["l1"]
    if all(v > 0 for v in xi.values()):
        assert sum(xi.values()) == pytest.approx(1.0)


def test_inherit_takes_gene_layers_only():
    theta0 = {"a.w": torch.zeros(2), "b.w": torch.zeros(3), "b.running_mean": torch.zeros(3)}
    cluster = {"a.w": torch.ones(2), "b.w": torch.ones(3), "b.running_mean": torch.ones(3)}
    out = G.inherit(theta0, cluster, ["b"], {"a": ["a.w"], "b": ["b.w", "b.running_mean"]})
    assert out["a.w"].sum() == 0 and out["b.w"].sum() == 3 and out["b.running_mean"].sum() == 3


def test_subspace_distance_zero_for_same_data():
    x = torch.randn(50, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    u = G.data_subspace(x, 3)
    assert G.subspace_distance(u, u) == pytest.approx(0.0, abs=1e-10)


def test_lanczos_subspace_of_wide_data_equals_the_dense_one(monkeypatch):
    # 600 features (> 512): the top-d subspace by Lanczos, against a full eigh
    x = torch.rand(200, 3, 10, 20, generator=torch.Generator().manual_seed(1))
    fast = G.data_subspace(x, 5)
    monkeypatch.setattr(G, "_DENSE_EIGH_MAX", 10_000)
    dense = G.data_subspace(x, 5)
    assert fast.shape == dense.shape == (600, 5)
    assert G.subspace_distance(fast, dense) == pytest.approx(0.0, abs=1e-10)
    assert G.subspace_distance(fast, G.data_subspace(x[:100], 5)) > 1e-6  # can differ


# ------------------------------------------------------------------------- checkpoints
class _Killed(Exception):
    pass


def test_selection_state_round_trips_through_a_checkpoint_file(tmp_path):
    # Prepare: a random-arm algorithm that has drawn twice and logged one update
    alg = G.GeneFL(1, "random", seed=3)
    xi = {"a": 0.5, "b": 0.3, "c": 0.2}
    G.select_layers(xi, 1, "random", alg.rng)
    alg.updates.append(G.ClientUpdate(2, 1, {"a": 0.9, "b": 1.0, "c": 0.99}, xi, ["b"], 24))
    path = tmp_path / "alg.pt"
    torch.save(alg.state_dict(), path)
    # Execute: a fresh algorithm of the same seed loads it (as the engine does)
    other = G.GeneFL(1, "random", seed=3)
    other.load_state_dict(torch.load(path, weights_only=True))
    # Assert: same log, and the generator continues where the first one stands
    assert other.updates == alg.updates
    draws = [G.select_layers(xi, 2, "random", a.rng) for a in (alg, other)]
    assert draws[0] == draws[1]
    assert other.rng.random() == alg.rng.random()


def test_simulate_killed_midway_resumes_to_the_uninterrupted_output(tmp_path, monkeypatch):
    # Two clusters (4 + 2 clients), 4 rounds each, checkpoints every 2 rounds; the run is
    # killed in round 3 of cluster 1, so cluster 0's result and cluster 1's round-2
    # state are on disk. The random arm draws from the algorithm's own generator, so
    # its state must travel too; the metered byte log must neither lose nor repeat rounds.
    from audit.experiments.genefl_inverted_cosine import SMOKE_SIM

    torch.set_num_threads(1)
    cfg = {**SMOKE_SIM, "rounds": 4, "n_agnostic": 2, "finetune_steps": 4}
    full = G.simulate(cfg, 0, "random")
    ck = str(tmp_path / "sim.pt")
    ran = []
    plain = G.GeneFL.round_metrics

    def metrics(self, round, *args):
        if kill and self.fed.name == "cluster1" and round == 3:
            raise _Killed
        ran.append((self.fed.name, round))
        return plain(self, round, *args)

    monkeypatch.setattr(G.GeneFL, "round_metrics", metrics)
    kill = True
    with pytest.raises(_Killed):
        G.simulate(cfg, 0, "random", checkpoint=ck, checkpoint_every=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.pt.cluster0.done",
                                                          "sim.pt.cluster1"]
    assert torch.load(f"{ck}.cluster1", weights_only=True)["round"] == 2
    # Execute: the same call again
    kill, ran[:] = False, []
    resumed = G.simulate(cfg, 0, "random", checkpoint=ck, checkpoint_every=2)
    # Assert: only cluster 1's last two rounds were trained again ...
    assert ran == [("cluster1", 3), ("cluster1", 4)]
    # ... the output is identical, byte counts included, and nothing is left on disk
    f_full, f_res = full.pop("final_states"), resumed.pop("final_states")
    assert resumed == full
    for cl in resumed["clusters"]:
        assert len(cl["comm_up_per_round"]) == len(cl["comm_down_per_round"]) == 4
        assert min(cl["comm_up_per_round"]) > 0 and min(cl["comm_down_per_round"]) > 0
    assert [c["comm_up_per_round"] for c in resumed["clusters"]] == \
        [c["comm_up_per_round"] for c in full["clusters"]]
    for a, b in zip(f_full, f_res):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert list(tmp_path.iterdir()) == []
