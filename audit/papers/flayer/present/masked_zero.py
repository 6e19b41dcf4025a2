"""The presentation of ``flayer-masked-zero``: the estimates, the release's x20 arm,
tables, figures, notes, the convergence caveat and findings, built from the evidence
:func:`audit.papers.flayer.masked_zero.evidence` returns (every comparison and decided
part, and the per-seed tables they rest on) and from the runs' curves. It decides
nothing: the parts arrive decided, so deciding stays apart from presenting. It imports the claim's declarations,
never the claim's code.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from audit import kit, questions, stats
from audit.analysis import difference_estimate, mean_estimate
from audit.claims import Analysis, Figure, RunContext, RunSpec, Table
from audit.papers.flayer.declarations import masked_zero as D
from audit.papers.flayer.declarations.masked_zero import ARMS, PREMISE_ARM, X20
from audit.questions import Finding
from audit.verdict import Estimate

ARM_NAMES = tuple(a.name for a in ARMS)
#: what :func:`analysis` reads from the evidence, in the order it unpacks it
EVIDENCE = (
    "est_s", "pers", "glob", "ratio", "zeros", "n_test", "n_pers", "resolution", "best",
    "corrected", "tw", "sens_ok", "sens_txt", "sweep_gaps", "margin", "equiv", "alpha",
    "frac", "k", "alpha_k", "premise", "sweep_rows", "setting_rows", "parts", "eq4",
    "lean_g")


def _estimates(ev: Mapping[str, Any], results, seeds) -> tuple[list[Estimate], float, dict]:
    """The estimates of the evidence ``ev``, in the report's order; with as-released's
    position between literal and the best corrected arm and each arm's largest Eq. 4
    multiplier."""
    pers, glob, ratio, zeros, best, tw, equiv = (ev[k] for k in (
        "pers", "glob", "ratio", "zeros", "best", "tw", "equiv"))
    E: list[Estimate] = []

    def diff(name, a, b, what):  # every paired difference here is of accuracies
        E.append(difference_estimate(name, a, b, "accuracy", what))

    for arm in ARM_NAMES:
        E.append(mean_estimate(f"{arm}_personal_acc", pers[arm], "accuracy",
                               description=f"{arm}: final personalised accuracy (mean over seeds)"))
        E.append(mean_estimate(f"{arm}_global_acc", glob[arm], "accuracy",
                               description=f"{arm}: final global-model accuracy"))
    E.append(mean_estimate("literal_final_zero_fraction", zeros["literal"], "fraction",
                           "literal: fraction of exact zeros in the final global parameters"))
    E.append(mean_estimate("literal_norm_ratio", ratio["literal"], "ratio",
                           "literal: final / initial global L2 norm (parameters)"))
    E += [mean_estimate(f"{arm}_norm_ratio", ratio[arm], "ratio", f"{arm}: final / initial norm")
          for arm in ev["corrected"] + ("as-released", "fedavg")]
    E += ev["est_s"]
    E.append(ev["premise"].estimate)
    diff("literal_minus_fedavg", pers["literal"], pers["fedavg"], "literal - fedavg, final "
         "personalised accuracy: does the printed rule train at all against plain FedAvg")
    diff("gap_best_corrected_minus_literal", pers[best], pers["literal"],
         f"{best} - literal, final personalised accuracy (paired)")
    diff("gap_best_corrected_minus_literal_global", glob[best], glob["literal"],
         f"{best} - literal, final global accuracy (paired)")
    E.append(Estimate("tost_literal_like_best_p", tw.tost.p_value, unit="p",
                      description=f"equivalence p (the larger of the rule's two exact "
                      f"sign-test p-values), literal within +-{equiv:g} of {best} "
                      f"(equivalent: {tw.tost.equivalent})"))
    E.append(Estimate("assay_sensitivity", float(ev["sens_ok"]), unit="bool",
                      description=ev["sens_txt"]))
    for arm in ev["corrected"]:
        diff(f"gap_{arm}_minus_literal", pers[arm], pers["literal"],
             f"{arm} - literal, final personalised accuracy")
    # ---- where as-released lands
    asr = pers["as-released"]
    span = float(pers[best].mean() - pers["literal"].mean())
    pos = float((asr.mean() - pers["literal"].mean()) / span) if span else float("nan")
    E.append(Estimate("as_released_position", pos, unit="fraction",
                      description=f"(as-released - literal) / ({best} - literal), means; "
                      "0 = at literal, 1 = at the best corrected arm"))
    diff("as_released_minus_literal", asr, pers["literal"],
         "as-released - literal, final personalised accuracy")
    diff("as_released_minus_best_corrected", asr, pers[best],
         f"as-released - {best}, final personalised accuracy")
    diff("fedavg_minus_literal_global", glob["fedavg"], glob["literal"],
         "fedavg - literal, final global accuracy")
    mults = {a: max(m["max_lr_mult"] for s in seeds
                    for m in results[RunSpec(a, s, "")]["per_round"]) for a in ARM_NAMES}
    E.append(Estimate("literal_max_eq4_multiplier", mults["literal"], unit="x",
                      description="largest Eq. 4 multiplier in any literal round"))
    for st, b, a_vals, lit in ev["sweep_gaps"]:
        diff(f"gap_{st.replace('=', '_')}", a_vals, lit,
             f"{st}: {b} - literal, final personalised accuracy")
    return E, pos, mults


def _row(x):
    m = stats.mean_interval(x, level=0.95)
    return round(m.mean, 4), stats.interval_text(m, ".4f")


def _curve(results, arm, seeds, setting, key):
    return np.array([[m[key] for m in results[RunSpec(arm, s, setting)]["per_round"]]
                     for s in seeds])


def _band_series(label, x, rows):
    return {"label": label, "x": [float(v) for v in x], "y": rows.mean(0).tolist(),
            "low": rows.min(0).tolist(), "high": rows.max(0).tolist()}


def _figures(results, seeds, cfg) -> list[Figure]:
    x = list(range(1, cfg["rounds"] + 1))
    figs = []
    for key, title, ylabel in D.ROUND_FIGURES:
        series = []
        for a in ARM_NAMES:
            rows = _curve(results, a, seeds, "", key)
            if key == "norm":  # round 0: the initial model (same for every arm)
                init = np.array([[results[RunSpec(a, s, "")]["init_norm"]] for s in seeds])
                series.append(_band_series(a, [0] + x, np.hstack([init, rows])))
            else:
                series.append(_band_series(a, x, rows))
        figs.append(Figure(f"{key}_per_round", title, "round", ylabel, tuple(series),
                           logy=False, caption=D.BAND + ("; round 0 is the initial model"
                                                         if key == "norm" else "")))
    # per-layer norm of the literal arm vs selector-mean
    first = results[RunSpec("literal", seeds[0], "")]["per_round"][0]
    layers = [k.split(":", 1)[1] for k in first if k.startswith("norm:")]
    series = [_band_series(f"{a} {layer}", x, _curve(results, a, seeds, "", f"norm:{layer}"))
              for a in ("literal", "selector-mean") for layer in layers]
    figs.append(Figure("layer_norm_per_round", "Per-layer L2 norm per round", "round",
                       "L2 norm", tuple(series), logy=True,
                       caption="literal vs selector-mean; mean over seeds, band min..max"))
    series = [_band_series(f"literal {layer}", x,
                           _curve(results, "literal", seeds, "", f"zero:{layer}"))
              for layer in layers]
    figs.append(Figure("layer_zero_per_round", "Literal: per-layer exact-zero fraction",
                       "round", "fraction of exact zeros", tuple(series),
                       caption="mean over seeds, band min..max"))
    for key, title in D.ACCURACY_FIGURES:
        series = []
        for a in ARM_NAMES:
            runs = [results[RunSpec(a, s, "")] for s in seeds]
            series.append(_band_series(a, runs[0]["eval_rounds"],
                                       np.array([r[key] for r in runs])))
        figs.append(Figure(key, title, "round", "accuracy", tuple(series),
                           caption=D.BAND + "; round 0 is the initial model"))
    return figs


def _convergence(results, seeds, arms, resolution) -> dict:
    """Per arm, whether its mean personalised-accuracy curve had settled at the last
    evaluation (audit.questions.convergence: change over the last fifth of the rounds
    against three test examples)."""
    out = {}
    for a in dict.fromkeys(arms):
        runs = [results[RunSpec(a, s, "")] for s in seeds]
        curve = np.mean(np.array([r["personal_acc"] for r in runs]), axis=0)
        out[a] = questions.convergence(curve, runs[0]["eval_rounds"], resolution)
    return out


def _note_premise(premise, dl, level: float) -> str:
    """NOTE_PREMISE: the premise's estimate with the rule's ``level`` % interval, and
    literal - fedavg ``dl`` with its 95% t interval."""
    est = premise.estimate
    return D.NOTE_PREMISE.format(status=premise.status, arm=PREMISE_ARM, est=est, dl=dl,
                                 est_ci=stats.ci_text(est, D.CI_RULE, paren=True, level=level),
                                 dl_ci=stats.ci_text(dl, D.CI_T, paren=True))


def _note_which_fix(dc, ds, collapse, tw, best: str) -> str:
    """NOTE_WHICH_FIX: carry-over and selector-mean minus literal, each with its descriptive
    95% t interval; separated only where both are intervals (a point's ends compare
    points). Beside them, the decisive test: the collapse part (``collapse``, decided on
    ``tw``, ``best`` - literal at the rule's level) and whether it decides, so the
    descriptive intervals never read firmer than the verdict."""
    which = (D.WHICH_NO_INTERVAL if stats.no_interval(dc) or stats.no_interval(ds) else
             D.WHICH_SEPARATED if dc.high < ds.low else D.WHICH_NOT_SEPARATED)
    margin = float(tw.margin)
    if collapse.verdict.value != "INCONCLUSIVE":
        said = D.WHICH_DECIDED.format(verdict=collapse.verdict.value)
    else:
        why = []
        if getattr(collapse, "held", ""):
            why.append(D.WHICH_HELD.format(held=collapse.held))
        d = tw.difference
        if not stats.no_interval(d):
            inside = [w for w, v in (("the margin m", margin), ("0", 0.0))
                      if float(d.low) <= v <= float(d.high)]
            if inside:
                why.append(D.WHICH_CONTAINS.format(what=" and ".join(inside)))
        said = D.WHICH_UNDECIDED.format(why=": " + "; ".join(why) if why else "")
    decisive = D.WHICH_DECISIVE.format(
        best=best, margin=margin, said=said,
        rule_ci=stats.ci_text(tw.difference, D.CI_RULE, level=100 * (1 - tw.alpha)))
    return D.NOTE_WHICH_FIX.format(
        dc=dc, ds=ds, dc_ci=stats.ci_text(dc, D.CI_T, paren=True),
        ds_ci=stats.ci_text(ds, D.CI_T, paren=True), which=which, decisive=decisive)


def _note_metric(dg, dp: float, lean: str, **fields) -> str:
    """NOTE_METRIC: the best corrected arm minus literal on the global model, ``dg``,
    beside the personalised gap's mean ``dp``, and ``lean``: which way the collapse rule
    on the global metric points (the claim's ``global_lean``)."""
    size = (D.GAP_LARGER if dg.mean > dp else D.GAP_SMALLER if dg.mean < dp
            else D.GAP_SAME)
    return D.NOTE_METRIC.format(dg=dg, dg_ci=stats.ci_text(dg, D.CI_T, paren=True),
                                size=size, dp=dp, lean=lean, **fields)


def analysis(ev: Mapping[str, Any], results: Mapping[RunSpec, Mapping],
             ctx: RunContext) -> Analysis:
    """The claim's :class:`Analysis` from its evidence ``ev`` (keys: :data:`EVIDENCE`) and
    the runs' curves (``results``)."""
    cfg, seeds = ctx.config, list(ctx.seeds)
    (est_s, pers, glob, ratio, zeros, n_test, n_pers, resolution, best, corrected, tw,
     sens_ok, sens_txt, sweep_gaps, margin, equiv, alpha, frac, k, alpha_k, premise,
     sweep_rows, setting_rows, parts, eq4, lean_g) = (ev[k] for k in EVIDENCE)
    E, pos, mults = _estimates(ev, results, seeds)
    # ---- as-released with the release's x20 rate factor (reported)
    x20_seeds = [s for s in seeds if RunSpec("as-released", s, X20) in results]
    x20_txt = D.X20_NOT_RUN
    if x20_seeds:
        xp, xg, xb = (np.array([results[RunSpec("as-released", s, st)][key] for s in x20_seeds])
                      for st, key in ((X20, "final_personal_acc"), (X20, "final_global_acc"),
                                      ("", "final_personal_acc")))
        for x, which, what in ((xp, "personal", "as-released with the release's x20 CNN "
                                "rate factor"), (xg, "global", "the same, global-model accuracy")):
            E.append(Estimate(f"as_released_x20_{which}_acc", float(x.mean()), unit="accuracy",
                              n=len(x), method="mean", description=what))
        x20_txt = D.X20_MEASURED.format(xp=xp.mean(), xg=xg.mean(), seeds=x20_seeds,
                                        base=xb.mean())

    tables = [
        Table(D.ACCURACY_TITLE, D.ACCURACY_COLUMNS,
              tuple((a, *_row(pers[a]), *_row(glob[a]), round(float(ratio[a].mean()), 3),
                     round(float(zeros[a].mean()), 4)) for a in ARM_NAMES),
              D.ACCURACY_NOTE.format(n_test=n_test, test_res=1 / n_test, n_pers=n_pers,
                                     resolution=resolution)),
        Table(D.SWEEP_TITLE, D.SWEEP_COLUMNS[:-1] + (D.SWEEP_COLUMNS[-1].format(margin=margin),),
              tuple(sweep_rows), D.SWEEP_NOTE),
        eq4,
        Table(D.MULTIPLIER_TITLE, ("arm", "max multiplier"),
              tuple((a, round(v, 3)) for a, v in mults.items())),
    ]
    figures = _figures(results, seeds, cfg)
    dc, ds, dg, dl = (stats.paired_difference(a, b, level=0.95, method="t") for a, b in (
        (pers["carry-over"], pers["literal"]), (pers["selector-mean"], pers["literal"]),
        (glob[best], glob["literal"]), (pers["literal"], pers["fedavg"])))
    notes = (
        _note_premise(premise, dl, 100 * (1 - alpha)),
        _note_which_fix(dc, ds, next(p for p in parts if p.id == "collapse"), tw, best),
        _note_metric(dg, float(np.mean(pers[best] - pers["literal"])), lean_g, best=best,
                     literal=glob["literal"].mean(), fedavg=glob["fedavg"].mean()),
        D.NOTE_AS_RELEASED.format(pos=pos, best=best, x20=x20_txt),
        D.NOTE_ALPHA.format(frac=frac, alpha=alpha, k=k, alpha_k=alpha_k),
        D.NOTE_MARGIN.format(margin=margin, equiv=equiv),
        D.NOTE_SETTING,
        D.NOTE_LAYER.format(layer_unit=cfg.get("layer_unit", "tensor")),
        *D.NOTES_FIXED,
    )
    # ---- was training done when the final accuracy was read?
    conv = _convergence(results, seeds, (best, "literal", PREMISE_ARM, "fedavg"),
                        resolution)
    caveats = {}
    if not all(c["converged"] for c in conv.values()):
        late = ", ".join(f"{a} {c['change']:+.3f}" for a, c in conv.items()
                         if not c["converged"])
        first = next(iter(conv.values()))
        caveats["accuracy-collapse"] = D.CAVEAT_CONVERGENCE.format(late=late, **first)
    E += [Estimate(f"late_change_{a}", c["change"], unit="accuracy",
                   description=c["text"]) for a, c in conv.items()]
    findings = (
        Finding(D.FINDING_GLOBAL.format(
            below_fedavg=glob["fedavg"].mean() - glob["literal"].mean(), below_best=dg.mean,
            best=best, literal=glob["literal"].mean(), fedavg=glob["fedavg"].mean()),
                ("gap_best_corrected_minus_literal_global", "fedavg_minus_literal_global")),
        Finding(D.FINDING_PREMISE.format(arm=PREMISE_ARM, value=premise.estimate.value,
                                         status=premise.status),
                ("premise_flayer_minus_fedavg",)),
    )
    tables.append(kit.misbehaviour_table(kit.misbehaving_seeds(pers, ARM_NAMES, seeds),
                                         len(seeds), "final personalised accuracy"))
    return Analysis(tuple(E), parts, tuple(tables), tuple(figures), notes, premise=premise,
                    settings=setting_rows, findings=findings, caveats=caveats)
