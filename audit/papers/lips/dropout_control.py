"""Falsifier ``lips-dropout-control``: is LIPS's gain more than generic regularisation?

Paper: LIPS, arXiv 2506.00932v1. What the claim declares (the reviewer's claim, the arms,
scales and tuning grids, the parts and their rules, the questions, the notes' prose, how
the settings were chosen, and why this setting can separate the arms) is in
:mod:`audit.papers.lips.declarations.dropout_control`; this module holds the piece
each arm changes, the clients' split, ``run``, the decisions and the presentation.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from audit import kit, questions, stats
from audit.analysis import difference_estimate, mean_estimate
from audit.claims import Analysis, AuditError, Claim, Figure, RunContext, RunSpec, Table
from audit.papers.lips.declarations import dropout_control as D
from audit.papers.lips.declarations.dropout_control import (  # noqa: F401 (re-exported)
    ARMS, CLAIM_ID, CONTROLS, COS_MARGIN, N_COMPARISONS, SCALES, SEARCHES)
from audit.questions import Finding
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer, premise_gate

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
    ``score`` names a score of :mod:`audit.papers.lips.algorithm` (imported when the piece is
    built: it imports torch, which listing and reviewing the claims do not need)."""

    def post(hp, cfg: Mapping):
        from audit.papers.lips import algorithm as lips

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
    from audit.papers.lips.algorithm import gaussian_noise, printed_schedule

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


# ------------------------------------------------------------------------------ data
@functools.lru_cache(maxsize=4)
def _digits_like(name: str, kw: tuple = ()):
    from audit.fl.data import load_dataset

    # one fixed train/test split; the seeds vary clients
    return load_dataset(name, seed=0, **dict(kw))


def _dataset(cfg: Mapping, ctx: RunContext, seed: int):
    from audit.fl.data import load_dataset

    name = cfg["dataset"]
    if name in ("digits", "synthetic"):
        # synthetic: Gaussian blobs in digits' 8 x 8 shape, made as hard as dataset_kw's
        # noise says (audit.fl.data.synthetic_classification)
        return _digits_like(name, tuple(sorted(dict(cfg.get("dataset_kw") or {}).items())))
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
    from audit.papers.lips.algorithm import FedBNProbe

    if arm not in PIECES:
        raise AuditError(f"unknown arm {arm!r}")
    piece = PIECES[arm]
    ref = int(cfg["reference_round"])
    probe = {}
    if piece.post is not None:
        probe["post"] = piece.post(hp, cfg)
    if piece.freeze:
        probe["freeze_after"] = _freeze_round(cfg)
    alg = FedBNProbe(**probe, reference_round=ref, curve_every=curve_every(cfg))
    model_kw = piece.model(hp) if piece.model is not None else {}
    over = piece.config(hp, cfg) if piece.config is not None else {}
    return alg, model_kw, over


def _freeze_round(cfg: Mapping) -> int:
    """Round f after which the freeze arm's middle layers get no update (at least the
    reference round)."""
    return max(int(cfg["reference_round"]),
               int(round(int(cfg["rounds"]) * cfg["freeze_fraction"])))


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


# --------------------------------------------------------------------------- decisions
def _outcome(match, beaten, needed: list[str]) -> tuple[Outcome, str]:
    """CONFIRMED when some comparison matches LIPS, REFUTED when LIPS beats every one,
    else INCONCLUSIVE with what would decide it (``needed``: "<comparison>: <n> pairs")."""
    if any(match):
        return Outcome.CONFIRMED, ""
    if all(beaten):
        return Outcome.REFUTED, ""
    return Outcome.INCONCLUSIVE, (D.NEEDS_SEEDS + ", ".join(needed) if needed
                                  else D.NEEDS_OTHER)


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
    on = [on_reviewer(tw.outcome, holds_when="FALSIFIED") for tw in tws.values()]
    reason = " | ".join(f"lips vs {k}: {tw.reason}" for k, tw in tws.items())
    if not sensitive:
        reason = D.NO_SENSITIVITY_FAMILY + reason
    out, needs = _outcome([o == Outcome.CONFIRMED for o in on],
                          [o == Outcome.REFUTED for o in on],
                          [f"{k}: {tw.seeds_needed} pairs" for k, tw in tws.items()
                           if tw.outcome == "INCONCLUSIVE" and tw.seeds_needed])
    return out, reason, needs, _flip_info(tws, out, resolution)


def _decide_one(label: str):
    """One three-way comparison mapped with ``on_reviewer(..., holds_when="FALSIFIED")``
    (the reviewer holds where "A beats B" is falsified); ``label`` names it in the reason."""

    def decide(tw, sensitive: bool, resolution: float = math.nan):
        reason = f"{label}: {tw.reason}"
        if not sensitive:
            reason = D.NO_SENSITIVITY + reason
        out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
        needs = ""
        if out == Outcome.INCONCLUSIVE:
            needs = (D.NEEDS_PAIRS.format(tw.seeds_needed) if tw.seeds_needed
                     else D.NEEDS_OTHER)
        return out, reason, needs, {"flip": tw.flip, "resolution": resolution,
                                    "unit": "points"}

    return decide


def _decide_selection(tw, grid_range: float, margin: float, resolution: float = math.nan):
    """The per-run optimism of choosing LIPS's (tau0, k) on test instead of validation,
    against the margin d (``tw``: the three-way rule on optimism - 0 with m = d; it is
    >= 0 by construction, so never tested against 0). SUPPORTED -> CONFIRMED; FALSIFIED
    (below d) -> REFUTED where the grid could have added d (its mean per-run range), else
    INCONCLUSIVE: "less than d" would be foregone."""
    foregone = grid_range < margin
    out = on_reviewer(tw.outcome, holds_when="SUPPORTED")
    lead = ""
    if out == Outcome.REFUTED and foregone:
        out, lead = Outcome.INCONCLUSIVE, D.SELECTION_FOREGONE.format(
            grid_range=grid_range, margin=margin)
    reason = lead + D.SELECTION_REASON.format(reason=tw.reason, grid_range=grid_range,
                                              margin=margin)
    needs = ""
    if out == Outcome.INCONCLUSIVE:
        needs = (D.SELECTION_NEEDS if foregone else
                 D.NEEDS_PAIRS.format(tw.seeds_needed) if tw.seeds_needed else D.NEEDS_OTHER)
    return out, reason, needs, {"flip": tw.flip, "resolution": resolution, "unit": "points"}


def _decide_cosine(cos: Mapping[str, np.ndarray], inertia_level: float):
    """A measurement: each arm's mean final middle-layer cosine to the round-2 weights,
    and FedBN minus it (how far the arm lifts the middle layers off their inertia)."""
    parts = []
    for arm, c in cos.items():
        if arm == "fedbn":
            parts.append(D.COSINE_FEDBN.format(c.mean()))
            continue
        parts.append(D.COSINE_ARM.format(
            arm=arm, mean=c.mean(), d=_paired(cos["fedbn"], c), level=inertia_level,
            below="below" if c.mean() < inertia_level else "not below"))
    return Outcome.INCONCLUSIVE, D.COSINE_REASON.format("; ".join(parts)), D.COSINE_NEEDS


def _decide_overfitting(gap: Mapping[str, np.ndarray], peak: Mapping[str, np.ndarray]):
    """A measurement: each arm's train-minus-test accuracy gap at its last round (mean
    over seeds, 95% t CI) and the largest gap of its curve (mean over seeds)."""
    bits = [D.OVERFIT_ARM.format(arm=arm, m=stats.mean_interval(g),
                                 peak=float(np.mean(peak[arm]))) for arm, g in gap.items()]
    return Outcome.INCONCLUSIVE, D.OVERFIT_REASON.format("; ".join(bits)), D.OVERFIT_NEEDS


def _decide_best_round(best_minus_last: Mapping[str, np.ndarray], at_last, at_best):
    """A measurement: per arm, best-round minus last-round test accuracy (>= 0 by
    construction); LIPS - FedBN read at the last round and at each arm's best round."""
    bits = "; ".join(f"{arm} {float(np.mean(v)):.2f}" for arm, v in best_minus_last.items())
    flips = np.sign(at_last.mean) != np.sign(at_best.mean)
    return (Outcome.INCONCLUSIVE, D.BEST_ROUND_REASON.format(
        bits=bits, last=at_last, best=at_best,
        changes="CHANGES" if flips else "does not change"), D.NO_THRESHOLD)


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
        bits.append(D.BOTH_BIT.format(c=c, a=a, a_reason=tw_acc[c].reason, k=k,
                                      k_reason=tw_cos[c].reason))
    reason = " | ".join(bits)
    missing = [w for w, ok in (("accuracy", sensitive), ("cosine", cos_sensitive)) if not ok]
    if missing:
        reason = D.NO_SENSITIVITY_ON.format(" and ".join(missing)) + reason
    out, needs = _outcome(match, beaten, [
        f"{c} ({w}): {tw.seeds_needed} pairs" for w, d_ in (("accuracy", tw_acc),
                                                             ("cosine", tw_cos))
        for c, tw in d_.items() if tw.outcome == "INCONCLUSIVE" and tw.seeds_needed])
    flips = [tw.flip for tw in tw_acc.values() if tw.flip is not None]
    return out, reason, needs, {"flip": min(flips) if flips else None,
                                "resolution": resolution, "unit": "points"}


def _family_rule(part: str) -> Rule:
    what, names = D.FAMILY_PARTS[part]
    return Rule(part, D.FAMILY_TEXT.replace("{what}", what).replace("{names}", names),
                _decide_family)


def _measured(part: str, text: str, decide: Callable) -> Rule:
    return Rule(part, text, decide, kind="measurement", reachable=("INCONCLUSIVE",))


RULE_CONTROLS = _family_rule("regularisation-controls")
RULE_LAYERS = _family_rule("layer-targeting")
# Reviewer (record: referee_report.major_comments[0]): the sensitivity score is not
# needed, random masks do as well: the outcome about "LIPS beats LIPS with random masks"
RULE_RANDOM = Rule("random-mask", D.RANDOM_TEXT, _decide_one("lips vs lips-random"))
RULE_SELECTION = Rule("selection-optimism", D.SELECTION_TEXT, _decide_selection)
RULE_COSINE = _measured("middle-cosine", D.COSINE_TEXT, _decide_cosine)
RULE_OVERFIT = _measured("overfitting", D.OVERFIT_TEXT, _decide_overfitting)
# Reviewer (record: referee_report.major_comments[3]): the overfitting the paper blames
# is never shown to be what LIPS cures: the outcome of "FedBN's gap exceeds LIPS's"
RULE_GAP = Rule("overfitting-reduced", D.GAP_TEXT, _decide_one("gap fedbn vs gap lips"))
RULE_BEST_ROUND = _measured("best-round", D.BEST_ROUND_TEXT, _decide_best_round)
RULE_BOTH = Rule("controls-match-both", D.BOTH_TEXT, _decide_both)
N_BOTH = len(CONTROLS)
QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS, D.COMBINATION_TEXT)


def _premise(tw, alpha: float) -> Premise:
    """The paper's own effect, decided by a fixed rule: the three-way outcome of "LIPS
    beats FedBN" (m = 0, d, alpha_premise x alpha_fraction): SUPPORTED -> reproduced,
    FALSIFIED (below FedBN, or within +-d with the planted handicap detected) -> not
    reproduced, INCONCLUSIVE -> undecided."""
    est = Estimate.of("premise_lips_minus_fedbn", tw.difference, "points",
                      D.PREMISE_ESTIMATE.format(conf=100 * (1 - alpha),
                                                method=tw.difference.method))
    return kit.premise(D.PREMISE_EFFECT, tw, estimate=est, rule=D.PREMISE_RULE.format(
        d=tw.equivalence_margin, alpha=alpha))


# ---------------------------------------------------------------------------- analysis
def _paired(a, b):
    """The paired difference ``a - b`` over seeds with its Student-t 95% interval."""
    return stats.paired_difference(a, b, level=0.95, method="t")


def _ci(x) -> tuple:
    """The mean over seeds (2 decimals) and its Student-t 95% interval, as tabled."""
    m = stats.mean_interval(x)
    return round(m.mean, 2), f"[{m.low:.2f}, {m.high:.2f}]"


def _cmp_row(name: str, tw) -> tuple:
    """One three-way comparison as a row of the comparisons tables."""
    dd = tw.difference
    return (name, round(dd.mean, 3), f"[{dd.low:.3f}, {dd.high:.3f}]", f"{tw.alpha:.4g}",
            round(tw.tost.p_value, 4), tw.outcome, "" if tw.flip is None else round(tw.flip, 3),
            "" if tw.seeds_needed is None else tw.seeds_needed)


def _arm_tables(sel, acc, cos_final, ctx: RunContext) -> tuple[Table, Table, Table]:
    """The arms at their chosen candidates, the tuning grid, and the per-layer cosines."""
    cfg = ctx.config
    rows = []
    for arm in ARM_NAMES:
        s = sel[arm]
        rows.append((arm, str(s["hp"]), round(float(s["val"].mean()), 2), *_ci(acc[arm]),
                     str(s["test_hp"]), round(float(s["test_if_test_tuned"].mean()), 2),
                     round(float(cos_final[arm].mean()), 3),
                     round(float(np.mean([r["middle_zero_frac"][-1] for r in s["runs"]])), 3),
                     round(float(np.mean([r["seconds"] for r in s["runs"]])), 2)))
    grid = tuple((arm, str(hp), round(v, 2), round(t, 2)) for arm in cfg["grid"]
                 for hp, v, t in zip(candidates(cfg, arm), sel[arm]["all_val"],
                                     sel[arm]["all_test"]))
    layers = list(sel["fedbn"]["runs"][0]["final_layer_cos"])
    per_layer = tuple((arm,) + tuple(round(float(np.mean(
        [r["final_layer_cos"][ln] for r in sel[arm]["runs"]])), 3) for ln in layers)
        for arm in ARM_NAMES)
    return (Table(D.T_ARMS, D.T_ARMS_COLUMNS, tuple(rows),
                  note=D.T_ARMS_NOTE.format(seeds=list(ctx.seeds))),
            Table(D.T_GRID, D.T_GRID_COLUMNS, grid, note=D.T_GRID_NOTE),
            Table(D.T_LAYERS, ("arm",) + tuple(layers), per_layer))


def _figures(sel, acc) -> tuple[Figure, ...]:
    """The middle-layer cosine per round, each arm's accuracy minus FedBN's, and the
    overfitting gap per round (mean over seeds, band = min..max)."""
    cos, gaps = [], []
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
        cos.append({"label": arm, "x": xs, "y": ys, "low": lo, "high": hi})
        runs = sel[arm]["runs"]
        k = min(len(r["gap_curve"]) for r in runs)
        vals = np.array([[100 * g for g in r["gap_curve"][:k]] for r in runs])
        gaps.append({"label": arm, "x": list(runs[0]["curve_rounds"][:k]),
                     "y": vals.mean(0).tolist(), "low": vals.min(0).tolist(),
                     "high": vals.max(0).tolist()})
    diffs = [_paired(acc[a], acc["fedbn"]) for a in D.BAR_LABELS]
    bars = {"label": "arm - fedbn", "x": list(D.BAR_LABELS.values()),
            "y": [d.mean for d in diffs], "low": [d.low for d in diffs],
            "high": [d.high for d in diffs]}
    return (Figure(*D.FIG_COS, tuple(cos), caption=D.FIG_COS_CAPTION),
            Figure(*D.FIG_ACC, (bars,), kind="bar", caption=D.FIG_ACC_CAPTION),
            Figure(*D.FIG_GAP, tuple(gaps), caption=D.FIG_GAP_CAPTION))


def analyse(results, ctx: RunContext) -> Analysis:
    cfg = ctx.config
    frac = float(ctx.alpha_fraction)
    d_margin = float(cfg["equivalence_margin"])
    alpha = kit.look_alpha(cfg["alpha_family"], ctx) / N_COMPARISONS
    a_side = kit.look_alpha(cfg.get("alpha_beside", 0.05), ctx)
    a_prem = kit.look_alpha(cfg.get("alpha_premise", 0.05), ctx)
    a_both = kit.look_alpha(cfg["alpha_family"], ctx) / N_BOTH
    sel = {arm: _selected(results, arm, ctx) for arm in ARM_NAMES}
    acc = {arm: sel[arm]["test"] for arm in ARM_NAMES}
    cos_final = {arm: np.array([r["middle_cos"][-1] for r in sel[arm]["runs"]])
                 for arm in ARM_NAMES}
    n_test = sel["fedbn"]["runs"][0]["n_test"]
    resolution = 100.0 / n_test
    n = len(ctx.seeds)
    R = int(cfg["rounds"])
    short_rounds = int(round(R * cfg["short_fraction"]))
    every = curve_every(cfg)

    def three_way(a, b, alpha_: float, sensitive: bool, e: float = d_margin):
        return stats.three_way(a, b, margin=0.0, equivalence_margin=e, alpha=alpha_,
                               sensitive=sensitive)

    def per_run(f):
        return {a: np.array([f(r) for r in sel[a]["runs"]], dtype=float) for a in ARM_NAMES}

    # assay sensitivity at the margin's scale: the planted handicap (FedBN stopped at
    # short_fraction of the rounds, about d on tuning seeds) is detected by the same rule,
    # seeds and alpha as the decision it licenses
    def planted(a):
        return three_way(acc["fedbn"], acc["fedbn-short"], a, False)

    tw_sens, tw_sens_side = planted(alpha), planted(a_side)
    sensitive = tw_sens.outcome == "SUPPORTED"
    sens_side = tw_sens_side.outcome == "SUPPORTED"
    sens_both = planted(a_both).outcome == "SUPPORTED"
    # premise first: does LIPS beat FedBN here?
    tw_prem = three_way(acc["lips"], acc["fedbn"], a_prem,
                        planted(a_prem).outcome == "SUPPORTED")
    premise = _premise(tw_prem, a_prem)
    # the combined parts (controls, then all layers), random masks, optimism of tuning on
    # test, the overfitting gap, the best round, and the reviewer's test in full
    cmp = {c: three_way(acc["lips"], acc[c], alpha, sensitive)
           for c in CONTROLS + ("lips-all-layers",)}
    tw_rand = three_way(acc["lips"], acc["lips-random"], a_side, sens_side)
    s_l = sel["lips"]
    grid_range = float(s_l["grid_range"].mean())
    opt = _paired(s_l["per_seed_test_best"], s_l["per_seed_val_choice"])
    tw_sel = stats.three_way(s_l["per_seed_test_best"] - s_l["per_seed_val_choice"],
                             np.zeros(n), margin=d_margin, equivalence_margin=d_margin,
                             alpha=a_side, sensitive=grid_range >= d_margin)
    gap = per_run(lambda r: 100 * r["gap_curve"][-1])
    peak = per_run(lambda r: 100 * max(r["gap_curve"]))
    best = per_run(lambda r: 100 * max(r["test_curve"]))
    last = per_run(lambda r: 100 * r["test_curve"][-1])
    bml = {a: best[a] - last[a] for a in ARM_NAMES}
    tw_gap = three_way(gap["fedbn"], gap["lips"], a_side, sens_side)
    at_last = _paired(acc["lips"], acc["fedbn"])
    at_best = _paired(best["lips"], best["fedbn"])
    cos_freeze = three_way(cos_final["fedbn-freeze-middle"], cos_final["fedbn"], a_both,
                           False, COS_MARGIN)
    cos_sens = cos_freeze.outcome == "SUPPORTED"
    tw_acc = {c: three_way(acc["lips"], acc[c], a_both, sens_both) for c in CONTROLS}
    tw_cos = {c: three_way(cos_final[c], cos_final["lips"], a_both, cos_sens, COS_MARGIN)
              for c in CONTROLS}

    # parts
    fam = dict(d=f"{d_margin:g}", alpha_family=f"{float(cfg['alpha_family']):g}",
               alpha_fraction=f"{frac:.4g}", m=N_COMPARISONS, alpha=f"{alpha:.4g}",
               three_way=stats.three_way_text(0.0, d_margin, alpha, n),
               short_rounds=short_rounds, rounds=R)
    side = dict(d=f"{d_margin:g}", alpha_beside=f"{float(cfg.get('alpha_beside', 0.05)):g}",
                alpha_fraction=f"{frac:.4g}", alpha=f"{a_side:.4g}",
                three_way=stats.three_way_text(0.0, d_margin, a_side, n))
    both = {**fam, "m": N_BOTH, "alpha": f"{a_both:.4g}", "e": f"{COS_MARGIN:g}",
            "three_way": stats.three_way_text(0.0, d_margin, a_both, n)}
    cos_arms = ("fedbn", "lips") + CONTROLS
    curves = {"every": every, "n": n}
    parts = (
        premise_gate(RULE_CONTROLS({c: cmp[c] for c in CONTROLS}, sensitive, resolution,
                                   params=fam), premise),
        premise_gate(RULE_LAYERS({"lips-all-layers": cmp["lips-all-layers"]}, sensitive,
                                 resolution, params=fam), premise),
        premise_gate(RULE_RANDOM(tw_rand, sens_side, resolution, params=side), premise),
        RULE_SELECTION(tw_sel, grid_range, d_margin, resolution, params={
            **side, "three_way": stats.three_way_text(d_margin, d_margin, a_side, n)}),
        RULE_COSINE({a: cos_final[a] for a in cos_arms}, D.INERTIA_LEVEL,
                    params={"n": n, "inertia_level": f"{D.INERTIA_LEVEL:g}"}),
        premise_gate(RULE_BOTH(tw_acc, tw_cos, sens_both, cos_sens, resolution, params=both),
                     premise),
        RULE_OVERFIT(gap, peak, params=curves),
        premise_gate(RULE_GAP(tw_gap, sens_side, resolution, params=side), premise),
        RULE_BEST_ROUND(bml, at_last, at_best, params=curves),
    )

    # estimates
    def of(name: str, diff, unit: str = "points", key: str = "", **fmt) -> Estimate:
        return Estimate.of(name, diff, unit, D.EST[key or name].format(**fmt))

    def acc_diff(name: str, a: str, b: str) -> Estimate:
        return difference_estimate(name, acc[a], acc[b], "points", D.EST[name])

    def flag(name: str, value: bool) -> Estimate:
        return Estimate(name, float(value), description=D.EST[name])

    def mean_gain(name: str, value, description: str) -> Estimate:
        return Estimate(name, float(value), unit="points", n=n, method="mean",
                        description=description)

    def conf(a: float) -> float:
        return 100 * (1 - a)

    est = [of("assay_sensitivity_gap", tw_sens.difference, short_rounds=short_rounds,
              rounds=R, d=d_margin, conf=conf(alpha)),
           flag("assay_sensitive", sensitive), flag("assay_sensitive_beside", sens_side),
           Estimate("metric_resolution", resolution, unit="points",
                    description=D.EST["metric_resolution"]),
           premise.estimate, acc_diff("lips_minus_fedbn", "lips", "fedbn")]
    for c, tw in cmp.items():
        est.append(of(f"lips_minus_{c}", tw.difference, key="lips_minus", c=c, conf=conf(alpha)))
        if tw.mde is not None:
            est.append(Estimate(f"mde_{c}", float(tw.mde), unit="points", n=n,
                                method="t power 0.8", description=D.EST["mde"].format(c=c)))
    est += [acc_diff("lips_random_minus_lips", "lips-random", "lips"),
            acc_diff("lips_released_score_minus_lips", "lips-released-score", "lips"),
            acc_diff("freeze_minus_fedbn", "fedbn-freeze-middle", "fedbn")]
    est += [mean_estimate(f"acc_{arm}", acc[arm], "points", D.EST["acc"].format(arm=arm))
            for arm in ARM_NAMES]
    for arm in cos_arms:
        stem = D.COS_STEMS[arm]
        est.append(mean_estimate(f"{stem}_middle_cos_final", cos_final[arm], "cosine",
                                 D.EST["middle_cos_final"].format(arm=arm)))
        if arm != "fedbn":
            est.append(of(f"cos_lift_{stem}", _paired(cos_final["fedbn"], cos_final[arm]),
                          "cosine", key="cos_lift", arm=arm))
    for arm in cfg["grid"]:
        s = sel[arm]
        for key, chosen in (("selection_optimism", s["test_if_test_tuned"]),
                            ("selection_optimism_per_seed", s["per_seed_test_best"])):
            est.append(mean_gain(f"{key}_{arm}", chosen.mean() - s["test"].mean(),
                                 D.EST[key].format(arm=arm)))
    est += [of("lips_minus_lips-random", tw_rand.difference, conf=conf(a_side)),
            of("selection_optimism_per_run_lips", opt),
            mean_estimate("selection_grid_range_lips", s_l["grid_range"], "points",
                          D.EST["selection_grid_range_lips"]),
            mean_gain("lips_gain_if_tuned_on_test",
                      s_l["test_if_test_tuned"].mean() - acc["fedbn"].mean(),
                      D.EST["lips_gain_if_tuned_on_test"]),
            of("gap_fedbn_minus_lips", tw_gap.difference, conf=conf(a_side)),
            of("lips_minus_fedbn_best_round", at_best),
            Estimate("cosine_margin", COS_MARGIN, unit="cosine",
                     description=D.EST["cosine_margin"]),
            flag("cosine_sensitive", cos_sens),
            of("cos_freeze_minus_fedbn", cos_freeze.difference, "cosine", conf=conf(a_both))]
    est += [of(f"cos_{c}_minus_lips", tw_cos[c].difference, "cosine", key="cos_minus_lips",
               c=c, conf=conf(a_both)) for c in CONTROLS]
    for a in ARM_NAMES:
        for key, x in (("gap", gap[a]), ("best_minus_last", bml[a])):
            est.append(mean_estimate(f"{key}_{a}", x, "points", D.EST[key].format(arm=a),
                                     no_spread_point=True))

    # tables
    t_arms, t_grid, t_layers = _arm_tables(sel, acc, cos_final, ctx)
    t_cmp = Table(D.T_CMP, D.T_CMP_COLUMNS,
                  tuple(_cmp_row(f"lips - {c}", tw) for c, tw in cmp.items())
                  + (_cmp_row("premise: lips - fedbn", tw_prem),
                     _cmp_row("planted: fedbn - fedbn-short", tw_sens)),
                  note=D.T_CMP_NOTE.format(d=d_margin, alpha=alpha, m=N_COMPARISONS,
                                           frac=frac, resolution=resolution))
    t_side = Table(D.T_SIDE, D.T_CMP_COLUMNS,
                   (_cmp_row("lips - lips-random", tw_rand),
                    _cmp_row("planted: fedbn - fedbn-short (beside alpha)", tw_sens_side)),
                   note=D.T_SIDE_NOTE.format(d=d_margin, alpha=a_side))
    t_curve = Table(D.T_CURVE, D.T_CURVE_COLUMNS, tuple(
        (a,) + _ci(gap[a]) + tuple(round(float(x[a].mean()), 2) for x in (peak, best, last, bml))
        for a in ARM_NAMES), note=D.T_CURVE_NOTE.format(
            every=every, seeds=list(ctx.seeds), last=at_last.mean, best=at_best.mean))
    t_both = Table(D.T_BOTH, D.T_BOTH_COLUMNS,
                   tuple((c, round(tw_acc[c].difference.mean, 3), tw_acc[c].outcome,
                          round(tw_cos[c].difference.mean, 4), tw_cos[c].outcome)
                         for c in CONTROLS),
                   note=D.T_BOTH_NOTE.format(alpha=a_both, d=d_margin, e=COS_MARGIN,
                                             f=cos_freeze, acc_sens=D.SHOWN[sens_both]))
    tables = (t_arms, t_cmp, t_side, t_grid,
              kit.per_seed_table(D.T_PER_SEED, acc, ARM_NAMES, ctx.seeds, digits=2),
              t_layers, t_curve, t_both,
              kit.misbehaviour_table(kit.misbehaving_seeds(acc, ARM_NAMES, ctx.seeds), n,
                                     D.ACC_METRIC))

    # notes and findings
    mdes = ", ".join(f"{c}: {tw.mde:.2f}" for c, tw in cmp.items() if tw.mde is not None)
    where = "above" if at_last.low > 0 else "below" if at_last.high < 0 else "around"
    notes = (
        D.NOTE_PREMISE.format(status=premise.status, reason=premise.reason),
        D.NOTE_SETTING.format(n_clients=cfg["n_clients"], n_train=cfg["n_train"],
                              alpha=cfg["alpha"], rounds=R, n_test=cfg["n_test"],
                              n_test_seed=n_test, resolution=resolution),
        D.NOTE_SENSITIVITY.format(short_rounds=short_rounds, rounds=R, sd=tw_sens.difference,
                                  conf=conf(alpha), outcome=tw_sens.outcome, alpha=alpha,
                                  detected=D.DETECTED[sensitive], a_side=a_side,
                                  detected_side=D.DETECTED[sens_side],
                                  mdes=mdes or D.NO_MDES),
        D.NOTE_GAIN.format(g=at_last, where=D.GAIN_WHERE[where], decided="; ".join(
            f"{p.id}: {p.verdict.value}" for p in parts)),
        D.NOTE_TUNING,
        D.NOTE_INERTIA.format(c=stats.mean_interval(cos_final["fedbn"]),
                              f_round=_freeze_round(cfg),
                              f=_paired(acc["fedbn-freeze-middle"], acc["fedbn"]),
                              r=_paired(acc["lips-random"], acc["lips"])),
        D.NOTE_BESIDE.format(r=tw_rand.difference, conf=conf(tw_rand.alpha),
                             outcome=tw_rand.outcome, opt=opt, grid_range=grid_range,
                             n_c=len(cfg["grid"]["lips"])),
        # the last pruning round's strength at T = 300: tau0 0.2 at the last multiple of 5
        D.NOTE_FAITHFUL.format(rounds=R, pruned=100 * 0.2 * (1 - (R - R % 5) / 300)),
        D.NOTE_THRESHOLDS.format(d=d_margin, m=N_COMPARISONS, frac=frac),
        D.NOTE_COSINE,
        D.NOTE_SCALE.format(width=cfg["width"], n=n, alpha=alpha),
    )
    by = {e.name: e for e in est}
    findings = [Finding(D.FINDING_PREMISE.format(status=premise.status,
                                                 value=premise.estimate.value),
                        (premise.estimate.name,))]
    if "cos_lift_noise" in by and "cos_lift_lips" in by:
        findings.append(Finding(D.FINDING_COSINE.format(
            lips=by["cos_lift_lips"].value, noise=by["cos_lift_noise"].value,
            dropout=by["cos_lift_dropout"].value),
            ("cos_lift_lips", "cos_lift_noise", "cos_lift_dropout")))
    return Analysis(tuple(est), parts, tables, _figures(sel, acc), notes, premise=premise,
                    findings=tuple(findings))


CLAIM = Claim(
    id=CLAIM_ID, paper=D.PAPER, record=D.RECORD, title=D.TITLE, statement=D.STATEMENT,
    arms=ARMS, rules=(RULE_CONTROLS, RULE_LAYERS, RULE_RANDOM, RULE_SELECTION, RULE_COSINE,
                      RULE_BOTH, RULE_OVERFIT, RULE_GAP, RULE_BEST_ROUND),
    combination=COMBINATION, questions=QUESTIONS, stochastic=True,
    default_seeds=D.DEFAULT_SEEDS, validation_metrics=D.VALIDATION_METRICS, scales=SCALES,
    regime_maps=D.REGIME_MAPS,
    run=run, analyse=analyse, specs=specs, paper_numbers=D.PAPER_NUMBERS, searches=SEARCHES,
)
