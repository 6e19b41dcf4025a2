"""Falsifier ``genefl-inverted-cosine``: what does GENE-FL's layer score select?

Paper: GENE-FL, arXiv 2504.14628v1, Eq. 9 (xi_l = cos(theta_l, theta~_l) / dim(theta_l),
normalised to sum 1) and Algorithm 1 lines 11-13 (sort xi descending, keep the top gamma
layers as the learnGene); the prose reads a high xi as strong private-data influence.
Review record 004 (``skeptic_critique.rationale``, ``referee_report.major_comments``,
``pith_extraction.falsifier``): a high cosine means the layer moved LESS, so the prose is
inverted and top-gamma keeps the most stable layers.

Three pieces (issue 6):
1. the reviewer's perturbation test on trained models: a copy with one known layer moved
   by a fixed relative amount; does the untouched layer score higher? (equal sizes, and
   different sizes, where the 1/dim factor enters);
2. the selection statistics on real client updates: the rank correlation of xi with 1/dim
   (``xi_dim_rank_correlation``), and how far top-gamma agrees with "the gamma most stable
   layers" (highest cosine) and with "the gamma smallest layers";
3. the run (a separate, labelled result): agnostic clients initialised from each arm's
   learnGene, accuracy after a fixed number of local steps; known clients' accuracy.
The verdict on the reviewer's claim comes from 1 and 2 only.

Issue 30 (record item ``referee_report.minor_comments[3]``): is top beating bottom fair?
Two controls run on every seed: ``bottom-gamma-bytes`` (a bottom gene of top-gamma's
parameter count, whole layers: ``audit.algorithms.genefl.select_bytes_matched``) and
``bottom-gamma-no-classifier`` (bottom-gamma without the classifier trained on the known
classes); question ``fair-reversal`` compares top-gamma with each (Bonferroni over the
two). A gamma sweep (settings ``gamma=<fraction>``, top- and bottom-gamma on the first
``sweep_seeds`` seeds) repeats the reviewer's test at other gene sizes: question
``gamma-sweep``, one row per gamma, each by the same rule with its own premise.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from audit import kit, stats
from audit.analysis import mean_estimate, results_table
from audit.tuning import Search, tuning_seeds
from audit.claims import (GENEFL, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit import questions
from audit.questions import Finding, Question
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer, premise_gate

DELTA = 0.5  # the fixed relative perturbation: ||dtheta_l|| = DELTA * ||theta_l||
# accuracy equivalence margin d: 2 points of agnostic-client accuracy. Source: a stated
# multiple of the metric's resolution (one test example of a smoke agnostic client is
# 1/20 to 1/60 of its accuracy; over 4 clients one example moves the mean by about 0.004
# to 0.012: d is 2 to 5 examples), fixed before the run; `--set equivalence_margin=...` changes it and the printed rules.
EQUIV_MARGIN = 0.02
ALPHA = 0.05
# `selection`: Jaccard thresholds, stated choices fixed before the run (0.8: at most about
# one layer in ten differs between the two sets at gamma ~ 8; 0.5: fewer than two thirds
# shared)
J_HIGH, J_LOW = 0.8, 0.5

SMOKE_SIM = {"dataset": "digits", "model": "vgg", "model_kw": {"width": 0.5},
             "known_classes": list(range(7)), "agnostic_classes": list(range(5, 10)),
             "n_known": 6, "n_agnostic": 4, "alpha": 0.5, "clusters": 2, "svd_dim": 4,
             "rounds": 6, "clients_per_round": None, "local_epochs": 1, "batch_size": 32,
             "lr": 0.05, "gamma_fraction": 0.5, "lam_gen": 0.01, "lam_elg": 0.1,
             "fisher_quantile": 0.5, "finetune_steps": 8, "finetune_lr": 0.05,
             "agnostic_min_size": 60, "local_layers": "keep",
             "equivalence_margin": EQUIV_MARGIN,
             # issue 30: the gamma sweep (top- and bottom-gamma on the first sweep_seeds
             # seeds); 8 seeds: the three-way rule decides nothing on fewer pairs
             "gamma_sweep": [0.25, 0.75], "sweep_seeds": 8}
SCALES = {
    "smoke": SMOKE_SIM,
    # digits' classes 7-9 hold 426 training samples outside the known classes: 6 agnostic
    # clients of at least 50 (the smoke's 60 for 8 clients needed 480)
    # finetune_steps: chosen on tuning seeds (SEARCHES below)
    "full": {**SMOKE_SIM, "n_known": 12, "rounds": 30, "n_agnostic": 6, "clusters": 3,
             "finetune_steps": 10, "agnostic_min_size": 50},
    # CIFAR-10, the engine's CIFAR ResNet-18, shard partition with s = 4 shards a client
    # (our reading of the paper's s); needs --data-dir
    "paper": {**SMOKE_SIM, "dataset": "cifar10", "model": "resnet18", "model_kw": {},
              "partition": "shard", "shards": 4, "n_known": 20, "n_agnostic": 10,
              "clusters": 4, "rounds": 100, "clients_per_round": 10, "local_epochs": 1,
              "batch_size": 64, "lr": 0.01, "finetune_steps": 50, "svd_dim": 10,
              "gamma_sweep": [], "sweep_seeds": 0},
}

ARMS = (
    Arm("top-gamma", "learnGene = the gamma layers with the highest xi", "as printed "
        "(Algorithm 1 lines 11-13)"),
    Arm("bottom-gamma", "learnGene = the gamma layers with the lowest xi",
        "sort order reversed"),
    Arm("random-gamma", "learnGene = gamma layers drawn at random", "no score"),
    Arm("top-gamma-no-dim", "top gamma by cos alone", "Eq. 9 without the 1/dim factor"),
    Arm("top-gamma-reset", "top-gamma, clients restart every round from the full cluster "
        "model (Algorithm 1 line 4 literally)", "never-uploaded layers reset each round: "
        "reported, not in the verdict"),
    Arm("bottom-gamma-bytes", "learnGene = the lowest-xi layers, whole, taken from the "
        "lowest score upward while each brings the gene's parameter count closer to that "
        "of top-gamma on the same client update", "byte-matched control (issue 30)"),
    Arm("bottom-gamma-no-classifier", "learnGene = the gamma lowest-xi layers other than "
        "the classifier (the last linear layer)", "classifier-excluded control (issue 30)"),
)
ARM_NAMES = tuple(a.name for a in ARMS)
#: the arms of every gamma-sweep cell (the reviewer's test at another gene size)
SWEEP_ARMS = ("top-gamma", "bottom-gamma")
#: the fair controls of the reversal: arm -> part id
FAIR = {"bottom-gamma-bytes": "fair-bytes", "bottom-gamma-no-classifier": "fair-no-classifier"}


@dataclass(frozen=True)
class ArmPiece:
    """What an arm changes in a GENE-FL run (``simulate``): which gamma layers become
    the learnGene (``mode``: "top", "bottom" or "random" by xi, or a fair control,
    "bottom-bytes" or "bottom-no-classifier": ``audit.algorithms.genefl.select_gene``),
    whether Eq. 9 keeps its
    1/dim factor (``use_dim``), and what clients start never-uploaded layers from
    (``local_layers``: None keeps the config's default, "reset" the full cluster model)."""

    mode: str = "top"
    use_dim: bool = True
    local_layers: str | None = None


#: Each arm's piece, beside its declaration in ARMS (same names, same order).
PIECES: dict[str, ArmPiece] = {
    "top-gamma": ArmPiece("top"),
    "bottom-gamma": ArmPiece("bottom"),
    "random-gamma": ArmPiece("random"),
    "top-gamma-no-dim": ArmPiece("top", use_dim=False),
    "top-gamma-reset": ArmPiece("top", local_layers="reset"),
    "bottom-gamma-bytes": ArmPiece("bottom-bytes"),
    "bottom-gamma-no-classifier": ArmPiece("bottom-no-classifier"),
}
assert tuple(PIECES) == ARM_NAMES, "PIECES out of step with ARMS"


# ---------------------------------------------------------------- perturbation test
def perturbation_test(state, layers, seed: int, delta: float = DELTA) -> list[dict]:
    """For every ordered pair (perturbed l, untouched m): move layer l of a copy of the
    trained ``state`` by ``delta * ||theta_l||`` in a random direction orthogonal to it
    (seeded; each tensor of the layer alike), so that the moved layer's cosine is exactly
    1 / sqrt(1 + delta^2) (0.894 at delta 0.5); score both with Eq. 9 and record whether
    the untouched m scores higher."""
    import torch

    from audit.algorithms.genefl import layer_dims, layer_score

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
def _jaccard(a, b) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def selection_stats(updates: list[dict], dims: dict, gamma: int) -> dict:
    """Per client update: Spearman(xi, 1/dim), and Jaccard of top-gamma by xi with the
    gamma highest-cosine layers and with the gamma smallest layers; means over updates."""
    from scipy.stats import spearmanr

    from audit.algorithms.genefl import select_layers

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
        js.append(_jaccard(top, select_layers(cos, gamma, "top")))
        jz.append(_jaccard(top, smallest))
    return {"rho": float(np.mean(rho)), "j_stable": float(np.mean(js)),
            "j_size": float(np.mean(jz)), "n_updates": len(updates), "smallest": smallest}


# ------------------------------------------------------------------------------ run
def gamma_setting(fraction: float) -> str:
    """The sweep setting's label: ``gamma=0.25``."""
    return f"gamma={float(fraction):g}"


def specs(ctx: RunContext) -> list[RunSpec]:
    """Every arm on every seed (the base setting), then each gamma of ``gamma_sweep``
    with the arms :data:`SWEEP_ARMS` on the first ``sweep_seeds`` seeds."""
    cfg = ctx.config
    out = [RunSpec(a, s) for s in ctx.seeds for a in ARM_NAMES]
    sw = ctx.seeds[:int(cfg.get("sweep_seeds", 0))]
    for g in cfg.get("gamma_sweep", ()):
        out += [RunSpec(a, s, gamma_setting(g)) for s in sw for a in SWEEP_ARMS]
    return out


def _gamma_of(spec: RunSpec) -> float | None:
    if not spec.setting:
        return None
    if not spec.setting.startswith("gamma="):
        raise AuditError(f"unknown setting {spec.setting!r}")
    return float(spec.setting.split("=", 1)[1])


def run(spec: RunSpec, ctx: RunContext) -> dict:
    import torch

    from audit.algorithms.genefl_sim import simulate

    torch.set_num_threads(1)
    cfg = dict(ctx.config)
    if cfg["dataset"] != "digits" and ctx.data_dir is None:
        raise AuditError(f"scale {ctx.scale!r} runs on {cfg['dataset']}: pass --data-dir "
                         "(or set AUDIT_DATA) to its local copy (torchvision layout)")
    piece = PIECES[spec.arm]
    mode, use_dim = piece.mode, piece.use_dim
    g = _gamma_of(spec)
    if g is not None:  # a gamma-sweep cell
        cfg["gamma_fraction"] = g
    if piece.local_layers is not None:
        cfg["local_layers"] = piece.local_layers
    cfg["plant_effect"] = float(cfg.get("equivalence_margin", EQUIV_MARGIN))
    # a killed long run resumes from its last checkpoint (None when caching is off)
    out = simulate(cfg, spec.seed, mode, use_dim, data_dir=ctx.data_dir, device=ctx.device,
                   checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)
    finals = out.pop("final_states")
    res = {k: out[k] for k in ("gamma", "n_layers", "known_acc", "agnostic_acc",
                               "agnostic_acc_nogene", "agnostic_acc_planted", "cluster_of",
                               "n_test_agnostic")}
    res["genes"] = [c["gene"] for c in out["clusters"]]
    res["gene_param_bytes"] = [c["gene_param_bytes"] for c in out["clusters"]]
    dims = out["clusters"][0]["dims"]
    res["dims"] = dims
    if spec.arm == "top-gamma" and not spec.setting:  # the printed method's models
        updates = [u for c in out["clusters"] for u in c["last_updates"]]
        res["selection"] = selection_stats(updates, dims, out["gamma"])
        res["updates"] = updates
        state = {k: v.cpu() for k, v in finals[0].items()}
        # the layer map (parameters only) from the state's own keys
        layers = {l: [k for k in state if k.rsplit(".", 1)[0] == l and
                      not k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
                  for l in dims}
        res["perturbation"] = perturbation_test(state, layers, seed=spec.seed)
    return res


# -------------------------------------------------------------------------- rules
def _direction_decide(ev):
    eq = [r for r in ev["pairs"] if r["size"] == "equal"]
    if not eq:
        return Outcome.INCONCLUSIVE, "the model has no two layers of equal size", \
            "a model with equal-size layers"
    wins = sum(r["untouched_higher"] for r in eq)
    txt = (f"equal-size pairs: the untouched layer scores higher in {wins} of {len(eq)} "
           f"(relative move {ev['delta']}, {ev['n_models']} trained models)")
    if wins == len(eq):
        return Outcome.CONFIRMED, txt + ": a higher xi means the layer moved less " \
            "(as the identity says).", ""
    return Outcome.REFUTED, txt + ": a moved layer outscored an unmoved one of its size " \
        "(the identity failed numerically: a bug to look into).", ""


RULE_DIRECTION = Rule(
    "direction",
    "A derivation, checked numerically (its verdict is a proof, not an experiment): at "
    "equal size Eq. 9 orders layers by cosine, an untouched layer has cosine exactly 1 and "
    "a layer moved by delta x its norm orthogonally has cosine 1/sqrt(1 + delta^2) < 1, so "
    "the untouched layer must score higher. The reviewer's perturbation test checks it on "
    "each seed's trained model (delta = {delta}): CONFIRMED when the untouched layer scores "
    "higher in every equal-size pair; REFUTED when any moved layer scores higher than an "
    "untouched one of its size (only a numerical failure of the identity could do that); "
    "INCONCLUSIVE when the model has no two layers of equal size.",
    _direction_decide, kind="derivation")


def _selection_decide(ev):
    js, jz, rho = ev["j_stable"], ev["j_size"], ev["rho"]
    hi, lo = ev["j_high"], ev["j_low"]
    txt = (f"over {ev['n_updates']} client updates: Jaccard(top-gamma by xi, gamma most "
           f"stable) = {js:.3f}, Jaccard(top-gamma by xi, gamma smallest) = {jz:.3f}, "
           f"Spearman(xi, 1/dim) = {rho:.3f}")
    if js >= hi:
        return Outcome.CONFIRMED, txt + ": top-gamma keeps the most stable layers.", ""
    if js < lo and jz >= hi:
        return Outcome.REFUTED, txt + ": top-gamma keeps the smallest layers, not the " \
            "most stable ones.", ""
    return Outcome.INCONCLUSIVE, txt + ": neither description fits well.", \
        "models where stability and size disagree more clearly"


RULE_SELECTION = Rule(
    "selection",
    "Selection statistics on the top-gamma arm's real client updates (last round, every "
    "client of every cluster, every seed; exact, no interval): CONFIRMED when the mean "
    "Jaccard overlap of top-gamma by xi with the gamma highest-cosine (most stable) layers "
    "is at least {j_high}; REFUTED when it is below {j_low} while the overlap with the "
    "gamma smallest layers is at least {j_high}; INCONCLUSIVE otherwise. Thresholds are "
    "stated choices fixed before the run (0.8: about one layer in ten differs).",
    _selection_decide)


def _accuracy_decide(ev):
    tw = ev["three_way"]
    # the reviewer's own test: bottom-gamma matches or beats top-gamma -> the reviewer is
    # right; top-gamma beats bottom-gamma (SUPPORTED of "top beats bottom") -> against
    out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
    needs = "" if tw.seeds_needed is None else f"about {tw.seeds_needed} seeds"
    return out, tw.reason + ev["sens_txt"], needs or "more seeds or a larger setting", \
        {"flip": tw.flip, "resolution": ev["resolution"], "unit": "accuracy"}


RULE_ACCURACY = Rule(
    "accuracy-top-vs-bottom",
    "The reviewer's own test, in both directions: agnostic-client accuracy after the fixed "
    "local steps, top-gamma (A) vs bottom-gamma (B), paired by seed. {rule}; equivalence "
    "counts only with assay sensitivity (a planted handicap of size d: round(d x n_test) "
    "correct predictions of the top-gamma model, drawn at random, relabelled wrong; "
    "detected by the same rule: CI of top minus planted above 0). Map onto the reviewer: top beats bottom -> REFUTED; "
    "bottom matches (equivalence) or beats top -> CONFIRMED; else INCONCLUSIVE. Gated by "
    "the premise (the gene beats no gene): INCONCLUSIVE where it is not reproduced.",
    _accuracy_decide)


def _fair_decide(ev):
    ctl = ev["control"]
    if ev["n_differ"] == 0:
        return Outcome.INCONCLUSIVE, (
            f"{ctl}: its gene is top-gamma's own gene on all {ev['n']} seeds (every "
            f"cluster){ev['size_txt']}: no gene of this kind differs from the top one in "
            "this model at this gamma, so there is nothing to compare"), ev["vacuous_needs"]
    tw = ev["three_way"]
    out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
    needs = "" if tw.seeds_needed is None else f"about {tw.seeds_needed} seeds"
    subset = ("" if ev["n_differ"] == ev["n"] else
              f" (the {ev['n_differ']} of {ev['n']} seeds where the genes differ)")
    return out, f"{ctl}{subset}: {tw.reason}{ev['size_txt']}{ev['sens_txt']}", \
        needs or "more seeds or a larger setting", \
        {"flip": tw.flip, "resolution": ev["resolution"], "unit": "accuracy"}


def _fair_rule(part: str, control: str, what: str) -> Rule:
    return Rule(
        part,
        f"The reviewer's test made fair ({what}): agnostic-client accuracy after the "
        f"fixed local steps, top-gamma (A) vs {control} (B), paired by seed over the "
        "seeds where the two cluster genes differ (a seed where they coincide would "
        "compare a gene with itself). {rule}, at alpha = {alpha} (0.05 split over the "
        "two fair controls, Bonferroni); equivalence counts only with the accuracy "
        "part's assay sensitivity. Map onto the reviewer: top beats the control -> "
        "REFUTED; the control matches (equivalence) or beats top -> CONFIRMED; else "
        "INCONCLUSIVE, and INCONCLUSIVE when the genes coincide on every seed. Gated by "
        "the premise (the gene beats no gene).",
        _fair_decide)


RULE_FAIR_BYTES = _fair_rule(
    "fair-bytes", "bottom-gamma-bytes",
    "equal gene size: the lowest-xi layers, whole, walked from the lowest score upward, "
    "each taken when it brings the gene's parameter count closer to that of top-gamma on "
    "the same client update")
RULE_FAIR_NO_CLASSIFIER = _fair_rule(
    "fair-no-classifier", "bottom-gamma-no-classifier",
    "no classifier: the gamma lowest-xi layers other than the last linear layer, so the "
    "bottom gene does not carry the classifier trained on the known classes")


def _sweep_decide(ev):
    rows = ev["rows"]
    if len(rows) < 2:
        return Outcome.INCONCLUSIVE, "no gamma sweep at this scale", \
            "a scale with a gamma sweep (gamma_sweep, sweep_seeds)"
    txt = "; ".join(f"gamma = {r['gamma']:g} ({r['gamma_layers']} layers, n = {r['n']}): "
                    f"top - bottom {r['diff']:+.4f} [{r['low']:.4f}, {r['high']:.4f}], "
                    f"premise {r['premise']} -> {r['verdict']}" for r in rows)
    words = {r["verdict"] for r in rows}
    if words == {"REFUTED"}:
        return Outcome.REFUTED, txt + ": top-gamma beats bottom-gamma at every gamma.", ""
    if words == {"CONFIRMED"}:
        return Outcome.CONFIRMED, txt + ": bottom-gamma matches or beats top-gamma at " \
            "every gamma.", ""
    if {"REFUTED", "CONFIRMED"} <= words:
        return Outcome.INCONCLUSIVE, txt + ": the outcome depends on gamma.", \
            "a gamma fixed by the paper (the rows disagree)"
    return Outcome.INCONCLUSIVE, txt + ".", (
        f"every row decided: the rule needs at least {stats.MIN_PAIRS} pairs a row and "
        "each row's own premise reproduced")


RULE_GAMMA_SWEEP = Rule(
    "gamma-sweep",
    "The reviewer's accuracy test at each gene size gamma: the base gamma ({base}, all "
    "seeds: the part accuracy-top-vs-bottom) and each gamma of the sweep ({sweep}, the "
    "first {sweep_seeds} seeds), top-gamma vs bottom-gamma with the same three-way rule "
    "at the same alpha, each row gated by its OWN premise (top-gamma at that gamma beats "
    "no gene) and with its own assay sensitivity (a planted handicap in that row's "
    "top-gamma runs). CONFIRMED when every row is CONFIRMED, REFUTED when every row is "
    "REFUTED, INCONCLUSIVE otherwise (rows that disagree: the outcome depends on gamma).",
    _sweep_decide)


QUESTIONS = (
    Question("prose-inverted",
             "Does a high Eq. 9 score mark the layers that moved least, the reverse of "
             "what the prose says it measures?",
             ("referee_report.major_comments[1]", "falsifier"), ("direction",),
             kind="proof"),
    Question("top-gamma-keeps-stable",
             "On real client updates, does the printed top-gamma selection keep the most "
             "stable (highest-cosine) layers?", ("referee_report.major_comments[1]",),
             ("selection",)),
    Question("selection-reversal",
             "Does reversing the selection (bottom-gamma) match or beat the printed "
             "top-gamma for agnostic clients (the reviewer's own accuracy test)?",
             ("falsifier",), ("accuracy-top-vs-bottom",),
             decides="the learnGene's own gain over no gene must reproduce first"),
    Question("fair-reversal",
             "Made fair (a bottom gene of top-gamma's size; a bottom gene without the "
             "classifier trained on the known classes), does reversing the selection match "
             "or beat top-gamma? Yes if it does under either control; no if top-gamma "
             "beats both.",
             ("referee_report.minor_comments[3]",), ("fair-bytes", "fair-no-classifier"),
             how="any",
             decides="the learnGene's own gain over no gene must reproduce first"),
    Question("gamma-sweep",
             "Does the reviewer's accuracy test (top- vs bottom-gamma) come out the same at "
             "every gene size gamma of the sweep?",
             ("referee_report.minor_comments[3]",), ("gamma-sweep",), sweeps=True,
             decides="each gamma's own premise reproduced, with enough sweep seeds for "
                     "the rule to decide"),
)

COMBINATION = questions.combination(QUESTIONS)


def _premise_decide(tw, d) -> Premise:
    return kit.premise("the learnGene (top-gamma, as printed) beats no gene on agnostic "
                       "clients (accuracy after the same local steps)", tw,
                       rule=f"three-way rule, A = top-gamma gene, B = no gene, margin 0, "
                            f"d = {d}",
                       estimate=Estimate.of("premise_top_minus_nogene", tw.difference,
                                            "accuracy",
                                            "paired by seed: top-gamma gene - no gene"))


# ----------------------------------------------------------------------- analysis
def _gene_match(results, seeds, arm) -> dict:
    """How ``arm``'s cluster genes compare with top-gamma's, per seed: whether they are
    the same layers in every cluster, the mean Jaccard overlap (over clusters), and the
    ratio of the mean gene parameter counts (``gene_param_bytes``, 4 bytes a parameter)."""
    same, jac, ratio = [], [], []
    for s in seeds:
        a, t = results[RunSpec(arm, s)], results[RunSpec("top-gamma", s)]
        ga, gt = [list(g) for g in a["genes"]], [list(g) for g in t["genes"]]
        same.append(ga == gt)
        jac.append(float(np.mean([_jaccard(x, y) for x, y in zip(ga, gt)])))
        ratio.append(float(np.mean(a["gene_param_bytes"]) / np.mean(t["gene_param_bytes"])))
    return {"same": np.array(same), "jaccard": np.array(jac), "ratio": np.array(ratio)}


def _cell(results, seeds, setting, d, alpha, resolution):
    """The reviewer's test in one gamma-sweep cell, with that cell's own premise and
    assay sensitivity: (part, three-way top vs bottom, premise, per-arm accuracies)."""
    acc = results_table(results, "agnostic_acc", SWEEP_ARMS, seeds, setting)
    top, bot = acc["top-gamma"], acc["bottom-gamma"]
    nog = results_table(results, "agnostic_acc_nogene", ["top-gamma"], seeds,
                        setting)["top-gamma"]
    pl = results_table(results, "agnostic_acc_planted", ["top-gamma"], seeds,
                       setting)["top-gamma"]
    sens = stats.three_way(top, pl, margin=0.0, equivalence_margin=d, alpha=alpha)
    sensitive = sens.outcome == "SUPPORTED"
    tw = stats.three_way(top, bot, margin=0.0, equivalence_margin=d, alpha=alpha,
                         sensitive=sensitive)
    prem = _premise_decide(stats.three_way(top, nog, margin=0.0, equivalence_margin=d,
                                           alpha=alpha, sensitive=sensitive), d)
    txt = (f" Assay sensitivity here: top-gamma minus its planted copy "
           f"{sens.difference.mean:.4f} -> {'detected' if sensitive else 'NOT detected'}.")
    part = premise_gate(RULE_ACCURACY({"three_way": tw, "sens_txt": txt,
                                       "resolution": resolution},
                                      params={"rule": stats.three_way_text(
                                          0.0, d, alpha, len(seeds))}), prem)
    return part, tw, prem, acc


def analyse(results, ctx: RunContext) -> Analysis:
    seeds = list(ctx.seeds)
    arms = [a.name for a in ARMS]
    cfg = ctx.config
    alpha = ALPHA * float(getattr(ctx, "alpha_fraction", 1.0))
    d = float(cfg.get("equivalence_margin", EQUIV_MARGIN))
    tops = [results[RunSpec("top-gamma", s)] for s in seeds]
    pairs = [dict(r, seed=s) for s, t in zip(seeds, tops) for r in t["perturbation"]]
    sel = [t["selection"] for t in tops]
    n_upd = sum(s_["n_updates"] for s_ in sel)
    rho = np.array([s_["rho"] for s_ in sel])
    js = np.array([s_["j_stable"] for s_ in sel])
    jz = np.array([s_["j_size"] for s_ in sel])

    mean_est = functools.partial(mean_estimate, no_spread_point=True)

    acc = results_table(results, "agnostic_acc", arms, seeds)
    known = results_table(results, "known_acc", arms, seeds)
    nogene = results_table(results, "agnostic_acc_nogene", ["top-gamma"], seeds)["top-gamma"]
    planted = results_table(results, "agnostic_acc_planted", ["top-gamma"], seeds)["top-gamma"]
    n_test = [n for t in tops for n in t["n_test_agnostic"]]
    n_agn = len(tops[0]["n_test_agnostic"])
    resolution = 1.0 / (n_agn * float(np.median(n_test)))  # one test example, mean of clients
    # assay sensitivity at the margin's scale: the planted handicap of expected size d
    sens = stats.three_way(acc["top-gamma"], planted, margin=0.0, equivalence_margin=d,
                           alpha=alpha)
    sensitive = sens.outcome == "SUPPORTED"
    sens_txt = (f" Assay sensitivity at d = {d}: top-gamma minus its planted copy "
                f"(planted {d}, up to one test example) = {sens.difference.mean:.4f}, {100 * (1 - alpha):g}% CI "
                f"[{sens.difference.low:.4f}, {sens.difference.high:.4f}] -> "
                f"{'detected (sensitive)' if sensitive else 'NOT detected'}.")
    tw = stats.three_way(acc["top-gamma"], acc["bottom-gamma"], margin=0.0,
                         equivalence_margin=d, alpha=alpha, sensitive=sensitive)
    prem_tw = stats.three_way(acc["top-gamma"], nogene, margin=0.0, equivalence_margin=d,
                              alpha=alpha, sensitive=sensitive)
    premise = _premise_decide(prem_tw, d)

    ev_dir = {"pairs": pairs, "n_models": len(seeds), "delta": DELTA}
    ev_sel = {"j_stable": float(js.mean()), "j_size": float(jz.mean()),
              "rho": float(rho.mean()), "n_updates": n_upd, "j_high": J_HIGH,
              "j_low": J_LOW}
    rule_txt = stats.three_way_text(0.0, d, alpha, len(seeds))
    parts = (RULE_DIRECTION(ev_dir, params={"delta": DELTA}),
             RULE_SELECTION(ev_sel, params={"j_high": J_HIGH, "j_low": J_LOW}),
             premise_gate(RULE_ACCURACY({"three_way": tw, "sens_txt": sens_txt,
                                         "resolution": resolution},
                                        params={"rule": rule_txt}), premise))

    # ---- issue 30: the fair controls (Bonferroni over the two) and the gamma sweep
    alpha_fair = alpha / len(FAIR)
    fair, fair_tw, match = [], {}, {}
    for arm, rule in (("bottom-gamma-bytes", RULE_FAIR_BYTES),
                      ("bottom-gamma-no-classifier", RULE_FAIR_NO_CLASSIFIER)):
        m = match[arm] = _gene_match(results, seeds, arm)
        keep = [i for i in range(len(seeds)) if not m["same"][i]]
        size_txt = (f"; its gene holds {m['ratio'].mean():.2f} x top-gamma's parameters "
                    f"(mean over seeds), Jaccard overlap with top-gamma's layers "
                    f"{m['jaccard'].mean():.2f}")
        ev = {"control": arm, "n": len(seeds), "n_differ": len(keep), "size_txt": size_txt,
              "sens_txt": sens_txt, "resolution": resolution,
              "vacuous_needs": "a model whose layer sizes leave a bottom gene of top-gamma's "
                               "size other than top-gamma's own (or a gene of partial "
                               "layers), or another gamma"}
        n_rule = len(keep)
        if keep:
            fair_tw[arm] = ev["three_way"] = stats.three_way(
                acc["top-gamma"][keep], acc[arm][keep], margin=0.0, equivalence_margin=d,
                alpha=alpha_fair, sensitive=sensitive)
        fair.append(premise_gate(rule(ev, params={
            "rule": stats.three_way_text(0.0, d, alpha_fair, n_rule),
            "alpha": f"{alpha_fair:g}"}), premise))

    base_gamma = float(cfg["gamma_fraction"])
    sweep_rows = [{"setting": gamma_setting(base_gamma), "gamma": base_gamma,
                   "gamma_layers": tops[0]["gamma"], "n": len(seeds), "diff": tw.difference.mean,
                   "low": tw.difference.low, "high": tw.difference.high,
                   "premise": premise.status, "verdict": parts[2].verdict.value,
                   "top": float(acc["top-gamma"].mean()),
                   "bottom": float(acc["bottom-gamma"].mean()), "base": True}]
    sweep_est = []
    for g in cfg.get("gamma_sweep", ()):
        st = gamma_setting(g)
        sw = [s for s in seeds if all(RunSpec(a, s, st) in results for a in SWEEP_ARMS)]
        if len(sw) < 2:
            continue
        cpart, ctw, cprem, cacc = _cell(results, sw, st, d, alpha, resolution)
        sweep_rows.append({"setting": st, "gamma": float(g),
                           "gamma_layers": results[RunSpec("top-gamma", sw[0], st)]["gamma"],
                           "n": len(sw), "diff": ctw.difference.mean,
                           "low": ctw.difference.low, "high": ctw.difference.high,
                           "premise": cprem.status, "verdict": cpart.verdict.value,
                           "top": float(cacc["top-gamma"].mean()),
                           "bottom": float(cacc["bottom-gamma"].mean()), "base": False})
        sweep_est.append(Estimate.of(f"diff_agnostic_top_minus_bottom_{st.replace('=', '_')}",
                                     ctw.difference, "accuracy",
                                     f"{st}: top-gamma - bottom-gamma, paired by seed "
                                     f"(n = {len(sw)}, sweep seeds)"))
    sweep_part = RULE_GAMMA_SWEEP({"rows": sweep_rows}, params={
        "base": f"{base_gamma:g}",
        "sweep": ", ".join(f"{float(g):g}" for g in cfg.get("gamma_sweep", ())) or "none",
        "sweep_seeds": int(cfg.get("sweep_seeds", 0))})
    parts = parts + tuple(fair) + (sweep_part,)
    settings = tuple({"setting": r["setting"], "verdict": r["verdict"], "base": r["base"],
                      "closest_to_paper": False, "why": "",
                      "note": f"top - bottom {r['diff']:+.4f} [{r['low']:.4f}, "
                              f"{r['high']:.4f}], n = {r['n']}; premise here: "
                              f"{r['premise']}"} for r in sweep_rows)

    def frac(rows, key):
        return sum(r[key] for r in rows) / len(rows) if rows else float("nan")

    by_size = {}
    for rel in ("equal", "perturbed smaller", "perturbed larger"):
        rows = [r for r in pairs if r["size"] == rel]
        by_size[rel] = (len(rows), frac(rows, "untouched_higher"),
                        frac(rows, "untouched_higher_no_dim"))
    est = [
        Estimate("perturb_equal_untouched_higher", by_size["equal"][1], unit="fraction",
                 n=by_size["equal"][0], description="equal-size pairs where the untouched "
                 "layer scores higher (exact count)"),
        Estimate("perturb_smaller_untouched_higher", by_size["perturbed smaller"][1],
                 unit="fraction", n=by_size["perturbed smaller"][0],
                 description="moved layer smaller than the untouched one"),
        Estimate("perturb_larger_untouched_higher", by_size["perturbed larger"][1],
                 unit="fraction", n=by_size["perturbed larger"][0],
                 description="moved layer larger than the untouched one"),
        mean_est("xi_dim_rank_correlation", rho, "rho",
                 "Spearman(xi, 1/dim) over layers, mean over client updates, per seed"),
        mean_est("jaccard_top_vs_most_stable", js, "Jaccard",
                 "top-gamma by xi vs the gamma highest-cosine layers"),
        mean_est("jaccard_top_vs_smallest", jz, "Jaccard",
                 "top-gamma by xi vs the gamma smallest layers"),
    ]
    for a in arms:
        est.append(mean_est(f"agnostic_acc_{a}", acc[a], "accuracy",
                            f"agnostic clients from the {a} learnGene"))
    est.append(mean_est("agnostic_acc_no-gene", nogene, "accuracy",
                        "agnostic clients from fresh weights (no learnGene)"))
    est.append(mean_est("agnostic_acc_planted", planted, "accuracy",
                        f"top-gamma's predictions with a planted handicap of {d}"))
    for a in arms:
        est.append(mean_est(f"known_acc_{a}", known[a], "accuracy",
                            f"known clients, their model after the last round, {a}"))
    diffs = []
    for a in arms[1:] + ["no-gene", "planted"]:
        b = nogene if a == "no-gene" else planted if a == "planted" else acc[a]
        dd = stats.paired_difference(acc["top-gamma"], b, level=1 - alpha, method="hall")
        est.append(Estimate.of(f"diff_agnostic_top_minus_{a}", dd, "accuracy",
                               f"paired by seed: top-gamma - {a}"))
        diffs.append((a, dd))
    est.append(Estimate("chance_level_known", 1.0 / len(cfg["known_classes"]),
                        unit="accuracy", description="1 / number of known classes"))
    for arm, m in match.items():
        est.append(mean_est(f"gene_params_ratio_{arm}", m["ratio"], "ratio",
                            f"{arm}'s cluster gene parameters / top-gamma's, per seed"))
        est.append(mean_est(f"gene_jaccard_{arm}_vs_top", m["jaccard"], "Jaccard",
                            f"{arm}'s cluster gene layers vs top-gamma's, per seed"))
        est.append(Estimate(f"seeds_gene_differs_{arm}", float((~m["same"]).sum()),
                            unit="seeds", n=len(seeds),
                            description=f"seeds where {arm}'s gene differs from "
                                        "top-gamma's in some cluster (exact count)"))
    bm = _gene_match(results, seeds, "bottom-gamma")
    est.append(mean_est("gene_params_ratio_bottom-gamma", bm["ratio"], "ratio",
                        "bottom-gamma's cluster gene parameters / top-gamma's, per seed"))
    est.extend(sweep_est)

    genes = {a: results[RunSpec(a, seeds[0])]["genes"] for a in arms}
    dims = tops[0]["dims"]
    gamma = tops[0]["gamma"]
    tables = [
        Table("Perturbation test: does the untouched layer score higher?",
              ("size relation", "pairs", "with 1/dim (Eq. 9)", "cos alone"),
              tuple((k, v[0], round(v[1], 4), round(v[2], 4)) for k, v in by_size.items()),
              note=f"All ordered pairs of layers, {len(seeds)} trained models (top-gamma, "
                   f"cluster 0, last round), relative move {DELTA}."),
        Table(f"Layers chosen (seed {seeds[0]}, per cluster; gamma = {gamma} of "
              f"{tops[0]['n_layers']})", ("arm", "learnGene layers"),
              tuple((a, " | ".join(", ".join(g) for g in genes[a])) for a in arms),
              note="Layer sizes: " + ", ".join(f"{l} {n}" for l, n in dims.items()) +
                   "; the gamma smallest: " + ", ".join(sel[0]["smallest"])),
        Table("Agnostic clients: paired differences (top-gamma minus other)",
              ("other", "mean", f"{100 * (1 - alpha):g}% CI low",
               f"{100 * (1 - alpha):g}% CI high", "n"),
              tuple((a, round(x.mean, 4), round(x.low, 4), round(x.high, 4), x.n)
                    for a, x in diffs),
              note="Hall's skewness-corrected t intervals at the rule's alpha, descriptive; "
                   "the rule's own interval is wider (a skewness allowance) and must agree "
                   "with an exact sign test."),
        Table("Known clients: accuracy by arm (mean over seeds)",
              ("arm", "known-client accuracy", "chance level"),
              tuple((a, round(float(np.mean(known[a])), 4),
                     round(1.0 / len(cfg["known_classes"]), 4)) for a in arms)),
        Table("Fair controls of the reversal: top-gamma against each",
              ("control", "gene params / top's", "Jaccard with top's layers",
               "seeds where genes differ", "top minus control",
               f"{100 * (1 - alpha_fair):g}% CI", "verdict"),
              tuple((a, round(float(match[a]["ratio"].mean()), 3),
                     round(float(match[a]["jaccard"].mean()), 3),
                     f"{int((~match[a]['same']).sum())} of {len(seeds)}",
                     round(fair_tw[a].difference.mean, 4) if a in fair_tw else "-",
                     (f"[{fair_tw[a].difference.low:.4f}, {fair_tw[a].difference.high:.4f}]"
                      if a in fair_tw else "-"), p.verdict.value)
                    for a, p in zip(FAIR, fair)) +
              (("bottom-gamma (unfair, for reference)", round(float(bm["ratio"].mean()), 3),
                round(float(bm["jaccard"].mean()), 3), "-", round(tw.difference.mean, 4),
                f"[{tw.difference.low:.4f}, {tw.difference.high:.4f}]",
                parts[2].verdict.value),),
              note=f"Paired by seed over the seeds where the genes differ; alpha "
                   f"{alpha_fair:g} each (Bonferroni over the two controls); gated by the "
                   "premise. Gene sizes are the cluster genes' parameter counts."),
        Table("Gamma sweep: the reviewer's test at each gene size",
              ("gamma", "layers in gene", "seeds", "top-gamma", "bottom-gamma",
               "top minus bottom", f"{100 * (1 - alpha):g}% CI", "premise here",
               "verdict"),
              tuple((f"{r['gamma']:g}" + (" (base)" if r["base"] else ""),
                     r["gamma_layers"], r["n"], round(r["top"], 4), round(r["bottom"], 4),
                     round(r["diff"], 4), f"[{r['low']:.4f}, {r['high']:.4f}]",
                     r["premise"], r["verdict"]) for r in sweep_rows),
              note="Agnostic-client accuracy, mean over seeds; each row its own premise "
                   "(top-gamma at that gamma beats no gene) and assay sensitivity."),
    ]
    u0 = tops[0]["updates"][0]
    names = list(u0["xi"])
    figs = [Figure("xi_vs_dim", "Eq. 9 score against layer size (one client update)",
                   "parameters in layer (log10)", "xi (log10)",
                   ({"label": "layers", "x": [float(np.log10(dims[l])) for l in names],
                     "y": [float(np.log10(max(u0["xi"][l], 1e-12))) for l in names]},),
                   caption="Cosines are all near 1, so log xi falls on a line of slope -1."),
            Figure("agnostic_acc", "Agnostic-client accuracy by arm (per seed)", "seed",
                   "accuracy",
                   tuple({"label": a, "x": seeds, "y": acc[a].tolist()} for a in arms) +
                   ({"label": "no-gene", "x": seeds, "y": nogene.tolist()},))]
    acc_part = parts[2]
    notes = [
        f"Premise: {premise.effect}: {premise.status} (top minus no gene "
        f"{prem_tw.difference.mean:.4f}, CI [{prem_tw.difference.low:.4f}, "
        f"{prem_tw.difference.high:.4f}]). The accuracy part explains where that gain comes "
        "from, so it is gated by it; `direction` and `selection` are about the score and "
        "are not gated.",
        f"The reviewer's own test (top- vs bottom-gamma) enters the verdict both ways; here "
        f"it says {acc_part.verdict.value} (top minus bottom {tw.difference.mean:.4f}, CI "
        f"[{tw.difference.low:.4f}, {tw.difference.high:.4f}])" +
        (": the consequence the reviewer draws goes AGAINST the reviewer, while the "
         "derivation behind it (`prose-inverted`) stands; the two are separate questions "
         "with separate verdicts." if acc_part.verdict == Outcome.REFUTED else "."),
        "Direction is a derivation: at equal size Eq. 9 orders layers by cosine, and a moved "
        "layer's cosine is below 1, so the untouched layer always scores higher; the prose's "
        "reading (high xi = strong private-data influence) is the reverse of what the "
        "formula measures. The perturbation test only checks the identity numerically.",
        f"Size: over trained layers the cosines sit near 1 and xi follows 1/dim almost "
        f"exactly (Spearman {rho.mean():.3f}); with different sizes the moved SMALLER layer "
        f"still outscores an untouched larger one in "
        f"{1 - by_size['perturbed smaller'][1]:.0%} of pairs. Which layers top-gamma keeps "
        "is therefore mostly a matter of their size.",
        f"Caveat on `selection`: in this model the smallest layers (norm layers, conv1) "
        f"are also the ones that move least, so 'most stable' and 'smallest' pick nearly the "
        f"same set (Jaccard {js.mean():.3f} and {jz.mean():.3f}). The thresholds "
        f"{J_HIGH}/{J_LOW} are stated choices, not taken from the results.",
        "Known clients (issue 16, item 7): as printed (Algorithm 1 line 4), a client starts "
        "every round from the FULL cluster model, and the server averages only uploaded "
        "layers, so a layer nobody uploads is reset to its initial value every round. With "
        "top-gamma (the smallest layers) that is nearly every weight: the arm "
        f"`top-gamma-reset` shows that literal reading, known-client accuracy "
        f"{float(np.mean(known['top-gamma-reset'])):.3f} against a chance level of "
        f"{1 / len(cfg['known_classes']):.3f}. The verdict's arms use our stated reading "
        "(`local_layers = keep`): every client trains all layers and keeps its own copy; "
        "the cluster model overwrites only the aggregated layers; known-client accuracy "
        f"then {float(np.mean(known['top-gamma'])):.3f}. Which way it pushes: the reset "
        "reading trains the gene's small layers against random large ones, so it handicaps "
        "top-gamma relative to bottom-gamma (whose large layers are shared) - i.e. towards "
        "the reviewer.",
        f"Thresholds: d = {d} (a stated multiple of the resolution, about "
        f"{d / resolution:.1f} test examples of the mean agnostic accuracy; one example = "
        f"{resolution:.4f}); alpha = {alpha:g} (0.05 x the "
        f"look's alpha fraction {float(getattr(ctx, 'alpha_fraction', 1.0)):g}). Assay "
        f"sensitivity is checked with a planted handicap of size d through the model's real "
        f"predictions (round(d x n) correct predictions relabelled wrong): {sens.outcome}. "
        "The planted copy shares the top-gamma arm's training, so it shows only that the "
        "metric resolves d; between two trained arms the seed noise is far larger: the "
        f"smallest effect of top vs bottom the rule itself decides at n = {len(seeds)} is "
        + (f"{stats.rule_mde(len(seeds), alpha) * tw.difference.sd:.4f}"
           if stats.rule_mde(len(seeds), alpha) is not None else "none (it cannot decide)")
        + ", so an "
        "equivalence within d is out of reach at this scale and the reviewer's test can in "
        "practice only go against the reviewer or stay undecided here.",
        f"The accuracy part runs on a small setting ({ctx.scale}): {len(seeds)} seeds; one "
        f"test example is 1/{min(n_test)} to 1/{max(n_test)} of an agnostic client's "
        "accuracy. A decision needs Hall's interval, widened by a skewness allowance, to "
        "agree with an exact sign test at alpha/2 a side; nothing is decided below 6 pairs.",
        "Deviations (named in audit/algorithms/genefl.py): clustering by average linkage of "
        "data-subspace distances; the Fisher threshold as a quantile; an empirical Fisher "
        "from one minibatch; the cluster learnGene = the gamma layers most uploaded in the "
        "last round; agnostic clients hold only classes the known clients never see (digits "
        "7-9: their pool is classes 5-9 minus every sample of the known classes 0-6); "
        "known clients keep their own layers (above).",
    ]
    # issue 30: the fair controls and the sweep, in words
    fb, fc = fair
    nb = int((~match["bottom-gamma-bytes"]["same"]).sum())

    def _said(p, arm):
        if arm not in fair_tw:
            return "cannot be compared"
        t_ = fair_tw[arm].difference
        return (f"top-gamma scores {t_.mean:+.4f} against it (CI [{t_.low:.4f}, "
                f"{t_.high:.4f}]): {p.verdict.value}")

    bytes_txt = (f"the byte-matched control is top-gamma's own gene on every seed (the only "
                 f"whole layers small enough to match top-gamma's "
                 f"{np.mean([np.mean(t['gene_param_bytes']) for t in tops]) / 4:.0f} "
                 f"parameters are top-gamma's layers), so it cannot be compared"
                 if nb == 0 else
                 f"against a bottom gene of about the same size "
                 f"({match['bottom-gamma-bytes']['ratio'].mean():.2f} x top-gamma's "
                 f"parameters, {nb} of {len(seeds)} seeds differ) "
                 + _said(fb, "bottom-gamma-bytes"))
    survives = ("survives both controls" if fb.verdict == fc.verdict == Outcome.REFUTED else
                "does not survive: a fair control matches or beats top-gamma"
                if Outcome.CONFIRMED in (fb.verdict, fc.verdict) else "is not decided by them")
    rows_txt = "; ".join(f"gamma {r['gamma']:g}: {r['diff']:+.4f} ({r['verdict']}, n = "
                         f"{r['n']})" for r in sweep_rows)
    fair_finding = Finding(
        f"Made fair, top beating bottom {survives}. Without the classifier trained on the "
        f"known classes (gene {match['bottom-gamma-no-classifier']['ratio'].mean():.1f} x "
        f"top-gamma's parameters, against {bm['ratio'].mean():.1f} x for plain "
        f"bottom-gamma), " + _said(fc, "bottom-gamma-no-classifier") + f"; {bytes_txt}.",
        ("diff_agnostic_top_minus_bottom-gamma-no-classifier",
         "diff_agnostic_top_minus_bottom-gamma-bytes",
         "gene_params_ratio_bottom-gamma-no-classifier"))
    sweep_finding = Finding(
        f"Across gene sizes, top minus bottom (agnostic accuracy, paired by seed): "
        f"{rows_txt}; the gamma-sweep question says {sweep_part.verdict.value}.",
        tuple(e.name for e in sweep_est))
    notes.append(
        f"Fair controls (issue 30): at layer granularity an equal-size bottom gene exists "
        f"only where the layer sizes allow it. Byte-matched: walking up from the lowest xi, "
        f"a layer is taken when it brings the count closer to top-gamma's; here the gene "
        f"holds {match['bottom-gamma-bytes']['ratio'].mean():.2f} x top-gamma's parameters "
        f"with Jaccard {match['bottom-gamma-bytes']['jaccard'].mean():.2f} to its layers "
        f"({nb} of {len(seeds)} seeds differ). Classifier excluded: bottom-gamma among the "
        f"layers other than the last linear one, "
        f"{match['bottom-gamma-no-classifier']['ratio'].mean():.1f} x top-gamma's "
        f"parameters. Each is compared with top-gamma at alpha {alpha_fair:g} (Bonferroni "
        f"over the two), gated by the same premise. The gamma sweep repeats the reviewer's "
        f"test with each gamma's own premise: {rows_txt}.")
    findings = (
        Finding(f"In practice the Eq. 9 score is a size ranking: over the trained layers "
                f"the cosines sit near 1, so xi follows 1/dim (Spearman {rho.mean():.3f}) and "
                f"top-gamma is the gamma smallest layers (Jaccard {jz.mean():.3f}); which "
                f"layers it keeps says little about how they moved.",
                ("xi_dim_rank_correlation", "jaccard_top_vs_smallest")),
        Finding(f"Reversing the selection: agnostic clients from the printed top-gamma gene "
                f"score {tw.difference.mean:+.4f} against bottom-gamma (paired by seed), and "
                f"the gene itself {prem_tw.difference.mean:+.4f} against no gene.",
                ("diff_agnostic_top_minus_bottom-gamma", "diff_agnostic_top_minus_no-gene")),
        fair_finding, sweep_finding,
    )
    tables.append(kit.misbehaviour_table(kit.misbehaving_seeds(acc, arms, seeds),
                                         len(seeds), "agnostic clients' accuracy"))
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(notes), premise=premise,
                    findings=findings, settings=settings,
                    caveats={"gamma-sweep": "gamma only: the clustering's SVD dimension, "
                                            "which the same record item names, is not swept"})


#: How the settings were chosen (audit.tuning: tuning seeds only, never a verdict's).
SEARCHES = (
    Search("full", "agnostic clients' local steps at full scale (finetune_steps), where "
           "the learnGene's own gain over no gene (the premise) stands out most from its "
           "seed-to-seed noise", tuning_seeds(3),
           ("10 steps: top-gamma gene 0.908, no gene 0.789, gene - no gene +0.119 "
            "(SD 0.016)",
            "20 steps: gene 0.954, no gene 0.829, gene - no gene +0.125 (SD 0.095)"),
           "10 steps (`audit tune genefl-inverted-cosine --scale full --arms top-gamma "
           "--metric agnostic_acc --grid finetune_steps=10,20`, then --metric "
           "agnostic_acc_nogene)",
           "the same mean gain with a sixth of the spread, and fewer local steps leave the "
           "agnostic clients' accuracy more dependent on which layers the gene holds, the "
           "comparison the reviewer's test makes; clients, rounds and clusters are sized "
           "to the data (digits' classes 7-9 hold 426 samples) and to about 45 minutes at "
           "the cap of 20 seeds, not by any result",
           test_metric_read=True),
)


CLAIM = Claim(
    searches=SEARCHES,
    id="genefl-inverted-cosine",
    paper=GENEFL,
    record=RecordRef(RECORDS[GENEFL.arxiv_id],
                     ("falsifier", "referee_report.major_comments[1]")),
    title="inverted cosine score",
    statement=("A high cosine to the previous weights means a layer moved little, so "
               "keeping the top-scored layers keeps the most stable ones, the opposite "
               "of what the prose says the score measures."),
    arms=ARMS,
    rules=(RULE_DIRECTION, RULE_SELECTION, RULE_ACCURACY, RULE_FAIR_BYTES,
           RULE_FAIR_NO_CLASSIFIER, RULE_GAMMA_SWEEP),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=True,
    # plain `audit run` without seeds: the first sequential look (the three-way rule
    # decides nothing below 6 pairs; a lock is reproduced with its own plan)
    default_seeds=tuple(range(10)),
    # no run reads validation data, so `audit tune` refuses every metric without
    # --allow-test-metric (the full-scale search read test data: flagged in SEARCHES)
    validation_metrics=(),
    scales=SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
    paper_numbers=(
        PaperNumber("learnGene size", "9.04 MB", "abstract", ""),
        PaperNumber("selection rule", "top gamma by descending xi", "Algorithm 1", ""),
    ),
)
