"""The presentation of ``lips-dropout-control``: its estimates, tables, figures, notes and
findings, built from the evidence :func:`audit.papers.lips.dropout_control.evidence`
returns (every comparison and decided part). It decides nothing: the parts arrive
decided, so deciding (all that stability and sequential looks need) stays apart from
presenting. It imports the claim's declarations, never the claim's code.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from audit import kit, stats
from audit.analysis import difference_estimate, mean_estimate
from audit.claims import Analysis, Figure, RunContext, RunSpec, Table
from audit.papers.lips.declarations import dropout_control as D
from audit.papers.lips.declarations.dropout_control import ARMS, CONTROLS, N_COMPARISONS
from audit.papers.lips.declarations.dropout_control import COS_MARGIN
from audit.questions import MEASURED, Finding
from audit.verdict import Estimate

ARM_NAMES = tuple(a.name for a in ARMS)
#: what :func:`analysis` reads from the evidence, in the order it unpacks it
EVIDENCE = (
    "sel", "acc", "cos_final", "gap", "peak", "best", "last", "bml", "parts", "premise",
    "cmp", "tw_rand", "tw_gap", "tw_prem", "tw_sens", "tw_sens_side", "tw_acc", "tw_cos",
    "cos_freeze", "opt", "at_last", "at_best", "sensitive", "sens_side", "sens_both",
    "cos_sens", "alpha", "a_side", "a_both", "frac", "d_margin", "resolution", "n", "R",
    "short_rounds", "every", "grid_range", "freeze_round", "cos_arms", "n_test",
    "tw_gap_sens", "sens_gap", "gap_why")


def _paired(a, b):
    """The paired difference ``a - b`` over seeds with its Student-t 95% interval."""
    return stats.paired_difference(a, b, level=0.95, method="t")


def _ci(x) -> tuple:
    """The mean over seeds (2 decimals) and its Student-t 95% interval, as tabled."""
    m = stats.mean_interval(x)
    return round(m.mean, 2), stats.interval_text(m, ".2f")


def _cmp_row(name: str, tw) -> tuple:
    """One three-way comparison as a row of the comparisons tables."""
    dd = tw.difference
    return (name, round(dd.mean, 3), stats.interval_text(dd, ".3f"), f"{tw.alpha:.4g}",
            round(tw.tost.p_value, 4), tw.outcome, "" if tw.flip is None else round(tw.flip, 3),
            "" if tw.seeds_needed is None else tw.seeds_needed)


def _note_sensitivity(sd, conf: float, gap_tw=None, gap_shown: bool = False,
                      gap_why: str = "", **fields) -> str:
    """NOTE_SENSITIVITY: FedBN minus its cut-short copy ``sd`` with its ``conf`` % interval;
    then, given ``gap_tw`` (the three-way rule on the cut-short copy's train-test gap
    minus FedBN's, at the gap part's alpha), NOTE_SENSITIVITY_GAP: whether it shows assay
    sensitivity on the gap (``gap_shown``; ``gap_why`` says why not)."""
    text = D.NOTE_SENSITIVITY.format(sd=sd, sd_ci=stats.ci_text(sd, D.CI_CONF_2, conf=conf),
                                     **fields)
    if gap_tw is None:
        return text
    g = gap_tw.difference
    shown = D.SHOWN[bool(gap_shown)] + ("" if gap_shown else f" ({gap_why})")
    return text + D.NOTE_SENSITIVITY_GAP.format(
        g=g, g_ci=stats.ci_text(g, D.CI_CONF_2, conf=100 * (1 - gap_tw.alpha)),
        outcome=gap_tw.outcome, shown=shown)


def _note_gain(g, **fields) -> str:
    """NOTE_GAIN: LIPS minus FedBN ``g`` with its 95% t interval."""
    return D.NOTE_GAIN.format(g=g, g_ci=stats.ci_text(g, D.CI_T_2), **fields)


def _note_inertia(c, f, r, **fields) -> str:
    """NOTE_INERTIA: FedBN's final middle cosine ``c``, freezing ``f`` and random masks
    ``r``, each with its 95% interval."""
    return D.NOTE_INERTIA.format(c=c, f=f, r=r, c_ci=stats.ci_text(c, D.CI_95_3),
                                 f_ci=stats.ci_text(f, D.CI_95_2),
                                 r_ci=stats.ci_text(r, D.CI_95_2), **fields)


def _note_beside(r, opt, conf: float, **fields) -> str:
    """NOTE_BESIDE: LIPS minus LIPS-random ``r`` (``conf`` % interval) and the selection
    optimism ``opt`` (95% t interval)."""
    return D.NOTE_BESIDE.format(r=r, opt=opt, r_ci=stats.ci_text(r, D.CI_CONF_2, conf=conf),
                                opt_ci=stats.ci_text(opt, D.CI_T_2), **fields)


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
                 for hp, v, t in zip(cfg["grid"][arm], sel[arm]["all_val"],
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


def analysis(ev: Mapping[str, Any], results: Mapping[RunSpec, Mapping],
             ctx: RunContext) -> Analysis:
    """The claim's :class:`Analysis` from its evidence ``ev`` (keys: :data:`EVIDENCE`);
    ``results`` (the runs) is not read: the evidence holds what the report shows."""
    cfg = ctx.config
    (sel, acc, cos_final, gap, peak, best, last, bml, parts, premise, cmp, tw_rand, tw_gap,
     tw_prem, tw_sens, tw_sens_side, tw_acc, tw_cos, cos_freeze, opt, at_last, at_best,
     sensitive, sens_side, sens_both, cos_sens, alpha, a_side, a_both, frac, d_margin,
     resolution, n, R, short_rounds, every, grid_range, freeze_round, cos_arms,
     n_test, tw_gap_sens, sens_gap, gap_why) = (ev[k] for k in EVIDENCE)
    s_l = sel["lips"]

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
            of("planted_gap_shift", tw_gap_sens.difference, conf=conf(a_side),
               short_rounds=short_rounds, rounds=R, d=d_margin),
            flag("gap_sensitive", sens_gap),
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
                    _cmp_row("planted: fedbn - fedbn-short (this part's alpha)",
                             tw_sens_side)),
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
        D.NOTE_PREMISE.format(status=premise.status, reason=premise.reason,
                              gated=", ".join(p.id for p in parts if p.gated)),
        D.NOTE_SETTING.format(n_clients=cfg["n_clients"], n_train=cfg["n_train"],
                              alpha=cfg["alpha"], rounds=R, n_test=cfg["n_test"],
                              n_test_seed=n_test, resolution=resolution),
        _note_sensitivity(tw_sens.difference, conf(alpha), short_rounds=short_rounds,
                          rounds=R, outcome=tw_sens.outcome, alpha=alpha,
                          detected=D.DETECTED[sensitive], a_side=a_side,
                          detected_side=D.DETECTED[sens_side], mdes=mdes or D.NO_MDES,
                          gap_tw=tw_gap_sens, gap_shown=sens_gap, gap_why=gap_why),
        _note_gain(at_last, where=D.GAIN_WHERE[where], decided="; ".join(
            f"{p.id}: {MEASURED if p.kind == 'measurement' else p.verdict.value}"
            for p in parts)),
        D.NOTE_TUNING,
        _note_inertia(stats.mean_interval(cos_final["fedbn"]),
                      _paired(acc["fedbn-freeze-middle"], acc["fedbn"]),
                      _paired(acc["lips-random"], acc["lips"]), f_round=freeze_round),
        _note_beside(tw_rand.difference, opt, conf(tw_rand.alpha), outcome=tw_rand.outcome,
                     grid_range=grid_range, n_c=len(cfg["grid"]["lips"])),
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
