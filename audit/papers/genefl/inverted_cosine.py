"""Falsifier ``genefl-inverted-cosine``: what does GENE-FL's layer score select?

The declarations (paper and record, the three pieces and issue 30's fair controls and
gamma sweep, arms, scales, thresholds, texts) are in
``audit.papers.genefl.declarations.inverted_cosine``, whose docstring says what each
piece tests. Here: what each arm changes in a GENE-FL run, the run (the reviewer's
perturbation test and the selection statistics it reads on the trained models are
:mod:`audit.papers.genefl.simulation`'s), the parts' decisions and the evidence they rest
on (``evidence``); :mod:`audit.papers.genefl.present.inverted_cosine` presents it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit import kit, questions, stats
from audit.analysis import results_table
from audit.claims import AuditError, Claim, RunContext, RunSpec
from audit.papers.genefl.declarations import inverted_cosine as D
from audit.papers.genefl.present import inverted_cosine as P
from audit.papers.genefl.declarations.inverted_cosine import (  # noqa: F401 (tests)
    ARM_NAMES, FAIR, SCALES, SMOKE_SIM, SWEEP_ARMS)
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer, premise_gate


@dataclass(frozen=True)
class ArmPiece:
    """What an arm changes in a GENE-FL run (``simulate``): which gamma layers become
    the learnGene (``mode``: "top", "bottom" or "random" by xi, or a fair control,
    "bottom-bytes" or "bottom-no-classifier": ``audit.papers.genefl.algorithm.select_gene``),
    whether Eq. 9 keeps its 1/dim factor (``use_dim``), and what clients start
    never-uploaded layers from (``local_layers``: None keeps the config's default, "reset"
    the full cluster model)."""

    mode: str = "top"
    use_dim: bool = True
    local_layers: str | None = None


#: Each arm's piece, beside its declaration in D.ARMS (same names, same order).
PIECES: dict[str, ArmPiece] = {
    "top-gamma": ArmPiece("top"),
    "bottom-gamma": ArmPiece("bottom"),
    "random-gamma": ArmPiece("random"),
    "top-gamma-no-dim": ArmPiece("top", use_dim=False),
    "top-gamma-reset": ArmPiece("top", local_layers="reset"),
    "bottom-gamma-bytes": ArmPiece("bottom-bytes"),
    "bottom-gamma-no-classifier": ArmPiece("bottom-no-classifier"),
}
assert tuple(PIECES) == ARM_NAMES, "PIECES out of step with D.ARMS"


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

    from audit.papers.genefl.simulation import perturbation_test, selection_stats, simulate

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
    cfg["plant_effect"] = float(cfg.get("equivalence_margin", D.EQUIV_MARGIN))
    # a killed long run resumes from its last checkpoint (None when caching is off)
    out = simulate(cfg, spec.seed, mode, use_dim, data_dir=ctx.data_dir, device=ctx.device,
                   checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)
    finals = out.pop("final_states")
    res = {k: out[k] for k in ("gamma", "n_layers", "known_acc", "agnostic_acc",
                               "agnostic_acc_nogene", "agnostic_acc_planted", "cluster_of",
                               "n_test_agnostic")}
    if "agnostic_val_acc" in out:  # agnostic_val_fraction > 0: the validation read-out
        res["agnostic_val_acc"] = out["agnostic_val_acc"]
        res["agnostic_val_acc_nogene"] = out["agnostic_val_acc_nogene"]
        res["n_val_agnostic"] = out["n_val_agnostic"]
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
        res["perturbation"] = perturbation_test(state, layers, seed=spec.seed, delta=D.DELTA)
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


def _selection_decide(ev):
    js, jz, rho = ev["j_stable"], ev["j_size"], ev["rho"]
    hi, lo = ev["j_high"], ev["j_low"]
    (s_lo, s_hi), (z_lo, z_hi) = ev["j_stable_ci"], ev["j_size_ci"]
    # each interval with its label; a point or an undefined interval only says so
    level = f"{100 * ev['level']:.4g}% t interval over {ev['n_seeds']} seeds"
    s_ci, z_ci = (stats.ci_text(stats.Interval(lo_, hi_), "[{low:.3f}, {high:.3f}] ({level})",
                                paren=True, level=level)
                  for lo_, hi_ in ((s_lo, s_hi), (z_lo, z_hi)))
    txt = (f"over {ev['n_updates']} client updates: Jaccard(top-gamma by xi, gamma most "
           f"stable) = {js:.3f} {s_ci}, Jaccard(top-gamma by xi, gamma "
           f"smallest) = {jz:.3f} {z_ci}, Spearman(xi, 1/dim) = {rho:.3f}")
    if s_lo >= hi:
        size = (f", which in this model are also the smallest (Jaccard {jz:.3f}): stability "
                f"and size cannot be told apart here" if jz >= hi else "")
        return Outcome.CONFIRMED, txt + f": top-gamma keeps the most stable layers{size}.", ""
    if s_hi < lo and z_lo >= hi:
        return Outcome.REFUTED, txt + ": top-gamma keeps the smallest layers, not the " \
            "most stable ones.", ""
    return Outcome.INCONCLUSIVE, txt + ": neither description holds over the seeds' " \
        "interval.", "more seeds, or models where stability and size disagree more clearly"


def _accuracy_decide(ev):
    tw = ev["three_way"]
    # the reviewer's own test: bottom-gamma matches or beats top-gamma -> the reviewer is
    # right; top-gamma beats bottom-gamma (SUPPORTED of "top beats bottom") -> against
    out = on_reviewer(tw.outcome, holds_when="FALSIFIED")
    needs = "" if tw.seeds_needed is None else f"about {tw.seeds_phrase()}"
    return out, tw.reason + ev["sens_txt"], needs or "more seeds or a larger setting", \
        {"flip": tw.flip, "resolution": ev["resolution"], "unit": "accuracy"}


def _fair_decide(ev):
    ctl = ev["control"]
    if ev["n_differ"] == 0:
        return Outcome.INCONCLUSIVE, (
            f"{ctl}: its gene is top-gamma's own gene on all {ev['n']} seeds (every "
            f"cluster){ev['size_txt']}: no gene of this kind differs from the top one in "
            "this model at this gamma, so there is nothing to compare"), ev["vacuous_needs"]
    if ev["n_differ"] < 2:  # one seed is no paired comparison (three_way needs two)
        return Outcome.INCONCLUSIVE, (
            f"{ctl}: its gene differs from top-gamma's on {ev['n_differ']} of {ev['n']} "
            f"seeds only{ev['size_txt']}: too few pairs to compare"), \
            "more seeds on which this control's gene differs from top-gamma's"
    out, _, needs, info = _accuracy_decide(ev)  # the same test on the seeds that differ
    info = {**info, "alpha_share": ev.get("alpha_share", 1.0 / len(FAIR))}  # Bonferroni
    subset = ("" if ev["n_differ"] == ev["n"] else
              f" (the {ev['n_differ']} of {ev['n']} seeds where the genes differ)")
    return out, f"{ctl}{subset}: {ev['three_way'].reason}{ev['size_txt']}{ev['sens_txt']}", \
        needs, info


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
        "every row decided: each row's own premise reproduced, and enough sweep seeds "
        "(sweep_seeds) whose arms differ for the three-way rule to decide at its alpha "
        "(each row's reason gives the count)")


RULE_DIRECTION = Rule("direction", D.RULE_DIRECTION, _direction_decide, kind="derivation")
RULE_SELECTION = Rule("selection", D.RULE_SELECTION, _selection_decide)
RULE_ACCURACY = Rule("accuracy-top-vs-bottom", D.RULE_ACCURACY, _accuracy_decide)
#: the fair controls' rules: control arm -> its rule (the part id FAIR names)
FAIR_RULES = {arm: Rule(part, D.RULE_FAIR.format(what=D.FAIR_CONTROLS[part], control=arm),
                        _fair_decide) for arm, part in FAIR.items()}
RULE_FAIR_BYTES = FAIR_RULES["bottom-gamma-bytes"]
RULE_FAIR_NO_CLASSIFIER = FAIR_RULES["bottom-gamma-no-classifier"]
RULE_GAMMA_SWEEP = Rule("gamma-sweep", D.RULE_GAMMA_SWEEP, _sweep_decide)

QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS)


def _premise_decide(tw, d) -> Premise:
    return kit.premise(D.PREMISE_EFFECT, tw, rule=D.PREMISE_RULE.format(d=d),
                       estimate=Estimate.of("premise_top_minus_nogene", tw.difference,
                                            "accuracy",
                                            "paired by seed: top-gamma gene - no gene"))


# ----------------------------------------------------------------------- evidence
def _jaccard(a, b) -> float:
    # the simulation's ``jaccard``, kept here so that deciding loads no torch
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


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


def _accuracies(results, arms, seeds, setting=""):
    """Per-seed agnostic-client accuracy of ``arms``, and that of top-gamma's runs from no
    gene and with the planted handicap, in one setting."""
    acc = results_table(results, "agnostic_acc", arms, seeds, setting)
    one = [results_table(results, f"agnostic_acc_{k}", ["top-gamma"], seeds,
                         setting)["top-gamma"] for k in ("nogene", "planted")]
    return acc, *one


def _reversal(top, bottom, nogene, planted, d, alpha, resolution, cell=False) -> dict:
    """The reviewer's test (agnostic accuracy, top- vs bottom-gamma, paired by seed) in one
    setting, the base or a gamma-sweep cell, with that setting's own assay sensitivity
    (top-gamma against its planted copy) and premise (top-gamma beats no gene)."""
    sens = stats.three_way(top, planted, margin=0.0, equivalence_margin=d, alpha=alpha)
    sensitive = sens.outcome == "SUPPORTED"
    tw = stats.three_way(top, bottom, margin=0.0, equivalence_margin=d, alpha=alpha,
                         sensitive=sensitive)
    prem_tw = stats.three_way(top, nogene, margin=0.0, equivalence_margin=d, alpha=alpha,
                              sensitive=sensitive)
    premise = _premise_decide(prem_tw, d)
    s = sens.difference
    seen = ("detected" if cell else "detected (sensitive)") if sensitive else "NOT detected"
    short = D.SENSITIVITY_SHORT.format(mean=s.mean) if s.mean < D.SHORT_OF_D * d else ""
    sens_txt = (D.SENSITIVITY_CELL if cell else D.SENSITIVITY).format(
        d=d, mean=s.mean, ci=stats.ci_text(s, D.SENSITIVITY_CI, level=100 * (1 - alpha)),
        seen=seen, short=short)
    part = premise_gate(RULE_ACCURACY(
        {"three_way": tw, "sens_txt": sens_txt, "resolution": resolution},
        params={"rule": stats.three_way_text(0.0, d, alpha, len(top))}), premise)
    return {"sens": sens, "sensitive": sensitive, "sens_txt": sens_txt, "tw": tw,
            "prem_tw": prem_tw, "premise": premise, "part": part, "n": len(top),
            "top": float(top.mean()), "bottom": float(bottom.mean())}


def _sweep_row(setting, gamma, gamma_layers, rev, base) -> dict:
    """One row of the gamma sweep: the reviewer's test (:func:`_reversal`) at one gene size."""
    t = rev["tw"].difference
    return {"setting": setting, "gamma": gamma, "gamma_layers": gamma_layers, "n": rev["n"],
            "diff": t.mean, "low": t.low, "high": t.high, "premise": rev["premise"].status,
            "verdict": rev["part"].verdict.value, "top": rev["top"], "bottom": rev["bottom"],
            "base": base}


def evidence(results, ctx: RunContext) -> dict:
    """Every decided part and the numbers it rests on: what
    :func:`audit.papers.genefl.present.inverted_cosine.analysis` presents (its
    ``EVIDENCE``)."""
    seeds = list(ctx.seeds)
    arms = list(ARM_NAMES)
    cfg = ctx.config
    alpha = kit.look_alpha(D.ALPHA, ctx)
    d = float(cfg.get("equivalence_margin", D.EQUIV_MARGIN))
    tops = [results[RunSpec("top-gamma", s)] for s in seeds]
    pairs = [dict(r, seed=s) for s, t in zip(seeds, tops) for r in t["perturbation"]]
    sel = [t["selection"] for t in tops]
    rho, js, jz = (np.array([s_[k] for s_ in sel]) for k in ("rho", "j_stable", "j_size"))

    acc, nogene, planted = _accuracies(results, arms, seeds)
    known = results_table(results, "known_acc", arms, seeds)
    n_test = [n for t in tops for n in t["n_test_agnostic"]]
    # one test example, in the mean over the agnostic clients
    resolution = 1.0 / (len(tops[0]["n_test_agnostic"]) * float(np.median(n_test)))
    base = _reversal(acc["top-gamma"], acc["bottom-gamma"], nogene, planted, d, alpha,
                     resolution)
    sens, tw, prem_tw, premise = base["sens"], base["tw"], base["prem_tw"], base["premise"]
    # the seeds are a sample of runs: the thresholds apply to the (1 - alpha) t interval
    # of the per-seed mean overlaps, not to the point estimate
    def interval(v):  # one seed has no interval: nothing is decided on it
        if len(v) < 2:
            return (-np.inf, np.inf)
        m = stats.mean_interval(v, level=1 - alpha)
        return (m.low, m.high)

    js_ci, jz_ci = interval(js), interval(jz)
    ev_sel = {"j_stable": float(js.mean()), "j_size": float(jz.mean()),
              "rho": float(rho.mean()), "n_updates": sum(s_["n_updates"] for s_ in sel),
              "j_high": D.J_HIGH, "j_low": D.J_LOW, "level": 1 - alpha, "n_seeds": len(seeds),
              "j_stable_ci": js_ci, "j_size_ci": jz_ci}
    parts = (RULE_DIRECTION({"pairs": pairs, "n_models": len(seeds), "delta": D.DELTA},
                            params={"delta": D.DELTA}),
             RULE_SELECTION(ev_sel, params={"j_high": D.J_HIGH, "j_low": D.J_LOW}),
             base["part"])

    # ---- issue 30: the fair controls (Bonferroni over the two) and the gamma sweep
    alpha_fair = alpha / len(FAIR)
    fair, fair_tw, match = [], {}, {}
    for arm, rule in FAIR_RULES.items():
        m = match[arm] = _gene_match(results, seeds, arm)
        keep = [i for i in range(len(seeds)) if not m["same"][i]]
        ev = {"control": arm, "n": len(seeds), "n_differ": len(keep),
              "size_txt": f"; its gene holds {m['ratio'].mean():.2f} x top-gamma's parameters "
                          f"(mean over seeds), Jaccard overlap with top-gamma's layers "
                          f"{m['jaccard'].mean():.2f}",
              "sens_txt": base["sens_txt"], "resolution": resolution,
              "vacuous_needs": D.FAIR_VACUOUS_NEEDS, "alpha_share": 1.0 / len(FAIR)}
        if len(keep) >= 2:
            fair_tw[arm] = ev["three_way"] = stats.three_way(
                acc["top-gamma"][keep], acc[arm][keep], margin=0.0, equivalence_margin=d,
                alpha=alpha_fair, sensitive=base["sensitive"])
        fair.append(premise_gate(rule(ev, params={
            "rule": stats.three_way_text(0.0, d, alpha_fair, len(keep)),
            "alpha": f"{alpha_fair:g}"}), premise))

    base_gamma = float(cfg["gamma_fraction"])
    sweep_rows = [_sweep_row(gamma_setting(base_gamma), base_gamma, tops[0]["gamma"], base,
                             True)]
    sweep_diffs = []  # (setting, top - bottom, seeds) per sweep cell
    for g in cfg.get("gamma_sweep", ()):
        st = gamma_setting(g)
        sw = [s for s in seeds if all(RunSpec(a, s, st) in results for a in SWEEP_ARMS)]
        if len(sw) < 2:
            continue
        cacc, cnog, cpl = _accuracies(results, SWEEP_ARMS, sw, st)
        rev = _reversal(cacc["top-gamma"], cacc["bottom-gamma"], cnog, cpl, d, alpha,
                        resolution, cell=True)
        layers = results[RunSpec("top-gamma", sw[0], st)]["gamma"]
        sweep_rows.append(_sweep_row(st, float(g), layers, rev, False))
        sweep_diffs.append((st, rev["tw"].difference, len(sw)))
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

    bottom_match = _gene_match(results, seeds, "bottom-gamma")
    return kit.gather(P.EVIDENCE, locals())


analyse, decide = kit.staged(evidence, P.analysis)


CLAIM = Claim(
    searches=D.SEARCHES,
    id=D.CLAIM_ID,
    paper=D.PAPER,
    record=D.RECORD,
    title=D.TITLE,
    statement=D.STATEMENT,
    arms=D.ARMS,
    rules=(RULE_DIRECTION, RULE_SELECTION, RULE_ACCURACY, RULE_FAIR_BYTES,
           RULE_FAIR_NO_CLASSIFIER, RULE_GAMMA_SWEEP),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=True,
    default_seeds=D.DEFAULT_SEEDS,
    validation_metrics=D.VALIDATION_METRICS,
    regime_maps=D.REGIME_MAPS,
    scales=SCALES,
    run=run,
    analyse=analyse,
    decide=decide,
    specs=specs,
    paper_numbers=D.PAPER_NUMBERS,
)
