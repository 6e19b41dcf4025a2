"""Falsifier ``lips-dropout-control``: is LIPS's gain more than generic regularisation?

Paper: LIPS, arXiv 2506.00932v1. Review record: 2506.00932 ``skeptic_critique``
(``load_bearing_attack``, ``concrete_test``). CLAIMS.md section 4.

The reviewer's claim, paraphrased: the paper never runs a regularisation control
(dropout, weight decay or noise on the middle layers), so its accuracy gain is not shown
to come from curing layer inertia; the random-mask ablation beating the sensitivity
score on CIFAR-100 and the lack of a middle-only vs all-layers ablation point the same
way; tau0 and k were chosen on test data.

Parts: ``regularisation-controls`` and ``layer-targeting`` decide the verdict; two more,
reported beside it, answer other review comments: ``random-mask`` (LIPS vs the same
pruning with a random mask) and ``selection-optimism`` (how much choosing (tau0, k) on
the test splits instead of validation adds to LIPS's number, per run).

What we run (``audit.algorithms.lips``): FedBN and LIPS as printed, its ablations
(random mask, all layers, the released score and schedule) and three controls
(dropout on the middle layers, weight decay, Gaussian noise on the middle layers at
LIPS's period), each tuned with the same small grid chosen on the clients' validation
splits; plus two diagnostic arms: a known-worse arm (FedBN trained for half the rounds)
for assay sensitivity, and the paper's freeze test (middle layers frozen after round f).

Why this setting can separate arms (a prototype on 8x8 digits with 60 rounds sat at a
98 % ceiling): training is cut to a budget where FedBN is still improving (the
early-stopped arm is measurably worse, which the rule checks on the same seeds), each
client holds only 20 training images, and every client's test split is drawn from the
held-out digits test set (never seen by any client) with the client's own label
proportions, 30 images each, so the metric has 900 test decisions per seed.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Mapping

import numpy as np
import torch

from audit import stats
from audit.algorithms.lips import (FedBNProbe, gaussian_noise, grad_sensitivity,
                                   printed_schedule, prune, random_score,
                                   released_schedule, update_sensitivity)
from audit.claims import (LIPS, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit.verdict import Estimate, Outcome, Rule, any_of

CLAIM_ID = "lips-dropout-control"

# ------------------------------------------------------------------------------ arms
ARMS = (
    Arm("fedbn", "FedBN: dense local SGD, norm layers kept local, no server piece",
        "baseline (no LIPS)"),
    Arm("lips", "LIPS as printed: every k rounds prune the lowest |dw * w| fraction "
        "tau0 (1 - t/T) of each middle layer (T = run length)", "as printed (Sec. 4)"),
    Arm("lips-random", "LIPS with a uniformly random mask of the same size",
        "score: random instead of |dw * w| (paper Table 4 ablation)"),
    Arm("lips-all-layers", "LIPS pruning every conv and linear weight, not only the "
        "middle layers", "layer set: all weight layers instead of middle"),
    Arm("lips-as-released", "LIPS with the released score |grad * w| (last local "
        "minibatch) and the released schedule (T fixed at 300)",
        "score and schedule as in the released code"),
    Arm("fedbn-dropout-middle", "FedBN with dropout after every middle layer, rate tuned",
        "control: model option dropout_middle instead of pruning"),
    Arm("fedbn-weight-decay", "FedBN with local SGD weight decay, strength tuned",
        "control: weight decay instead of pruning"),
    Arm("fedbn-noise-middle", "FedBN + Gaussian noise (scale x layer std) added to the "
        "middle layers on LIPS's rounds with LIPS's decay", "control: noise instead of "
        "zeroing"),
    Arm("fedbn-short", "FedBN stopped early, after a fixed fraction of the rounds "
        "(known-worse arm for the assay-sensitivity check)", "rounds: short_fraction x R"),
    Arm("fedbn-freeze-middle", "FedBN whose middle layers get no update after round f "
        "(paper's Table 1 freeze test)", "local lr of middle layers 0 after round f"),
)
ARM_NAMES = tuple(a.name for a in ARMS)
LIPS_FAMILY = ("lips", "lips-random", "lips-all-layers", "lips-as-released")
CONTROLS = ("fedbn-dropout-middle", "fedbn-weight-decay", "fedbn-noise-middle")

# The tuning grid: the same budget (number of candidates) for every tuned arm.
# LIPS-family candidates are (tau0, k); noise is (sigma0, k); dropout a rate; wd a decay.
_GRID_SMOKE = {
    "lips": [(0.2, 5), (0.5, 5)],
    "lips-random": [(0.2, 5), (0.5, 5)],
    "lips-all-layers": [(0.2, 5), (0.5, 5)],
    "lips-as-released": [(0.2, 5), (0.5, 5)],
    "fedbn-dropout-middle": [0.1, 0.3],
    "fedbn-weight-decay": [1e-3, 1e-2],
    "fedbn-noise-middle": [(0.2, 5), (0.5, 5)],
}

_COMMON = dict(n_clients=30, n_train=20, n_val=10, n_test=30, alpha=0.1,
               model="vgg", width=0.25, batch_size=10, local_epochs=1, momentum=0.0,
               freeze_fraction=1 / 6, short_fraction=2 / 3, reference_round=2,
               equivalence_margin=2.0, alpha_family=0.05, alpha_beside=0.05,
               checkpoint_every=10)

SCALES = {
    "smoke": {**_COMMON, "dataset": "digits", "rounds": 30, "lr": 0.1, "grid": _GRID_SMOKE},
    "full": {**_COMMON, "dataset": "digits", "n_clients": 50, "width": 0.5, "rounds": 60,
             "lr": 0.1,
             "grid": _GRID_SMOKE},
    # The paper's main setting (Sec. 5): CIFAR-100, Dir(0.1), 100 clients x 100 samples,
    # ResNet-8, 300 rounds; read from ctx.data_dir on a GPU.
    "paper": {**_COMMON, "dataset": "cifar100", "n_clients": 100, "n_train": 100,
              "n_val": 20, "n_test": 50, "model": "resnet8", "width": 1.0,
              "batch_size": 32, "local_epochs": 1, "rounds": 300, "lr": 0.05,
              "grid": {"lips": [(0.2, 10), (0.5, 10)], "lips-random": [(0.2, 10), (0.5, 10)],
                       "lips-all-layers": [(0.2, 10), (0.5, 10)],
                       "lips-as-released": [(0.2, 10), (0.5, 10)],
                       "fedbn-dropout-middle": [0.1, 0.3],
                       "fedbn-weight-decay": [5e-4, 5e-3],
                       "fedbn-noise-middle": [(0.2, 10), (0.5, 10)]},
              # float32 by default; --set amp=bf16 autocasts the forward on CUDA (every
              # arm trains alike, so it cannot favour one; it was not faster for FLAYER's
              # ResNet-18 on an H200, and was not timed here)
              "amp": None},
}


# ------------------------------------------------------------------------------ data
@functools.lru_cache(maxsize=2)
def _digits_like(name: str):
    from audit.fl.data import load_dataset

    return load_dataset(name, seed=0)  # one fixed train/test split; the seeds vary clients


def _dataset(cfg: Mapping, ctx: RunContext, seed: int):
    from audit.fl.data import load_dataset

    name = cfg["dataset"]
    if name in ("digits", "synthetic"):
        return _digits_like(name)
    # the clients are drawn from it; a missing copy raises DatasetNotFound (an AuditError)
    return load_dataset(name, data_dir=ctx.data_dir)


def build_clients(ds, cfg: Mapping, seed: int):
    """The LIPS split (arXiv 2506.00932, Sec. 5): each client draws class proportions
    q_k ~ Dir(alpha) and then its own samples, independently of the other clients
    (clients may share images). Per client: ``n_train`` training and ``n_val``
    validation images from the training pool (disjoint within the client), and
    ``n_test`` test images drawn with the same q_k from the held-out test set.

    Deviation: the paper's per-client test data is not specified beyond the label skew;
    we draw it from the dataset's test split so no client ever trained on a test image.
    """
    from audit.fl.data import ClientData, FederatedData

    rng = np.random.default_rng([seed, 11])
    ytr, yte = ds.y_train.numpy(), ds.y_test.numpy()
    C = ds.num_classes
    pool_tr = [np.flatnonzero(ytr == c) for c in range(C)]
    pool_te = [np.flatnonzero(yte == c) for c in range(C)]

    def draw(pools, counts, exclude=()):
        out = []
        for pool, m in zip(pools, counts):
            if m:
                if len(exclude):
                    pool = np.setdiff1d(pool, exclude, assume_unique=True)
                out.append(rng.choice(pool, size=m, replace=m > len(pool)))
        return np.sort(np.concatenate(out)).astype(np.int64)

    clients = []
    for _ in range(cfg["n_clients"]):
        q = rng.dirichlet(np.full(C, cfg["alpha"]))
        tr = draw(pool_tr, rng.multinomial(cfg["n_train"], q))
        va = draw(pool_tr, rng.multinomial(cfg["n_val"], q), exclude=tr)
        te = draw(pool_te, rng.multinomial(cfg["n_test"], q))
        t = torch.from_numpy
        clients.append(ClientData(ds.x_train[t(tr)], ds.y_train[t(tr)], ds.x_train[t(va)],
                                  ds.y_train[t(va)], ds.x_test[t(te)], ds.y_test[t(te)]))
    return FederatedData(clients, ds.x_test, ds.y_test, C, ds.name)


# ------------------------------------------------------------------------------- runs
def candidates(cfg: Mapping, arm: str) -> list:
    """The tuning candidates of an arm (one ``None`` for untuned arms)."""
    return list(cfg["grid"].get(arm, [None]))


def specs(ctx: RunContext) -> list[RunSpec]:
    out = []
    for arm in ARM_NAMES:
        for i, _ in enumerate(candidates(ctx.config, arm)):
            out += [RunSpec(arm, s, f"cand={i}") for s in ctx.seeds]
    return out


def make_arm(arm: str, hp, cfg: Mapping):
    """(algorithm, model options, config overrides) of one arm at one candidate."""
    R = int(cfg["rounds"])
    ref = int(cfg["reference_round"])
    model_kw, over = {}, {}
    if arm in ("fedbn", "fedbn-short"):
        alg = FedBNProbe(reference_round=ref)
        if arm == "fedbn-short":
            over["rounds"] = int(round(R * cfg["short_fraction"]))
    elif arm == "fedbn-freeze-middle":
        alg = FedBNProbe(freeze_after=max(ref, int(round(R * cfg["freeze_fraction"]))),
                         reference_round=ref)
    elif arm in LIPS_FAMILY:
        tau0, k = hp
        if arm == "lips":
            piece = prune(update_sensitivity, printed_schedule(tau0, k, R), "middle")
        elif arm == "lips-random":
            piece = prune(random_score, printed_schedule(tau0, k, R), "middle")
        elif arm == "lips-all-layers":
            piece = prune(update_sensitivity, printed_schedule(tau0, k, R), "all")
        else:
            piece = prune(grad_sensitivity, released_schedule(tau0, k, R), "middle",
                          needs_grad=True)
        alg = FedBNProbe(post=piece, reference_round=ref)
    elif arm == "fedbn-noise-middle":
        sigma0, k = hp
        alg = FedBNProbe(post=gaussian_noise(printed_schedule(sigma0, k, R), "middle"),
                         reference_round=ref)
    elif arm == "fedbn-dropout-middle":
        alg = FedBNProbe(reference_round=ref)
        model_kw["dropout_middle"] = float(hp)
    elif arm == "fedbn-weight-decay":
        alg = FedBNProbe(reference_round=ref)
        over["weight_decay"] = float(hp)
    else:
        raise AuditError(f"unknown arm {arm!r}")
    return alg, model_kw, over


def run(spec: RunSpec, ctx: RunContext) -> dict:
    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_model

    cfg = ctx.config
    torch.set_num_threads(1 if ctx.device == "cpu" else torch.get_num_threads())
    cand = int(spec.setting.split("=")[1]) if spec.setting else 0
    hp = candidates(cfg, spec.arm)[cand]
    ds = _dataset(cfg, ctx, spec.seed)
    fed = build_clients(ds, cfg, spec.seed)
    alg, model_kw, over = make_arm(spec.arm, hp, cfg)
    rounds = int(over.get("rounds", cfg["rounds"]))
    fl = FLConfig(rounds=rounds, batch_size=int(cfg["batch_size"]), lr=float(cfg["lr"]),
                  momentum=float(cfg["momentum"]), local_epochs=int(cfg["local_epochs"]),
                  weight_decay=float(over.get("weight_decay", 0.0)), seed=int(spec.seed),
                  device=ctx.device, eval_every=rounds, eval_val=True,
                  layer_metrics=False, amp=cfg.get("amp"))

    def model_fn():
        return build_model(cfg["model"], ds.num_classes, ds.in_channels, ds.image_size,
                           width=cfg["width"], **model_kw)

    t0 = time.perf_counter()
    # a killed long run resumes from its last checkpoint (None when caching is off)
    h = run_federated(model_fn, fed, alg, fl, checkpoint=ctx.checkpoint(spec),
                      checkpoint_every=int(cfg.get("checkpoint_every", 5)))
    cos = [a.get("middle_cos") for a in h.algo]
    zero = [a["middle_zero_frac"] for a in h.algo]
    last = h.algo[-1]
    return {
        "hp": hp, "rounds": rounds,
        "test_acc": float(h.personal_acc[-1]),  # personalised, client test splits
        "val_acc": float(h.val_acc[-1]),  # personalised, client validation splits
        "n_test": int(sum(len(c.y_test) for c in fed.clients)),
        "middle_cos": cos, "middle_zero_frac": zero,
        "final_layer_cos": {k[4:]: v for k, v in last.items() if k.startswith("cos:")},
        "seconds": time.perf_counter() - t0,
    }


# ---------------------------------------------------------------------------- analysis
def _selected(results, arm: str, ctx: RunContext) -> dict:
    """Tuning: the candidate with the highest mean validation accuracy over the seeds
    (first one on ties); also the candidate tuning on test would have picked."""
    cands = candidates(ctx.config, arm)
    val, test = [], []
    for i, _ in enumerate(cands):
        rs = [results[RunSpec(arm, s, f"cand={i}")] for s in ctx.seeds]
        # rounded to 1e-9 points: float noise in the means would otherwise make an exact
        # tie look like a 1e-16 effect (and stats.seeds_needed finds no n for it)
        val.append(np.round(np.array([r["val_acc"] for r in rs]) * 100, 9))
        test.append(np.round(np.array([r["test_acc"] for r in rs]) * 100, 9))
    iv = int(np.argmax([v.mean() for v in val]))
    it = int(np.argmax([t.mean() for t in test]))
    runs = [results[RunSpec(arm, s, f"cand={iv}")] for s in ctx.seeds]
    per_seed_best = np.max(np.stack(test), axis=0)  # peeking at test in every run
    # the same per run with the choice made on validation (first candidate on ties)
    per_seed_val = np.stack(test)[np.argmax(np.stack(val), axis=0), np.arange(len(ctx.seeds))]
    grid_range = np.ptp(np.stack(test), axis=0)  # most a per-run choice could change
    return {"cand": iv, "hp": cands[iv], "test": test[iv], "val": val[iv],
            "per_seed_test_best": per_seed_best, "per_seed_val_choice": per_seed_val,
            "grid_range": grid_range,
            "test_cand": it, "test_hp": cands[it], "test_if_test_tuned": test[it],
            "runs": runs, "all_val": [float(v.mean()) for v in val],
            "all_test": [float(t.mean()) for t in test]}


def _decide_family(tws: Mapping[str, Any], sensitive: bool):
    """CONFIRMED when some comparison shows the alternative equivalent to LIPS or better
    (three-way outcome FALSIFIED for "LIPS beats it"); REFUTED when LIPS beats every one
    (all SUPPORTED); INCONCLUSIVE otherwise."""
    outs = {k: tw.outcome for k, tw in tws.items()}
    reason = " | ".join(f"lips vs {k}: {tw.reason}" for k, tw in tws.items())
    if not sensitive:
        reason = "no assay sensitivity shown (see the sensitivity estimate); " + reason
    if any(o == "FALSIFIED" for o in outs.values()):
        return Outcome.CONFIRMED, reason, ""
    if all(o == "SUPPORTED" for o in outs.values()):
        return Outcome.REFUTED, reason, ""
    needs = [f"{k}: {tw.seeds_needed} pairs" for k, tw in tws.items()
             if tw.outcome == "INCONCLUSIVE" and tw.seeds_needed]
    return Outcome.INCONCLUSIVE, reason, ("seeds that would detect the observed "
                                          "differences: " + ", ".join(needs)
                                          if needs else "a larger or different setting")


def _rule_text(what: str, names: str, m: int) -> str:
    return (f"{what}: for each of {names}, the three-way rule on the per-seed difference "
            f"LIPS - alternative of personalised test accuracy (points): paired "
            f"Student-t CI and paired TOST with equivalence margin d = 2.0 points (under "
            f"half of the paper's 4.76-point CIFAR-100 gain), alpha = 0.05 / {m} "
            f"(Bonferroni over the {m} comparisons of this falsifier), n = the seeds run. "
            f"Equivalence counts only if the assay-sensitivity check passed (FedBN beats "
            f"the early-stopped FedBN with the lower end of its 95% CI above d). "
            f"CONFIRMED when some alternative is equivalent to LIPS or better (CI below "
            f"0); REFUTED when LIPS beats every one (CI above 0); else INCONCLUSIVE.")


N_COMPARISONS = 4  # three controls + all layers
RULE_CONTROLS = Rule("regularisation-controls",
                     _rule_text("Regularisation controls",
                                "dropout / weight decay / noise on the middle layers",
                                N_COMPARISONS),
                     _decide_family)
RULE_LAYERS = Rule("layer-targeting",
                   _rule_text("Layer targeting", "LIPS on all weight layers",
                              N_COMPARISONS),
                   _decide_family)


def _decide_random(tw, sensitive: bool):
    """Reviewer (record: referee_report.major_comments[0]): the sensitivity score is not
    needed, random masks do as well. The three-way outcome about "LIPS beats LIPS with
    random masks": SUPPORTED -> the reviewer is REFUTED; FALSIFIED (random at least as
    good, or equivalent within d with assay sensitivity) -> CONFIRMED; else INCONCLUSIVE."""
    reason = f"lips vs lips-random: {tw.reason}"
    if not sensitive:
        reason = "no assay sensitivity shown (see the sensitivity estimate); " + reason
    if tw.outcome == "SUPPORTED":
        return Outcome.REFUTED, reason, ""
    if tw.outcome == "FALSIFIED":
        return Outcome.CONFIRMED, reason, ""
    return Outcome.INCONCLUSIVE, reason, (
        f"{tw.seeds_needed} pairs would detect the observed difference"
        if tw.seeds_needed else "a larger or different setting")


def _decide_selection(tw, sensitive: bool, grid_range: float, margin: float):
    """Reviewer (record: referee_report.major_comments[2]): picking tau0 and k on the test
    sets makes the reported number hard to interpret. The three-way outcome about "the
    test-chosen candidate's test accuracy exceeds the validation-chosen one's" (per run,
    LIPS): SUPPORTED -> CONFIRMED (picking on test inflates the number); FALSIFIED by
    equivalence within d, which counts only when the claim's assay check passed AND the
    grid leaves room for an optimism above d -> REFUTED; else INCONCLUSIVE."""
    reason = (f"test-chosen vs validation-chosen (lips, per run): {tw.reason} Mean per-run "
              f"range of the candidates' test accuracy: {grid_range:.3g} points "
              f"({'above' if grid_range > margin else 'not above'} d = {margin:g}).")
    if not sensitive:
        reason = ("no sensitivity shown (the assay check failed or the candidates' test "
                  "accuracies differ by d or less, so any choice is within d by "
                  "construction); " + reason)
    if tw.outcome == "SUPPORTED":
        return Outcome.CONFIRMED, reason, ""
    if tw.outcome == "FALSIFIED":
        return Outcome.REFUTED, reason, ""
    if tw.seeds_needed:
        needs = f"{tw.seeds_needed} pairs would detect the observed optimism"
    elif not sensitive:
        needs = "a wider tuning grid (candidates whose test accuracies differ by more than d)"
    else:
        needs = "a larger or different setting"
    return Outcome.INCONCLUSIVE, reason, needs


RULE_RANDOM = Rule(
    "random-mask",
    "Random mask (reported beside the verdict; not combined into it): the three-way rule "
    "on the per-seed difference LIPS - LIPS with a uniformly random mask of the same size "
    "(same seeds, same tuning budget, each at its validation-chosen candidate), paired "
    "Student-t CI and paired TOST with d = 2.0 points at alpha = 0.05 (its own question, "
    "outside the Bonferroni family of the combined parts). CONFIRMED (the score is not "
    "needed) when random is better (CI below 0) or equivalent within d with the claim's "
    "assay sensitivity shown; REFUTED when LIPS is better (CI above 0); else INCONCLUSIVE "
    "with the pairs needed.",
    _decide_random)
RULE_SELECTION = Rule(
    "selection-optimism",
    "Selection optimism (reported beside the verdict; not combined into it): in every run "
    "(seed) of LIPS, the candidate (tau0, k) with the highest test accuracy and the one "
    "with the highest validation accuracy are picked (first on ties); the per-seed "
    "optimism is the difference of their test accuracies (>= 0 by construction). The "
    "three-way rule on it (paired Student-t CI, TOST with d = 2.0 points, alpha = 0.05): "
    "CONFIRMED (picking on test inflates the reported number) when the CI lies above 0; "
    "REFUTED when TOST puts it within d, counted only if the claim's assay-sensitivity "
    "check passed and the candidates' test accuracies differ per run by more than d on "
    "average (else a within-d optimism holds by construction); else INCONCLUSIVE.",
    _decide_selection)
COMBINED_PARTS = ("regularisation-controls", "layer-targeting")


COMBINATION = any_of(
    COMBINED_PARTS,
    "the reviewer's claim (the mechanism is not isolated) holds when a control matches or "
    "beats LIPS, or all-layer pruning matches middle-only, and fails when LIPS beats every "
    "alternative. The parts random-mask and selection-optimism answer two other review "
    "comments; they are reported beside the verdict and do not enter it.")


def _est_diff(name, a, b, desc, unit="points"):
    return Estimate.of(name, stats.paired_difference(a, b, level=0.95, method="t"), unit,
                       desc)


def _est_mean(name, x, desc, unit="points"):
    return Estimate.of(name, stats.mean_interval(x, level=0.95), unit, desc)


def _inertia_note(acc, cos_final, cfg) -> str:
    c = stats.mean_interval(cos_final["fedbn"])
    f = stats.paired_difference(acc["fedbn-freeze-middle"], acc["fedbn"], level=0.95,
                                method="t")
    r = stats.paired_difference(acc["lips-random"], acc["lips"], level=0.95, method="t")
    f_round = max(int(cfg["reference_round"]),
                  int(round(cfg["rounds"] * cfg["freeze_fraction"])))
    return (f"Inertia: FedBN's middle layers end at a mean cosine of {c.mean:.3f} to their "
            f"round-2 weights (95% CI [{c.low:.3f}, {c.high:.3f}]; the paper reports above "
            f"0.95). Freezing them after round {f_round} changes accuracy by {f.mean:.2f} "
            f"points (95% CI [{f.low:.2f}, {f.high:.2f}]; the paper: under one point lost "
            f"after round 50 of 300). Random masks minus sensitivity masks: {r.mean:.2f} "
            f"points (95% CI [{r.low:.2f}, {r.high:.2f}]; the paper's Table 4: +2.30).")


def _beside_note(tw_rand, tw_sel, s_l, grid_range, d_margin, cfg) -> str:
    r, o = tw_rand.difference, tw_sel.difference
    n_c = len(cfg["grid"]["lips"])
    return (f"Beside the verdict. Random masks (review comment on Table 4): LIPS minus "
            f"LIPS-random {r.mean:.2f} points ({100 * (1 - tw_rand.alpha):.4g}% CI "
            f"[{r.low:.2f}, {r.high:.2f}]; three-way: {tw_rand.outcome}). Selection "
            f"optimism (review comment on tau0 and k picked on test): choosing LIPS's "
            f"candidate on test instead of validation in each run adds {o.mean:.2f} points "
            f"({100 * (1 - tw_sel.alpha):.4g}% CI [{o.low:.2f}, {o.high:.2f}]; "
            f"three-way: {tw_sel.outcome}); the candidates differ by {grid_range:.2f} "
            f"points per run on average, which bounds what any choice could add. What this "
            f"shows: how much picking among our {n_c} candidates on the test splits "
            f"inflates the reported number in this setting. What it does not show: the "
            f"size of the optimism in the paper's own numbers (its grid in Figure 7 is "
            f"larger, optimism grows with the number of candidates and the spread of their "
            f"results, and its data, model and rounds differ), nor anything about reporting "
            f"the best round instead of the last, which the comment also raises: we report "
            f"the last round only.")


def _gain_note(acc: Mapping[str, np.ndarray], parts) -> str:
    g = stats.paired_difference(acc["lips"], acc["fedbn"], level=0.95, method="t")
    if g.low > 0:
        where = "LIPS beats FedBN here, so the comparisons speak to a real gain"
    elif g.high < 0:
        where = ("LIPS is worse than FedBN here, so the paper's gain did not reproduce in "
                 "this setting; the verdict then says only that nothing on these runs ties "
                 "LIPS's effect to the middle layers or to its score, not that the paper's "
                 "gain is regularisation")
    else:
        where = ("LIPS is not distinguishable from FedBN here, so the comparisons concern "
                 "an effect that may be absent in this setting")
    decided = "; ".join(f"{p.id}: {p.verdict.value}" for p in parts)
    return (f"LIPS minus FedBN: {g.mean:.2f} points, 95% t CI [{g.low:.2f}, {g.high:.2f}] "
            f"(paper: +4.76 on CIFAR-100). {where}. Parts: {decided}.")


def analyse(results, ctx: RunContext) -> Analysis:
    cfg = ctx.config
    d_margin = float(cfg["equivalence_margin"])
    alpha = float(cfg["alpha_family"]) / N_COMPARISONS
    sel = {arm: _selected(results, arm, ctx) for arm in ARM_NAMES}
    acc = {arm: sel[arm]["test"] for arm in ARM_NAMES}
    n_test = sel["fedbn"]["runs"][0]["n_test"]

    # assay sensitivity: the known-worse arm is separated by more than the margin
    sens = stats.paired_difference(acc["fedbn"], acc["fedbn-short"], level=0.95, method="t")
    sensitive = bool(sens.low > d_margin)

    tws = {c: stats.three_way(acc["lips"], acc[c], margin=0.0, equivalence_margin=d_margin,
                              alpha=alpha, sensitive=sensitive) for c in CONTROLS}
    tw_all = stats.three_way(acc["lips"], acc["lips-all-layers"], margin=0.0,
                             equivalence_margin=d_margin, alpha=alpha, sensitive=sensitive)
    parts = (RULE_CONTROLS(tws, sensitive), RULE_LAYERS({"lips-all-layers": tw_all},
                                                       sensitive))

    # reported beside the verdict: random masks, and the optimism of tuning on test
    a_side = float(cfg.get("alpha_beside", 0.05))
    tw_rand = stats.three_way(acc["lips"], acc["lips-random"], margin=0.0,
                              equivalence_margin=d_margin, alpha=a_side, sensitive=sensitive)
    s_l = sel["lips"]
    grid_range = float(s_l["grid_range"].mean())
    sel_sensitive = bool(sensitive and grid_range > d_margin)
    tw_sel = stats.three_way(s_l["per_seed_test_best"], s_l["per_seed_val_choice"],
                             margin=0.0, equivalence_margin=d_margin, alpha=a_side,
                             sensitive=sel_sensitive)
    parts += (RULE_RANDOM(tw_rand, sensitive),
              RULE_SELECTION(tw_sel, sel_sensitive, grid_range, d_margin))

    est = [
        Estimate.of("assay_sensitivity_gap", sens, "points", "FedBN minus early-stopped "
                    f"FedBN (known-worse arm); sensitive when the CI's lower end exceeds "
                    f"d = {d_margin}"),
        Estimate("assay_sensitive", float(sensitive), description="1 if the "
                 "assay-sensitivity check passed"),
        Estimate("metric_resolution", 100.0 / n_test, unit="points", description="one test "
                 "decision per seed (all clients' test splits together)"),
        _est_diff("lips_minus_fedbn", acc["lips"], acc["fedbn"],
                  "LIPS gain over FedBN (paper: +4.76 on CIFAR-100)"),
    ]
    for c in CONTROLS + ("lips-all-layers",):
        tw = tws.get(c, tw_all)
        dd = tw.difference
        est.append(Estimate.of(f"lips_minus_{c}", dd, "points",
                               f"LIPS minus {c}, {100 * (1 - alpha):.4g}% CI (Bonferroni)"))
    est += [
        _est_diff("lips_random_minus_lips", acc["lips-random"], acc["lips"],
                  "random mask minus sensitivity mask (paper Table 4: +2.30)"),
        _est_diff("lips_as_released_minus_lips", acc["lips-as-released"], acc["lips"],
                  "released score and schedule minus the printed ones"),
        _est_diff("freeze_minus_fedbn", acc["fedbn-freeze-middle"], acc["fedbn"],
                  "middle layers frozen after round f, minus FedBN (paper Table 1: under "
                  "one point lost)"),
    ]
    for arm in ARM_NAMES:
        est.append(_est_mean(f"acc_{arm}", acc[arm], f"personalised test accuracy of {arm}"))
    cos_final = {arm: np.array([r["middle_cos"][-1] for r in sel[arm]["runs"]])
                 for arm in ARM_NAMES}
    est.append(_est_mean("fedbn_middle_cos_final", cos_final["fedbn"],
                         "FedBN mean middle-layer cosine to the round-2 weights at the last "
                         "round (paper: above 0.95)", unit="cosine"))
    est.append(_est_mean("lips_middle_cos_final", cos_final["lips"],
                         "LIPS mean middle-layer cosine to the round-2 weights at the last "
                         "round", unit="cosine"))
    est.append(_est_mean("dropout_middle_cos_final", cos_final["fedbn-dropout-middle"],
                         "dropout control's mean middle-layer cosine at the last round",
                         unit="cosine"))
    optimism = {}
    for arm in cfg["grid"]:
        s = sel[arm]
        optimism[arm] = float(s["test_if_test_tuned"].mean() - s["test"].mean())
        est.append(Estimate(f"selection_optimism_{arm}", optimism[arm], unit="points",
                            n=len(ctx.seeds), method="mean",
                            description=f"{arm}: mean test accuracy if tuned on test minus "
                            "tuned on validation"))
        ps_opt = float(s["per_seed_test_best"].mean() - s["test"].mean())
        est.append(Estimate(f"selection_optimism_per_seed_{arm}", ps_opt, unit="points",
                            n=len(ctx.seeds), method="mean",
                            description=f"{arm}: mean over seeds of the best candidate's "
                            "test accuracy in each run minus the validation choice"))
    for name, tw, desc in (
            ("lips_minus_lips-random", tw_rand, "LIPS minus LIPS with a random mask "
             "(part random-mask)"),
            ("selection_optimism_per_run_lips", tw_sel, "LIPS: per run, test accuracy of "
             "the candidate chosen on test minus that of the candidate chosen on validation "
             "(part selection-optimism)")):
        dd = tw.difference
        est.append(Estimate.of(name, dd, "points", f"{desc}, {100 * (1 - a_side):.4g}% CI"))
    est.append(_est_mean("selection_grid_range_lips", s_l["grid_range"], "LIPS: per run, "
                         "highest minus lowest test accuracy over the tuning candidates "
                         "(the most a choice could change the number)"))
    est.append(Estimate("selection_sensitive", float(sel_sensitive), description="1 if the "
                        "assay check passed and the mean grid range exceeds d"))
    gain_test_tuned = float(sel["lips"]["test_if_test_tuned"].mean() - acc["fedbn"].mean())
    est.append(Estimate("lips_gain_if_tuned_on_test", gain_test_tuned, unit="points",
                        n=len(ctx.seeds), method="mean",
                        description="LIPS minus FedBN had LIPS been tuned on test"))

    # tables
    rows = []
    for arm in ARM_NAMES:
        s = sel[arm]
        m = stats.mean_interval(acc[arm])
        rows.append((arm, str(s["hp"]), round(float(s["val"].mean()), 2),
                     round(m.mean, 2), f"[{m.low:.2f}, {m.high:.2f}]",
                     str(s["test_hp"]), round(float(s["test_if_test_tuned"].mean()), 2),
                     round(float(cos_final[arm].mean()), 3),
                     round(float(np.mean([r["middle_zero_frac"][-1] for r in s["runs"]])), 3),
                     round(float(np.mean([r["seconds"] for r in s["runs"]])), 2)))
    t_arms = Table("Arms: chosen hyperparameters (validation), personalised accuracy (%)",
                   ("arm", "chosen (val)", "val acc", "test acc", "95% t CI",
                    "chosen on test", "test acc if test-tuned", "middle cos (last)",
                    "middle zeros (last)", "s/run"),
                   tuple(rows),
                   note=f"Mean over seeds {list(ctx.seeds)}; hyperparameters: LIPS family "
                        "(tau0, k), noise (sigma0, k), dropout rate, weight decay.")
    grid_rows = []
    for arm in cfg["grid"]:
        s = sel[arm]
        for hp, v, t in zip(candidates(cfg, arm), s["all_val"], s["all_test"]):
            grid_rows.append((arm, str(hp), round(v, 2), round(t, 2)))
    t_grid = Table("Tuning grid: mean validation and test accuracy per candidate (%)",
                   ("arm", "candidate", "val acc", "test acc"), tuple(grid_rows),
                   note="The same number of candidates for every tuned arm; the choice is "
                        "by validation accuracy; test is shown only to measure the "
                        "selection optimism.")
    cmp_rows = []
    for name, tw in list(tws.items()) + [("lips-all-layers", tw_all)]:
        dd, tt = tw.difference, tw.tost
        cmp_rows.append((f"lips - {name}", round(dd.mean, 3),
                         f"[{dd.low:.3f}, {dd.high:.3f}]", f"[{tt.low90:.3f}, {tt.high90:.3f}]",
                         round(tt.p_value, 4), tw.outcome,
                         "" if tw.seeds_needed is None else tw.seeds_needed))
    t_cmp = Table("Comparisons (points; paired over seeds)",
                  ("comparison", "mean", f"{100 * (1 - alpha):.4g}% CI",
                   f"{100 * (1 - 2 * alpha):.4g}% CI (TOST)", "TOST p", "three-way outcome",
                   "seeds needed"), tuple(cmp_rows),
                  note=f"Three-way outcome about 'LIPS beats the alternative'; d = "
                       f"{d_margin} points; alpha = {alpha:.4g}.")
    side_rows = []
    for name, tw in (("lips - lips-random", tw_rand),
                     ("lips: test-chosen - validation-chosen (per run)", tw_sel)):
        dd, tt = tw.difference, tw.tost
        side_rows.append((name, round(dd.mean, 3), f"[{dd.low:.3f}, {dd.high:.3f}]",
                          f"[{tt.low90:.3f}, {tt.high90:.3f}]", round(tt.p_value, 4),
                          tw.outcome, "" if tw.seeds_needed is None else tw.seeds_needed))
    t_side = Table("Parts reported beside the verdict (points; paired over seeds)",
                   ("comparison", "mean", f"{100 * (1 - a_side):.4g}% CI",
                    f"{100 * (1 - 2 * a_side):.4g}% CI (TOST)", "TOST p",
                    "three-way outcome", "seeds needed"), tuple(side_rows),
                   note=f"Parts random-mask and selection-optimism; d = {d_margin} points; "
                        f"alpha = {a_side:g} each; they do not enter the claim's verdict.")
    per_seed = Table("Per-seed personalised test accuracy (%) at the chosen candidate",
                     ("seed",) + ARM_NAMES,
                     tuple((s,) + tuple(round(float(acc[a][i]), 2) for a in ARM_NAMES)
                           for i, s in enumerate(ctx.seeds)))
    layer_names_ = list(sel["fedbn"]["runs"][0]["final_layer_cos"])
    t_layers = Table("Per middle layer: cosine to the round-2 weights at the last round",
                     ("arm",) + tuple(layer_names_),
                     tuple((arm,) + tuple(round(float(np.mean(
                         [r["final_layer_cos"][ln] for r in sel[arm]["runs"]])), 3)
                         for ln in layer_names_) for arm in ARM_NAMES))

    # figures
    series = []
    for arm in ARM_NAMES:
        curves = [r["middle_cos"] for r in sel[arm]["runs"]]
        R = len(curves[0])
        xs, ys, lo, hi = [], [], [], []
        for t in range(R):
            vals = [c[t] for c in curves if c[t] is not None]
            if vals:
                xs.append(t + 1)
                ys.append(float(np.mean(vals)))
                lo.append(float(np.min(vals)))
                hi.append(float(np.max(vals)))
        series.append({"label": arm, "x": xs, "y": ys, "low": lo, "high": hi})
    fig_cos = Figure("middle_cosine", "Inertia: mean middle-layer cosine to round-2 weights",
                     "round", "cosine", tuple(series),
                     caption="Mean over seeds, band = min..max over seeds. Pruning zeroes "
                             "weights, which lowers the cosine by construction.")
    short = {"lips": "lips", "lips-random": "random", "lips-all-layers": "all-layers",
             "lips-as-released": "released", "fedbn-dropout-middle": "dropout",
             "fedbn-weight-decay": "wd", "fedbn-noise-middle": "noise",
             "fedbn-freeze-middle": "freeze", "fedbn-short": "short"}
    diffs = {a: stats.paired_difference(acc[a], acc["fedbn"], level=0.95, method="t")
             for a in short}
    fig_acc = Figure("accuracy", "Accuracy minus FedBN's, paired over seeds (95% t CI)",
                     "arm", "difference (points)",
                     ({"label": "arm - fedbn", "x": list(short.values()),
                       "y": [diffs[a].mean for a in short],
                       "low": [diffs[a].low for a in short],
                       "high": [diffs[a].high for a in short]},), kind="bar",
                     caption="Personalised test accuracy at the validation-chosen "
                             "candidate; dropout, wd, noise are the controls; short is the "
                             "known-worse arm of the sensitivity check.")

    notes = (
        "Setting and why it can separate arms: 8x8 digits, "
        f"{cfg['n_clients']} clients with {cfg['n_train']} training images each drawn with "
        f"Dirichlet({cfg['alpha']}) label proportions (the paper's per-client draw), "
        f"{cfg['rounds']} rounds. A prototype at 60 rounds saturated at about 98% "
        "personalised accuracy for every arm; here training stops where FedBN is still "
        "improving, and every client's test split comes from the held-out test set "
        f"({cfg['n_test']} images per client, {n_test} per seed, resolution "
        f"{100.0 / n_test:.2f} points). The assay-sensitivity check asks that FedBN beat "
        f"FedBN stopped after {cfg['short_fraction']:.0%} of the rounds by more than the "
        f"margin d = {d_margin} points on the same seeds (gap {sens.mean:.2f}, 95% CI "
        f"[{sens.low:.2f}, {sens.high:.2f}]: {'passed' if sensitive else 'failed'}). "
        "The rounds, learning rate, width and client count were set with a short pilot on "
        "seeds 0-2 (FedBN, early-stopped FedBN, LIPS, dropout, all-layer LIPS) for speed "
        "and to leave the ceiling; the tuning grids were fixed before it.",
        _gain_note(acc, parts),
        "Tuning: every tuned arm gets the same number of candidates; the candidate with the "
        "highest mean validation accuracy (clients' validation splits, disjoint from their "
        "training data) is reported; the 'chosen on test' columns show what picking on the "
        "test splits would have reported (selection optimism, at least 0 by "
        "construction); the per-seed optimism picks the best candidate on test in every "
        "run separately, as a per-run peek at the test split would.",
        _inertia_note(acc, cos_final, cfg),
        _beside_note(tw_rand, tw_sel, s_l, grid_range, d_margin, cfg),
        "Caveat on the cosine: LIPS, its ablations and the noise control change middle "
        "weights directly after aggregation, so their lower cosine to round 2 partly "
        "measures the perturbation itself, not renewed learning.",
        "Caveat on scale: this is a small CPU setting (digits, a VGG-style net of width "
        f"{cfg['width']}), not CIFAR-100 with ResNet-8 at 300 rounds; the paper's numbers "
        f"are shown beside ours only for orientation. With {len(ctx.seeds)} seeds and a "
        f"Bonferroni alpha of {alpha:.4g} the TOST needs a small spread of the "
        "differences; the seeds needed are given when a comparison is inconclusive. An "
        "exact sign-flip test could not reach "
        f"p < 0.05 with {len(ctx.seeds)} pairs "
        f"(smallest p = {stats.smallest_signflip_p(len(ctx.seeds)):.4g}), so none is used. "
        "The paper scale reads CIFAR-100 from --data-dir (ResNet-8, 100 clients x 100 "
        "images, 300 rounds); TinyImageNet with ResNet-10 is the same scale with "
        "--set dataset=\"tinyimagenet\" --set model=\"resnet10\".",
    )
    return Analysis(tuple(est), parts, (t_arms, t_cmp, t_side, t_grid, per_seed, t_layers),
                    (fig_cos, fig_acc), notes)


CLAIM = Claim(
    id=CLAIM_ID,
    paper=LIPS,
    record=RecordRef(RECORDS[LIPS.arxiv_id], ("skeptic_critique.load_bearing_attack",
                                              "skeptic_critique.concrete_test", "falsifier",
                                              "referee_report.major_comments[0]",
                                              "referee_report.major_comments[1]",
                                              "referee_report.major_comments[2]",
                                              "referee_report.major_comments[4]")),
    title="dropout control",
    statement="The accuracy gain of LIPS is never compared with generic regularisation "
              "of the middle layers (dropout, weight decay, noise) nor with pruning every "
              "layer, so it is not shown to come from curing layer inertia; random masks "
              "do as well as the sensitivity score, and the hyperparameters were picked "
              "on test data.",
    arms=ARMS,
    rules=(RULE_CONTROLS, RULE_LAYERS, RULE_RANDOM, RULE_SELECTION),
    combination=COMBINATION,
    stochastic=True,
    scales=SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
    answers={"skeptic_critique.concrete_test": "regularisation-controls",
             "falsifier": "regularisation-controls",
             "referee_report.major_comments[1]": "regularisation-controls",
             "referee_report.major_comments[4]": "layer-targeting",
             "referee_report.major_comments[0]": "random-mask",
             "referee_report.major_comments[2]": "selection-optimism"},
    paper_numbers=(
        PaperNumber("FedBN, CIFAR-100 Dir(0.1)", 43.08, "main results table", ours="acc_fedbn"),
        PaperNumber("LIPS, CIFAR-100 Dir(0.1)", 47.84, "main results table", ours="acc_lips"),
        PaperNumber("LIPS-Random, CIFAR-100 Dir(0.1)", 50.14, "Table 4",
                    ours="acc_lips-random"),
        PaperNumber("FedBN, TinyImageNet Dir(0.1)", 36.83, "main results table"),
        PaperNumber("LIPS, TinyImageNet Dir(0.1)", 40.61, "main results table"),
        PaperNumber("accuracy lost by freezing middle layers after round 50",
                    "under 1 point", "Table 1", ours="freeze_minus_fedbn"),
    ),
)
