"""Falsifier `fedtlu-lower-bound` (FedTLU, arXiv 2412.17692v2): the code.

What the claim declares (the reviewer's three points and the parts that answer them, the
scales, margins, rule texts, questions, notes and searches) is in
``audit/papers/fedtlu/declarations/lower_bound.py``, whose docstring says what each
part computes. Here: the exact derivations of part 1 (``exact_results``, the paper's
algorithm module's search over the declared grid), the units
(``run``: the FL runs of parts 2 and 3 are :mod:`audit.papers.fedtlu.simulation`'s),
the decisions that are not kit kinds, the premise, and the evidence every part rests on
(``evidence``); :mod:`audit.papers.fedtlu.present.lower_bound` presents it.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from audit import kit, stats
from audit.claims import Claim, RunContext, RunSpec
from audit.analysis import results_table
from audit import questions
from audit.papers.fedtlu.declarations import lower_bound as D
from audit.papers.fedtlu.present import lower_bound as P
from audit.papers.fedtlu.declarations.lower_bound import (  # noqa: F401 (tests read them)
    ALPHA, ARMS, CLAIM_ID, N_TESTS, ONE_MINUS_DELTA, PAPER_GAP_REL, PAPER_RUNS,
    PREMISE_EFFECT, PRINTED, SCALES, SEARCHES, SETTINGS)
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer

EXACT = RunSpec(arm="exact", seed=None, setting="proof")


# ================================================================= part 1: exact proof
def exact_results(cfg) -> dict:
    """Part 1's exact numbers: the paper's algorithm searched over the declared grid."""
    from audit.papers.fedtlu import algorithm as tlu

    return tlu.exact_results(int(cfg["n_random"]), D.SWEEP_ETA_L, D.SWEEP_RATIOS,
                             D.SWEEP_DELTAS)


def run(spec: RunSpec, ctx: RunContext) -> dict:
    if spec == EXACT:
        return exact_results(ctx.config)
    from audit.papers.fedtlu.simulation import fl_run

    return fl_run(spec.arm, spec.seed, spec.setting, ctx.config, device=ctx.device,
                  data_dir=ctx.data_dir, checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)


def specs(ctx: RunContext) -> list[RunSpec]:
    return [EXACT] + [RunSpec(a, s, st) for st in SETTINGS for a in ARMS for s in ctx.seeds]


# ============================================================================ the rules
def _decide_isotropic(ex):
    r = ex["iso"]
    if r["d_full"] > r["d_subset"]:
        return Outcome.CONFIRMED, D.ISO_CONFIRMED.format(**r), ""
    tight = (math.isclose(r["d_full"], r["lb_full"])
             and math.isclose(r["d_subset"], r["lb_subset"]))
    return Outcome.REFUTED, D.ISO_REFUTED.format(
        **r, tight=D.ISO_TIGHT.format(**r) if tight else ""), ""


def _n_found(ex) -> int:
    """Counterexamples found by the whole search: the exact separable sweep plus the
    coupled random quadratics (indefinite and PSD, both sides of eta*L = 2)."""
    n = int(ex["sweep_n_counterexamples"])
    for q in ex["random"].values():
        n_hi, n_lo = int(q["n_high"]), int(q["n"]) - int(q["n_high"])
        n += round(q["counterexample_frac_high"] * n_hi) + round(
            q["counterexample_frac_low"] * n_lo)
    return n


def _decide_ordering(ex):
    n = _n_found(ex)
    if n == 0:
        return Outcome.REFUTED, D.ORDER_NONE.format(**ex), ""
    return Outcome.CONFIRMED, D.ORDER_FOUND.format_map({**ex, **ex["simplest"], "n": n}), ""


def _decide_vacuous(ex):
    iso = ex["iso"]
    if ex["sweep_lb_negative_high"] and iso["both_increase"]:
        return Outcome.CONFIRMED, D.VACUOUS_CONFIRMED.format_map({**ex, **iso}), ""
    return Outcome.REFUTED, D.VACUOUS_REFUTED, ""


def _decide_assumption(ev):
    tw, orc = ev["three_way"], ev["oracle"]
    d = tw.difference
    # the ratio's interval: 1 - delta minus the difference's, ends swapped
    ratio = replace(d, low=ONE_MINUS_DELTA - d.high, high=ONE_MINUS_DELTA - d.low)
    txt = D.ASSUMPTION_INTERVAL.format(
        mean=ONE_MINUS_DELTA - d.mean, n=d.n, alpha=tw.alpha,
        ci=stats.ci_text(ratio, D.ASSUMPTION_CI, level=100 * (1 - tw.alpha)))
    side = (D.ASSUMPTION_ORACLE.format(oracle=orc.mean)
            + (D.ASSUMPTION_ORACLE_LOW if orc.mean < ONE_MINUS_DELTA else ")"))
    out = on_reviewer(tw.outcome, holds_when="SUPPORTED")
    return (out, D.ASSUMPTION_REASONS[out.value].format(txt=txt, side=side),
            D.NEEDS_ASSUMPTION if out == Outcome.INCONCLUSIVE else "",
            {"flip": tw.flip, "unit": "share of ||g||^2"})


def _decisive(res: dict, outcome: str):
    """The three-way that decides the noise part: the SUPPORTED setting (smallest flip)
    when FedTLU wins somewhere, else the most fragile setting."""
    pool = [tw for tw in res.values() if tw.outcome == outcome] or list(res.values())
    return min(pool, key=lambda tw: tw.flip if tw.flip is not None else math.inf)


def _decide_noise(ev):
    res = ev["three_way"]  # setting -> ThreeWay on Random - FedTLU (positive: FedTLU wins)
    reasons = "; ".join(f"{st}: {tw.reason}" for st, tw in res.items())
    info = {"resolution": ev["resolution"], "unit": "perplexity"}
    for outcome, found, lead in (("SUPPORTED", any, D.NOISE_WIN),
                                 ("FALSIFIED", all, D.NOISE_EQUIVALENT)):
        if found(tw.outcome == outcome for tw in res.values()):
            return (on_reviewer(outcome, holds_when="FALSIFIED"), lead + reasons, "",
                    {**info, "flip": _decisive(res, outcome).flip})
    need = ", ".join(f"{st}: {tw.seeds_phrase()}" for st, tw in res.items()
                     if tw.seeds_needed)
    return (Outcome.INCONCLUSIVE, reasons,
            f"seeds to detect the observed gaps: {need}" if need else D.NOISE_NO_SEEDS,
            {**info, "flip": _decisive(res, "INCONCLUSIVE").flip})


def _decide_power(ev):
    """ev: rows of (setting, sd_rel, sd_low, sd_high, mde3_low, mde3_high, need)."""
    g, runs = ev["gap"], ev["runs"]
    txt = "; ".join(D.POWER_ROW.format(
        st=st, sd=100 * sd, runs=runs, m_lo=100 * m_lo, m_hi=100 * m_hi, need=need,
        gap=100 * g, sd_ci=stats.ci_text(
            stats.Interval(100 * lo, 100 * hi), D.POWER_SD_CI,
            level=100 * (1 - ev["alpha"])))
        for st, sd, lo, hi, m_lo, m_hi, need in ev["rows"])
    flat = [r[0] for r in ev["rows"] if not r[3] > 0]  # an SD interval of (0, 0)
    if flat:  # no seed-to-seed spread was seen: the noise the rule reads is not measured
        return Outcome.INCONCLUSIVE, txt + D.POWER_NO_SPREAD.format(
            settings=", ".join(map(str, flat))), D.NEEDS_POWER
    if all(g < r[4] for r in ev["rows"]):
        return Outcome.CONFIRMED, D.POWER_CONFIRMED.format(txt=txt, runs=runs, gap=100 * g), ""
    if all(g > r[5] for r in ev["rows"]):
        return Outcome.REFUTED, D.POWER_REFUTED.format(txt=txt, runs=runs), ""
    return Outcome.INCONCLUSIVE, txt, D.NEEDS_POWER


def _decide_printed(ev):
    rows = ev["rows"]
    txt = "; ".join(D.PRINTED_ROW.format(name=name, r=r, f=f) for name, r, f in rows)
    worse = [name for name, r, f in rows if r < f]
    if worse:
        return Outcome.CONFIRMED, D.PRINTED_CONFIRMED.format(txt=txt, worse=", ".join(worse)), ""
    return Outcome.REFUTED, D.PRINTED_REFUTED.format(txt=txt), ""


def _decide_readings(ev):
    rows = ev["rows"]  # (setting, final, per-seed minimum, minimum of the mean curve)
    txt = "; ".join(D.READINGS_ROW.format(st=st, f=f, m=m, c=c) for st, f, m, c in rows)
    flips = [st for st, f, m, c in rows if len({np.sign(f), np.sign(m), np.sign(c)}) > 1]
    return Outcome.INCONCLUSIVE, (D.READINGS_FLIP.format(txt=txt, flips=", ".join(flips))
                                  if flips else D.READINGS_AGREE.format(txt=txt)), ""


RULE_ISO = Rule(**D.RULE_ISO, decide=_decide_isotropic)
RULE_ORDER = Rule(**D.RULE_ORDER, decide=_decide_ordering)
RULE_VACUOUS = Rule(**D.RULE_VACUOUS, decide=_decide_vacuous)
RULE_ASSUMPTION = Rule(**D.RULE_ASSUMPTION, decide=_decide_assumption)
RULE_NOISE = Rule(**D.RULE_NOISE, decide=_decide_noise)
RULE_POWER = Rule(**D.RULE_POWER, decide=_decide_power)
RULE_PRINTED = Rule(**D.RULE_PRINTED, decide=_decide_printed)
RULE_READINGS = Rule(**D.RULE_READINGS, decide=_decide_readings)
QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS)


def premise_of(res: dict) -> Premise:
    """The paper's effect, decided by the rule fixed here: the noise part's three-ways
    (Random - FedTLU, margin 0) read for the paper: reproduced when FedTLU beats Random in
    some setting (SUPPORTED), not reproduced when every setting is FALSIFIED (FedTLU not
    better beyond the paper's own gap, or worse), undecided otherwise."""
    outs = {st: tw.outcome for st, tw in res.items()}
    won = [k for k, o in outs.items() if o == "SUPPORTED"]
    st = won[0] if won else "noisy"
    status = ("reproduced" if won else "not reproduced"
              if all(o == "FALSIFIED" for o in outs.values()) else "undecided")
    d = res[st].difference
    est = Estimate.of(f"premise_ppl_random_minus_fedtlu_{st}", d, "perplexity",
                      D.PREMISE_ESTIMATE.format(st=st, method=d.method))
    reason = "; ".join(f"{k}: {o}" for k, o in outs.items())
    return Premise(PREMISE_EFFECT, status, D.PREMISE_REASON.format(outcomes=reason), est,
                   leans=kit.premise_leans(*res.values()))


# ============================================================================ evidence
def evidence(results, ctx: RunContext) -> dict:
    """Every decided part, the three-way results and the numbers they rest on: what
    :func:`audit.papers.fedtlu.present.lower_bound.analysis` presents (its ``EVIDENCE``)."""
    ex = results[EXACT]
    parts = [RULE_ISO(ex), RULE_ORDER(ex, params={"n_random": int(ctx.config["n_random"])}),
             RULE_VACUOUS(ex)]
    seeds = ctx.seeds
    n = len(seeds)
    ppl = {st: results_table(results, "ppl_final", ARMS, seeds, st) for st in SETTINGS}
    frac = float(ctx.alpha_fraction)
    alpha_p = kit.look_alpha(ALPHA, ctx)
    alpha = alpha_p / N_TESTS  # every decision below: one Bonferroni share
    equiv_rel = float(ctx.config["equiv_rel"])  # every scale declares it (the paper's gap)
    common = {"alpha": f"{alpha:.4g}", "alpha_fraction": f"{frac:.4g}", "n_tests": N_TESTS,
              "level": f"{100 * (1 - alpha):.4g}", "n": n}

    def per_seed(arm: str, st: str, key: str) -> list:  # one value per seed, in seed order
        return [results[RunSpec(arm, s, st)][key] for s in seeds]

    def clean(arm: str, key: str):  # per seed: the mean over rounds of a clean run's series
        return np.array([np.mean(v) for v in per_seed(arm, "clean", key)])

    # assumption (b): per-seed mean ratio, FedTLU, clean
    ratio = {a: clean(a, "ratio_model") for a in ("fedtlu", "random")}
    # 0.95 - ratio > 0 is the reviewer's claim; no equivalence branch (sensitive=False)
    tw_ab = stats.three_way(np.full(n, ONE_MINUS_DELTA), ratio["fedtlu"], margin=0.0,
                            equivalence_margin=1e-9, alpha=alpha, sensitive=False)
    # the best same-size choice's share (its mean over seeds, with its interval)
    oracle = stats.mean_interval(clean("fedtlu", "ratio_model_oracle"))
    score_link = stats.paired_difference(clean("fedtlu", "ratio_group"),
                                         clean("fedtlu", "ratio_group_random"), method="t")

    # noise: three-way per setting; sensitivity = a planted margin-sized handicap detected
    tw_all, margins, pmin, sens_rows, resolution = {}, {}, {}, [], []
    for st in SETTINGS:
        p = ppl[st]
        margin = margins[st] = equiv_rel * float(np.mean(p["random"]))
        planted = np.array([results[RunSpec("random", s, st)].get("ppl_final_planted", math.nan)
                            for s in seeds])
        sensitive, rise = False, (math.nan, math.nan, math.nan)
        if np.all(np.isfinite(planted)):  # else: cached before the planted arm existed
            assay = kit.planted_assay(planted, p["fedtlu"], detect_above=0.0,
                                      equivalence_margin=margin, alpha=alpha)
            sensitive, d = assay.sensitive, assay.tw.difference
            rise = (float(stats.paired_difference(planted, p["random"], method="t").mean),
                    d.low, d.high)
        sens_rows.append((st, "planted (margin-sized)", *rise, sensitive))
        gross = stats.paired_difference(p["none"], p["random"], method="t")
        sens_rows.append((st, "control `none` (gross)", gross.mean, gross.low, gross.high,
                          bool(gross.low > 0)))
        tw_all[st] = stats.three_way(p["random"], p["fedtlu"], margin=0.0,
                                     equivalence_margin=margin, alpha=alpha,
                                     sensitive=sensitive)
        ntok = [results[RunSpec("random", s, st)].get("n_test_tokens") for s in seeds]
        if all(ntok):  # one test token's loss moved by one nat: ppl / N_test
            resolution.append(float(np.mean(p["random"])) / float(np.mean(ntok)))
        pmin[st] = {a: np.array(per_seed(a, st, "ppl_min")) for a in ("random", "fedtlu")}
    # the reviewer's point about three runs, as a question of power (rows per setting)
    power_rows = []
    factor = stats.minimum_detectable_effect(PAPER_RUNS, alpha=ALPHA)
    for st in SETTINGS:
        rel = (ppl[st]["random"] - ppl[st]["fedtlu"]) / float(np.mean(ppl[st]["random"]))
        sd, lo, hi = stats.sd_interval(rel, alpha_p)
        try:
            need = stats.seeds_needed(equiv_rel, sd, alpha=ALPHA) if sd > 0 else "n/a"
        except ValueError:  # past the search's cap: a tiny effect against this spread
            need = f"> {stats.SEEDS_NEEDED_CAP}"
        power_rows.append((st, sd, lo, hi, factor * lo, factor * hi, need))
    premise = premise_of(tw_all)
    # a hypothesis of the paper's proof: not gated by the premise (it explains no gain)
    parts.append(RULE_ASSUMPTION({"three_way": tw_ab, "oracle": oracle}, params=common))
    parts.append(RULE_NOISE({"three_way": tw_all,
                             "resolution": min(resolution) if resolution else None},
                            params={**common, "equiv_pct": f"{100 * equiv_rel:.3g}"}))
    parts.append(RULE_POWER({"rows": power_rows, "gap": equiv_rel, "runs": PAPER_RUNS,
                             "alpha": alpha_p},
                            params={"runs": PAPER_RUNS, "n": n, "alpha": f"{alpha_p:.4g}",
                                    "level": f"{100 * (1 - alpha_p):.4g}",
                                    "factor": f"{factor:.3g}",
                                    "gap_pct": f"{100 * equiv_rel:.3g}"}))
    parts.append(RULE_PRINTED({"rows": PRINTED}))
    read_rows = []
    for st in SETTINGS:
        curves = {a: np.array(per_seed(a, st, "ppl")) for a in ("random", "fedtlu")}
        read_rows.append((st, float(np.mean(curves["random"][:, -1] - curves["fedtlu"][:, -1])),
                          float(np.mean(curves["random"].min(axis=1)
                                        - curves["fedtlu"].min(axis=1))),
                          float(curves["random"].mean(axis=0).min()
                                - curves["fedtlu"].mean(axis=0).min())))
    parts.append(RULE_READINGS({"rows": read_rows}))
    return kit.gather(P.EVIDENCE, locals())


analyse, decide = kit.staged(evidence, P.analysis)


CLAIM = Claim(
    id=CLAIM_ID, paper=D.PAPER, record=D.RECORD, title=D.TITLE, statement=D.STATEMENT,
    arms=D.ARM_DECLS,
    rules=(RULE_ISO, RULE_ORDER, RULE_VACUOUS, RULE_ASSUMPTION, RULE_NOISE, RULE_POWER,
           RULE_PRINTED, RULE_READINGS),
    combination=COMBINATION, questions=QUESTIONS, stochastic=True,
    default_seeds=D.DEFAULT_SEEDS,
    # what `audit tune` may read: the validation perplexity of runs with val_fraction > 0
    # (the full-scale search, before it existed, read test data: flagged in SEARCHES)
    validation_metrics=D.VALIDATION_METRICS, regime_maps=D.REGIME_MAPS,
    scales=SCALES, run=run, analyse=analyse, decide=decide, specs=specs,
    paper_numbers=D.PAPER_NUMBERS,
    searches=SEARCHES,
)
