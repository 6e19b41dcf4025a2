"""GENE-FL pieces (audit/papers/genefl/algorithm.py): Eq. 9's score, the selection arms."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.papers.genefl import algorithm as G

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
    from audit.papers.genefl.inverted_cosine import SMOKE_SIM
    from audit.papers.genefl.simulation import simulate

    torch.set_num_threads(1)
    cfg = {**SMOKE_SIM, "rounds": 4, "n_agnostic": 2, "finetune_steps": 4}
    full = simulate(cfg, 0, "random")
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
        simulate(cfg, 0, "random", checkpoint=ck, checkpoint_every=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.pt.cluster0.done",
                                                          "sim.pt.cluster1"]
    assert torch.load(f"{ck}.cluster1", weights_only=True)["round"] == 2
    # Execute: the same call again
    kill, ran[:] = False, []
    resumed = simulate(cfg, 0, "random", checkpoint=ck, checkpoint_every=2)
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


# ------------------------------------------------------------------ local layers (keep)
def test_keep_client_takes_only_the_aggregated_layers_from_the_cluster_model():
    alg = G.GeneFL(1, "top", local_layers="keep")
    alg.state_layers = {"a": ["a.w"], "b": ["b.w", "b.running_mean"]}
    mine = {"a.w": torch.zeros(2), "b.w": torch.zeros(3), "b.running_mean": torch.zeros(3)}
    recv = {k: torch.ones_like(v) for k, v in mine.items()}
    assert alg.client_init(recv, None, 0, 1)["a.w"].sum() == 2  # first round: received
    alg.shared = ["b"]
    out = alg.client_init(recv, mine, 0, 2)
    assert out["a.w"].sum() == 0 and out["b.w"].sum() == 3 and out["b.running_mean"].sum() == 3
    reset = G.GeneFL(1, "top", local_layers="reset")
    assert reset.update_client_state(None, recv, mine, 0, 1) is None
    assert reset.client_init(recv, mine, 0, 2)["a.w"].sum() == 2
    with pytest.raises(ValueError, match="local_layers"):
        G.GeneFL(1, "top", local_layers="other")


def test_planted_accuracy_loses_about_the_planted_effect():
    net = torch.nn.Linear(4, 10)
    x = torch.randn(4000, 4, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        y = net(x).argmax(1)  # a model that is right on every example
    st = {k: v.clone() for k, v in net.state_dict().items()}
    acc = G.planted_accuracy(net, st, x, y, 0.1, 10, np.random.default_rng(0))
    assert acc == pytest.approx(0.9, abs=1e-12)  # exactly 400 of 4000 relabelled
    assert G.planted_accuracy(net, st, x, y, 0.0, 10, np.random.default_rng(0)) == 1.0


# ------------------------------------------------- inverted cosine: parts, driven by hand
from audit import stats  # noqa: E402
from audit.verdict import Outcome, premise_gate  # noqa: E402


def _ic():
    from audit.papers.genefl import inverted_cosine as IC

    return IC


def test_direction_reaches_each_declared_outcome_and_is_a_derivation():
    IC = _ic()
    assert IC.RULE_DIRECTION.kind == "derivation"
    ok = {"size": "equal", "untouched_higher": True}
    bad = {"size": "equal", "untouched_higher": False}
    other = {"size": "perturbed smaller", "untouched_higher": False}
    ev = lambda rows: {"pairs": rows, "n_models": 1, "delta": 0.5}  # noqa: E731
    got = {IC.RULE_DIRECTION(ev(r), params={"delta": 0.5}).verdict
           for r in ([ok, other], [ok, bad], [other])}
    assert got == {Outcome.CONFIRMED, Outcome.REFUTED, Outcome.INCONCLUSIVE}


def test_selection_reaches_each_outcome_and_prints_its_thresholds():
    IC = _ic()
    base = {"rho": 0.9, "n_updates": 5, "j_high": 0.8, "j_low": 0.5, "level": 0.95,
            "n_seeds": 10}
    # (mean, interval) of the overlap with the most stable and with the smallest layers
    cases = [(Outcome.CONFIRMED, (0.9, (0.85, 0.95)), (0.9, (0.85, 0.95))),
             (Outcome.REFUTED, (0.3, (0.2, 0.4)), (0.9, (0.85, 0.95))),
             (Outcome.INCONCLUSIVE, (0.6, (0.5, 0.7)), (0.6, (0.5, 0.7))),
             # the mean clears 0.8 but the seeds' interval does not: no verdict on it
             (Outcome.INCONCLUSIVE, (0.83, (0.76, 0.9)), (0.9, (0.85, 0.95)))]
    for want, (js, js_ci), (jz, jz_ci) in cases:
        p = IC.RULE_SELECTION({**base, "j_stable": js, "j_size": jz, "j_stable_ci": js_ci,
                               "j_size_ci": jz_ci}, params={"j_high": 0.8, "j_low": 0.5})
        assert p.verdict == want and "at or above 0.8" in p.rule and "t interval" in p.rule
    confirmed = IC.RULE_SELECTION({**base, "j_stable": 0.9, "j_size": 0.9,
                                   "j_stable_ci": (0.85, 0.95), "j_size_ci": (0.85, 0.95)},
                                  params={"j_high": 0.8, "j_low": 0.5})
    assert "cannot be told apart" in confirmed.reason  # size and stability coincide


def _accuracy_part(a, b, sensitive=True, d=0.02):
    IC = _ic()
    tw = stats.three_way(a, b, margin=0.0, equivalence_margin=d, alpha=0.05,
                         sensitive=sensitive)
    return IC.RULE_ACCURACY({"three_way": tw, "sens_txt": "", "resolution": 0.005},
                            params={"rule": stats.three_way_text(0.0, d, 0.05, len(a))}), tw


def test_accuracy_part_both_directions_and_the_premise_gate():
    IC = _ic()
    # 8 pairs: the three-way rule decides nothing on fewer than stats.MIN_PAIRS
    top = np.array([0.80, 0.82, 0.78, 0.81, 0.79, 0.80, 0.83, 0.77])
    gap = np.array([0.10, 0.12, 0.09, 0.11, 0.10, 0.11, 0.10, 0.12])
    # top clearly beats bottom: against the reviewer
    p, _ = _accuracy_part(top, top - gap)
    assert p.verdict == Outcome.REFUTED and p.resolution == 0.005
    # bottom beats top: for the reviewer
    p, _ = _accuracy_part(top, top + gap)
    assert p.verdict == Outcome.CONFIRMED
    # equivalent (within d), sensitive: for the reviewer; not sensitive: undecided
    eq = top + np.array([0.001, -0.001, 0.0005, -0.0005, 0.0, 0.001, -0.001, 0.0005])
    assert _accuracy_part(top, eq)[0].verdict == Outcome.CONFIRMED
    assert _accuracy_part(top, eq, sensitive=False)[0].verdict == Outcome.INCONCLUSIVE
    # noisy: undecided
    noisy = top + np.array([0.2, -0.2, 0.15, -0.1, 0.0, 0.1, -0.15, 0.05])
    assert _accuracy_part(top, noisy)[0].verdict == Outcome.INCONCLUSIVE
    # the premise: reproduced lets REFUTED through; not reproduced / undecided gate it
    p, _ = _accuracy_part(top, top - 0.1 - 0.01 * np.arange(8) / 8)
    jitter = np.array([0.001, -0.001, 0, 0.002, -0.002, 0.001, 0.0015, -0.0005])
    for d_nog, status in ((0.1, "reproduced"), (-0.1, "not reproduced")):
        ptw = stats.three_way(top, top - d_nog + jitter,
                              margin=0.0, equivalence_margin=0.02, alpha=0.05)
        prem = IC._premise_decide(ptw, 0.02)
        assert prem.status == status
        gated = premise_gate(p, prem)
        assert gated.verdict == (Outcome.REFUTED if status == "reproduced"
                                 else Outcome.INCONCLUSIVE)


def test_combination_lets_the_reviewers_test_refute():
    IC = _ic()
    from audit.verdict import Part

    mk = lambda i, v: Part(i, v, "", "")  # noqa: E731
    rest = [mk(i, Outcome.REFUTED) for i in ("fair-bytes", "fair-no-classifier",
                                             "gamma-sweep")]
    parts = [mk("direction", Outcome.REFUTED), mk("selection", Outcome.REFUTED),
             mk("accuracy-top-vs-bottom", Outcome.REFUTED)] + rest
    assert IC.COMBINATION(parts) == Outcome.REFUTED
    parts[2] = mk("accuracy-top-vs-bottom", Outcome.CONFIRMED)
    assert IC.COMBINATION(parts) == Outcome.SPLIT  # the questions disagree
    for pid in ("accuracy-top-vs-bottom", "fair-bytes", "fair-no-classifier", "gamma-sweep"):
        assert pid in IC.COMBINATION.parts


def test_composite_calibration_under_a_global_null():
    # The composite: all_of(direction [derivation, CONFIRMED], selection [fixed],
    # accuracy gated by the premise). Global null for the reviewer's test: top and
    # bottom equal (true difference 0 = the margin). A false REFUTED of the claim needs
    # the accuracy part SUPPORTED ("top beats bottom") AND the premise reproduced; a
    # false CONFIRMED at the boundary (true top - bottom = +d) needs a false equivalence.
    # Both must stay at or below alpha / 2 (the rule's promise a side) plus 3
    # Monte-Carlo SE, for every shape.
    from audit import calibration as C

    reps, n, alpha = 4000, 8, 0.05
    for dist in ("normal", "exp-right", "t3", "accuracy-100"):
        rng = C.cell_rng(f"genefl-composite:{dist}")
        sd = C.scale_of(dist)
        d = 0.5 * sd
        # the premise drawn independently with a large true gain (3 SD): reproduced in
        # most replicates, the worst case for the gate (it rarely blocks an error)
        prem = C.draw(dist, (reps, n), rng, 3 * sd, sd)
        prem_ok = stats.three_way_codes(prem, margin=0.0, equivalence_margin=d,
                                        alpha=alpha).codes == stats.SUPPORTED
        assert prem_ok.mean() > 0.5
        null = C.draw(dist, (reps, n), rng, 0.0, sd)
        c = stats.three_way_codes(null, margin=0.0, equivalence_margin=d, alpha=alpha).codes
        false_refuted = np.mean((c == stats.SUPPORTED) & prem_ok)
        # each side of the rule is promised at alpha / 2 (audit.calibration)
        assert false_refuted <= alpha / 2 + 3 * C.mc_se(alpha / 2, reps), (dist,
                                                                           false_refuted)
        edge = C.draw(dist, (reps, n), rng, d, sd)
        c = stats.three_way_codes(edge, margin=0.0, equivalence_margin=d,
                                  alpha=alpha).by_equivalence
        false_confirmed = np.mean(c & prem_ok)
        assert false_confirmed <= alpha / 2 + 3 * C.mc_se(alpha / 2, reps), (
            dist, false_confirmed)


# ------------------------------------------------------- uplink bytes: parts, by hand
def test_uplink_parts_reach_each_declared_outcome_and_are_derivations():
    from audit.papers.genefl import uplink_bytes as UB

    for rule in (UB.RULE_RATIO, UB.RULE_FORMULA):
        assert rule.kind == "derivation"
    # once-per-client turns on the participant count, which the paper does not give: a
    # measurement with its crossovers, no verdict
    assert UB.RULE_ONCE.kind == "measurement"
    ev = lambda a, b: {"ratio_bidirectional": a, "ratio_bidirectional_selected": b,  # noqa
                       "threshold": 0.25}
    got = {UB.RULE_RATIO(ev(*x), params={"threshold": 0.25}).verdict
           for x in ((0.6, 0.6), (0.2, 0.2), (0.6, 0.2))}
    assert got == {Outcome.CONFIRMED, Outcome.REFUTED, Outcome.INCONCLUSIVE}

    def once(ratios):
        sweep = [{"participants": 10 * (i + 1), "ratio": r, "ratio_selected": r}
                 for i, r in enumerate(ratios)]
        return UB.RULE_ONCE({"threshold_once": 0.5, "threshold": 0.25, "sweep": sweep,
                             "assumed": sweep[0], "n_assumed": 100},
                            params={"threshold_once": 0.5, "threshold": 0.25, "n_lo": 10,
                                    "n_hi": 10 * len(ratios)})

    assert once([0.6, 0.7]).verdict == Outcome.INCONCLUSIVE
    assert once([0.2, 0.3]).verdict == Outcome.INCONCLUSIVE
    p = once([0.2, 0.6])
    assert p.verdict == Outcome.INCONCLUSIVE and "from P = 20" in p.reason
    row = {"reading": "x", "value_gb": 42.66, "has_x2": True, "reproduces": True}
    assert UB.RULE_FORMULA({"formula": [row]}, params={"rounds": 100, "tol": 0.01}
                           ).verdict == Outcome.REFUTED
    assert UB.RULE_FORMULA({"formula": [{**row, "reproduces": False}]},
                           params={"rounds": 100, "tol": 0.01}).verdict == Outcome.CONFIRMED


def test_participants_sweep_ends():
    from audit.papers.genefl.simulation import participants
    from audit.papers.genefl.uplink_bytes import client_counts

    assert participants(100, 10, 10) == 10
    assert participants(100, 10, 100) == 100  # every client takes part (seeded draw)
    assert participants(3, 10, 1000) <= 30
    assert client_counts(100, 10)[0] == 10 and client_counts(100, 10)[-1] == 1000


# ------------------------------------------- issue 30: fair controls and the gamma sweep
# the smoke VGG's layer sizes (width 0.5, 8 x 8 digits), in depth order
VGG_DIMS = {"conv1": 160, "bn1": 32, "conv2": 4640, "bn2": 64, "conv3": 18496, "bn3": 128,
            "conv4": 36928, "bn4": 128, "fc1": 8320, "fc": 1290}


def _size_scores(dims, cos=None):
    cos = cos or {}
    raw = {l: cos.get(l, 1.0) / d for l, d in dims.items()}
    tot = sum(raw.values())
    return {l: v / tot for l, v in raw.items()}


def test_bytes_matched_walks_up_from_the_lowest_score():
    # hand case: scores ascending c (0.1), b (0.2), d (0.3), a (0.4); target 10.
    # c (dim 30): |30 - 10| = 20 > 10, skipped; b (dim 6): |6 - 10| = 4 < 10, taken;
    # d (dim 5): |11 - 10| = 1 < 4, taken; a (dim 2): |13 - 10| = 3 > 1, skipped
    scores = {"a": 0.4, "b": 0.2, "c": 0.1, "d": 0.3}
    dims = {"a": 2, "b": 6, "c": 30, "d": 5}
    assert G.select_bytes_matched(scores, dims, 10) == ["b", "d"]  # depth order
    # every layer alone at least twice the target: the one nearest in size
    assert G.select_bytes_matched({"a": 0.1, "b": 0.2}, {"a": 50, "b": 30}, 10) == ["b"]
    # through select_gene: the target is top-gamma's count on the same scores (a + d = 7):
    # c skipped, b |6 - 7| = 1 taken, d |11 - 7| = 4 > 1 skipped, a |8 - 7| = 1 not < 1
    assert G.select_layers(scores, 2, "top") == ["a", "d"]
    assert G.select_gene(scores, 2, "bottom-bytes", dims=dims) == ["b"]
    with pytest.raises(ValueError, match="dims"):
        G.select_gene(scores, 2, "bottom-bytes")


def test_bytes_matched_on_the_smoke_vgg_is_top_gamma_at_half_the_layers():
    # xi ~ 1/dim: at gamma = 5 the only whole layers small enough to match top-gamma's
    # 512 parameters ARE top-gamma's layers, so the control coincides with top-gamma;
    # at gamma = 2 and 8 it is another gene (conv1; conv3) of about the same size
    xi = _size_scores(VGG_DIMS)
    top5 = G.select_layers(xi, 5, "top")
    assert sum(VGG_DIMS[l] for l in top5) == 512
    assert G.select_gene(xi, 5, "bottom-bytes", dims=VGG_DIMS) == top5
    assert G.select_gene(xi, 2, "bottom-bytes", dims=VGG_DIMS) == ["conv1"]
    assert G.select_gene(xi, 8, "bottom-bytes", dims=VGG_DIMS) == ["conv3"]


def test_no_classifier_excludes_the_last_linear_layer():
    from audit.fl.models import build_model

    m = build_model("vgg", 10, 1, 8, width=0.5)
    assert G.classifier_layer(m) == "fc"
    xi = _size_scores(VGG_DIMS)
    bottom = G.select_layers(xi, 5, "bottom")
    assert "fc" in bottom  # the plain bottom gene carries the classifier
    got = G.select_gene(xi, 5, "bottom-no-classifier", classifier="fc")
    assert got == ["conv1", "conv2", "conv3", "conv4", "fc1"] and "fc" not in got
    assert G.select_layers(xi, 4, "bottom", exclude=("fc",)) == ["conv2", "conv3", "conv4",
                                                                 "fc1"]
    with pytest.raises(ValueError, match="gamma"):
        G.select_layers(xi, 10, "bottom", exclude=("fc",))
    with pytest.raises(ValueError, match="classifier"):
        G.select_gene(xi, 5, "bottom-no-classifier")
    with pytest.raises(ValueError, match="mode"):
        G.select_gene(xi, 5, "sideways")


def test_select_gene_leaves_the_printed_modes_unchanged():
    rng = np.random.default_rng(0)
    xi = {f"l{i}": float(v) for i, v in enumerate(rng.random(9))}
    for mode in ("top", "bottom"):
        for g in (1, 4, 9):
            assert G.select_gene(xi, g, mode) == G.select_layers(xi, g, mode)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert G.select_gene(xi, 3, "random", a) == G.select_layers(xi, 3, "random", b)
    assert a.random() == b.random()  # the same draws consumed


def test_cluster_gene_of_the_fair_controls():
    ups = lambda sels: [G.ClientUpdate(3, i, {}, {}, s, 0) for i, s in enumerate(sels)]  # noqa
    alg = G.GeneFL(2, "bottom-bytes")
    alg.layers = {l: [l + ".w"] for l in ("a", "b", "c", "fc")}
    alg.updates = ups([["a"], ["b", "c"], ["b", "c"], ["a"], ["c"]])
    assert alg.cluster_gene(3) == ["a"]  # most common set; ties: the first client's
    alg.updates = ups([["c"], ["b", "c"], ["b", "c"]])
    assert alg.cluster_gene(3) == ["b", "c"]
    assert alg.cluster_gene(4) == []
    nc = G.GeneFL(2, "bottom-no-classifier")
    nc.layers, nc.classifier = alg.layers, "fc"
    nc.updates = ups([["a", "b"], ["b", "c"]])
    assert nc.cluster_gene(3) == ["a", "b"]  # b 2 votes, then a (depth order), never fc
    nc.updates = []
    assert "fc" not in nc.cluster_gene(3)
    with pytest.raises(ValueError, match="mode"):
        G.GeneFL(2, "sideways")


# -------------------------------------------- the claim's analysis on fake results
def _fake_results(ctx, effect):
    """Every unit of ``specs(ctx)`` with the keys analyse reads. ``effect``: arm ->
    per-seed shift of the agnostic accuracy (top-gamma at 0.85, no gene 0.70)."""
    IC = _ic()
    rng = np.random.default_rng(7)
    top5 = ["conv1", "bn1", "bn2", "bn3", "bn4"]
    genes = {"top-gamma": top5, "top-gamma-no-dim": top5, "top-gamma-reset": top5,
             "bottom-gamma-bytes": top5, "random-gamma": ["conv1", "fc", "bn2", "conv3",
                                                          "bn4"],
             "bottom-gamma": ["conv2", "conv3", "conv4", "fc1", "fc"],
             "bottom-gamma-no-classifier": ["conv1", "conv2", "conv3", "conv4", "fc1"]}
    xi = _size_scores(VGG_DIMS)
    out = {}
    for spec in IC.specs(ctx):
        noise = float(rng.normal(0, 0.003))
        shift = effect.get((spec.setting, spec.arm), effect.get(spec.arm, 0.0))
        acc = 0.85 + shift + noise
        g = genes[spec.arm]
        r = {"gamma": 5, "n_layers": 10, "known_acc": 0.9, "agnostic_acc": acc,
             "agnostic_acc_nogene": 0.70 + float(rng.normal(0, 0.003)),
             "agnostic_acc_planted": acc - 0.04, "cluster_of": [0, 0, 1, 1],
             "n_test_agnostic": [40, 40, 40, 40], "genes": [g, g],
             "gene_param_bytes": [4 * sum(VGG_DIMS[l] for l in g)] * 2, "dims": VGG_DIMS}
        if spec.arm == "top-gamma" and not spec.setting:
            r["perturbation"] = [{"perturbed": "bn3", "untouched": "bn4", "dim_p": 128,
                                  "dim_u": 128, "size": "equal", "untouched_higher": True,
                                  "untouched_higher_no_dim": True}]
            r["selection"] = {"rho": 0.99, "j_stable": 0.9, "j_size": 1.0, "n_updates": 4,
                              "smallest": top5}
            r["updates"] = [{"client": 0, "cos": {l: 1.0 for l in VGG_DIMS}, "xi": xi,
                             "selected": top5}]
        out[spec] = r
    return out


def _analysed(effect, seeds=tuple(range(10))):
    from audit.runner import make_context

    IC = _ic()
    ctx = make_context(IC.CLAIM, "smoke", seeds=list(seeds))
    a = IC.analyse(_fake_results(ctx, effect), ctx)
    return {p.id: p for p in a.parts}, a


def test_specs_run_the_sweep_on_the_first_sweep_seeds_only():
    from audit.claims import RunSpec
    from audit.runner import make_context

    IC = _ic()
    ctx = make_context(IC.CLAIM, "smoke", seeds=list(range(20)))
    sp = IC.specs(ctx)
    base = [s for s in sp if not s.setting]
    assert len(base) == 20 * len(IC.ARM_NAMES) == 140
    sw = [s for s in sp if s.setting]
    k = ctx.config["sweep_seeds"]
    assert len(sw) == len(ctx.config["gamma_sweep"]) * 2 * k
    assert {s.setting for s in sw} == {"gamma=0.25", "gamma=0.75"}
    assert {s.seed for s in sw} == set(range(k)) and {s.arm for s in sw} == set(IC.SWEEP_ARMS)
    assert IC._gamma_of(RunSpec("top-gamma", 0, "gamma=0.25")) == 0.25
    assert IC.CLAIM.unit_specs(ctx) == sp


def test_analyse_reaches_the_fair_and_sweep_parts_refuted():
    # top beats every other gene by 0.1 (the bytes control is top's own gene: no shift)
    worse = {a: -0.1 for a in ("bottom-gamma", "bottom-gamma-no-classifier",
                               "random-gamma")}
    parts, a = _analysed(worse)
    assert parts["accuracy-top-vs-bottom"].verdict == Outcome.REFUTED
    assert parts["fair-no-classifier"].verdict == Outcome.REFUTED
    assert parts["fair-no-classifier"].gated
    # the byte-matched gene IS top-gamma's here: vacuous, never read as equivalence
    fb = parts["fair-bytes"]
    assert fb.verdict == Outcome.INCONCLUSIVE and "top-gamma's own gene" in fb.reason
    assert parts["gamma-sweep"].verdict == Outcome.REFUTED
    rows = {s["setting"]: s for s in a.settings}
    assert set(rows) == {"gamma=0.5", "gamma=0.25", "gamma=0.75"} and rows["gamma=0.5"]["base"]
    assert all(s["verdict"] == "REFUTED" for s in a.settings)
    from audit import questions

    ans = {x["id"]: x for x in questions.answers(_ic().CLAIM, a.parts, a)}
    assert ans["fair-reversal"]["verdict"] == "INCONCLUSIVE"  # any: needs both REFUTED
    assert ans["gamma-sweep"]["verdict"] == "REFUTED" and len(ans["gamma-sweep"]["rows"]) == 3
    assert "referee_report.minor_comments[3]" in ans["fair-reversal"]["fields"]
    text = " ".join(f.text for f in a.findings)
    assert "Made fair" in text and "cannot be compared" in text
    names = {e.name for e in a.estimates}
    for f in a.findings:
        assert set(f.estimates) <= names, f.estimates


def test_analyse_fair_parts_confirmed_and_the_sweep_split_by_gamma():
    # the classifier-excluded control beats top: the reviewer is right under a fair control
    parts, a = _analysed({"bottom-gamma": -0.1, "bottom-gamma-no-classifier": 0.1,
                          ("gamma=0.25", "bottom-gamma"): 0.1})
    assert parts["fair-no-classifier"].verdict == Outcome.CONFIRMED
    from audit import questions

    ans = {x["id"]: x for x in questions.answers(_ic().CLAIM, a.parts, a)}
    assert ans["fair-reversal"]["verdict"] == "CONFIRMED"
    # gamma = 0.25 goes the other way: the sweep part does not decide
    assert parts["gamma-sweep"].verdict == Outcome.INCONCLUSIVE
    assert "depends on gamma" in parts["gamma-sweep"].reason
    assert ans["gamma-sweep"]["settings_split"]


def test_analyse_premise_not_reproduced_gates_the_fair_parts():
    # every gene far below no gene (top at 0.45 vs 0.70): the premise fails
    down = {a: -0.4 for a in _ic().ARM_NAMES}
    down.update({("gamma=0.25", a): -0.4 for a in ("top-gamma", "bottom-gamma")})
    down.update({("gamma=0.75", a): -0.4 for a in ("top-gamma", "bottom-gamma")})
    down["bottom-gamma-no-classifier"] = -0.5
    parts, _ = _analysed(down)
    p = parts["fair-no-classifier"]
    assert p.verdict == Outcome.INCONCLUSIVE and "premise not reproduced" in p.reason


def test_fair_and_sweep_rules_reach_each_outcome():
    IC = _ic()
    top = np.array([0.80, 0.82, 0.78, 0.81, 0.79, 0.80, 0.83, 0.77])
    gap = np.array([0.10, 0.12, 0.09, 0.11, 0.10, 0.11, 0.10, 0.12])
    base = {"control": "x", "n": 8, "n_differ": 8, "size_txt": "", "sens_txt": "",
            "resolution": 0.005, "vacuous_needs": "v"}
    got = set()
    for b in (top - gap, top + gap, top + gap * np.array([1, -1] * 4)):
        tw = stats.three_way(top, b, margin=0.0, equivalence_margin=0.02, alpha=0.025,
                             sensitive=True)
        got.add(IC.RULE_FAIR_BYTES({**base, "three_way": tw},
                                   params={"rule": "r", "alpha": "0.025"}).verdict)
    assert got == {Outcome.REFUTED, Outcome.CONFIRMED, Outcome.INCONCLUSIVE}
    vac = IC.RULE_FAIR_NO_CLASSIFIER({**base, "n_differ": 0}, params={"rule": "r",
                                                                      "alpha": "0.025"})
    assert vac.verdict == Outcome.INCONCLUSIVE and vac.needs == "v"
    row = lambda v: {"gamma": 0.5, "gamma_layers": 5, "n": 8, "diff": 0.1, "low": 0.05,  # noqa
                     "high": 0.15, "premise": "reproduced", "verdict": v}
    sw = lambda vs: IC.RULE_GAMMA_SWEEP({"rows": [row(v) for v in vs]}, params={  # noqa
        "base": "0.5", "sweep": "0.25", "sweep_seeds": 8}).verdict
    assert sw(["REFUTED", "REFUTED"]) == Outcome.REFUTED
    assert sw(["CONFIRMED", "CONFIRMED"]) == Outcome.CONFIRMED
    assert sw(["REFUTED", "INCONCLUSIVE"]) == Outcome.INCONCLUSIVE
    assert sw(["REFUTED"]) == Outcome.INCONCLUSIVE  # no sweep at this scale


# ------------------------------------- inverted cosine: the validation read-out (issue 30)
def test_agnostic_validation_split_is_held_out_and_read(monkeypatch):
    # A tuning unit (seed 1000) with a quarter of each agnostic client's training examples
    # held out: its result reads accuracy on them (the claim's one validation metric), and
    # the held-out indices touch neither the client's test split nor what it fine-tunes on
    from audit.papers.genefl import simulation as genefl_sim
    from audit.claims import RunSpec
    from audit.runner import make_context
    from audit.tuning import test_metric_problem

    IC = _ic()
    torch.set_num_threads(1)
    ctx = make_context(IC.CLAIM, "smoke", seeds=[1000, 1001], overrides={  # 2: stochastic
        "agnostic_val_fraction": 0.25, "rounds": 1, "finetune_steps": 2})
    seen = {}
    plain = genefl_sim.simulate

    def spy(*args, **kw):  # the simulation's own output, index sets included
        out = plain(*args, **kw)
        seen.update(out)
        return out

    monkeypatch.setattr(genefl_sim, "simulate", spy)
    # Execute
    res = IC.run(RunSpec("top-gamma", 1000), ctx)
    # Assert: a finite accuracy in [0, 1] ...
    for key in ("agnostic_val_acc", "agnostic_val_acc_nogene"):
        v = res[key]
        assert isinstance(v, float) and np.isfinite(v) and 0.0 <= v <= 1.0, key
        assert test_metric_problem(IC.CLAIM, key) == ""
    # ... on disjoint index sets: a quarter (floored) of each client's training split
    splits = seen["agnostic_splits"]
    assert len(splits) == ctx.config["n_agnostic"] == len(res["n_val_agnostic"])
    for j, sp in enumerate(splits):
        te, va, fit = (set(sp[k]) for k in ("test", "val", "fit"))
        assert len(te) == len(sp["test"]) and len(va) == len(sp["val"]) > 0
        assert not va & te and not va & fit and not te & fit and fit
        assert len(va) == int(np.floor(0.25 * (len(va) + len(fit))))
        assert res["n_val_agnostic"][j] == len(va)
        assert res["n_test_agnostic"][j] == len(te)
    for key in ("agnostic_acc", "agnostic_acc_nogene"):  # the test data stays refused
        assert test_metric_problem(IC.CLAIM, key)


def test_a_fair_control_that_differs_on_one_seed_is_inconclusive():
    """One seed whose control gene differs from top-gamma's went to three_way with one
    pair: a ValueError traceback ending the run. It is no paired comparison."""
    from audit.papers.genefl.inverted_cosine import _fair_decide
    from audit.verdict import Outcome

    out, reason, needs = _fair_decide({"control": "bytes", "n": 10, "n_differ": 1,
                                       "size_txt": "", "vacuous_needs": "x"})
    assert out == Outcome.INCONCLUSIVE and "1 of 10 seeds" in reason and needs


# ------------------------------ the notes say what the numbers are (a referee read)
def _notes_at(diffs, planted_gap):
    """The analysis of fake results whose base top-gamma minus bottom-gamma on seed i is
    ``diffs[i]`` and top-gamma minus its planted copy ``planted_gap[i]``: the reviewer's
    test part and the notes (NOTE_OWN_TEST, NOTE_THRESHOLDS)."""
    from audit.claims import RunSpec
    from audit.runner import make_context

    IC = _ic()
    ctx = make_context(IC.CLAIM, "smoke", seeds=list(range(len(diffs))))
    res = _fake_results(ctx, {})
    for spec, r in res.items():
        if spec.setting:
            continue
        top = res[RunSpec("top-gamma", spec.seed)]["agnostic_acc"]
        if spec.arm == "bottom-gamma":
            r["agnostic_acc"] = top - diffs[spec.seed]
        elif spec.arm == "top-gamma":
            r["agnostic_acc_planted"] = top - planted_gap[spec.seed]
    a = IC.analyse(res, ctx)
    part = {p.id: p for p in a.parts}["accuracy-top-vs-bottom"]
    own = next(n for n in a.notes if n.startswith("The reviewer's own test"))
    thr = next(n for n in a.notes if n.startswith("Thresholds:"))
    return part, own, thr


# decided REFUTED at a mean well below the rule's power-0.8 effect, one seed's difference
# 0.005 from flipping the sign test (fragile); the planted handicap about 0.005, not d
_SMALL_DIFFS = [0.25, 0.05, 0.1, 0.2, 0.005, 0.15, 0.3, 0.08, 0.12, -0.005]
_SHORT_GAP = [0.004, 0.006, 0.005, 0.007, 0.003, 0.005, 0.006, 0.004, 0.005, 0.006]


def test_thresholds_note_names_the_mde_as_decided_with_its_power_not_the_smallest():
    """The note called the rule's minimum detectable effect 'the smallest effect the rule
    decides', beside a run the rule decided at a smaller mean. It is the effect decided
    with the rule's power (taken from the rule, not typed), and smaller ones can be."""
    import re

    from audit import stats

    part, _, thr = _notes_at(_SMALL_DIFFS, _SHORT_GAP)
    assert part.verdict == Outcome.REFUTED
    diff = np.asarray(_SMALL_DIFFS)
    power = stats.three_way(diff, np.zeros_like(diff), equivalence_margin=0.02).power
    mde = stats.rule_mde(len(diff), 0.05, power=power) * float(np.std(diff, ddof=1))
    assert diff.mean() < mde  # the case the old wording got wrong
    assert "smallest effect" not in thr
    assert f"{mde:.4f} with probability {power:g}" in thr
    assert re.search(r"smaller effects are decided less often, not never: this run "
                     rf"decided REFUTED at {diff.mean():.4f}", thr)


def test_thresholds_note_uses_the_realised_planted_handicap_not_d():
    """Where round(d x n) plants much less than d (few test examples a client), the reason
    said so and the note still called it a handicap 'of size d'."""
    part, _, thr = _notes_at(_SMALL_DIFFS, _SHORT_GAP)
    realised = float(np.mean(_SHORT_GAP))
    assert f"The realised handicap is {realised:.4f}" in part.reason  # the reason's number
    assert "of size d" not in thr and "resolves d" not in thr
    assert f"is {realised:.4f}, under 0.5 x d, not d" in thr
    # a handicap near d is reported as such, with no 'short' clause
    _, _, near = _notes_at(_SMALL_DIFFS, [g + 0.015 for g in _SHORT_GAP])
    assert f"is {realised + 0.015:.4f}." in near and "under 0.5 x d" not in near


def test_own_test_note_says_when_its_word_is_fragile():
    """The note said REFUTED goes 'AGAINST the reviewer' in capitals on a word one seed's
    metric moved by under one test example flips; the part's flip distance is known when
    the notes are built, so the note says so (and drops the capitals)."""
    part, own, _ = _notes_at(_SMALL_DIFFS, _SHORT_GAP)
    assert part.verdict == Outcome.REFUTED and part.fragile
    assert "AGAINST" not in own and "goes against the reviewer" in own
    assert (f"fragile: moving one seed's agnostic accuracy by {part.flip:.4f} "
            f"({part.flip / part.resolution:.1f} test examples)") in own
    # a robust word: no such clause
    sure, own2, _ = _notes_at([0.1 + 0.01 * (i % 3) for i in range(10)], _SHORT_GAP)
    assert sure.verdict == Outcome.REFUTED and not sure.fragile and "fragile" not in own2
