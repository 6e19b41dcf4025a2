"""The presentation of ``genefl-inverted-cosine``: its estimates, tables, figures, notes
and findings, built from the evidence :func:`audit.papers.genefl.inverted_cosine.evidence`
returns (every decided part and the numbers it rests on). It decides nothing: the parts
arrive decided, so deciding stays apart from presenting. It imports the claim's
declarations, never the claim's code.
"""
from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from audit import kit, stats
from audit.analysis import mean_estimate
from audit.claims import Analysis, Figure, RunContext, RunSpec, Table
from audit.papers.genefl.declarations import inverted_cosine as D
from audit.papers.genefl.declarations.inverted_cosine import FAIR
from audit.questions import Finding
from audit.verdict import Estimate, Outcome

#: what :func:`analysis` reads from the evidence, in the order it unpacks it
EVIDENCE = (
    "seeds", "arms", "alpha", "d", "tops", "pairs", "sel", "rho", "js", "jz", "acc",
    "nogene", "planted", "known", "n_test", "resolution", "sens", "tw", "prem_tw",
    "premise", "parts", "alpha_fair", "fair", "fair_tw", "match", "sweep_rows",
    "sweep_diffs", "sweep_part", "settings", "bottom_match")


def _ci_method(diff) -> str:
    """``diff``'s interval with its level and method (CI_METHOD); where it has none (a
    zero-width or undefined one), the no-interval text alone."""
    return stats.ci_text(diff, D.CI_METHOD, level=100 * diff.level, method=diff.method)


def analysis(ev: Mapping[str, Any], results: Mapping[RunSpec, Mapping],
             ctx: RunContext) -> Analysis:
    """The claim's :class:`Analysis` from its evidence ``ev`` (keys: :data:`EVIDENCE`) and
    the runs (the genes each arm chose, for the tables)."""
    cfg = ctx.config
    (seeds, arms, alpha, d, tops, pairs, sel, rho, js, jz, acc, nogene, planted,
     known, n_test, resolution, sens, tw, prem_tw, premise, parts, alpha_fair, fair,
     fair_tw, match, sweep_rows, sweep_diffs, sweep_part, settings,
     bottom_match) = (ev[k] for k in EVIDENCE)
    mean_est = functools.partial(mean_estimate, no_spread_point=True)

    def frac(rows, key):
        return sum(r[key] for r in rows) / len(rows) if rows else float("nan")

    by_size = {}  # size relation -> (pairs, untouched higher with 1/dim, by cos alone)
    for rel in ("equal", "perturbed smaller", "perturbed larger"):
        rows = [r for r in pairs if r["size"] == rel]
        by_size[rel] = (len(rows), frac(rows, "untouched_higher"),
                        frac(rows, "untouched_higher_no_dim"))
    est = [Estimate(f"perturb_{rel.split()[-1]}_untouched_higher", by_size[rel][1],
                    unit="fraction", n=by_size[rel][0], description=what)
           for rel, what in (("equal", "equal-size pairs where the untouched layer scores "
                                       "higher (exact count)"),
                             ("perturbed smaller", "moved layer smaller than the untouched one"),
                             ("perturbed larger", "moved layer larger than the untouched one"))]
    est += [mean_est("xi_dim_rank_correlation", rho, "rho",
                     "Spearman(xi, 1/dim) over layers, mean over client updates, per seed"),
            mean_est("jaccard_top_vs_most_stable", js, "Jaccard",
                     "top-gamma by xi vs the gamma highest-cosine layers"),
            mean_est("jaccard_top_vs_smallest", jz, "Jaccard",
                     "top-gamma by xi vs the gamma smallest layers")]
    est += [mean_est(f"agnostic_acc_{a}", acc[a], "accuracy",
                     f"agnostic clients from the {a} learnGene") for a in arms]
    est += [mean_est("agnostic_acc_no-gene", nogene, "accuracy",
                     "agnostic clients from fresh weights (no learnGene)"),
            mean_est("agnostic_acc_planted", planted, "accuracy",
                     f"top-gamma's predictions with a planted handicap of {d}")]
    est += [mean_est(f"known_acc_{a}", known[a], "accuracy",
                     f"known clients, their model after the last round, {a}") for a in arms]
    diffs = []
    for a in arms[1:] + ["no-gene", "planted"]:
        b = nogene if a == "no-gene" else planted if a == "planted" else acc[a]
        dd = stats.paired_difference(acc["top-gamma"], b, level=1 - alpha, method="hall")
        est.append(Estimate.of(f"diff_agnostic_top_minus_{a}", dd, "accuracy",
                               f"paired by seed: top-gamma - {a}"))
        diffs.append((a, dd))
    chance = 1.0 / len(cfg["known_classes"])
    est.append(Estimate("chance_level_known", chance, unit="accuracy",
                        description="1 / number of known classes"))
    for arm, m in match.items():
        est += [mean_est(f"gene_params_ratio_{arm}", m["ratio"], "ratio",
                         f"{arm}'s cluster gene parameters / top-gamma's, per seed"),
                mean_est(f"gene_jaccard_{arm}_vs_top", m["jaccard"], "Jaccard",
                         f"{arm}'s cluster gene layers vs top-gamma's, per seed"),
                Estimate(f"seeds_gene_differs_{arm}", float((~m["same"]).sum()),
                         unit="seeds", n=len(seeds),
                         description=f"seeds where {arm}'s gene differs from top-gamma's in "
                                     "some cluster (exact count)")]
    bm = bottom_match
    est.append(mean_est("gene_params_ratio_bottom-gamma", bm["ratio"], "ratio",
                        "bottom-gamma's cluster gene parameters / top-gamma's, per seed"))
    sweep_est = [Estimate.of(f"diff_agnostic_top_minus_bottom_{st.replace('=', '_')}", diff,
                             "accuracy", f"{st}: top-gamma - bottom-gamma, paired by seed "
                                         f"(n = {n_sw}, sweep seeds)")
                 for st, diff, n_sw in sweep_diffs]
    est.extend(sweep_est)

    genes = {a: results[RunSpec(a, seeds[0])]["genes"] for a in arms}
    dims = tops[0]["dims"]

    def fair_row(name, m, differ, t, verdict):  # a row of the fair controls' table
        return (name, round(float(m["ratio"].mean()), 3), round(float(m["jaccard"].mean()), 3),
                differ, "-" if t is None else round(t.difference.mean, 4),
                "-" if t is None else stats.interval_text(t.difference, ".4f"),
                verdict)

    tables = [
        Table("Perturbation test: does the untouched layer score higher?",
              ("size relation", "pairs", "with 1/dim (Eq. 9)", "cos alone"),
              tuple((k, v[0], round(v[1], 4), round(v[2], 4)) for k, v in by_size.items()),
              note=f"All ordered pairs of layers, {len(seeds)} trained models (top-gamma, "
                   f"cluster 0, last round), relative move {D.DELTA}."),
        Table(f"Layers chosen (seed {seeds[0]}, per cluster; gamma = {tops[0]['gamma']} of "
              f"{tops[0]['n_layers']})", ("arm", "learnGene layers"),
              tuple((a, " | ".join(", ".join(g) for g in genes[a])) for a in arms),
              note="Layer sizes: " + ", ".join(f"{l} {n}" for l, n in dims.items()) +
                   "; the gamma smallest: " + ", ".join(sel[0]["smallest"])),
        Table("Agnostic clients: paired differences (top-gamma minus other)",
              ("other", "mean", f"{100 * (1 - alpha):g}% CI low",
               f"{100 * (1 - alpha):g}% CI high", "n"),
              tuple((a, round(x.mean, 4), round(x.low, 4), round(x.high, 4), x.n)
                    for a, x in diffs),
              note=D.TABLE_DIFFS_NOTE),
        Table("Known clients: accuracy by arm (mean over seeds)",
              ("arm", "known-client accuracy", "chance level"),
              tuple((a, round(float(np.mean(known[a])), 4), round(chance, 4)) for a in arms)),
        Table("Fair controls of the reversal: top-gamma against each",
              ("control", "gene params / top's", "Jaccard with top's layers",
               "seeds where genes differ", "top minus control",
               f"{100 * (1 - alpha_fair):g}% CI", "verdict"),
              tuple(fair_row(a, match[a], f"{int((~match[a]['same']).sum())} of {len(seeds)}",
                             fair_tw.get(a), p.verdict.value) for a, p in zip(FAIR, fair)) +
              (fair_row("bottom-gamma (unfair, for reference)", bm, "-", tw,
                        parts[2].verdict.value),),
              note=D.TABLE_FAIR_NOTE.format(alpha_fair=alpha_fair)),
        Table("Gamma sweep: the reviewer's test at each gene size",
              ("gamma", "layers in gene", "seeds", "top-gamma", "bottom-gamma",
               "top minus bottom", f"{100 * (1 - alpha):g}% CI", "premise here",
               "verdict"),
              tuple((f"{r['gamma']:g}" + (" (base)" if r["base"] else ""),
                     r["gamma_layers"], r["n"], round(r["top"], 4), round(r["bottom"], 4),
                     round(r["diff"], 4), f"[{r['low']:.4f}, {r['high']:.4f}]",
                     r["premise"], r["verdict"]) for r in sweep_rows),
              note=D.TABLE_SWEEP_NOTE),
        kit.misbehaviour_table(kit.misbehaving_seeds(acc, arms, seeds), len(seeds),
                               "agnostic clients' accuracy"),
    ]
    u0 = tops[0]["updates"][0]
    names = list(u0["xi"])
    figs = (Figure("xi_vs_dim", "Eq. 9 score against layer size (one client update)",
                   "parameters in layer (log10)", "xi (log10)",
                   ({"label": "layers", "x": [float(np.log10(dims[l])) for l in names],
                     "y": [float(np.log10(max(u0["xi"][l], 1e-12))) for l in names]},),
                   caption="Cosines are all near 1, so log xi falls on a line of slope -1."),
            Figure("agnostic_acc", "Agnostic-client accuracy by arm (per seed)", "seed",
                   "accuracy",
                   tuple({"label": a, "x": seeds, "y": acc[a].tolist()} for a in arms) +
                   ({"label": "no-gene", "x": seeds, "y": nogene.tolist()},)))

    pd, td = prem_tw.difference, tw.difference
    acc_part = next(p for p in parts if p.id == "accuracy-top-vs-bottom")  # own test
    # the rule's minimum detectable effect at its own power (audit.stats.rule_mde: SD
    # units), scaled by the observed spread: decided with probability tw.power, not the
    # smallest effect it can decide
    mde = stats.rule_mde(len(seeds), alpha, power=tw.power)
    if mde is None:
        mde_txt = D.THRESHOLDS_NO_MDE.format(power=tw.power, n=len(seeds))
    else:
        mde_abs = mde * td.sd
        below = acc_part.verdict != Outcome.INCONCLUSIVE and abs(td.mean) < mde_abs
        mde_txt = D.THRESHOLDS_MDE.format(
            mde=mde_abs, power=tw.power, n=len(seeds),
            run=D.THRESHOLDS_MDE_RUN.format(verdict=acc_part.verdict.value, mean=td.mean)
            if below else "")
    realised = float(sens.difference.mean)  # the planted handicap as realised (the reason's)
    short = (D.THRESHOLDS_SHORT.format(share=D.SHORT_OF_D)
             if realised < D.SHORT_OF_D * d else "")
    fragile = (D.NOTE_OWN_TEST_FRAGILE.format(flip=acc_part.flip,
                                              examples=acc_part.flip / acc_part.resolution)
               if acc_part.fragile else "")
    rows_txt = "; ".join(f"gamma {r['gamma']:g}: {r['diff']:+.4f} ({r['verdict']}, n = "
                         f"{r['n']})" for r in sweep_rows)
    mb, mc = match["bottom-gamma-bytes"], match["bottom-gamma-no-classifier"]
    nb = int((~mb["same"]).sum())
    notes = (
        D.NOTE_PREMISE.format(effect=premise.effect, status=premise.status, mean=pd.mean,
                              ci=_ci_method(pd)),
        D.NOTE_OWN_TEST.format(verdict=acc_part.verdict.value, mean=td.mean,
                               ci=_ci_method(td), tail=(D.NOTE_OWN_TEST_AGAINST
                               if acc_part.verdict == Outcome.REFUTED else ".") + fragile),
        D.NOTE_DIRECTION,
        D.NOTE_SIZE.format(rho=rho.mean(), smaller=1 - by_size["perturbed smaller"][1]),
        D.NOTE_SELECTION.format(js=js.mean(), jz=jz.mean(), j_high=D.J_HIGH, j_low=D.J_LOW),
        D.NOTE_KNOWN.format(reset=float(np.mean(known["top-gamma-reset"])), chance=chance,
                            keep=float(np.mean(known["top-gamma"]))),
        D.NOTE_THRESHOLDS.format(
            d=d, examples=d / resolution, resolution=resolution, alpha=alpha,
            fraction=float(ctx.alpha_fraction), sensitivity=sens.outcome,
            realised=realised, short=short, mde=mde_txt),
        D.NOTE_SCALE.format(scale=ctx.scale, n=len(seeds), lo=min(n_test), hi=max(n_test)),
        D.NOTE_DEVIATIONS,
        D.NOTE_FAIR.format(bytes_ratio=mb["ratio"].mean(), bytes_jaccard=mb["jaccard"].mean(),
                           differ=nb, n=len(seeds), nocls_ratio=mc["ratio"].mean(),
                           alpha_fair=alpha_fair, rows=rows_txt),
    )

    def said(p, arm):  # how one fair control came out, in words
        if arm not in fair_tw:
            return D.FAIR_NOT_SAID
        t_ = fair_tw[arm].difference
        return D.FAIR_SAID.format(mean=t_.mean, ci=_ci_method(t_), verdict=p.verdict.value)

    fb, fc = fair
    bytes_txt = (D.FAIR_BYTES_VACUOUS.format(params=np.mean(
        [np.mean(t["gene_param_bytes"]) for t in tops]) / 4) if nb == 0 else D.FAIR_BYTES.format(
        ratio=mb["ratio"].mean(), differ=nb, n=len(seeds), said=said(fb, "bottom-gamma-bytes")))
    survives = D.SURVIVES[0 if fb.verdict == fc.verdict == Outcome.REFUTED else
                          1 if Outcome.CONFIRMED in (fb.verdict, fc.verdict) else 2]
    findings = (
        Finding(D.FINDING_SIZE.format(rho=rho.mean(), jz=jz.mean()),
                ("xi_dim_rank_correlation", "jaccard_top_vs_smallest")),
        Finding(D.FINDING_REVERSAL.format(diff=td.mean, premise=pd.mean),
                ("diff_agnostic_top_minus_bottom-gamma", "diff_agnostic_top_minus_no-gene")),
        Finding(D.FINDING_FAIR.format(survives=survives, nocls_ratio=mc["ratio"].mean(),
                                      bottom_ratio=bm["ratio"].mean(),
                                      nocls=said(fc, "bottom-gamma-no-classifier"),
                                      bytes=bytes_txt),
                ("diff_agnostic_top_minus_bottom-gamma-no-classifier",
                 "diff_agnostic_top_minus_bottom-gamma-bytes",
                 "gene_params_ratio_bottom-gamma-no-classifier")),
        Finding(D.FINDING_SWEEP.format(rows=rows_txt, verdict=sweep_part.verdict.value),
                tuple(e.name for e in sweep_est)),
    )
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables), figures=figs,
                    notes=notes, premise=premise, findings=findings, settings=settings,
                    caveats=D.CAVEATS)
