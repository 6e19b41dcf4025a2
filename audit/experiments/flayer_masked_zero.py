"""flayer-masked-zero: does FLAYER's Algorithm 1, run as printed, collapse?

Paper: FLAYER, arXiv 2412.07062v3 (Eq. 2, Eq. 4, Eqs. 5-9, Algorithm 1 line 12).
Record: ``shared/reviews/000_87577804b4c438f8.txt`` (skeptic_critique.concrete_test and
load_bearing_attack; referee_report.major_comments). Our paraphrase of the reviewer: the
printed server step averages uploads in which masked-out coordinates are zeros, so a
coordinate that no sampled client selected becomes exactly zero and one selected by a
part of the clients is scaled down by that part's weight; the reported accuracy could
therefore not come from that rule.

Two parts, each with its own rule (ALL_PARTS combines them):

- ``structural`` (exact, per round, from the runs of the ``literal`` arm): every
  coordinate no sampled client selected is exactly 0 in the new global model, and every
  other coordinate equals p x (the mean over its selectors), p the selectors' share of
  the weight (so it shrinks whenever 0 < p < 1).
- ``collapse`` (statistical): the best corrected arm's final personalised accuracy beats
  ``literal``'s by more than a stated margin (paired over seeds, ``stats.three_way``).
  It is not inferred from the structural part: with many clients most coordinates have
  some selector. Depth and clients-per-round sweeps show how the gap moves.

Arms (``audit.algorithms.flayer``): literal, carry-over, selector-mean, masked-delta
(the server rule is the only difference), as-released, fedavg.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import torch

from audit import stats
from audit.algorithms.flayer import ARMS as ARM_NAMES
from audit.algorithms.flayer import CORRECTED, eq4_multiplier, make_algorithm
from audit.claims import (FLAYER, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit.runner import results_table
from audit.verdict import ALL_PARTS, Estimate, Outcome, Rule

CLAIM_ID = "flayer-masked-zero"

# ------------------------------------------------------------------------ decision rules
MARGIN = 0.10  # "collapse": the best corrected arm is ahead by more than 10 points
EQUIV = 0.02  # "performs like": within +-2 points (TOST)
ALPHA = 0.05
IDENTITY_TOL = 1e-5  # float32 rounding of a float64 mean, relative to the largest value

ARMS = (
    Arm("literal", "FLAYER client (Eqs. 2, 4, 5-9); server = Algorithm 1 line 12: weighted "
        "mean of theta*M, masked zeros included", "as printed"),
    Arm("carry-over", "as literal; coordinates no client selected keep the previous global "
        "value", "server: + carry_over()"),
    Arm("selector-mean", "as literal; each coordinate averaged over the clients that "
        "selected it, previous value where none did", "server: selector_mean()"),
    Arm("masked-delta", "as literal; global += weighted mean of M_k * (theta_k - global)",
        "server: masked_delta()"),
    Arm("as-released", "server and mask rules of the authors' release (from CLAIMS.md): "
        "selector-mean over non-zero uploads, cap 0.9, head and 2-D Linear weights unmasked, "
        "per-kernel-slice conv masks, A_l from the test split",
        "server + masks + A_l source"),
    Arm("fedavg", "plain FedAvg on the same model, data and seeds", "no FLAYER piece"),
)


def _decide_structural(ev: Mapping[str, Any]):
    n_rounds = ev["rounds_checked"]
    where = f"{n_rounds} rounds of the literal arm over {ev['runs']} runs (all settings)"
    if n_rounds == 0:
        return Outcome.INCONCLUSIVE, "no literal rounds were run", "run the literal arm"
    if ev["max_unselected_nonzero"] > 0 or ev["max_identity_err"] > IDENTITY_TOL:
        return (Outcome.REFUTED,
                f"in {where}: {int(ev['max_unselected_nonzero'])} unselected coordinates were "
                f"non-zero, largest relative deviation from p x selector-mean "
                f"{ev['max_identity_err']:.2e}", "")
    if ev["max_shrunk_frac"] <= 0 and ev["max_unselected_frac"] <= 0:
        return (Outcome.INCONCLUSIVE,
                f"in {where} every coordinate was selected by every client: nothing to "
                f"zero or shrink", "a setting where masks differ between clients")
    return (Outcome.CONFIRMED,
            f"in {where}: every unselected coordinate was exactly 0 (up to "
            f"{ev['max_unselected_frac']:.1%} of the parameters in a round, "
            f"{ev['mean_unselected_frac']:.1%} on average) and every coordinate equalled "
            f"p x selector-mean (largest relative deviation {ev['max_identity_err']:.1e}); "
            f"{ev['mean_shrunk_frac']:.1%} of coordinates a round had 0 < p < 1, mean p "
            f"over selected coordinates {ev['mean_p']:.3f}", "")


RULE_STRUCTURAL = Rule(
    "structural",
    "Exact, per round: for every round of every literal run (all settings and seeds), "
    "(i) every parameter coordinate that no sampled client selected must be exactly 0 in "
    "the new global model, and (ii) every coordinate must equal p x (weighted mean over "
    f"its selectors) to float32 rounding (relative deviation <= {IDENTITY_TOL:g}), p = the "
    "selectors' share of the upload weight. CONFIRMED when both hold in every round and "
    "some coordinate was unselected or had 0 < p < 1; REFUTED when any round breaks (i) or "
    "(ii); INCONCLUSIVE when no coordinate was ever unselected or shrunk.",
    _decide_structural,
)

_MAP = {"SUPPORTED": Outcome.CONFIRMED, "FALSIFIED": Outcome.REFUTED,
        "INCONCLUSIVE": Outcome.INCONCLUSIVE}


def _decide_collapse(ev: Mapping[str, Any]):
    tw = ev["three_way"]
    reason = (f"best corrected arm {ev['best']} vs literal, final personalised accuracy: "
              f"{tw.reason} Assay sensitivity: {ev['sensitivity']}. {ev['sweep']}")
    needs = ""
    if tw.outcome == "INCONCLUSIVE":
        needs = (f"minimum detectable gap at n = {tw.n} is {tw.mde:.3g}; "
                 + (f"{tw.seeds_needed} seeds would detect the observed gap"
                    if tw.seeds_needed else "more seeds or a larger scale"))
    return _MAP[tw.outcome], reason, needs


RULE_COLLAPSE = Rule(
    "collapse",
    f"Paired over seeds, base setting, metric = final personalised accuracy (mean over "
    f"clients of the personal model on the client's own test split). A = the corrected "
    f"arm (carry-over, selector-mean, masked-delta) with the highest mean, B = literal. "
    f"stats.three_way(A, B, margin={MARGIN}, equivalence_margin={EQUIV}, alpha={ALPHA}): "
    f"CONFIRMED ('collapse') when the {int((1 - ALPHA) * 100)}% paired CI of A - B "
    f"(Student-t below 10 seeds, BCa from 10 on) lies above {MARGIN} (10 accuracy "
    f"points); REFUTED when it lies below {MARGIN}, "
    f"or when TOST shows |A - B| < {EQUIV} with assay sensitivity (the same seeds and "
    f"metric separate A's trained model from its untrained round-0 model by more than the "
    f"margin); INCONCLUSIVE otherwise. Choosing the best of three corrected arms favours "
    f"the reviewer; the depth and clients-per-round sweeps are reported beside, each with "
    f"the same rule, but do not enter the verdict.",
    _decide_collapse,
)

# ------------------------------------------------------------------------------- scales
# head_layers = s of Eq. 2, counted in conv/linear layers from the output: 1 (the
# classifier) is our choice, the paper's value of s for each model is not restated here.
# Personalised accuracy = mean over clients of the Eq. 2 start model on the client's own
# test split (the engine's personal_state), for every arm alike.
SCALES: dict[str, dict] = {
    "smoke": {
        "dataset": "digits", "model": "cnn", "model_kw": {"width": 0.5},
        "n_clients": 20, "alpha": 0.1, "clients_per_round": None,
        "rounds": 12, "local_epochs": 1, "batch_size": 16, "lr": 0.1, "eval_every": 3,
        "val_fraction": 0.15, "test_fraction": 0.2, "head_layers": 1,
        "depth_sweep": [["vgg", {"width": 0.25, "norm": "none"}]],
        "cpr_sweep": [5], "sweep_arms": ["literal", "selector-mean"], "sweep_seeds": 3,
    },
    "full": {
        "dataset": "digits", "model": "cnn", "model_kw": {},
        "n_clients": 20, "alpha": 0.1, "clients_per_round": None,
        "rounds": 40, "local_epochs": 1, "batch_size": 10, "lr": 0.05, "eval_every": 2,
        "val_fraction": 0.15, "test_fraction": 0.2, "head_layers": 1,
        "depth_sweep": [["cnn2", {}], ["vgg", {"norm": "none"}],
                        ["resnet8", {"norm": "gn"}]],
        "cpr_sweep": [10, 5, 2],
        "sweep_arms": ["literal", "carry-over", "selector-mean", "masked-delta"],
        "sweep_seeds": 5,
    },
    # the paper's setting (Sec. 5): CIFAR-100, ResNet-18, 20 clients, Dir(0.1), batch 10,
    # lr 0.1, 75 rounds, 1 local epoch; data from ctx.data_dir, on ctx.device
    "paper": {
        "dataset": "cifar100", "model": "resnet18", "model_kw": {},
        "n_clients": 20, "alpha": 0.1, "clients_per_round": None,
        "rounds": 75, "local_epochs": 1, "batch_size": 10, "lr": 0.1, "eval_every": 5,
        "val_fraction": 0.1, "test_fraction": 0.2, "head_layers": 1,
        "depth_sweep": [], "cpr_sweep": [], "sweep_arms": [], "sweep_seeds": 0,
        # float32: bf16 autocast (--set amp=bf16) could not change the verdict (zeros come
        # from the aggregation rule in float32 weights; arms train alike), but on an H200
        # it was not faster here (9-12 s a round against 10 s in float32), so it is off
        "amp": None,
    },
}

_KEEP = ("zero_frac", "norm", "unselected_frac", "unselected_nonzero", "shrunk_frac",
         "mean_p", "literal_identity_err", "max_lr_mult")


def specs(ctx: RunContext) -> list[RunSpec]:
    cfg = ctx.config
    out = [RunSpec(a, s, "") for s in ctx.seeds for a in ARM_NAMES]
    sweep_seeds = ctx.seeds[:int(cfg["sweep_seeds"])]
    settings = [f"depth={m}" for m, _ in cfg["depth_sweep"]]
    settings += [f"cpr={k}" for k in cfg["cpr_sweep"]]
    for st in settings:
        out += [RunSpec(a, s, st) for s in sweep_seeds for a in cfg["sweep_arms"]]
    return out


def _setting(spec: RunSpec, cfg: Mapping) -> tuple[str, dict, int | None]:
    model, kw, cpr = cfg["model"], dict(cfg["model_kw"]), cfg["clients_per_round"]
    if spec.setting.startswith("depth="):
        model = spec.setting.split("=", 1)[1]
        kw = dict(dict(cfg["depth_sweep"])[model])
    elif spec.setting.startswith("cpr="):
        cpr = int(spec.setting.split("=", 1)[1])
    elif spec.setting:
        raise AuditError(f"unknown setting {spec.setting!r}")
    return model, kw, cpr


def _federated(cfg: Mapping, seed: int, data_dir: str | None):
    from audit.fl.data import dirichlet_partition, load_dataset, make_federated

    ds = load_dataset(cfg["dataset"], data_dir=data_dir, seed=0)  # DatasetNotFound: AuditError
    rng = np.random.default_rng([seed, 0])  # partition and splits: paired across arms
    part = dirichlet_partition(ds.y_train, cfg["n_clients"], cfg["alpha"], rng)
    return ds, make_federated(ds, part, cfg["val_fraction"], cfg["test_fraction"], rng)


def run(spec: RunSpec, ctx: RunContext) -> dict:
    """One arm at one seed in one setting: per-round structure, accuracy curves."""
    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_model

    cfg = ctx.config
    torch.set_num_threads(1)
    model_name, kw, cpr = _setting(spec, cfg)
    ds, fed = _federated(cfg, spec.seed, ctx.data_dir)

    def model_fn():
        return build_model(model_name, ds.num_classes, ds.in_channels, ds.image_size, **kw)

    with torch.random.fork_rng(), torch.no_grad():  # the engine's initial model
        torch.manual_seed(spec.seed)
        init_norm = math.sqrt(sum(float((p.double() ** 2).sum())
                                  for p in model_fn().parameters()))
    alg = make_algorithm(spec.arm, head_layers=cfg["head_layers"])
    fl = FLConfig(rounds=cfg["rounds"], clients_per_round=cpr,
                  local_epochs=cfg["local_epochs"], batch_size=cfg["batch_size"],
                  lr=cfg["lr"], seed=spec.seed, device=ctx.device,
                  eval_every=cfg["eval_every"], eval_init=True, layer_metrics=False,
                  amp=cfg.get("amp"))
    h = run_federated(model_fn, fed, alg, fl, checkpoint=ctx.checkpoint(spec))
    per_round = [{k: v for k, v in m.items() if k in _KEEP or ":" in k} for m in h.algo]
    return {
        "init_norm": init_norm,
        "eval_rounds": list(h.rounds),
        "personal_acc": list(h.personal_acc),
        "global_acc": list(h.test_acc),
        "final_personal_acc": h.personal_acc[-1],
        "final_global_acc": h.test_acc[-1],
        "init_personal_acc": h.personal_acc[0],
        "final_zero_frac": per_round[-1]["zero_frac"],
        "norm_ratio": per_round[-1]["norm"] / init_norm,
        "per_round": per_round,
        "n_test_global": int(len(fed.y_test)),
        "seconds": h.seconds,
    }


# ------------------------------------------------------------------------------ analysis
def _mean_est(name, x, unit="accuracy", description=""):
    return Estimate.of(name, stats.mean_interval(x, level=0.95), unit, description)


def _diff_est(name, a, b, description):
    return Estimate.of(name, stats.paired_difference(a, b, level=0.95, method="t"),
                       "accuracy", description)


def eq4_table() -> Table:
    """Eq. 4's multiplier eta_i / eta as ||g|| -> 0 (printed form, no floor)."""
    rows = []
    for g in (1.0, 1e-1, 1e-2, 1e-4, 1e-8, 1e-16, 1e-32):
        ms = [eq4_multiplier(g, i, 10, floor=0.0) for i in (1, 5, 10)]
        rows.append((f"{g:.0e}", *[round(m, 3) for m in ms],
                     round((ms[2] - 1.0) / math.log(1.0 / g), 4) if g < 1 else None))
    rows.append(("0", "inf", "inf", "inf", None))
    return Table("Eq. 4: the learning-rate multiplier 1 + log(1 + 1/||g||) * i/L",
                 ("||g_i||", "i/L = 0.1", "i/L = 0.5", "i/L = 1",
                  "(m - 1)/log(1/||g||) at i/L = 1"),
                 tuple(rows),
                 "Exact values. The multiplier has no upper bound: it grows like "
                 "(i/L) log(1/||g||) (last column tends to i/L = 1), so a layer whose "
                 "gradient vanishes gets an unbounded step size. Our runs clamp ||g|| at "
                 "1e-12 (multiplier at most 1 + 27.6 i/L).")


def _curve(results, arm, seeds, setting, key):
    rows = np.array([[m[key] for m in results[RunSpec(arm, s, setting)]["per_round"]]
                     for s in seeds])
    return rows


def _band_series(label, x, rows):
    return {"label": label, "x": [float(v) for v in x], "y": rows.mean(0).tolist(),
            "low": rows.min(0).tolist(), "high": rows.max(0).tolist()}


def analyse(results: Mapping[RunSpec, Mapping], ctx: RunContext) -> Analysis:
    cfg, seeds = ctx.config, list(ctx.seeds)
    E: list[Estimate] = []
    pers = results_table(results, "final_personal_acc", ARM_NAMES, seeds)
    glob = results_table(results, "final_global_acc", ARM_NAMES, seeds)
    init = results_table(results, "init_personal_acc", ARM_NAMES, seeds)
    n_test = results[RunSpec("literal", seeds[0], "")]["n_test_global"]

    for arm in ARM_NAMES:
        E.append(_mean_est(f"{arm}_personal_acc", pers[arm],
                           description=f"{arm}: final personalised accuracy (mean over seeds)"))
        E.append(_mean_est(f"{arm}_global_acc", glob[arm],
                           description=f"{arm}: final global-model accuracy"))
    lit_zero = results_table(results, "final_zero_frac", ["literal"], seeds)["literal"]
    lit_ratio = results_table(results, "norm_ratio", ["literal"], seeds)["literal"]
    E.append(_mean_est("literal_final_zero_fraction", lit_zero, "fraction",
                       "literal: fraction of exact zeros in the final global parameters"))
    E.append(_mean_est("literal_norm_ratio", lit_ratio, "ratio",
                       "literal: final / initial global L2 norm (parameters)"))
    for arm in CORRECTED + ("as-released", "fedavg"):
        r = results_table(results, "norm_ratio", [arm], seeds)[arm]
        E.append(_mean_est(f"{arm}_norm_ratio", r, "ratio", f"{arm}: final / initial norm"))

    # ---- structural (exact, every literal round of every setting)
    lit_runs = [v for k, v in results.items() if k.arm == "literal"]
    rounds = [m for v in lit_runs for m in v["per_round"]]
    ev_s = {
        "runs": len(lit_runs), "rounds_checked": len(rounds),
        "max_unselected_nonzero": max((m["unselected_nonzero"] for m in rounds), default=0),
        "max_identity_err": max((m["literal_identity_err"] for m in rounds), default=0.0),
        "max_unselected_frac": max((m["unselected_frac"] for m in rounds), default=0.0),
        "mean_unselected_frac": float(np.mean([m["unselected_frac"] for m in rounds])),
        "max_shrunk_frac": max((m["shrunk_frac"] for m in rounds), default=0.0),
        "mean_shrunk_frac": float(np.mean([m["shrunk_frac"] for m in rounds])),
        "mean_p": float(np.nanmean([m["mean_p"] for m in rounds])),
    }
    part_s = RULE_STRUCTURAL(ev_s)
    E += [Estimate("literal_max_unselected_nonzero", ev_s["max_unselected_nonzero"],
                   unit="coordinates", description="unselected but non-zero (must be 0)"),
          Estimate("literal_max_identity_err", ev_s["max_identity_err"], unit="relative",
                   description="largest |global - p x selector-mean| / max |p x selector-mean|"),
          Estimate("literal_mean_unselected_frac", ev_s["mean_unselected_frac"],
                   unit="fraction", description="coordinates no sampled client selected"),
          Estimate("literal_mean_shrunk_frac", ev_s["mean_shrunk_frac"], unit="fraction",
                   description="coordinates with 0 < p < 1 (shrunk by the zeros)"),
          Estimate("literal_mean_p", ev_s["mean_p"], unit="share",
                   description="mean selector share p over selected coordinates")]

    # ---- collapse (base setting)
    best = max(CORRECTED, key=lambda a: float(pers[a].mean()))
    sens_d = stats.paired_difference(pers[best], init[best], level=1 - ALPHA, method="t")
    sensitive = bool(sens_d.low > MARGIN)
    sens_txt = (f"{best} trained vs its round-0 model: mean {sens_d.mean:.3f}, 95% CI "
                f"[{sens_d.low:.3f}, {sens_d.high:.3f}] -> "
                + ("sensitive" if sensitive else "NOT sensitive"))
    tw = stats.three_way(pers[best], pers["literal"], margin=MARGIN, equivalence_margin=EQUIV,
                         alpha=ALPHA, sensitive=sensitive, rng=stats.verdict_rng())
    E.append(_diff_est("gap_best_corrected_minus_literal", pers[best], pers["literal"],
                       f"{best} - literal, final personalised accuracy (paired)"))
    E.append(_diff_est("gap_best_corrected_minus_literal_global", glob[best], glob["literal"],
                       f"{best} - literal, final global accuracy (paired)"))
    E.append(Estimate("tost_literal_like_best_p", tw.tost.p_value, unit="p",
                      description=f"TOST p, literal within +-{EQUIV} of {best} "
                      f"(equivalent: {tw.tost.equivalent}, sensitive: {sensitive})"))
    E.append(Estimate("assay_sensitivity", float(sensitive), unit="bool",
                      description=sens_txt))
    for arm in CORRECTED:
        E.append(_diff_est(f"gap_{arm}_minus_literal", pers[arm], pers["literal"],
                           f"{arm} - literal, final personalised accuracy"))

    # ---- where as-released lands
    asr = pers["as-released"]
    span = float(pers[best].mean() - pers["literal"].mean())
    E.append(Estimate("as_released_position",
                      float((asr.mean() - pers["literal"].mean()) / span) if span else
                      float("nan"), unit="fraction",
                      description=f"(as-released - literal) / ({best} - literal), means; "
                      "0 = at literal, 1 = at the best corrected arm"))
    E.append(_diff_est("as_released_minus_literal", asr, pers["literal"],
                       "as-released - literal, final personalised accuracy"))
    E.append(_diff_est("as_released_minus_best_corrected", asr, pers[best],
                       f"as-released - {best}, final personalised accuracy"))
    E.append(_diff_est("fedavg_minus_literal_global", glob["fedavg"], glob["literal"],
                       "fedavg - literal, final global accuracy"))
    mults = {a: max(m["max_lr_mult"] for s in seeds
                    for m in results[RunSpec(a, s, "")]["per_round"]) for a in ARM_NAMES}
    E.append(Estimate("literal_max_eq4_multiplier", mults["literal"], unit="x",
                      description="largest Eq. 4 multiplier in any literal round"))

    # ---- sweeps
    sweep_rows, sweep_txt = [], []
    settings = [("", cfg["model"], "all" if cfg["clients_per_round"] is None
                 else cfg["clients_per_round"])]
    settings += [(f"depth={m}", m, "all") for m, _ in cfg["depth_sweep"]]
    settings += [(f"cpr={k}", cfg["model"], k) for k in cfg["cpr_sweep"]]
    sw_seeds = seeds[:int(cfg["sweep_seeds"])] or seeds
    for st, model, cpr in settings:
        arms_here = list(ARM_NAMES) if st == "" else list(cfg["sweep_arms"])
        sds = seeds if st == "" else sw_seeds
        if len(sds) < 2 or "literal" not in arms_here:
            continue
        p = results_table(results, "final_personal_acc", arms_here, sds, st)
        corr = [a for a in arms_here if a in CORRECTED]
        b = max(corr, key=lambda a: float(p[a].mean()))
        i0 = results_table(results, "init_personal_acc", [b], sds, st)[b]
        sens_here = bool(stats.paired_difference(p[b], i0, level=1 - ALPHA,
                                                 method="t").low > MARGIN)
        t = stats.three_way(p[b], p["literal"], margin=MARGIN, equivalence_margin=EQUIV,
                            alpha=ALPHA, sensitive=sens_here, rng=stats.verdict_rng())
        zf = results_table(results, "final_zero_frac", ["literal"], sds, st)["literal"]
        nr = results_table(results, "norm_ratio", ["literal"], sds, st)["literal"]
        L = len([k for k in results[RunSpec("literal", sds[0], st)]["per_round"][0]
                 if k.startswith("norm:")])
        d = t.difference
        label = st or "base"
        sweep_rows.append((label, model, cpr, len(sds), L, round(float(zf.mean()), 4),
                           round(float(nr.mean()), 3), round(float(p["literal"].mean()), 4),
                           b, round(float(p[b].mean()), 4), round(d.mean, 4),
                           f"[{d.low:.4f}, {d.high:.4f}]", _MAP[t.outcome].value))
        sweep_txt.append(f"{label}: gap {d.mean:.3f} [{d.low:.3f}, {d.high:.3f}] -> "
                         f"{_MAP[t.outcome].value}")
        if st:
            E.append(_diff_est(f"gap_{st.replace('=', '_')}", p[b], p["literal"],
                               f"{st}: {b} - literal, final personalised accuracy"))
    ev_c = {"three_way": tw, "best": best, "sensitivity": sens_txt,
            "sweep": "Sweeps (same rule, not in the verdict): " + "; ".join(sweep_txt) + "."}
    part_c = RULE_COLLAPSE(ev_c)

    ratio = results_table(results, "norm_ratio", ARM_NAMES, seeds)
    zeros = results_table(results, "final_zero_frac", ARM_NAMES, seeds)
    tables = [
        Table("Final accuracy per arm (base setting, mean over seeds, 95% t-interval)",
              ("arm", "personalised", "95% CI", "global", "95% CI", "norm final/initial",
               "zero fraction"),
              tuple((a, *_row(pers[a]), *_row(glob[a]), round(float(ratio[a].mean()), 3),
                     round(float(zeros[a].mean()), 4)) for a in ARM_NAMES),
              f"Resolution of the global accuracy: one test example = 1/{n_test} = "
              f"{1 / n_test:.4f}."),
        Table("Gap to the best corrected arm by setting (personalised accuracy)",
              ("setting", "model", "clients/round", "seeds", "layers", "literal zero frac",
               "literal norm ratio", "literal acc", "best corrected", "its acc", "gap",
               "95% CI", f"rule (margin {MARGIN})"),
              tuple(sweep_rows),
              "Sweep settings use the sweep arms and the first sweep_seeds seeds; their "
              "outcomes are reported, not combined into the verdict. 'layers' counts "
              "parameter-bearing modules; Eq. 4 and 9 index parameter tensors."),
        eq4_table(),
        Table("Largest Eq. 4 multiplier seen in any round (base setting)",
              ("arm", "max multiplier"), tuple((a, round(v, 3)) for a, v in mults.items())),
    ]
    figures = _figures(results, seeds, cfg)
    dc = stats.paired_difference(pers["carry-over"], pers["literal"], level=0.95, method="t")
    ds = stats.paired_difference(pers["selector-mean"], pers["literal"], level=0.95,
                                 method="t")
    dg = stats.paired_difference(glob[best], glob["literal"], level=0.95, method="t")
    pos = [e.value for e in E if e.name == "as_released_position"][0]
    which = ("At this scale, filling in the exact zeros alone (carry-over) does not "
             "close the gap; undoing the shrinkage of partly selected coordinates as well "
             "(selector-mean) does."
             if dc.high < ds.low else
             "The two fixes are not separated at this scale.")
    measured = (
        f"Which fix matters (personalised accuracy, paired, 95% t): carry-over - literal "
        f"{dc.mean:+.3f} [{dc.low:+.3f}, {dc.high:+.3f}]; selector-mean - literal "
        f"{ds.mean:+.3f} [{ds.low:+.3f}, {ds.high:+.3f}]. {which}",
        f"The global model suffers more than the personalised one: {best} - literal on the "
        f"global test set {dg.mean:+.3f} [{dg.low:+.3f}, {dg.high:+.3f}] (literal "
        f"{glob['literal'].mean():.3f}, fedavg {glob['fedavg'].mean():.3f}). The "
        f"personalised metric, the paper's, mixes each client's own head back in (Eq. 2).",
        f"as-released lands at {pos:.2f} on the line from literal (0) to {best} (1).",
    )
    notes = measured + (
        "The structural part is mathematics checked on every round: the literal server "
        "rule equals p x selector-mean coordinate by coordinate, so unselected "
        "coordinates are exactly zero and partly selected ones are scaled by p < 1.",
        "The consequence part is measured, not inferred: the literal arm's clients "
        "retrain from the shrunken global model every round, and its personalised model "
        "mixes in the client's own head (Eq. 2), which can hide a damaged global model.",
        "Smoke scale runs the 8x8 digits set with a small CNN; the paper's 60.68% "
        "(CIFAR-100, ResNet-18) is shown beside our literal arm only as the paper's "
        "number; its setting is --scale paper (needs the data and a GPU).",
        "as-released re-implements the release's server and mask rules from their "
        "description (no code of the release); its extra x20 rate factor for the CNN and "
        "its CPU-only write-back of masks into the client model are not reproduced.",
    )
    return Analysis(tuple(E), (part_s, part_c), tuple(tables), tuple(figures), notes)


def _row(x):
    m = stats.mean_interval(x, level=0.95)
    return round(m.mean, 4), f"[{m.low:.4f}, {m.high:.4f}]"


def _figures(results, seeds, cfg) -> list[Figure]:
    R = cfg["rounds"]
    x = list(range(1, R + 1))
    figs = []
    for key, title, ylabel, logy in (
            ("norm", "Global L2 norm per round", "L2 norm of the parameters", False),
            ("zero_frac", "Exact-zero fraction of the global model per round",
             "fraction of exact zeros", False),
            ("unselected_frac", "Coordinates no sampled client selected, per round",
             "fraction of coordinates", False)):
        series = []
        for a in ARM_NAMES:
            rows = _curve(results, a, seeds, "", key)
            if key == "norm":  # round 0: the initial model (same for every arm)
                init = np.array([[results[RunSpec(a, s, "")]["init_norm"]] for s in seeds])
                series.append(_band_series(a, [0] + x, np.hstack([init, rows])))
            else:
                series.append(_band_series(a, x, rows))
        figs.append(Figure(f"{key}_per_round", title, "round", ylabel, tuple(series),
                           logy=logy, caption="mean over seeds; band = min..max over seeds"
                           + ("; round 0 is the initial model" if key == "norm" else "")))
    # per-layer norm of the literal arm vs selector-mean
    first = results[RunSpec("literal", seeds[0], "")]["per_round"][0]
    layers = [k.split(":", 1)[1] for k in first if k.startswith("norm:")]
    series = []
    for a in ("literal", "selector-mean"):
        for layer in layers:
            series.append(_band_series(f"{a} {layer}", x,
                                       _curve(results, a, seeds, "", f"norm:{layer}")))
    figs.append(Figure("layer_norm_per_round", "Per-layer L2 norm per round", "round",
                       "L2 norm", tuple(series), logy=True,
                       caption="literal vs selector-mean; mean over seeds, band min..max"))
    series = [_band_series(f"literal {layer}", x,
                           _curve(results, "literal", seeds, "", f"zero:{layer}"))
              for layer in layers]
    figs.append(Figure("layer_zero_per_round", "Literal: per-layer exact-zero fraction",
                       "round", "fraction of exact zeros", tuple(series),
                       caption="mean over seeds, band min..max"))
    for key, title in (("personal_acc", "Personalised accuracy per round"),
                       ("global_acc", "Global-model accuracy per round")):
        series = []
        for a in ARM_NAMES:
            runs = [results[RunSpec(a, s, "")] for s in seeds]
            rows = np.array([r[key] for r in runs])
            series.append(_band_series(a, runs[0]["eval_rounds"], rows))
        figs.append(Figure(key, title, "round", "accuracy", tuple(series),
                           caption="mean over seeds; band = min..max over seeds; round 0 "
                           "is the initial model"))
    return figs


CLAIM = Claim(
    id=CLAIM_ID,
    paper=FLAYER,
    record=RecordRef(RECORDS[FLAYER.arxiv_id],
                     ("skeptic_critique.concrete_test", "skeptic_critique.load_bearing_attack",
                      "falsifier", "referee_report.major_comments[0]")),
    title="masked-zero aggregation collapse",
    statement=("Run as printed, the server average lets masked-out coordinates enter as "
               "zeros, so unselected weights vanish and selected ones shrink; the "
               "reported accuracy could not come from that rule."),
    arms=ARMS,
    rules=(RULE_STRUCTURAL, RULE_COLLAPSE),
    combination=ALL_PARTS,
    stochastic=True,
    scales=SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
    paper_numbers=(
        PaperNumber("FLAYER personalised accuracy, CIFAR-100 / ResNet-18, Dir(0.1)", "60.68 %",
                    "Table of overall performance", "literal_personal_acc"),
        PaperNumber("mean gain over six pFL baselines", "+5.40 points (up to 14.29)",
                    "abstract", ""),
        PaperNumber("training time vs FedAvg", "58.9% less", "abstract", ""),
    ),
    answers={"skeptic_critique.concrete_test": "structural",
             "skeptic_critique.load_bearing_attack": "collapse",
             "falsifier": "collapse",
             "referee_report.major_comments[0]": "structural"},
)
