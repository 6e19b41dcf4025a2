"""The GENE-FL experiment driver: one whole run (``simulate``), shared by the two GENE-FL
claims (:mod:`audit.papers.genefl.inverted_cosine`, and the simulated run of
:mod:`audit.papers.genefl.uplink_bytes`), and the message counts of uplink-bytes's
other units.

Known clients are clustered once and each cluster trains GENE-FL (``GeneFL``, from
:mod:`audit.papers.genefl.algorithm`) on the engine, with its uploads metered
(:mod:`audit.fl.comm`); agnostic clients then start from their nearest cluster's
learnGene and are fine-tuned. Long runs checkpoint: each cluster's engine run resumes
from its own checkpoint, and a finished cluster's result is kept until the call returns.

On the trained models, ``genefl-inverted-cosine`` reads two probes from here: the
reviewer's perturbation test (``perturbation_test``) and the selection statistics
(``selection_stats``: what top-gamma by the layer score keeps). ``genefl-uplink-bytes``
reads the paper's model from here: its sizes under each convention (``size_variants``),
the learnGene selected after a short real update (``selected_gene``), and both protocols'
messages counted (``count_messages``, over the seeded ``draws`` of participants).

Not a claim: it is not listed in ``audit.claims.CLAIM_MODULES``.
"""
from __future__ import annotations

import copy
from typing import Callable, Mapping, Optional

import numpy as np
import torch

from audit.papers.genefl.algorithm import (GeneFL, cluster_clients, data_subspace, finetune,
                                           gamma_from_fraction, inherit, layer_dims,
                                           layer_score, layer_state_keys, nearest_cluster,
                                           planted_accuracy, select_layers)
from audit.fl.models import layer_names

__all__ = ["count_messages", "draws", "jaccard", "participants", "perturbation_test",
           "resnet18_meta", "selected_gene", "selection_stats", "short_update_scores",
           "simulate", "size_variants"]

#: the share of each agnostic client's pool that is its test split
AGNOSTIC_TEST_FRACTION = 0.3


def _cluster_run(c: Mapping, k: int, members: list, fed_k, model_fn, pnames: list,
                 gamma: int, seed: int, mode: str, use_dim: bool, device: str,
                 checkpoint: Optional[str], checkpoint_every: int,
                 on_round: Optional[Callable[[int, int], None]] = None) -> dict:
    """GENE-FL on one cluster: ``{"entry": <the JSON-able cluster row>, "final_state":
    ..., "gene": ...}``. With ``checkpoint`` the engine saves and resumes the run there
    (the algorithm's update log and generator and the byte log travel with it)."""
    from audit.fl import comm
    from audit.fl.engine import FLConfig, run_federated

    alg = GeneFL(gamma, mode, use_dim, c["lam_gen"], c["lam_elg"],
                 c["fisher_quantile"], seed=seed * 100 + k,
                 local_layers=c.get("local_layers", "keep"))
    cpr = c.get("clients_per_round")
    cfg = FLConfig(rounds=c["rounds"], clients_per_round=None if cpr is None
                   else min(cpr, len(members)), local_epochs=c["local_epochs"],
                   batch_size=c["batch_size"], lr=c["lr"], seed=seed, device=device,
                   eval_every=c["rounds"], layer_metrics=False)
    log = comm.CommLog()  # every engine transfer of this cluster, counted
    h = run_federated(model_fn, fed_k, comm.metered(alg, log, pnames), cfg,
                      checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                      on_round=on_round)
    per_round = log.per_round("param")
    last = c["rounds"]
    gene = alg.cluster_gene(last)
    dims = layer_dims(h.final_state, alg.layers)
    entry = {
        "members": members,
        "learngene_bytes_per_round": [a["learngene_param_bytes"] for a in h.algo],
        "comm_up_per_round": [per_round[r]["up"] for r in sorted(per_round)],
        "comm_down_per_round": [per_round[r]["down"] for r in sorted(per_round)],
        "participants_per_round": [len({t.client for t in log.transfers
                                        if t.round == r and t.direction == "up"})
                                   for r in sorted(per_round)],
        "model_param_bytes": int(sum(h.final_state[k2].numel() * 4 for k2 in alg.pkeys)),
        "gene": gene,
        "gene_param_bytes": int(sum(dims[l] for l in gene) * 4),
        "personal_acc": float(h.personal_acc[-1]),
        "client_acc": list(h.client_acc[-1]),
        "dims": dims,
        "last_updates": [{"client": u.client, "cos": u.cos, "xi": u.xi,
                          "selected": u.selected} for u in alg.updates if u.round == last],
    }
    return {"entry": entry, "final_state": h.final_state, "gene": gene}


def _cluster_key(c: Mapping, k: int, members: list, seed: int, mode: str, use_dim: bool,
                 device: str) -> str:
    """What a finished cluster's saved result depends on (compared on resume)."""
    import json

    return json.dumps([dict(c), k, members, seed, mode, use_dim, device], sort_keys=True,
                      default=str)


def _load_cluster(path: Optional[str], key: str, device: str) -> Optional[dict]:
    """A finished cluster's result saved by an earlier, interrupted call (or None)."""
    import os

    if not path or not os.path.exists(path):
        return None
    try:
        saved = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # a corrupt file is reported and ignored, as in the engine
        import warnings

        warnings.warn(f"ignoring unreadable cluster result {path} ({exc})", stacklevel=3)
        return None
    return saved["result"] if saved.get("key") == key else None


def _agnostic_holdout(ds, pool: np.ndarray, parts: list, agn, test_fraction: float,
                      split_rng: np.random.Generator, fraction: float, seed: int) -> list:
    """Each agnostic client's validation split (``agnostic_val_fraction`` > 0): the
    client's training split as ``make_federated`` drew it (``split_rng``: a copy of the
    generator it drew with, taken just before, so its draws are replayed and the run's
    own generator is untouched; checked against the client's tensors), of which
    ``floor(n_train x fraction)`` examples, drawn by the client's own generator
    ``[seed, 63, j]``, are held out; the rest (in their original order) is what the client
    is assigned to a cluster by and fine-tunes on. Per client: the validation and fit
    tensors and the three index sets (test, val, fit) into ``ds.x_train``."""
    out = []
    for j, (p, cl) in enumerate(zip(parts, agn.clients)):
        idx = split_rng.permutation(np.asarray(pool[p], dtype=np.int64))
        n_te = int(np.floor(len(idx) * test_fraction))
        test, train = idx[:n_te], idx[n_te:]
        if not (len(train) == len(cl.y_train) and
                torch.equal(ds.y_train[torch.as_tensor(train)], cl.y_train) and
                torch.equal(ds.x_train[torch.as_tensor(train)], cl.x_train)):
            raise RuntimeError("agnostic validation split: the replayed client split "
                               "differs from make_federated's (its drawing changed)")
        n_va = int(np.floor(len(train) * fraction))
        if not 1 <= n_va < len(train):
            raise ValueError(f"agnostic_val_fraction {fraction:g} leaves agnostic client {j} "
                             f"({len(train)} training examples) {n_va} validation examples "
                             "and needs at least one in each of validation and fine-tuning")
        pos = np.random.default_rng([seed, 63, j]).permutation(len(train))
        va, fit = np.sort(pos[:n_va]), np.sort(pos[n_va:])
        tva, tfit = torch.as_tensor(va), torch.as_tensor(fit)
        out.append({"x_val": cl.x_train[tva], "y_val": cl.y_train[tva],
                    "x_fit": cl.x_train[tfit], "y_fit": cl.y_train[tfit],
                    "idx": {"test": test.tolist(), "val": train[va].tolist(),
                            "fit": train[fit].tolist()}})
    return out


def simulate(config: Mapping, seed: int, mode: str = "top", use_dim: bool = True,
             data_dir: Optional[str] = None, device: str = "cpu",
             checkpoint: Optional[str] = None, checkpoint_every: int = 5,
             on_round: Optional[Callable[[int, int], None]] = None) -> dict:
    """One GENE-FL run: known clients in clusters, then agnostic clients from the genes.

    ``mode``: the gene choice of every client update, any of
    :data:`audit.papers.genefl.algorithm.GENE_MODES` (``top`` as printed; ``bottom``,
    ``random``; the fair controls ``bottom-bytes`` and ``bottom-no-classifier``).

    ``config`` keys: dataset, model, model_kw, known_classes, agnostic_classes, n_known,
    n_agnostic, alpha, clusters, svd_dim, rounds, clients_per_round, local_epochs,
    batch_size, lr, gamma_fraction, lam_gen, lam_elg, fisher_quantile, finetune_steps,
    finetune_lr; optional agnostic_val_fraction (default 0: no validation split, the run
    exactly as without the key). Returns JSON-able data: per cluster the learnGene size
    per round, the last round's per-client cosines / scores / selections, the cluster
    genes, the known clients' accuracy, and each agnostic client's accuracy from the gene
    and from the fresh initial weights alone (``no-gene``, the known-worse reference).

    ``agnostic_val_fraction`` > 0: each agnostic client holds out that fraction of its
    training examples (:func:`_agnostic_holdout`; disjoint from its test split), is
    assigned to a cluster by and fine-tunes on the rest, and the output gains
    ``agnostic_val_acc`` (mean over agnostic clients of the gene model's accuracy on the
    held-out examples, after the same fine-tuning, by the same ``evaluate``), its no-gene
    counterpart ``agnostic_val_acc_nogene``, ``n_val_agnostic`` and ``agnostic_splits``
    (per client the test, val and fit indices into the dataset's training arrays).

    ``checkpoint``: a file path prefix (None: no checkpoints). Cluster k's engine run
    saves and resumes at ``{checkpoint}.cluster{k}`` every ``checkpoint_every`` rounds
    (the engine removes it when the cluster is done), and the cluster's finished result
    is saved atomically at ``{checkpoint}.cluster{k}.done``, so a call killed in a later
    cluster or among the agnostic clients does not train the finished clusters again.
    The ``.done`` files are removed when the call returns. A resumed call returns the
    same numbers as an uninterrupted one (tested).

    ``on_round``: progress, ``on_round(round, rounds)`` after every round of each
    cluster's engine run (``RunContext.on_round``).
    """
    import os

    from audit.fl import data as D
    from audit.fl.engine import evaluate, save_atomic
    from audit.fl.models import build_model

    c = dict(config)
    val_frac = float(c.get("agnostic_val_fraction", 0.0))
    if not 0.0 <= val_frac < 1.0:
        raise ValueError(f"agnostic_val_fraction must lie in [0, 1), got {val_frac}")
    ds = D.load_dataset(c["dataset"], data_dir=data_dir, seed=0)
    shape = tuple(ds.x_train.shape[1:])
    model_fn = lambda: build_model(c["model"], ds.num_classes, shape[0], shape[-1],
                                   **dict(c.get("model_kw", {})))
    rng = np.random.default_rng([seed, 60])
    ytr = ds.y_train.numpy()
    known_pool = np.flatnonzero(np.isin(ytr, c["known_classes"]))
    agn_pool = np.setdiff1d(np.flatnonzero(np.isin(ytr, c["agnostic_classes"])), known_pool)
    try:
        if c.get("partition", "dirichlet") == "shard":
            known_parts = D.shard_partition(ytr[known_pool], c["n_known"], c["shards"], rng)
        else:
            known_parts = D.dirichlet_partition(ytr[known_pool], c["n_known"], c["alpha"],
                                                rng, min_size=c.get("min_size", 20))
        agn_parts = D.dirichlet_partition(ytr[agn_pool], c["n_agnostic"], c["alpha"], rng,
                                          min_size=c.get("agnostic_min_size", 20))
        known = D.make_federated(ds, [known_pool[p] for p in known_parts], 0.0, 0.2, rng)
        # a copy of the generator (no draw) replays the agnostic splits for the holdout
        split_rng = copy.deepcopy(rng) if val_frac > 0 else None
        agn = D.make_federated(ds, [agn_pool[p] for p in agn_parts], 0.0,
                               AGNOSTIC_TEST_FRACTION, rng)
    except D.PartitionError as e:  # a small or partial copy: say which classes fall short
        raise D.PartitionError(
            f"{ds.name}: {len(known_pool)} training images of the known classes "
            f"{list(c['known_classes'])} for {c['n_known']} clients, {len(agn_pool)} of "
            f"the agnostic classes {list(c['agnostic_classes'])} for {c['n_agnostic']}: "
            f"{e}") from None
    holdout = (_agnostic_holdout(ds, agn_pool, agn_parts, agn, AGNOSTIC_TEST_FRACTION,
                                 split_rng, val_frac, seed) if val_frac > 0 else None)
    labels = cluster_clients([cl.x_train for cl in known.clients], c["clusters"],
                             c["svd_dim"], seed)
    test_known = torch.as_tensor(np.isin(ds.y_test.numpy(), c["known_classes"]))
    template = model_fn()
    pnames = [n for n, _ in template.named_parameters()]
    n_layers = len(layer_names(template))
    gamma = gamma_from_fraction(n_layers, c["gamma_fraction"])
    out = {"gamma": gamma, "n_layers": n_layers, "cluster_of": labels.tolist(),
           "clusters": []}
    finals, genes, done_files = [], [], []
    for k in range(int(labels.max()) + 1):
        members = [i for i in range(len(labels)) if labels[i] == k]
        done = f"{checkpoint}.cluster{k}.done" if checkpoint else None
        key = _cluster_key(c, k, members, seed, mode, use_dim, device)
        res = _load_cluster(done, key, device)
        if res is None:
            fed_k = D.FederatedData([known.clients[i] for i in members],
                                    ds.x_test[test_known], ds.y_test[test_known],
                                    ds.num_classes, f"cluster{k}")
            res = _cluster_run(c, k, members, fed_k, model_fn, pnames, gamma, seed, mode,
                               use_dim, device, done and f"{checkpoint}.cluster{k}",
                               checkpoint_every, on_round)
            if done:
                save_atomic(done, {"key": key, "result": res})
        if done:
            done_files.append(done)
        finals.append(res["final_state"])
        genes.append(res["gene"])
        out["clusters"].append(res["entry"])
    # agnostic clients: nearest cluster (subspace distance), theta = [theta_0 ; gene]
    with torch.random.fork_rng():
        torch.manual_seed(seed + 10_000)
        theta0 = {k: v.detach().clone() for k, v in model_fn().state_dict().items()}
    cluster_x = [data_subspace(torch.cat([known.clients[i].x_train for i in cl["members"]]),
                               c["svd_dim"]) for cl in out["clusters"]]
    sl = layer_state_keys(template)
    agn_rows = []
    for j, cl in enumerate(agn.clients):
        hold = holdout[j] if holdout else None  # None: the whole training split is used
        x_fit, y_fit = (cl.x_train, cl.y_train) if hold is None else (hold["x_fit"],
                                                                       hold["y_fit"])
        k = nearest_cluster(x_fit, cluster_x, c["svd_dim"])
        row = {"client": j, "cluster": k}
        steps = c["finetune_steps"]
        for name, start in (("gene", inherit(theta0, finals[k], genes[k], sl)),
                            ("no-gene", theta0)):
            st = finetune(template, start, x_fit, y_fit, steps,
                          c["finetune_lr"], c["batch_size"],
                          np.random.default_rng([seed, 61, j]))
            row[name] = evaluate(template, st, cl.x_test, cl.y_test)[0]
            if hold is not None:  # the validation read-out: same model, same code
                row[f"{name}-val"] = evaluate(template, st, hold["x_val"], hold["y_val"])[0]
            if name == "gene":
                # the planted handicap for assay sensitivity (issue 16, item 6): the same
                # model's test predictions, each replaced with probability p by a label
                # drawn uniformly from the classes, p sized so that the expected loss is
                # ``plant_effect`` (the equivalence margin) of this client's accuracy
                row["gene-planted"] = planted_accuracy(
                    template, st, cl.x_test, cl.y_test, float(c.get("plant_effect", 0.0)),
                    ds.num_classes, np.random.default_rng([seed, 62, j]))
        agn_rows.append(row)
    out["agnostic"] = agn_rows
    out["agnostic_acc"] = float(np.mean([r["gene"] for r in agn_rows]))
    out["agnostic_acc_nogene"] = float(np.mean([r["no-gene"] for r in agn_rows]))
    out["agnostic_acc_planted"] = float(np.mean([r["gene-planted"] for r in agn_rows]))
    sizes = [len(cl.y_train) for cl in known.clients]
    out["known_acc"] = float(np.average(
        [a for cl in out["clusters"] for a in cl["client_acc"]]))
    out["n_train_known"] = sizes
    out["n_test_agnostic"] = [len(cl.y_test) for cl in agn.clients]
    if holdout:
        out["agnostic_val_acc"] = float(np.mean([r["gene-val"] for r in agn_rows]))
        out["agnostic_val_acc_nogene"] = float(np.mean([r["no-gene-val"] for r in agn_rows]))
        out["n_val_agnostic"] = [len(h["y_val"]) for h in holdout]
        out["agnostic_splits"] = [h["idx"] for h in holdout]
    out["final_states"] = finals  # not JSON: callers drop it (kept for the perturbation test)
    for f in done_files:  # finished: the result is cached by the runner
        if os.path.exists(f):
            os.remove(f)
    return out


# ---------------------------------------------------------------- perturbation test
def perturbation_test(state, layers, seed: int, delta: float) -> list[dict]:
    """For every ordered pair (perturbed l, untouched m): move layer l of a copy of the
    trained ``state`` by ``delta * ||theta_l||`` in a random direction orthogonal to it
    (seeded; each tensor of the layer alike), so that the moved layer's cosine is exactly
    1 / sqrt(1 + delta^2) (0.894 at delta 0.5); score both with Eq. 9 and record whether
    the untouched m scores higher."""

    dims = layer_dims(state, layers)
    g = torch.Generator().manual_seed(10_007 + seed)
    rows = []
    names = list(layers)
    for l in names:
        moved = {k: v.clone() for k, v in state.items()}
        for k in layers[l]:
            t = moved[k].double()
            u = torch.randn(t.shape, generator=g, dtype=torch.float64)
            u = u - (u.flatten() @ t.flatten()) / (t.norm() ** 2) * t  # orthogonal to t
            moved[k] = (t + delta * t.norm() * u / u.norm()).to(moved[k].dtype)
        xi = layer_score(moved, state, layers)
        nd = layer_score(moved, state, layers, use_dim=False)
        for m in names:
            if m == l:
                continue
            rel = "equal" if dims[l] == dims[m] else (
                "perturbed smaller" if dims[l] < dims[m] else "perturbed larger")
            rows.append({"perturbed": l, "untouched": m, "dim_p": dims[l], "dim_u": dims[m],
                         "size": rel, "untouched_higher": bool(xi[m] > xi[l]),
                         "untouched_higher_no_dim": bool(nd[m] > nd[l])})
    return rows


# ------------------------------------------------------------- selection statistics
def jaccard(a, b) -> float:
    """|a & b| / |a | b| of two layer selections (1 for two empty ones)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def selection_stats(updates: list[dict], dims: dict, gamma: int) -> dict:
    """Per client update: Spearman(xi, 1/dim), and Jaccard of top-gamma by xi with the
    gamma highest-cosine layers and with the gamma smallest layers; means over updates."""
    from scipy.stats import spearmanr

    rho, js, jz = [], [], []
    inv = {l: 1.0 / d for l, d in dims.items()}
    smallest = select_layers(inv, gamma, "top")
    for u in updates:
        xi, cos = u["xi"], u["cos"]
        names = list(xi)
        r = spearmanr([xi[l] for l in names], [inv[l] for l in names]).statistic
        # a NaN (a diverged model's constant or non-finite scores) stays NaN: the runner
        # reports the unit as diverged instead of reading it as "no correlation"
        rho.append(float(r))
        top = select_layers(xi, gamma, "top")
        js.append(jaccard(top, select_layers(cos, gamma, "top")))
        jz.append(jaccard(top, smallest))
    return {"rho": float(np.mean(rho)), "j_stable": float(np.mean(js)),
            "j_size": float(np.mean(jz)), "n_updates": len(updates), "smallest": smallest}


# ------------------------------------------------- the paper's model (genefl-uplink-bytes)
def resnet18_meta():
    """The paper's model, on the meta device (shapes and dtypes only)."""
    import torchvision

    with torch.device("meta"):
        return torchvision.models.resnet18(weights=None, num_classes=10)


def size_variants(mib: float, paper_mb: float) -> list[dict]:
    """ResNet-18 sizes under each convention (``mib``: bytes in a MiB), and whether each
    prints as the paper's ``paper_mb`` (two decimals)."""
    from audit.fl.models import build_model

    rows = []
    models = {"torchvision (7x7 stem, max-pool)": resnet18_meta(),
              "CIFAR head (3x3 stem, no max-pool; engine's resnet18)": build_model(
                  "resnet18", 10, 3, 32)}
    for name, m in models.items():
        p = sum(t.numel() * t.element_size() for t in m.parameters())
        fb = sum(t.numel() * t.element_size() for t in m.buffers() if t.is_floating_point())
        ib = sum(t.numel() * t.element_size() for t in m.buffers() if not t.is_floating_point())
        for conv, b in (("parameters", p), ("parameters + float buffers", p + fb),
                        ("whole state dict", p + fb + ib)):
            for unit, div in (("MiB", mib), ("MB (10^6)", 1e6)):
                v = b / div
                rows.append({"model": name, "counted": conv, "unit": unit, "bytes": int(b),
                             "size": v,
                             "prints_42.66": f"{v:.2f}" == f"{paper_mb:.2f}"})
    return rows


def short_update_scores(seed: int = 0):
    """Eq. 9 on a real update: a ResNet-18 (init under ``seed``) and the same model after
    3 SGD steps (lr 0.05, batch 32) on synthetic CIFAR-shaped blobs."""
    import torch.nn.functional as F
    import torchvision

    from audit.papers.genefl.algorithm import layer_keys
    from audit.fl.data import synthetic_classification

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = torchvision.models.resnet18(weights=None, num_classes=10)
    ds = synthetic_classification(seed, n=120, num_classes=10, shape=(3, 32, 32))
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    net.train()
    for s in range(3):
        opt.zero_grad()
        F.cross_entropy(net(ds.x_train[32 * s:32 * (s + 1)]),
                        ds.y_train[32 * s:32 * (s + 1)]).backward()
        opt.step()
    after = net.state_dict()
    layers = layer_keys(net)
    return layer_score(after, before, layers), layers, after


# ------------------------------------------------------- Algorithm 2's messages, counted
def draws(rounds: int, per_round: int, n_clients: int):
    """Each round's participants: ``per_round`` clients drawn without replacement from
    ``n_clients`` (seeded: the same draw for every count)."""
    rng = np.random.default_rng([0, 7])
    for _ in range(rounds):
        yield rng.choice(n_clients, size=min(per_round, n_clients), replace=False).tolist()


def participants(rounds: int, per_round: int, n_clients: int) -> int:
    """Distinct clients that take part over ``rounds`` rounds (the draw of :func:`draws`)."""
    return len({k for ks in draws(rounds, per_round, n_clients) for k in ks})


def count_messages(model_state, param_names, gene_state, cfg: Mapping, once: bool) -> dict:
    """Both protocols' messages over ``cfg``'s rounds, counted with ``audit.fl.comm``:
    FedAvg (the model down and up for every participant) and GENE-FL as printed
    (Algorithm 2: the cluster model down, the learnGene up; ``once``: the cluster model
    only at a client's first round; the gene to each agnostic client). Totals in bytes."""
    from audit.fl import comm

    full = comm.message(model_state, param_names)  # the model, tensor by tensor
    gene = comm.message(gene_state, param_names)
    R, B, N = cfg["rounds"], cfg["clients_per_round"], cfg["n_clients"]
    fed, gen = comm.CommLog(), comm.CommLog()
    seen: set[int] = set()
    for r, drawn in enumerate(draws(R, B, N), 1):  # only `once` depends on who takes part
        for k in sorted(drawn):
            fed.add(comm.Transfer("down", r, k, full, "global model"))
            fed.add(comm.Transfer("up", r, k, full, "full model"))
            if not once or k not in seen:  # Alg. 2 line 7 (once: only the first time)
                gen.add(comm.Transfer("down", r, k, full, "cluster model"))
            seen.add(k)
            gen.add(comm.Transfer("up", r, k, gene, "learnGene"))
    for j in range(cfg["n_agnostic"]):  # Alg. 2 line 10: the gene to each agnostic client
        gen.add(comm.Transfer("down", R + 1, N + j, gene, "cluster learnGene"))
    out = {}
    for name, log in (("fedavg", fed), ("genefl", gen)):
        for d in ("up", "down"):
            out[f"{name}_{d}"] = log.total(d, "param")
            out[f"{name}_{d}_buffers"] = log.total(d, "buffer")
        pr = log.per_round("param")
        out[f"{name}_per_round"] = [[r, pr[r]["up"], pr[r]["down"]] for r in sorted(pr)]
    out["participants"] = len(seen)
    return out


def selected_gene(net, gene_bytes: float) -> tuple[dict, dict]:
    """The learnGene that Algorithm 1 selects from ``net`` (the paper's model) after a
    short real update: the top-gamma layers by the layer score, with gamma the count whose
    parameter bytes come nearest ``gene_bytes``. Returns (the gene's state, what was
    chosen: gamma, the layers, their scores and sizes, and the bytes at every gamma)."""
    state = net.state_dict()
    xi, layers, after = short_update_scores(0)
    dims = {l: sum(after[k].numel() for k in ks) for l, ks in layers.items()}
    L = len(layers)
    order = sorted(xi, key=lambda l: -xi[l])
    cum = np.cumsum([dims[l] * 4 for l in order])
    gamma = int(np.argmin(np.abs(cum - gene_bytes))) + 1
    sel = select_layers(xi, gamma, "top")
    skeys = layer_state_keys(net)
    gene_state = {k: state[k] for l in sel for k in skeys[l]}
    return gene_state, dict(
        gamma=gamma, n_layers=L, selected=sel,
        selected_param_bytes=int(sum(dims[l] for l in sel) * 4),
        sweep=[{"gamma": g, "fraction_layers": g / L, "gene_param_bytes": int(cum[g - 1])}
               for g in range(1, L + 1)],
        order=order, xi={l: xi[l] for l in order}, dims={l: int(dims[l]) for l in order})
