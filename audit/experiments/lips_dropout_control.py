"""Falsifier ``lips-dropout-control``: is LIPS's gain more than generic regularisation?

Paper: LIPS, arXiv 2506.00932v1. Review record: 2506.00932 ``skeptic_critique``
(``load_bearing_attack``, ``concrete_test``). CLAIMS.md section 4.

The reviewer's claim, paraphrased: the paper never runs a regularisation control
(dropout, weight decay or noise on the middle layers), so its accuracy gain is not shown
to come from curing layer inertia; the random-mask ablation beating the sensitivity
score on CIFAR-100 and the lack of a middle-only vs all-layers ablation point the same
way; tau0 and k were chosen on test data.

Premise first: LIPS must beat FedBN here (three-way rule, ``Analysis.premise``); the
parts that explain that gain (``regularisation-controls``, ``layer-targeting``,
``random-mask``) go through ``premise_gate`` and are INCONCLUSIVE where it does not.

Parts: ``regularisation-controls`` and ``layer-targeting`` are the reviewer's own test and
decide the verdict (any of them, the reviewer's "or"); reported beside it: ``random-mask``
(LIPS vs the same pruning with a random mask), and two measurements without a verdict,
``selection-optimism`` (what choosing (tau0, k) on test instead of validation adds per
run; >= 0 by construction, so not tested against 0) and ``middle-cosine`` (does each
control lift the middle layers' cosine to round 2 off its inertia, as LIPS does; the
reviewer's second criterion, not a threshold because pruning lowers it by construction).

What we run (``audit.algorithms.lips``): FedBN and LIPS as printed, its ablations
(random mask, all layers, the released score with the horizon scaled to the run) and
three controls (dropout on the middle layers, weight decay, Gaussian noise on the middle
layers at LIPS's period), each tuned with the same small grid chosen on the clients'
validation splits; plus two diagnostic arms: a planted handicap of about the margin
(FedBN stopped at 90 % of the rounds, chosen on tuning seeds 1000-1004) for assay
sensitivity at the margin's scale, and the paper's freeze test (middle layers frozen
after round f).

Why this setting can separate arms (a prototype on 8x8 digits with 60 rounds sat at a
98 % ceiling): training is cut to a budget where FedBN is still improving, each client
holds only 20 training images, and every client's test split is drawn from the
held-out digits test set (never seen by any client) with the client's own label
proportions, 30 images each, so the metric has 900 test decisions per seed. The
smoke setting was set with a pilot on seeds 0-2, which are also verdict seeds (stated in
the report); the planted handicap's size was chosen on tuning seeds only. At ``full``
scale (60 rounds) the 90 % cut was not re-calibrated.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from audit import kit, stats
from audit.analysis import difference_estimate, mean_estimate
from audit.tuning import Search, tuning_seeds
from audit.claims import (LIPS, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit import questions
from audit.questions import Finding, Question
from audit.verdict import (Estimate, Outcome, Premise, Rule, on_reviewer,
                           premise_gate)

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
    Arm("lips-released-score", "LIPS with the released code's score |grad * w| (last "
        "local minibatch) and its schedule rule (masking on rounds divisible by k), the "
        "horizon T scaled to the run (the release fixes T = 300 for its 300-round runs, "
        "T/R = 1; --set released_horizon=300 gives the unscaled reading); leaves out that "
        "the release has no FedBN client (norm layers are kept local here, as in every arm)",
        "score |grad * w| instead of |dw * w|; T = R as in the release's own runs"),
    Arm("fedbn-dropout-middle", "FedBN with dropout after every middle layer, rate tuned",
        "control: model option dropout_middle instead of pruning"),
    Arm("fedbn-weight-decay", "FedBN with local SGD weight decay, strength tuned",
        "control: weight decay instead of pruning"),
    Arm("fedbn-noise-middle", "FedBN + Gaussian noise (scale x layer std) added to the "
        "middle layers on LIPS's rounds with LIPS's decay", "control: noise instead of "
        "zeroing"),
    Arm("fedbn-short", "FedBN stopped after short_fraction of the rounds: a planted "
        "handicap of about the equivalence margin (assay sensitivity at the margin's "
        "scale; the fraction was chosen on tuning seeds 1000-1004, never verdict seeds)",
        "rounds: short_fraction x R"),
    Arm("fedbn-freeze-middle", "FedBN whose middle layers get no update after round f "
        "(paper's Table 1 freeze test)", "local lr of middle layers 0 after round f"),
)
ARM_NAMES = tuple(a.name for a in ARMS)


@dataclass(frozen=True)
class ArmPiece:
    """The one piece an arm changes on FedBN (``FedBNProbe``), at a tuning candidate
    ``hp`` under a scale's config ``cfg``: a step after every round's aggregation
    (``post(hp, cfg)``: pruning or noise), the middle layers frozen after round f
    (``freeze``), model options (``model(hp)``) or config overrides (``config(hp, cfg)``:
    rounds, weight decay). No piece at all: FedBN itself."""

    post: Callable[[Any, Mapping], Any] | None = None
    freeze: bool = False
    model: Callable[[Any], dict] | None = None
    config: Callable[[Any, Mapping], dict] | None = None


def _pruned(score: str, layers: str, released: bool = False):
    """LIPS's pruning at ``hp = (tau0, k)``: the printed schedule with T = R, or (released)
    the release's schedule rule with T = ``released_horizon`` (default R, the run).
    ``score`` names a score of :mod:`audit.algorithms.lips` (imported when the piece is
    built: it imports torch, which listing and reviewing the claims do not need)."""

    def post(hp, cfg: Mapping):
        from audit.algorithms import lips

        tau0, k = hp
        R = int(cfg["rounds"])
        if not released:
            return lips.prune(getattr(lips, score), lips.printed_schedule(tau0, k, R), layers)
        T = cfg.get("released_horizon")
        return lips.prune(getattr(lips, score),
                          lips.released_schedule(tau0, k, R, T=R if T is None else int(T)),
                          layers, needs_grad=True)

    return post


def _noise(hp, cfg: Mapping):
    """Gaussian noise on the middle layers at ``hp = (sigma0, k)``, LIPS's schedule."""
    from audit.algorithms.lips import gaussian_noise, printed_schedule

    sigma0, k = hp
    return gaussian_noise(printed_schedule(sigma0, k, int(cfg["rounds"])), "middle")


#: Each arm's piece, beside its declaration in ARMS (same names, same order).
PIECES: dict[str, ArmPiece] = {
    "fedbn": ArmPiece(),
    "lips": ArmPiece(post=_pruned("update_sensitivity", "middle")),
    "lips-random": ArmPiece(post=_pruned("random_score", "middle")),
    "lips-all-layers": ArmPiece(post=_pruned("update_sensitivity", "all")),
    "lips-released-score": ArmPiece(post=_pruned("grad_sensitivity", "middle",
                                                 released=True)),
    "fedbn-dropout-middle": ArmPiece(model=lambda hp: {"dropout_middle": float(hp)}),
    "fedbn-weight-decay": ArmPiece(config=lambda hp, cfg: {"weight_decay": float(hp)}),
    "fedbn-noise-middle": ArmPiece(post=_noise),
    "fedbn-short": ArmPiece(config=lambda hp, cfg: {
        "rounds": int(round(int(cfg["rounds"]) * cfg["short_fraction"]))}),
    "fedbn-freeze-middle": ArmPiece(freeze=True),
}
assert tuple(PIECES) == ARM_NAMES, "PIECES out of step with ARMS"
LIPS_FAMILY = ("lips", "lips-random", "lips-all-layers", "lips-released-score")
CONTROLS = ("fedbn-dropout-middle", "fedbn-weight-decay", "fedbn-noise-middle")

# The tuning grid: the same budget (number of candidates) for every tuned arm.
# LIPS-family candidates are (tau0, k); noise is (sigma0, k); dropout a rate; wd a decay.
_GRID_SMOKE = {
    "lips": [(0.2, 5), (0.5, 5)],
    "lips-random": [(0.2, 5), (0.5, 5)],
    "lips-all-layers": [(0.2, 5), (0.5, 5)],
    "lips-released-score": [(0.2, 5), (0.5, 5)],
    "fedbn-dropout-middle": [0.1, 0.3],
    "fedbn-weight-decay": [1e-3, 1e-2],
    "fedbn-noise-middle": [(0.2, 5), (0.5, 5)],
}

_COMMON = dict(n_clients=30, n_train=20, n_val=10, n_test=30, alpha=0.1,
               model="vgg", width=0.25, batch_size=10, local_epochs=1, momentum=0.0,
               freeze_fraction=1 / 6, short_fraction=0.9, reference_round=2,
               equivalence_margin=2.0, alpha_family=0.05, alpha_beside=0.05,
               alpha_premise=0.05, released_horizon=None, checkpoint_every=10,
               curve_points=10)
# short_fraction = 0.9: the planted handicap's size, chosen on TUNING seeds at each scale
# (SEARCHES, at the end of this module). Before, 2/3 of the rounds (a 16.7-point
# handicap) showed only gross sensitivity.

SCALES = {
    "smoke": {**_COMMON, "dataset": "digits", "rounds": 30, "lr": 0.1, "grid": _GRID_SMOKE},
    # rounds and lr chosen on tuning seeds, short_fraction re-checked there (SEARCHES)
    "full": {**_COMMON, "dataset": "digits", "n_clients": 40, "width": 0.5, "rounds": 60,
             "lr": 0.03,
             "grid": _GRID_SMOKE},
    # The paper's main setting (Sec. 5): CIFAR-100, Dir(0.1), 100 clients x 100 samples,
    # ResNet-8, 300 rounds; read from ctx.data_dir on a GPU.
    "paper": {**_COMMON, "dataset": "cifar100", "n_clients": 100, "n_train": 100,
              "n_val": 20, "n_test": 50, "model": "resnet8", "width": 1.0,
              "batch_size": 32, "local_epochs": 1, "rounds": 300, "lr": 0.05,
              "grid": {"lips": [(0.2, 10), (0.5, 10)], "lips-random": [(0.2, 10), (0.5, 10)],
                       "lips-all-layers": [(0.2, 10), (0.5, 10)],
                       "lips-released-score": [(0.2, 10), (0.5, 10)],
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
    import torch

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
    """(algorithm, model options, config overrides) of one arm at one candidate, built
    from the arm's piece (:data:`PIECES`)."""
    from audit.algorithms.lips import FedBNProbe

    if arm not in PIECES:
        raise AuditError(f"unknown arm {arm!r}")
    piece = PIECES[arm]
    ref = int(cfg["reference_round"])
    probe = {}
    if piece.post is not None:
        probe["post"] = piece.post(hp, cfg)
    if piece.freeze:
        probe["freeze_after"] = max(ref, int(round(int(cfg["rounds"])
                                                   * cfg["freeze_fraction"])))
    alg = FedBNProbe(**probe, reference_round=ref, curve_every=curve_every(cfg))
    model_kw = piece.model(hp) if piece.model is not None else {}
    over = piece.config(hp, cfg) if piece.config is not None else {}
    return alg, model_kw, over


def run(spec: RunSpec, ctx: RunContext) -> dict:
    import torch

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
                      checkpoint_every=int(cfg.get("checkpoint_every", 5)),
                      on_round=ctx.on_round)
    cos = [a.get("middle_cos") for a in h.algo]
    zero = [a["middle_zero_frac"] for a in h.algo]
    last = h.algo[-1]
    # every curve round: the personalised test accuracy and train minus test (the
    # overfitting gap; train accuracy on each client's own training split, averaged over
    # clients as the test accuracy is), from the probe
    curve = [(t, a) for t, a in enumerate(h.algo, 1) if "curve_test_acc" in a]
    return {
        "hp": hp, "rounds": rounds,
        "test_acc": float(h.personal_acc[-1]),  # personalised, client test splits
        "val_acc": float(h.val_acc[-1]),  # personalised, client validation splits
        "n_test": int(sum(len(c.y_test) for c in fed.clients)),
        "middle_cos": cos, "middle_zero_frac": zero,
        "final_layer_cos": {k[4:]: v for k, v in last.items() if k.startswith("cos:")},
        "curve_rounds": [t for t, _ in curve],
        "test_curve": [a["curve_test_acc"] for _, a in curve],
        "gap_curve": [a["curve_train_acc"] - a["curve_test_acc"] for _, a in curve],
        "seconds": time.perf_counter() - t0,
    }


def curve_every(cfg: Mapping) -> int:
    """The accuracy curves (train / test per client, for the overfitting gap and the best
    round) are read every ``rounds // curve_points`` rounds of the scale (the same rounds
    for every arm; at least 1) and at each arm's last round. Reading them does not touch
    training (eval mode, no RNG), so every other number is the same at any value."""
    return max(1, int(cfg["rounds"]) // max(1, int(cfg["curve_points"])))


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


def _flip_info(tws: Mapping[str, Any], outcome: Outcome, resolution: float) -> dict:
    """The flip distance of a family part: CONFIRMED rests on its FALSIFIED comparisons
    (all must flip: the largest of their flips), REFUTED on every SUPPORTED one (any flip
    breaks it: the smallest); INCONCLUSIVE: the smallest flip of any comparison."""
    flips = {k: tw.flip for k, tw in tws.items() if tw.flip is not None}
    if outcome == Outcome.CONFIRMED:
        f = [flips[k] for k, tw in tws.items() if tw.outcome == "FALSIFIED" and k in flips]
        flip = max(f) if f else None
    else:
        flip = min(flips.values()) if flips else None
    return {"flip": flip, "resolution": resolution, "unit": "points"}


def _decide_family(tws: Mapping[str, Any], sensitive: bool, resolution: float = math.nan):
    """CONFIRMED when some comparison shows the alternative equivalent to LIPS or better
    (three-way outcome FALSIFIED for "LIPS beats it"); REFUTED when LIPS beats every one
    (all SUPPORTED); INCONCLUSIVE otherwise. The map onto the reviewer's claim is
    ``on_reviewer(..., holds_when="FALSIFIED")`` per comparison."""
    on = {k: on_reviewer(tw.outcome, holds_when="FALSIFIED") for k, tw in tws.items()}
    reason = " | ".join(f"lips vs {k}: {tw.reason}" for k, tw in tws.items())
    if not sensitive:
        reason = ("no assay sensitivity at the margin's scale (the planted handicap was "
                  "not detected), so no equivalence counts; " + reason)
    if any(o == Outcome.CONFIRMED for o in on.values()):
        out = Outcome.CONFIRMED
    elif all(o == Outcome.REFUTED for o in on.values()):
        out = Outcome.REFUTED
    else:
        out = Outcome.INCONCLUSIVE
    needs = ""
    if out == Outcome.INCONCLUSIVE:
        nd = [f"{k}: {tw.seeds_needed} pairs" for k, tw in tws.items()
              if tw.outcome == "INCONCLUSIVE" and tw.seeds_needed]
        needs = ("seeds that would detect the observed differences: " + ", ".join(nd)
                 if nd else "a larger or different setting")
    return out, reason, needs, _flip_info(tws, out, resolution)


_FAMILY_TEXT = (
    "{what}: for each of {names}, A = LIPS, B = the alternative, personalised test "
    "accuracy in points, margin m = 0, equivalence margin d = {d} points (set before the "
    "runs as under half of the paper's 4.76-point CIFAR-100 gain of LIPS over FedBN), "
    "alpha = {alpha_family} x {alpha_fraction} (share of this look) / {m} (Bonferroni over "
    "the {m} comparisons of the two combined parts) = {alpha}: the {three_way}. "
    "Equivalence counts only where assay sensitivity at the margin's scale is shown: FedBN "
    "beats the planted handicap (FedBN stopped at {short_rounds} of {rounds} rounds, "
    "about d) with the same rule, seeds and alpha (SUPPORTED). CONFIRMED when some "
    "alternative is equivalent to LIPS or better (FALSIFIED); REFUTED when LIPS beats "
    "every one (all SUPPORTED); else INCONCLUSIVE. The part explains LIPS's gain, so it is "
    "INCONCLUSIVE ('premise not reproduced at this scale') unless the premise (LIPS beats "
    "FedBN) is reproduced. Accuracy alone decides; the middle-layer cosine the reviewer "
    "also names is reported per arm in the measurement part `middle-cosine`, not used "
    "as a criterion: pruning and noise change the middle weights right after aggregation, "
    "so their lower cosine to round 2 follows from the intervention by construction, and "
    "no threshold for 'matching LIPS on the cosine' exists independently of the results.")

N_COMPARISONS = 4  # three controls + all layers
RULE_CONTROLS = Rule("regularisation-controls", _FAMILY_TEXT.replace(
    "{what}", "Regularisation controls (the reviewer's own test)").replace(
    "{names}", "dropout / weight decay / noise on the middle layers"), _decide_family)
RULE_LAYERS = Rule("layer-targeting", _FAMILY_TEXT.replace(
    "{what}", "Layer targeting (the reviewer's own test, second half)").replace(
    "{names}", "LIPS on all weight layers"), _decide_family)


def _decide_random(tw, sensitive: bool, resolution: float = math.nan):
    """Reviewer (record: referee_report.major_comments[0]): the sensitivity score is not
    needed, random masks do as well. The three-way outcome about "LIPS beats LIPS with
    random masks", mapped with ``on_reviewer(..., holds_when="FALSIFIED")``."""
    reason = f"lips vs lips-random: {tw.reason}"
    if not sensitive:
        reason = ("no assay sensitivity at the margin's scale, so no equivalence counts; "
                  + reason)
    out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
    needs = ""
    if out == Outcome.INCONCLUSIVE:
        needs = (f"{tw.seeds_needed} pairs would detect the observed difference"
                 if tw.seeds_needed else "a larger or different setting")
    return out, reason, needs, {"flip": tw.flip, "resolution": resolution, "unit": "points"}


def _decide_selection(optimism, grid_range, margin: float):
    """A measurement (no verdict): the per-run optimism of choosing LIPS's (tau0, k) on
    test instead of validation is >= 0 by construction (the test choice is the best on
    test), so "its CI lies above 0" is no test, and no threshold independent of the
    results says how large an optimism matters."""
    return (Outcome.INCONCLUSIVE,
            f"measured, not decided: per-run optimism (test-chosen minus validation-chosen "
            f"test accuracy, LIPS) mean {optimism.mean:.3g} points, 95% t CI "
            f"[{optimism.low:.3g}, {optimism.high:.3g}] (>= 0 by construction); the "
            f"candidates' test accuracies differ by {grid_range:.3g} points per run on "
            f"average, the most any choice could add (d = {margin:g} for scale).",
            "a threshold fixed independently of the results (none exists here)")


RULE_RANDOM = Rule(
    "random-mask",
    "Random mask (reported beside the verdict; not combined into it): A = LIPS, B = LIPS "
    "with a uniformly random mask of the same size (same seeds, same tuning budget, each "
    "at its validation-chosen candidate), margin m = 0, d = {d} points, alpha = "
    "{alpha_beside} x {alpha_fraction} = {alpha} (its own question, outside the "
    "Bonferroni family of the combined parts): the {three_way}. Mapped onto the reviewer "
    "(the score is not needed): FALSIFIED -> CONFIRMED, SUPPORTED -> REFUTED. Equivalence "
    "counts only with the planted handicap detected at this alpha; gated by the premise "
    "(it explains LIPS's gain).",
    _decide_random)
RULE_SELECTION = Rule(
    "selection-optimism",
    "Selection optimism (a measurement, no verdict): in every run (seed) of LIPS, the "
    "candidate (tau0, k) with the highest test accuracy and the one with the highest "
    "validation accuracy are picked (first on ties); the per-seed optimism is the "
    "difference of their test accuracies, with its 95% Student-t interval over the "
    "{n} seeds and the mean per-run range of the candidates' test accuracies. It is >= 0 "
    "by construction, so a test of 'above 0' could not fail, and no threshold "
    "independent of the results exists: the number is reported, not decided.",
    _decide_selection, kind="measurement", reachable=("INCONCLUSIVE",))


def _decide_cosine(cos: Mapping[str, np.ndarray], inertia_level: float):
    """A measurement: each arm's mean final middle-layer cosine to the round-2 weights,
    and FedBN minus it (how far the arm lifts the middle layers off their inertia)."""
    parts = []
    for arm, c in cos.items():
        if arm == "fedbn":
            parts.append(f"fedbn {c.mean():.3f}")
            continue
        d = stats.paired_difference(cos["fedbn"], c, level=0.95, method="t")
        parts.append(f"{arm} {c.mean():.3f} (FedBN minus it {d.mean:.3f}, 95% t CI "
                     f"[{d.low:.3f}, {d.high:.3f}]; "
                     f"{'below' if c.mean() < inertia_level else 'not below'} "
                     f"{inertia_level:g})")
    return (Outcome.INCONCLUSIVE, "measured, not decided: mean middle-layer cosine to the "
            "round-2 weights at the last round: " + "; ".join(parts) + ".",
            "a cosine criterion that the intervention does not meet by construction")


RULE_COSINE = Rule(
    "middle-cosine",
    "Middle-layer cosine (a measurement, no verdict; the reviewer's second comparison "
    "criterion): for LIPS and every control, the mean over seeds of the middle layers' "
    "cosine to their round-2 weights at the last round, and FedBN minus it (paired 95% "
    "Student-t CI over the {n} seeds): does the control lift the middle layers off their "
    "inertia as LIPS does? The paper's inertia level is a cosine above {inertia_level}. "
    "Not decided: LIPS and the noise control lower the cosine by construction (they zero "
    "or perturb the weights after aggregation), dropout and weight decay do not act on "
    "the global weights directly, so a difference says what each intervention does to "
    "the weights, not whether learning resumed.",
    _decide_cosine, kind="measurement", reachable=("INCONCLUSIVE",))

COMBINED_PARTS = ("regularisation-controls", "layer-targeting")


# ------------------------------------------------------------------ overfitting (mc[3])
def _decide_overfitting(gap: Mapping[str, np.ndarray], peak: Mapping[str, np.ndarray]):
    """A measurement: each arm's train-minus-test accuracy gap at its last round (mean
    over seeds, 95% t CI) and the largest gap of its curve (mean over seeds)."""
    bits = []
    for arm, g in gap.items():
        m = stats.mean_interval(g)
        bits.append(f"{arm} {m.mean:.2f} [{m.low:.2f}, {m.high:.2f}] (peak "
                    f"{float(np.mean(peak[arm])):.2f})")
    return (Outcome.INCONCLUSIVE, "measured, not decided: train minus test accuracy at "
            "the last round, points, mean [95% t CI] (largest gap over the curve): "
            + "; ".join(bits) + ".",
            "a threshold for 'overfits' fixed independently of the results (none exists "
            "here); whether LIPS narrows the gap is question overfitting-reduced")


RULE_OVERFIT = Rule(
    "overfitting",
    "Overfitting (a measurement, no verdict; the paper blames inertia on overfitting "
    "without measuring it): for every arm, the clients' personalised accuracy on their "
    "own training split minus that on their own test split (each the mean over clients, "
    "as the reported accuracy), read every {every} rounds and at the last; reported per "
    "arm as the mean over the {n} seeds of the last round's gap with its 95% Student-t "
    "interval, and the curve. No threshold for 'overfits' exists independently of the "
    "results.", _decide_overfitting, kind="measurement", reachable=("INCONCLUSIVE",))


def _decide_gap(tw, sensitive: bool, resolution: float = math.nan):
    """Reviewer (record: referee_report.major_comments[3]): the overfitting the paper
    blames is never shown to be what LIPS cures. Three-way outcome of "FedBN's gap
    exceeds LIPS's" (LIPS narrows the gap), mapped with ``holds_when="FALSIFIED"``."""
    reason = f"gap fedbn vs gap lips: {tw.reason}"
    if not sensitive:
        reason = ("no assay sensitivity at the margin's scale, so no equivalence counts; "
                  + reason)
    out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
    needs = ""
    if out == Outcome.INCONCLUSIVE:
        needs = (f"{tw.seeds_needed} pairs would detect the observed difference"
                 if tw.seeds_needed else "a larger or different setting")
    return out, reason, needs, {"flip": tw.flip, "resolution": resolution, "unit": "points"}


RULE_GAP = Rule(
    "overfitting-reduced",
    "Does LIPS narrow the train-test gap (its own question, outside the Bonferroni "
    "family): A = FedBN's gap, B = LIPS's gap (train minus test accuracy at the last "
    "round, points; paired over seeds, each arm at its validation-chosen candidate), "
    "margin m = 0, d = {d} points (the accuracy margin: a gap is a difference of two "
    "accuracies in the same points, and a narrowing smaller than d could not carry a gain "
    "of the paper's size), alpha = {alpha_beside} x {alpha_fraction} = {alpha}: the "
    "{three_way}. Mapped onto the reviewer (the overfitting story is not what LIPS "
    "cures): FALSIFIED (LIPS's gap equivalent to FedBN's or larger) -> CONFIRMED, "
    "SUPPORTED (LIPS narrows it) -> REFUTED. Equivalence counts only with the planted "
    "accuracy handicap detected at this alpha (the gap's seed-to-seed spread is that of "
    "the test accuracy plus the train accuracy's; caveat: the handicap is planted on "
    "accuracy, not on the gap); gated by the premise (it explains LIPS's gain).",
    _decide_gap)


# ---------------------------------------------------------------- best round (mc[2])
def _decide_best_round(best_minus_last: Mapping[str, np.ndarray], at_last, at_best):
    """A measurement: per arm, best-round minus last-round test accuracy (>= 0 by
    construction); LIPS - FedBN read at the last round and at each arm's best round."""
    bits = "; ".join(f"{arm} {float(np.mean(v)):.2f}" for arm, v in best_minus_last.items())
    flips = np.sign(at_last.mean) != np.sign(at_best.mean)
    return (Outcome.INCONCLUSIVE,
            f"measured, not decided: best-round minus last-round test accuracy, mean over "
            f"seeds (points): {bits}. LIPS - FedBN at the last round {at_last.mean:+.2f} "
            f"(95% t CI [{at_last.low:.2f}, {at_last.high:.2f}]), at each run's best round "
            f"{at_best.mean:+.2f} ([{at_best.low:.2f}, {at_best.high:.2f}]): the sign "
            f"{'CHANGES' if flips else 'does not change'} between the readings.",
            "a threshold fixed independently of the results (none exists here)")


RULE_BEST_ROUND = Rule(
    "best-round",
    "Best round against last round (a measurement, no verdict): for every arm and seed, "
    "the highest personalised test accuracy over the curve (read every {every} rounds "
    "and at the last) minus the last round's, the mean over the {n} seeds; and LIPS minus "
    "FedBN (paired 95% Student-t CI) read at the last round and at each run's best "
    "round, with whether its sign changes. Best minus last is >= 0 by construction (the "
    "best round is chosen on the test split), so it is reported, not tested.",
    _decide_best_round, kind="measurement", reachable=("INCONCLUSIVE",))


# ------------------------------------------- the reviewer's test in full: accuracy AND cosine
#: Equivalence margin of the middle-layer cosine (to the round-2 weights, at the last
#: round). Source: the paper calls a layer inert when this cosine is above 0.95, a band of
#: 0.05 below 1; e = 0.02 is under half of that band, as d is under half of the paper's
#: accuracy gain. Fixed in code before any run of the part that uses it.
COS_MARGIN = 0.02


def _decide_both(tw_acc: Mapping[str, Any], tw_cos: Mapping[str, Any], sensitive: bool,
                 cos_sensitive: bool, resolution: float = math.nan):
    """CONFIRMED when some control matches LIPS on accuracy (three-way FALSIFIED for "LIPS
    beats it") AND on the middle-layer cosine (three-way FALSIFIED for "the control's
    cosine stays above LIPS's": equivalent within e, or lower); REFUTED when LIPS beats
    every control on at least one of the two (a SUPPORTED); INCONCLUSIVE otherwise."""
    match, beaten, bits = [], [], []
    for c in tw_acc:
        a, k = tw_acc[c].outcome, tw_cos[c].outcome
        match.append(a == "FALSIFIED" and k == "FALSIFIED")
        beaten.append(a == "SUPPORTED" or k == "SUPPORTED")
        bits.append(f"{c}: accuracy {a} ({tw_acc[c].reason}); cosine {k} "
                    f"({tw_cos[c].reason})")
    reason = " | ".join(bits)
    missing = [w for w, ok in (("accuracy", sensitive), ("cosine", cos_sensitive)) if not ok]
    if missing:
        reason = (f"no assay sensitivity on {' and '.join(missing)}, so no equivalence "
                  f"counts there; " + reason)
    if any(match):
        out = Outcome.CONFIRMED
    elif all(beaten):
        out = Outcome.REFUTED
    else:
        out = Outcome.INCONCLUSIVE
    flips = [tw.flip for tw in list(tw_acc.values()) if tw.flip is not None]
    needs = ""
    if out == Outcome.INCONCLUSIVE:
        nd = [f"{c} ({w}): {tw.seeds_needed} pairs" for w, d_ in (("accuracy", tw_acc),
                                                                  ("cosine", tw_cos))
              for c, tw in d_.items() if tw.outcome == "INCONCLUSIVE" and tw.seeds_needed]
        needs = ("seeds that would detect the observed differences: " + ", ".join(nd)
                 if nd else "a larger or different setting")
    return out, reason, needs, {"flip": min(flips) if flips else None,
                                "resolution": resolution, "unit": "points"}


RULE_BOTH = Rule(
    "controls-match-both",
    "The reviewer's test in full (accuracy AND middle-layer cosine): for each of dropout "
    "/ weight decay / noise on the middle layers, two three-way comparisons, paired over "
    "seeds, at alpha = {alpha_family} x {alpha_fraction} / {m} (Bonferroni over the {m} "
    "controls; within a control both must hold, so each runs at that alpha) = {alpha}. "
    "Accuracy: A = LIPS, B = the control, personalised test accuracy, m = 0, d = {d} "
    "points (as in regularisation-controls). Cosine: A = the control, B = LIPS, mean "
    "middle-layer cosine to the round-2 weights at the last round, m = 0, equivalence "
    "margin e = {e} (under half of the 0.05 band above the paper's inertia level 0.95, "
    "as d is under half of the paper's gain): 'the control stays more inert than LIPS'. "
    "Both: the {three_way}, with d read as e for the cosine. A control matches LIPS when "
    "both are FALSIFIED (accuracy equivalent or better, cosine equivalent or lower); "
    "CONFIRMED when some control matches, REFUTED when LIPS beats every control on at "
    "least one (a SUPPORTED), else INCONCLUSIVE. Equivalence counts only with assay "
    "sensitivity: on accuracy the planted handicap detected at this alpha; on the cosine "
    "FedBN with its middle layers frozen after round f told apart from FedBN (its cosine "
    "higher, SUPPORTED) at this alpha. Caveat, as in middle-cosine: pruning and noise "
    "lower the cosine by changing the weights after aggregation. Gated by the premise.",
    _decide_both)
N_BOTH = len(CONTROLS)


_PREMISE_NEEDS = ("LIPS's own gain over FedBN must reproduce first: the paper's setting "
                     "(--scale paper: CIFAR-100, ResNet-8, 300 rounds; `audit estimate "
                     "lips-dropout-control --scale paper --device cuda --data-dir PATH` gives its "
                     "device time)")

QUESTIONS = (
    Question("regularisation-matches",
             "Does generic regularisation of the middle layers (dropout, weight decay or "
             "noise, tuned on validation data) match or beat LIPS?",
             ("skeptic_critique.concrete_test", "skeptic_critique.load_bearing_attack",
              "falsifier", "referee_report.major_comments[1]"),
             ("regularisation-controls",), decides=_PREMISE_NEEDS),
    Question("layer-targeting",
             "Does pruning every weight layer match pruning only the middle ones?",
             ("referee_report.major_comments[4]",), ("layer-targeting",),
             decides=_PREMISE_NEEDS),
    Question("random-mask",
             "Do random masks of the same size match or beat the sensitivity masks?",
             ("referee_report.major_comments[0]",), ("random-mask",),
             decides=_PREMISE_NEEDS),
    Question("selection-optimism",
             "How much does choosing (tau0, k) on the test set flatter LIPS?",
             ("referee_report.major_comments[2]",), ("selection-optimism",),
             kind="measurement"),
    Question("middle-cosine",
             "How far does each arm move the middle layers off their inertia (cosine to "
             "round 2)?", (), ("middle-cosine",), kind="measurement"),
    # the reviewer's concrete test names two criteria; regularisation-matches keeps the
    # accuracy-only reading (unchanged), this question asks for both at once, so a
    # reader sees each reading with its own verdict
    Question("regularisation-matches-both",
             "Does some regularisation control match LIPS on accuracy AND on the "
             "middle-layer cosine, as the reviewer's test asks?",
             ("skeptic_critique.concrete_test",), ("controls-match-both",),
             decides=_PREMISE_NEEDS),
    Question("overfitting",
             "How large is the train-test accuracy gap of every arm, round by round?",
             ("referee_report.major_comments[3]",), ("overfitting",), kind="measurement"),
    Question("overfitting-reduced",
             "Does LIPS narrow the train-test gap against FedBN, as its overfitting "
             "story implies?", ("referee_report.major_comments[3]",),
             ("overfitting-reduced",), decides=_PREMISE_NEEDS),
    Question("best-round",
             "How much higher is the best round's accuracy than the last round's, and "
             "does LIPS's comparison with FedBN change sign between the two readings?",
             ("referee_report.major_comments[2]",), ("best-round",), kind="measurement"),
)

COMBINATION = questions.combination(
    QUESTIONS, "the parts explaining LIPS's gain are INCONCLUSIVE where that gain (the "
    "premise) is not reproduced")


PREMISE_EFFECT = "LIPS beats FedBN (personalised test accuracy, points)"


def _premise(tw, alpha: float) -> Premise:
    """The paper's own effect, decided by a fixed rule: the three-way outcome of "LIPS
    beats FedBN" (m = 0, d, alpha_premise x alpha_fraction): SUPPORTED -> reproduced,
    FALSIFIED (below FedBN, or within +-d with the planted handicap detected) -> not
    reproduced, INCONCLUSIVE -> undecided."""
    est = Estimate.of("premise_lips_minus_fedbn", tw.difference, "points",
                      f"LIPS minus FedBN, {100 * (1 - alpha):.4g}% {tw.difference.method} "
                      "CI (paper: +4.76 on CIFAR-100 Dir(0.1))")
    return kit.premise(PREMISE_EFFECT, tw, estimate=est,
                       rule=f"three-way rule on LIPS - FedBN (m = 0, d = "
                            f"{tw.equivalence_margin:g}, alpha = {alpha:.4g})")


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


def _beside_note(tw_rand, opt, grid_range, cfg) -> str:
    r = tw_rand.difference
    n_c = len(cfg["grid"]["lips"])
    return (f"Beside the verdict. Random masks (review comment on Table 4): LIPS minus "
            f"LIPS-random {r.mean:.2f} points ({100 * (1 - tw_rand.alpha):.4g}% CI "
            f"[{r.low:.2f}, {r.high:.2f}]; three-way: {tw_rand.outcome}). Selection "
            f"optimism (review comment on tau0 and k picked on test; a measurement): "
            f"choosing LIPS's candidate on test instead of validation in each run adds "
            f"{opt.mean:.2f} points (95% t CI [{opt.low:.2f}, {opt.high:.2f}]); it is at "
            f"least 0 by construction, so it is reported, not tested against 0; the "
            f"candidates differ by {grid_range:.2f} points per run on average, which bounds "
            f"what any choice could add. What this shows: how much picking among our {n_c} "
            f"candidates on the test splits inflates the reported number in this setting. "
            f"What it does not show: the size of the optimism in the paper's own numbers "
            f"(its grid in Figure 7 is larger, optimism grows with the number of candidates "
            f"and the spread of their results, and its data, model and rounds differ), nor "
            f"anything about reporting the best round instead of the last, which the "
            f"comment also raises: the verdicts read the last round; the best-round "
            f"reading is the measurement best-round.")


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



def _curves_and_full_test(sel, acc, cos_final, cfg, ctx, premise, resolution, frac,
                          d_margin, planted, a_side, sens_side):
    """The parts, estimates, tables and figures of the overfitting gap, the best round
    and the reviewer's test in full (accuracy and cosine)."""
    n = len(ctx.seeds)
    every = curve_every(cfg)

    def per_run(arm, f):
        return np.array([f(r) for r in sel[arm]["runs"]], dtype=float)

    gap = {a: per_run(a, lambda r: 100 * r["gap_curve"][-1]) for a in ARM_NAMES}
    peak = {a: per_run(a, lambda r: 100 * max(r["gap_curve"])) for a in ARM_NAMES}
    best = {a: per_run(a, lambda r: 100 * max(r["test_curve"])) for a in ARM_NAMES}
    last = {a: per_run(a, lambda r: 100 * r["test_curve"][-1]) for a in ARM_NAMES}
    bml = {a: best[a] - last[a] for a in ARM_NAMES}

    tw_gap = stats.three_way(gap["fedbn"], gap["lips"], margin=0.0,
                             equivalence_margin=d_margin, alpha=a_side, sensitive=sens_side)
    at_last = stats.paired_difference(acc["lips"], acc["fedbn"], level=0.95, method="t")
    at_best = stats.paired_difference(best["lips"], best["fedbn"], level=0.95, method="t")

    a_both = float(cfg["alpha_family"]) * frac / N_BOTH
    sens_both = planted(a_both).outcome == "SUPPORTED"
    cos_freeze = stats.three_way(cos_final["fedbn-freeze-middle"], cos_final["fedbn"],
                                 margin=0.0, equivalence_margin=COS_MARGIN, alpha=a_both,
                                 sensitive=False)
    cos_sens = cos_freeze.outcome == "SUPPORTED"
    tw_acc = {c: stats.three_way(acc["lips"], acc[c], margin=0.0, equivalence_margin=d_margin,
                                 alpha=a_both, sensitive=sens_both) for c in CONTROLS}
    tw_cos = {c: stats.three_way(cos_final[c], cos_final["lips"], margin=0.0,
                                 equivalence_margin=COS_MARGIN, alpha=a_both,
                                 sensitive=cos_sens) for c in CONTROLS}
    parts = (
        premise_gate(RULE_BOTH(tw_acc, tw_cos, sens_both, cos_sens, resolution, params=dict(
            alpha_family=f"{float(cfg['alpha_family']):g}", alpha_fraction=f"{frac:.4g}",
            m=N_BOTH, alpha=f"{a_both:.4g}", d=f"{d_margin:g}", e=f"{COS_MARGIN:g}",
            three_way=stats.three_way_text(0.0, d_margin, a_both, n))), premise),
        RULE_OVERFIT(gap, peak, params={"every": every, "n": n}),
        premise_gate(RULE_GAP(tw_gap, sens_side, resolution, params=dict(
            d=f"{d_margin:g}", alpha_beside=f"{float(cfg.get('alpha_beside', 0.05)):g}",
            alpha_fraction=f"{frac:.4g}", alpha=f"{a_side:.4g}",
            three_way=stats.three_way_text(0.0, d_margin, a_side, n))), premise),
        RULE_BEST_ROUND(bml, at_last, at_best, params={"every": every, "n": n}),
    )

    est = [Estimate.of("gap_fedbn_minus_lips", tw_gap.difference, "points",
                       f"FedBN's train-test gap minus LIPS's at the last round (part "
                       f"overfitting-reduced), {100 * (1 - a_side):.4g}% CI"),
           Estimate.of("lips_minus_fedbn_best_round", at_best, "points",
                       "LIPS minus FedBN, each run read at its best round (test-chosen)"),
           Estimate("cosine_margin", COS_MARGIN, unit="cosine", description="equivalence "
                    "margin e of the middle-layer cosine (under half of the paper's 0.05 "
                    "inertia band)"),
           Estimate("cosine_sensitive", float(cos_sens), description="1 if FedBN with "
                    "frozen middle layers was told apart from FedBN on the cosine at the "
                    "controls-match-both alpha"),
           Estimate.of("cos_freeze_minus_fedbn", cos_freeze.difference, "cosine",
                       f"planted cosine difference: frozen middle layers minus FedBN, "
                       f"{100 * (1 - a_both):.4g}% CI")]
    for c in CONTROLS:
        est.append(Estimate.of(f"cos_{c}_minus_lips", tw_cos[c].difference, "cosine",
                               f"{c}'s final middle cosine minus LIPS's (part "
                               f"controls-match-both), {100 * (1 - a_both):.4g}% CI"))
    for a in ARM_NAMES:
        est.append(mean_estimate(f"gap_{a}", gap[a], "points", f"{a}: train minus test "
                                 "accuracy at the last round (overfitting)",
                                 no_spread_point=True))
        est.append(mean_estimate(f"best_minus_last_{a}", bml[a], "points",
                                 f"{a}: best-round minus last-round test accuracy "
                                 "(>= 0 by construction)", no_spread_point=True))

    def m_ci(x):
        m = stats.mean_interval(x)
        return round(m.mean, 2), f"[{m.low:.2f}, {m.high:.2f}]"

    rows = tuple((a,) + m_ci(gap[a]) + (round(float(peak[a].mean()), 2),
                                         round(float(best[a].mean()), 2),
                                         round(float(last[a].mean()), 2),
                                         round(float(bml[a].mean()), 2))
                 for a in ARM_NAMES)
    t_curve = Table("Overfitting and best round: train-test gap and best vs last round "
                    "(points)", ("arm", "gap (last round)", "95% t CI", "largest gap",
                                 "best-round acc", "last-round acc", "best - last"), rows,
                    note=f"Curves read every {every} rounds and at the last; mean over "
                         f"seeds {list(ctx.seeds)}; each arm at its validation-chosen "
                         f"candidate. LIPS - FedBN: last round {at_last.mean:+.2f}, best "
                         f"round {at_best.mean:+.2f}.")

    def bit(tw):
        return f"{tw.difference.mean:+.4f} {tw.outcome}"

    t_both = Table("The reviewer's test in full: each control against LIPS on accuracy and "
                   "on the middle-layer cosine", ("control", "lips - control (points)",
                                                  "accuracy outcome",
                                                  "control - lips (cosine)",
                                                  "cosine outcome"),
                   tuple((c, round(tw_acc[c].difference.mean, 3), tw_acc[c].outcome,
                          round(tw_cos[c].difference.mean, 4), tw_cos[c].outcome)
                         for c in CONTROLS),
                   note=f"alpha = {a_both:.4g}; d = {d_margin:g} points, e = {COS_MARGIN:g}; "
                        f"cosine sensitivity (frozen minus FedBN): {bit(cos_freeze)}; "
                        f"accuracy sensitivity: {'shown' if sens_both else 'not shown'}.")
    series = []
    for a in ARM_NAMES:
        runs = sel[a]["runs"]
        xs = runs[0]["curve_rounds"]
        k = min(len(r["gap_curve"]) for r in runs)
        vals = np.array([[100 * g for g in r["gap_curve"][:k]] for r in runs])
        series.append({"label": a, "x": list(xs[:k]), "y": vals.mean(0).tolist(),
                       "low": vals.min(0).tolist(), "high": vals.max(0).tolist()})
    fig = Figure("overfitting_gap", "Overfitting: train minus test accuracy per round",
                 "round", "gap (points)", tuple(series),
                 caption="Personalised accuracy on the clients' own training splits minus "
                         "on their test splits, mean over seeds, band = min..max.")
    return parts, est, (t_curve, t_both), (fig,)


def analyse(results, ctx: RunContext) -> Analysis:
    cfg = ctx.config
    frac = float(getattr(ctx, "alpha_fraction", 1.0))
    d_margin = float(cfg["equivalence_margin"])
    alpha = float(cfg["alpha_family"]) * frac / N_COMPARISONS
    a_side = float(cfg.get("alpha_beside", 0.05)) * frac
    a_prem = float(cfg.get("alpha_premise", 0.05)) * frac
    sel = {arm: _selected(results, arm, ctx) for arm in ARM_NAMES}
    acc = {arm: sel[arm]["test"] for arm in ARM_NAMES}
    n_test = sel["fedbn"]["runs"][0]["n_test"]
    resolution = 100.0 / n_test
    n = len(ctx.seeds)
    R = int(cfg["rounds"])
    short_rounds = int(round(R * cfg["short_fraction"]))

    # assay sensitivity at the margin's scale: the planted handicap (FedBN stopped at
    # short_fraction of the rounds, about d on tuning seeds) is detected by the same rule,
    # seeds and alpha as the decision it licenses
    def planted(a):
        return stats.three_way(acc["fedbn"], acc["fedbn-short"], margin=0.0,
                               equivalence_margin=d_margin, alpha=a, sensitive=False)

    tw_sens = planted(alpha)
    sensitive = tw_sens.outcome == "SUPPORTED"
    tw_sens_side = planted(a_side)
    sens_side = tw_sens_side.outcome == "SUPPORTED"
    sens_prem = planted(a_prem).outcome == "SUPPORTED"

    # premise first: does LIPS beat FedBN here?
    tw_prem = stats.three_way(acc["lips"], acc["fedbn"], margin=0.0,
                              equivalence_margin=d_margin, alpha=a_prem, sensitive=sens_prem)
    premise = _premise(tw_prem, a_prem)

    tws = {c: stats.three_way(acc["lips"], acc[c], margin=0.0, equivalence_margin=d_margin,
                              alpha=alpha, sensitive=sensitive) for c in CONTROLS}
    tw_all = stats.three_way(acc["lips"], acc["lips-all-layers"], margin=0.0,
                             equivalence_margin=d_margin, alpha=alpha, sensitive=sensitive)
    fam = dict(d=f"{d_margin:g}", alpha_family=f"{float(cfg['alpha_family']):g}",
               alpha_fraction=f"{frac:.4g}", m=N_COMPARISONS, alpha=f"{alpha:.4g}",
               three_way=stats.three_way_text(0.0, d_margin, alpha, n),
               short_rounds=short_rounds, rounds=R)
    parts = (premise_gate(RULE_CONTROLS(tws, sensitive, resolution, params=fam), premise),
             premise_gate(RULE_LAYERS({"lips-all-layers": tw_all}, sensitive, resolution,
                                      params=fam), premise))

    # reported beside the verdict: random masks, the optimism of tuning on test, cosine
    tw_rand = stats.three_way(acc["lips"], acc["lips-random"], margin=0.0,
                              equivalence_margin=d_margin, alpha=a_side, sensitive=sens_side)
    s_l = sel["lips"]
    grid_range = float(s_l["grid_range"].mean())
    opt = stats.paired_difference(s_l["per_seed_test_best"], s_l["per_seed_val_choice"],
                                  level=0.95, method="t")
    cos_final = {arm: np.array([r["middle_cos"][-1] for r in sel[arm]["runs"]])
                 for arm in ARM_NAMES}
    inertia_level = 0.95
    cos_arms = ("fedbn", "lips") + CONTROLS
    parts += (
        premise_gate(RULE_RANDOM(tw_rand, sens_side, resolution, params=dict(
            d=f"{d_margin:g}", alpha_beside=f"{float(cfg.get('alpha_beside', 0.05)):g}",
            alpha_fraction=f"{frac:.4g}", alpha=f"{a_side:.4g}",
            three_way=stats.three_way_text(0.0, d_margin, a_side, n))), premise),
        RULE_SELECTION(opt, grid_range, d_margin, params={"n": n}),
        RULE_COSINE({a: cos_final[a] for a in cos_arms}, inertia_level,
                    params={"n": n, "inertia_level": f"{inertia_level:g}"}),
    )
    more_parts, more_est, more_tables, more_figs = _curves_and_full_test(
        sel, acc, cos_final, cfg, ctx, premise, resolution, frac, d_margin, planted, a_side,
        sens_side)
    parts += more_parts

    est = [
        Estimate.of("assay_sensitivity_gap", tw_sens.difference, "points",
                    f"FedBN minus FedBN stopped at {short_rounds} of {R} rounds (planted "
                    f"handicap of about d = {d_margin:g}), {100 * (1 - alpha):.4g}% CI; "
                    "sensitive when its lower end exceeds 0 (three-way SUPPORTED)"),
        Estimate("assay_sensitive", float(sensitive), description="1 if the planted "
                 "handicap was detected at the family's alpha"),
        Estimate("assay_sensitive_beside", float(sens_side), description="1 if the planted "
                 "handicap was detected at the random-mask part's alpha"),
        Estimate("metric_resolution", resolution, unit="points", description="one test "
                 "decision per seed (all clients' test splits together)"),
        premise.estimate,
        difference_estimate("lips_minus_fedbn", acc["lips"], acc["fedbn"],
                            "points", "LIPS gain over FedBN (paper: +4.76 on CIFAR-100)"),
    ]
    for c, tw in list(tws.items()) + [("lips-all-layers", tw_all)]:
        est.append(Estimate.of(f"lips_minus_{c}", tw.difference, "points",
                               f"LIPS minus {c}, {100 * (1 - alpha):.4g}% CI (Bonferroni)"))
        if tw.mde is not None:
            est.append(Estimate(f"mde_{c}", float(tw.mde), unit="points", n=n,
                                method="t power 0.8", description=f"smallest LIPS - {c} "
                                "difference this comparison detects with power 0.8"))
    est += [
        difference_estimate("lips_random_minus_lips", acc["lips-random"], acc["lips"],
                            "points", "random mask minus sensitivity mask (paper Table 4: "
                            "+2.30)"),
        difference_estimate("lips_released_score_minus_lips", acc["lips-released-score"],
                            acc["lips"], "points", "released score |grad * w| (T scaled to "
                            "the run) minus the printed one"),
        difference_estimate("freeze_minus_fedbn", acc["fedbn-freeze-middle"], acc["fedbn"],
                            "points", "middle layers frozen after round f, minus FedBN (paper "
                            "Table 1: under one point lost)"),
    ]
    for arm in ARM_NAMES:
        est.append(mean_estimate(f"acc_{arm}", acc[arm], "points",
                                 f"personalised test accuracy of {arm}"))
    for arm in cos_arms:
        nm = {"fedbn": "fedbn", "lips": "lips", "fedbn-dropout-middle": "dropout",
              "fedbn-weight-decay": "weight_decay", "fedbn-noise-middle": "noise"}[arm]
        est.append(mean_estimate(f"{nm}_middle_cos_final", cos_final[arm], "cosine",
                                 f"{arm}: mean middle-layer cosine to the round-2 weights at "
                                 "the last round (paper's inertia: above 0.95)"))
        if arm != "fedbn":
            est.append(Estimate.of(f"cos_lift_{nm}", stats.paired_difference(
                cos_final["fedbn"], cos_final[arm], level=0.95, method="t"), "cosine",
                f"FedBN's final middle cosine minus {arm}'s (how far it lifts the middle "
                "layers off their inertia)"))
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
    est.append(Estimate.of("lips_minus_lips-random", tw_rand.difference, "points",
                           f"LIPS minus LIPS with a random mask (part random-mask), "
                           f"{100 * (1 - a_side):.4g}% CI"))
    est.append(Estimate.of("selection_optimism_per_run_lips", opt, "points",
                           "LIPS: per run, test accuracy of the candidate chosen on test "
                           "minus that of the candidate chosen on validation (part "
                           "selection-optimism, a measurement; >= 0 by construction)"))
    est.append(mean_estimate("selection_grid_range_lips", s_l["grid_range"], "points",
                             "LIPS: per run, highest minus lowest test accuracy over the "
                             "tuning candidates (the most a choice could change the number)"))
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
    def row(name, tw):
        dd = tw.difference
        return (name, round(dd.mean, 3), f"[{dd.low:.3f}, {dd.high:.3f}]",
                f"{tw.alpha:.4g}", round(tw.tost.p_value, 4), tw.outcome,
                "" if tw.flip is None else round(tw.flip, 3),
                "" if tw.seeds_needed is None else tw.seeds_needed)

    head = ("comparison", "mean", "(1 - alpha) interval of the rule", "alpha",
            "equivalence p (exact sign tests)",
            "three-way outcome", "flip (points)", "seeds needed")
    t_cmp = Table("Comparisons of the combined parts, the premise and the planted handicap "
                  "(points; paired over seeds)", head,
                  tuple(row(f"lips - {name}", tw)
                        for name, tw in list(tws.items()) + [("lips-all-layers", tw_all)])
                  + (row("premise: lips - fedbn", tw_prem),
                     row("planted: fedbn - fedbn-short", tw_sens)),
                  note=f"Three-way outcome about 'A beats B' (m = 0); d = {d_margin:g} "
                       f"points; the combined parts' alpha = {alpha:.4g} (Bonferroni over "
                       f"{N_COMPARISONS}, times this look's share {frac:.4g}); equivalence "
                       "is the same interval inside (-d, +d); flip = the smallest change "
                       "of one seed's difference that changes the outcome (resolution "
                       f"{resolution:.3g} points).")
    t_side = Table("Part reported beside the verdict (points; paired over seeds)", head,
                   (row("lips - lips-random", tw_rand),
                    row("planted: fedbn - fedbn-short (beside alpha)", tw_sens_side)),
                   note=f"Part random-mask; d = {d_margin:g} points; alpha = {a_side:.4g}; "
                        "it does not enter the claim's verdict.")
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
        xs, ys, lo, hi = [], [], [], []
        for t in range(len(curves[0])):
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
             "lips-released-score": "released", "fedbn-dropout-middle": "dropout",
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

    sd = tw_sens.difference
    mdes = ", ".join(f"{c}: {tw.mde:.2f}" for c, tw in
                     list(tws.items()) + [("lips-all-layers", tw_all)] if tw.mde is not None)
    notes = (
        f"Premise (LIPS beats FedBN): {premise.status}. {premise.reason} Where it is not "
        "reproduced, the parts that explain LIPS's gain (regularisation-controls, "
        "layer-targeting, random-mask) are INCONCLUSIVE with 'premise not reproduced at "
        "this scale', whatever their comparisons say (each comparison's own outcome stays "
        "in its reason and in the comparisons table).",
        "Setting and why it can separate arms: 8x8 digits, "
        f"{cfg['n_clients']} clients with {cfg['n_train']} training images each drawn with "
        f"Dirichlet({cfg['alpha']}) label proportions (the paper's per-client draw), "
        f"{R} rounds. A prototype at 60 rounds saturated at about 98% "
        "personalised accuracy for every arm; here training stops where FedBN is still "
        "improving, and every client's test split comes from the held-out test set "
        f"({cfg['n_test']} images per client, {n_test} per seed, resolution "
        f"{resolution:.2f} points). How the rounds, learning rate, width and client count "
        "were chosen is recorded under 'How the settings were chosen' (at smoke scale on "
        "seeds 0-2, which are also verdict seeds, as that section says; at full scale on "
        "tuning seeds only).",
        f"Assay sensitivity at the margin's scale: planted handicap: FedBN stopped at "
        f"{int(round(R * cfg['short_fraction']))} of {R} rounds, its size chosen on tuning "
        "seeds to give a gap of about d (see 'How the settings were chosen'). On the "
        "verdict seeds FedBN "
        f"minus that arm is {sd.mean:.2f} points ({100 * (1 - alpha):.4g}% CI "
        f"[{sd.low:.2f}, {sd.high:.2f}], three-way {tw_sens.outcome} at the family's alpha "
        f"{alpha:.4g}: {'detected' if sensitive else 'not detected'}; at the random-mask "
        f"part's alpha {a_side:.4g}: {'detected' if sens_side else 'not detected'}). An "
        "equivalence counts only where it is detected. Caveat: the handicap is the same "
        "FedBN run cut short (its pairs share the trajectory up to the cut), so its "
        "differences vary less than those between two differently trained arms; the "
        "minimum detectable effects of the combined comparisons (power 0.8, where "
        f"inconclusive) are: {mdes or 'none (all decided)'} points.",
        _gain_note(acc, parts),
        "Tuning: every tuned arm gets the same number of candidates; the candidate with the "
        "highest mean validation accuracy (clients' validation splits, disjoint from their "
        "training data) is reported; the 'chosen on test' columns show what picking on the "
        "test splits would have reported (selection optimism, at least 0 by "
        "construction); the per-seed optimism picks the best candidate on test in every "
        "run separately, as a per-run peek at the test split would.",
        _inertia_note(acc, cos_final, cfg),
        _beside_note(tw_rand, opt, grid_range, cfg),
        "Faithful arms. lips-released-score uses the released code's score |grad * w| and "
        "its schedule rule with the horizon T scaled to the run length (the release's "
        "T = 300 equals its own 300-round runs). The earlier reading, T fixed at 300 in a "
        f"{R}-round run, still pruned about {100 * 0.2 * (1 - (R - R % 5) / 300):.0f}% of "
        "the middle weights in the last pruning round and was evaluated right after; it "
        "cost that arm 4.4 points against LIPS at smoke scale, i.e. it pushed the released "
        "arm down (it never entered the verdict); --set released_horizon=300 restores it. "
        "Every arm keeps norm layers local (FedBN); the release has no FedBN client.",
        "Thresholds and their sources: d = "
        f"{d_margin:g} points, under half of the paper's 4.76-point CIFAR-100 gain (fixed "
        "before any run); alpha = 0.05 for the combined family (Bonferroni over "
        f"{N_COMPARISONS} comparisons), 0.05 for the premise and for random-mask, each "
        f"times this look's share {frac:.4g}; the inertia level 0.95 is the paper's.",
        "Caveat on the cosine: LIPS, its ablations and the noise control change middle "
        "weights directly after aggregation, so their lower cosine to round 2 partly "
        "measures the perturbation itself, not renewed learning; hence the cosine is a "
        "measurement (part middle-cosine), not a criterion of the verdict.",
        "Caveat on scale: this is a small CPU setting (digits, a VGG-style net of width "
        f"{cfg['width']}), not CIFAR-100 with ResNet-8 at 300 rounds; the paper's numbers "
        f"are shown beside ours only for orientation. With {n} seeds and a "
        f"Bonferroni alpha of {alpha:.4g} equivalence needs a small spread of the "
        "differences; the seeds needed are given when a comparison is inconclusive. A "
        "decision needs Hall's interval, widened by a skewness allowance, to agree with an "
        "exact sign test at alpha/2 a side (nothing is decided below 6 pairs). "
        "The paper scale reads CIFAR-100 from --data-dir (ResNet-8, 100 clients x 100 "
        "images, 300 rounds); TinyImageNet with ResNet-10 is the same scale with "
        "--set dataset=\"tinyimagenet\" --set model=\"resnet10\".",
    )
    by = {e.name: e for e in est}
    findings = [Finding(f"The paper's own effect, LIPS over FedBN, is {premise.status} "
                        f"here ({premise.estimate.value:+.2f} points); the questions that "
                        f"explain it wait for it.", (premise.estimate.name,))]
    if "cos_lift_noise" in by and "cos_lift_lips" in by:
        findings.append(Finding(
            f"The middle-layer cosine drop that the paper reads as cured inertia appears "
            f"with plain Gaussian noise too: FedBN's final middle cosine minus the arm's is "
            f"{by['cos_lift_lips'].value:+.4f} for LIPS and {by['cos_lift_noise'].value:+.4f} "
            f"for the noise control (dropout {by['cos_lift_dropout'].value:+.4f}); both "
            f"perturb the weights right after aggregation.",
            ("cos_lift_lips", "cos_lift_noise", "cos_lift_dropout")))
    return Analysis(tuple(est) + tuple(more_est), parts,
                    (t_arms, t_cmp, t_side, t_grid, per_seed, t_layers) + more_tables
                    + (kit.misbehaviour_table(kit.misbehaving_seeds(acc, ARM_NAMES, ctx.seeds),
                                              n, "personalised test accuracy, points"),),
                    (fig_cos, fig_acc) + more_figs, notes, premise=premise,
                    findings=tuple(findings))


#: How the settings were chosen (audit.tuning: tuning seeds only, never a verdict's,
#: except the first smoke record, made before tuning seeds were reserved: it says so).
SEARCHES = (
    Search("smoke", "rounds, learning rate, width and clients at smoke scale (speed, and "
           "accuracy off the ceiling that a 60-round prototype hit)", (0, 1, 2),
           ("a short pilot of FedBN, early-stopped FedBN, LIPS, dropout and all-layer LIPS "
            "(its numbers were not kept)",
            "re-checked on tuning seeds 1000-1004: FedBN still gains 2.24 points (SD 1.13) "
            "over its last 3 of 30 rounds, so the setting is off the ceiling there too"),
           "30 clients x 20 images, VGG width 0.25, 30 rounds, lr 0.1",
           "the fastest setting that left the ceiling; the tuning grids were fixed before "
           "that pilot", verdict_seeds_used=True),
    Search("smoke", "size of the planted handicap (assay sensitivity at the margin d = 2 "
           "points): the fraction of rounds the early-stopped FedBN runs", tuning_seeds(5),
           ("27 of 30 rounds: FedBN - short FedBN 2.24 points (SD 1.13)",
            "26 rounds: 2.00 (SD 1.42)", "24 rounds: 4.84"),
           "short_fraction 0.9 (27 of 30 rounds)",
           "26 and 27 rounds both put the gap at about d (2.00 and 2.24 points); 27 has "
           "the smaller spread; 24 rounds is more than twice d"),
    Search("full", "learning rate and rounds at full scale, where LIPS's own gain over FedBN "
           "(the premise) shows most: the paper's effect given its best chance",
           tuning_seeds(3),
           ("60 rounds, lr 0.1: FedBN 94.53, LIPS (tau0 0.2) 94.96, LIPS (tau0 0.5) 94.27; "
            "LIPS(0.2) - FedBN +0.42 points (SD 0.57)",
            "60 rounds, lr 0.03: FedBN 87.16, LIPS 87.91 and 88.20; +0.76 (SD 0.10)",
            "100 rounds, lr 0.1: FedBN 96.04, LIPS 96.27 and 95.80; +0.22 (SD 0.28)",
            "100 rounds, lr 0.03: FedBN 94.36, LIPS 94.49 and 94.58; +0.13 (SD 0.53)"),
           "60 rounds, lr 0.03 (`audit tune lips-dropout-control --scale full --arms "
           "fedbn,lips --metric test_acc --grid rounds=60,100 --grid lr=0.1,0.03 "
           "--contrast lips/cand=0:fedbn/cand=0`, 50 clients)",
           "the largest LIPS - FedBN gain for both tuning candidates, at the cost of the "
           "60-round settings, with FedBN furthest from the ceiling (87 against 94-96 %)",
           test_metric_read=True),
    Search("full", "clients at full scale: 50 clients would take about 55 minutes at the "
           "cap of 20 seeds (340 units of about 9.5 s measured), so 40; is the learning "
           "rate still the one where LIPS's gain shows most?", tuning_seeds(3),
           ("40 clients, lr 0.1: FedBN 93.81, LIPS 94.00 and 94.28; LIPS(0.2) - FedBN "
            "+0.19 points (SD 0.97)",
            "40 clients, lr 0.03: FedBN 86.64, LIPS 87.31 and 88.14; +0.67 (SD 1.30)"),
           "40 clients, lr 0.03 (`audit tune ... --set n_clients=40 --set rounds=60 "
           "--grid lr=0.1,0.03`)",
           "the time budget sets the clients; lr 0.03 still gives LIPS its larger gain",
           test_metric_read=True),
    Search("full", "size of the planted handicap at full scale (d = 2 points)",
           tuning_seeds(5),
           ("50 clients: short_fraction 0.8 (48 of 60 rounds): FedBN - short FedBN 4.39 "
            "points (SD 0.63); 0.9 (54 rounds): 2.05 (SD 0.28); 0.95 (57 rounds): 0.83 "
            "(SD 0.54)",
            "40 clients (the chosen setting): 0.9: 1.97 (SD 0.83)"),
           "short_fraction 0.9 (54 of 60 rounds)", "the fraction whose gap is closest to d"),
)


CLAIM = Claim(
    searches=SEARCHES,
    id=CLAIM_ID,
    paper=LIPS,
    record=RecordRef(RECORDS[LIPS.arxiv_id], ("skeptic_critique.load_bearing_attack",
                                              "skeptic_critique.concrete_test", "falsifier",
                                              "referee_report.major_comments[0]",
                                              "referee_report.major_comments[1]",
                                              "referee_report.major_comments[2]",
                                              "referee_report.major_comments[3]",
                                              "referee_report.major_comments[4]")),
    title="dropout control",
    statement="The accuracy gain of LIPS is never compared with generic regularisation "
              "of the middle layers (dropout, weight decay, noise) nor with pruning every "
              "layer, so it is not shown to come from curing layer inertia; random masks "
              "do as well as the sensitivity score, and the hyperparameters were picked "
              "on test data.",
    arms=ARMS,
    rules=(RULE_CONTROLS, RULE_LAYERS, RULE_RANDOM, RULE_SELECTION, RULE_COSINE, RULE_BOTH,
           RULE_OVERFIT, RULE_GAP, RULE_BEST_ROUND),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=True,
    # plain `audit run` without seeds: the first sequential look (the three-way rule
    # decides nothing below 6 pairs; a lock is reproduced with its own plan)
    default_seeds=tuple(range(10)),
    # the metric `audit tune` may read: personalised accuracy on the clients' validation
    # splits (every other accuracy reads test data)
    validation_metrics=("val_acc",),
    scales=SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
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
