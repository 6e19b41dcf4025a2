"""Falsifier ``fedtlu-score-undefined``: FedTLU's layer score at std(dW) = 0, and its scale.

Paper: FedTLU, arXiv 2412.17692v2, Section III: ``Score(W) = ||dW|| / (sqrt(n) std(dW))``
for the aggregated change dW of a layer with n entries. Review record 001
(``referee_report.minor_comments[0]``): the score has no value when std(dW) = 0, which a
frozen or unselected layer produces, and the paper does not say what happens then.

What we compute (exact; no seeds):

- ``undefined``: the printed formula evaluated literally in float64 (numpy, population
  std, no guard; :func:`literal_score`) on updates whose std is 0: all-zero (a frozen
  layer: 0/0), constant non-zero (x/0), a one-entry layer; beside them, what the
  project's guarded :func:`audit.algorithms.fedtlu.score` returns (imported: all-zero ->
  0.0, constant non-zero -> +inf, its documented choice) and the rounding case (a
  constant whose float64 mean is not exact, so np.std is a few 1e-17 and the literal
  score is a huge finite number instead of inf).
- ``scale-invariant``: with the population std, ||dW||^2 / n = mean^2 + var, so
  Score = sqrt(1 + mean^2 / var) (:func:`audit.algorithms.fedtlu.score_identity`), which
  does not change when dW is multiplied by any c != 0. A seeded sweep (numpy generator
  seeded 0) of random updates (sizes, means, spreads, distributions) and scales c
  (log-uniform in [1e-6, 1e6], random sign): the largest relative change of the score
  under scaling, and the largest relative gap to the identity.
- ``planted-pick`` (the first half of the review's falsifier): on a two-block quadratic
  loss, a quiet block whose update lowers the loss against a loud block whose update is
  noise (it raises the loss), in three planted families that differ only in whether a
  block's entries share a sign; which block does the score pick, and is it the useful
  one? By the identity above the score sees only mean^2 / var of the entries, so the
  answer should follow sign consistency, not usefulness; the seeded instances show it.
"""
from __future__ import annotations

import math

import numpy as np

from audit.claims import (FEDTLU, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit import questions
from audit.questions import Finding, Question
from audit.verdict import Estimate, Outcome, Rule

CLAIM_ID = "fedtlu-score-undefined"
INVARIANCE_TOL = 1e-12  # max relative deviation for CONFIRMED
DEPENDS_TOL = 1e-6  # a relative change above this under scaling would refute

BASE = {"n_updates": 400, "scales_per_update": 5, "log10_scale": [-6.0, 6.0],
        "sizes": [2, 10, 100, 1000], "max_mean_over_sd": 10.0, "seed": 0,
        # planted-pick: instances per family, entries per block (stated choices: 200
        # instances put an exact binomial interval within about +-0.07 of the rate)
        "n_planted": 200, "planted_size": 64}
# planted-pick: a pick rate whose exact interval lies inside this band, with neither
# one-sided test rejecting 1/2, is a coin flip. The band is a stated choice, fixed before
# the run: +-0.15 around 1/2, twice the half-width (about 0.07) of the exact interval at
# the configured 200 instances, so a rate of exactly 1/2 lands inside it with room to
# spare. PLANT_ALPHA is the family-wise level, split (Bonferroni) over the families
# and the two sides of each.
CHANCE_BAND = (0.35, 0.65)
PLANT_ALPHA = 0.05
# the planted families: (name, what it plants): entries of the useful block's offset
# from the optimum and of the noise block's move, each zero-mean or one-signed
PLANTED = (
    ("both zero-mean", "useful update -0.1 e (e ~ N(0, 1) entries), noise move 10 z "
     "(z ~ N(0, 1))"),
    ("useful one-signed", "useful update -0.1 e with e ~ 1 + 0.1 N(0, 1) (every entry "
     "moves the same way), noise move 10 z"),
    ("noise one-signed", "useful update -0.1 e (e ~ N(0, 1)), noise move 10 (1 + 0.1 z) "
     "(a drift every entry shares)"),
)
SCALES = {"smoke": BASE, "full": {**BASE, "n_updates": 4000},
          "paper": {**BASE, "n_updates": 4000, "sizes": [2, 10, 100, 1000, 100_000]}}

# updates with std = 0 (and one near it), as (label, values)
STD_ZERO_CASES = (
    ("all zero, n = 4 (frozen layer)", [0.0] * 4),
    ("constant 0.5, n = 4", [0.5] * 4),
    ("constant -0.25, n = 1000", [-0.25] * 1000),
    ("one entry, 0.3 (n = 1)", [0.3]),
    ("one entry, 0.0 (n = 1)", [0.0]),
    ("constant 0.1, n = 3 (float64 mean rounds)", [0.1] * 3),
)

ARMS = (
    Arm("literal", "Section III's score evaluated literally in float64 (numpy, population "
        "std, no guard)", "as printed"),
    Arm("guarded", "audit.algorithms.fedtlu.score: std = 0 handled (zero -> 0, constant "
        "-> inf)", "our guard for std = 0, the case the paper leaves open"),
)


def literal_score(dw) -> float:
    """``||dW|| / (sqrt(n) * std(dW))`` in float64 as printed, no guard (0/0 -> nan,
    x/0 -> inf, with IEEE semantics)."""
    x = np.asarray(dw, dtype=np.float64).ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(np.linalg.norm(x)) / (np.sqrt(np.float64(x.size))
                                                      * np.std(x)))


def _fn(arm: str):
    if arm == "literal":
        return literal_score
    if arm == "guarded":
        from audit.algorithms.fedtlu import score

        return score
    raise AuditError(f"unknown arm {arm!r}")


def _sweep(cfg, f) -> dict:
    from audit.algorithms.fedtlu import score_identity

    rng = np.random.default_rng(cfg["seed"])
    lo, hi = cfg["log10_scale"]
    dev_scale = dev_id = 0.0
    worst = None
    for u in range(cfg["n_updates"]):
        n = int(rng.choice(cfg["sizes"]))
        kind = ("normal", "uniform", "sparse")[u % 3]
        sd = 10.0 ** rng.uniform(-4, 1)
        mean = sd * rng.uniform(-cfg["max_mean_over_sd"], cfg["max_mean_over_sd"])
        if kind == "normal":
            x = mean + sd * rng.standard_normal(n)
        elif kind == "uniform":
            x = mean + sd * rng.uniform(-1.7, 1.7, n)
        else:  # mostly zeros: a sparsely updated layer
            x = np.where(rng.random(n) < 0.2, mean + sd * rng.standard_normal(n), 0.0)
        if np.all(x == x[0]):  # std = 0: that is the other part
            continue
        s0, ident = f(x), score_identity(x)
        dev_id = max(dev_id, abs(s0 - ident) / ident)
        for _ in range(cfg["scales_per_update"]):
            c = float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(lo, hi))
            s1 = f(c * x)
            d = abs(s1 - s0) / s0
            if d > dev_scale or worst is None:
                dev_scale, worst = max(dev_scale, d), {"n": n, "kind": kind, "c": c,
                                                       "score": s0, "scaled": s1}
    return {"max_rel_dev_scale": dev_scale, "max_rel_dev_identity": dev_id,
            "worst": worst}


def _moves(f) -> list[dict]:
    """Two layers with the same pattern, one moved 10^6 times further; and a large
    zero-mean move against a tiny one-signed move."""
    rng = np.random.default_rng([0, 1])
    v = rng.standard_normal(64)
    w = 1e-4 * (1.0 + 0.1 * rng.standard_normal(64))
    cases = [("pattern v, scaled 1e-3", 1e-3 * v), ("pattern v, scaled 1e3", 1e3 * v),
             ("large zero-mean move (sd 1)", v - v.mean()),
             ("tiny one-signed move (1e-4 +- 10%)", w)]
    exps = [e / 2 for e in range(-12, 13)]  # c = 10^-6 .. 10^6
    return [{"layer": k, "norm": float(np.linalg.norm(x)), "score": f(x),
             "log10_c": exps, "scaled": [f(10.0 ** e * x) for e in exps]} for k, x in cases]


def _planted(cfg, f) -> list[dict]:
    """For each planted family, ``n_planted`` seeded instances of the loss
    ``0.5 |w_U - w*_U|^2 + 0.5 |w_N - w*_N|^2`` with block U at offset e from its optimum
    and block N at its optimum: the update of U is the useful step -0.1 e (it lowers the
    loss by 0.5 (1 - 0.81) |e|^2), the update of N a loud move (norm about 100 times
    larger) that raises it by 0.5 |move|^2. The score of each update and the loss change
    of updating each block alone, exactly."""
    rng = np.random.default_rng([int(cfg["seed"]), 7])
    m = int(cfg["planted_size"])
    out = []
    for fam, _ in PLANTED:
        picks_useful, gains = 0, []
        for _ in range(int(cfg["n_planted"])):
            z1, z2 = rng.standard_normal(m), rng.standard_normal(m)
            e = (1.0 + 0.1 * z1) if fam == "useful one-signed" else z1
            move = 10.0 * ((1.0 + 0.1 * z2) if fam == "noise one-signed" else z2)
            du = -0.1 * e
            d_useful = 0.5 * float(e @ e) - 0.5 * float((e + du) @ (e + du))
            d_noise = -0.5 * float(move @ move)  # loss decrease (negative: a rise)
            su, sn = f(du), f(move)
            useful = su > sn
            picks_useful += int(useful)
            gains.append(d_useful if useful else d_noise)
        out.append({"family": fam, "n": int(cfg["n_planted"]), "useful_picked": picks_useful,
                    "mean_loss_decrease_of_pick": float(np.mean(gains))})
    return out


def run(spec: RunSpec, ctx: RunContext) -> dict:
    f = _fn(spec.arm)
    cases = []
    for label, vals in STD_ZERO_CASES:
        x = np.array(vals, dtype=np.float64)
        cases.append({"case": label, "n": int(x.size), "norm": float(np.linalg.norm(x)),
                      "std": float(np.std(x)), "score": f(x)})
    out = {"cases": cases, "sweep": _sweep(ctx.config, f), "moves": _moves(f)}
    if spec.arm == "guarded":  # the planted pick reads the project's score() only
        out["planted"] = _planted(ctx.config, f)
    return out


# ----------------------------------------------------------------------------- rules
def _undefined_decide(ev):
    lit = {c["case"]: c["score"] for c in ev["literal"]}
    zero = lit[STD_ZERO_CASES[0][0]]
    const = [lit[k] for k, _ in STD_ZERO_CASES[1:4]]
    shown = ", ".join(f"{k}: {v}" for k, v in lit.items())
    if math.isnan(zero) and all(math.isinf(v) for v in const):
        return Outcome.CONFIRMED, (
            f"the literal formula gives nan (0/0) on the all-zero update and inf (x/0) on "
            f"every constant one ({shown}); the project's score() has to choose a value "
            "(0 for all-zero, inf for constant)"), ""
    if all(math.isfinite(v) for v in [zero] + const):
        return Outcome.REFUTED, f"finite on every std = 0 case ({shown})", ""
    return Outcome.INCONCLUSIVE, f"mixed: {shown}", "a closer look at float64 rounding"


RULE_UNDEFINED = Rule(
    "undefined",
    "Section III's score evaluated literally in float64 (numpy, population std, IEEE "
    "division, no guard) on updates with std exactly 0: all-zero (n = 4), constant 0.5 "
    "(n = 4), constant -0.25 (n = 1000), one entry 0.3. CONFIRMED when the all-zero update "
    "gives nan and every constant non-zero one gives inf; REFUTED when all are finite; "
    "INCONCLUSIVE otherwise. A derivation: IEEE float64 arithmetic evaluated exactly, no "
    "seeds, no interval.",
    _undefined_decide, kind="derivation")


def _invariant_decide(ev):
    s, i = ev["max_rel_dev_scale"], ev["max_rel_dev_identity"]
    txt = (f"over {ev['n']} random updates x {ev['k']} scales: max relative change under "
           f"scaling {s:.2e}, max relative gap to sqrt(1 + mean^2/var) {i:.2e}")
    if s < INVARIANCE_TOL and i < INVARIANCE_TOL:
        return Outcome.CONFIRMED, txt, ""
    if s > DEPENDS_TOL:
        return Outcome.REFUTED, txt + " (the score depends on the scale)", ""
    return Outcome.INCONCLUSIVE, txt, "a look at the float64 error of np.std"


RULE_INVARIANT = Rule(
    "scale-invariant",
    "A seeded sweep (numpy default_rng({seed})) of random updates (n in {sizes}; "
    "normal, uniform and 80%-sparse entries; |mean|/sd up to {max_mean_over_sd}) each "
    "scaled by {k} random c = +-10^u, u uniform in [{u_lo}, {u_hi}]; the project's "
    "score() (guarded arm) and the literal "
    f"formula. CONFIRMED when, in both arms, the largest relative change of the score under "
    f"scaling and the largest relative gap to sqrt(1 + mean^2/var) are below "
    f"{INVARIANCE_TOL:g}; REFUTED when a change under scaling exceeds {DEPENDS_TOL:g}; "
    "INCONCLUSIVE otherwise. A derivation (the identity ||dW||^2/n = mean^2 + var), checked "
    "numerically on a seeded sweep; it is reported beside the verdict and does not enter it.",
    _invariant_decide, kind="derivation")


def _planted_decide(ev):
    from scipy.stats import binomtest

    lo, hi = ev["band"]
    side = ev["alpha"] / (2 * max(1, len(ev["rows"])))  # Bonferroni: families x sides
    rows, chance, wrong, right = [], [], [], []
    for r in ev["rows"]:
        k, n = r["useful_picked"], r["n"]
        ci = binomtest(k, n, 0.5).proportion_ci(1 - 2 * side, method="exact")
        p_more = binomtest(k, n, 0.5, alternative="greater").pvalue
        p_less = binomtest(k, n, 0.5, alternative="less").pvalue
        rows.append(f"{r['family']}: useful block picked {k} of {n} "
                    f"({100 * (1 - 2 * side):.4g}% CI {ci.low:.2f}-{ci.high:.2f})")
        if p_less < side:
            wrong.append(r["family"])
        elif p_more < side:
            right.append(r["family"])
        elif lo <= ci.low and ci.high <= hi:
            chance.append(r["family"])
    txt = "; ".join(rows)
    if chance or wrong:
        why = []
        if chance:
            why.append(f"a coin flip where {', '.join(chance)}")
        if wrong:
            why.append(f"the noise block picked more often than the useful one where "
                       f"{', '.join(wrong)}")
        return Outcome.CONFIRMED, (f"{txt}: the score does not pick by usefulness ("
                                   f"{'; '.join(why)}); it follows which block's entries "
                                   f"share a sign"), ""
    if len(right) == len(ev["rows"]):
        return Outcome.REFUTED, f"{txt}: the useful block is picked in every family", ""
    return Outcome.INCONCLUSIVE, txt, "more planted instances (n_planted)"


RULE_PLANTED = Rule(
    "planted-pick",
    "Planted two-block quadratics (score() of the guarded arm; {n} seeded instances per "
    "family, {m} entries a block): a quiet block whose update lowers the loss against a "
    "loud block (about 100 times the norm) whose move raises it, in three families "
    "(both zero-mean; the useful update one-signed; the noise move one-signed). For each "
    "family the rate at which the score ranks the useful block higher, with its exact "
    "binomial interval and one-sided exact binomial tests against 1/2, each at "
    "alpha / (2 x families) (Bonferroni, alpha = {alpha}; the interval at the matching "
    "level). CONFIRMED (the score does not pick by usefulness) when in some family the "
    "noise block is picked significantly more often, or neither side rejects and the "
    "interval lies inside [{lo}, {hi}] (a coin flip); REFUTED when the useful block is "
    "picked significantly more often in every family; INCONCLUSIVE otherwise. A "
    "demonstration of the identity above rather than an experiment: a score that is a "
    "function of mean^2/var alone must flip a coin on the symmetric zero-mean family and "
    "follow the one-signed block in the others, so for this score the outcome is fixed by "
    "construction; the rule would separate a score that saw usefulness.",
    _planted_decide, kind="derivation")


# -------------------------------------------------------------------------- analysis
def analyse(results, ctx: RunContext) -> Analysis:
    cfg = ctx.config
    lit, grd = results[RunSpec("literal")], results[RunSpec("guarded")]
    sw = {a: results[RunSpec(a)]["sweep"] for a in ("literal", "guarded")}
    ds = max(s["max_rel_dev_scale"] for s in sw.values())
    di = max(s["max_rel_dev_identity"] for s in sw.values())
    parts = (RULE_UNDEFINED({"literal": lit["cases"]}),
             RULE_INVARIANT({"max_rel_dev_scale": ds, "max_rel_dev_identity": di,
                             "n": cfg["n_updates"], "k": cfg["scales_per_update"]},
                            params={"sizes": ", ".join(str(int(s)) for s in cfg["sizes"]),
                                    "seed": cfg["seed"], "k": cfg["scales_per_update"],
                                    "max_mean_over_sd": f"{float(cfg['max_mean_over_sd']):g}",
                                    "u_lo": f"{float(cfg['log10_scale'][0]):g}",
                                    "u_hi": f"{float(cfg['log10_scale'][1]):g}"}),
             RULE_PLANTED({"rows": grd["planted"], "band": CHANCE_BAND, "alpha": PLANT_ALPHA},
                          params={"n": cfg["n_planted"], "m": cfg["planted_size"],
                                  "alpha": PLANT_ALPHA, "lo": CHANCE_BAND[0],
                                  "hi": CHANCE_BAND[1]}))

    def fin(v):  # estimates carry finite numbers; nan / inf are shown in the table
        return v if math.isfinite(v) else float("nan")

    byc = {c["case"]: c for c in lit["cases"]}
    rnd = byc[STD_ZERO_CASES[5][0]]
    est = [
        Estimate("max_rel_dev_under_scaling", ds, unit="ratio",
                 description="largest |Score(c dW) - Score(dW)| / Score(dW), both arms"),
        Estimate("max_rel_dev_from_identity", di, unit="ratio",
                 description="largest |Score - sqrt(1 + mean^2/var)| / that, both arms"),
        Estimate("literal_score_rounding_constant", fin(rnd["score"]), unit="",
                 description="literal formula on [0.1, 0.1, 0.1]: np.std rounds above 0"),
        Estimate("literal_std_rounding_constant", rnd["std"], unit="",
                 description="np.std([0.1, 0.1, 0.1]) in float64"),
        *(Estimate(f"planted_useful_pick_rate_{r['family'].replace(' ', '_').replace('-', '_')}",
                   r["useful_picked"] / r["n"], unit="fraction", n=r["n"],
                   description=f"planted family '{r['family']}': share of instances where "
                               f"the score ranks the useful block above the noise block")
          for r in grd["planted"]),
        Estimate("n_nonfinite_literal", sum(not math.isfinite(c["score"])
                                            for c in lit["cases"]), unit="cases",
                 description=f"std = 0 cases where the literal score is nan or inf, of "
                             f"{len(lit['cases'])}"),
    ]
    gm = {m["layer"]: m for m in grd["moves"]}
    tables = [
        Table("Updates with std(dW) = 0: the literal formula and the project's score()",
              ("update", "n", "||dW||", "std (np.std)", "literal score", "score() (guarded)"),
              tuple((c["case"], c["n"], f"{c['norm']:.6g}", f"{c['std']:.3e}",
                     f"{c['score']:.6g}", f"{g['score']:.6g}")
                    for c, g in zip(lit["cases"], grd["cases"])),
              note="score() returns 0.0 for an all-zero update and +inf when every entry is "
                   "equal (exactly); the last row is constant in value but np.std rounds "
                   "to a few 1e-17, so the literal formula returns a huge finite number."),
        Table("The score does not see how far a layer moved (score(), guarded)",
              ("layer update", "||dW||", "score"),
              tuple((m["layer"], f"{m['norm']:.4g}", f"{m['score']:.6g}")
                    for m in grd["moves"])),
        Table("Planted blocks: does the score pick the useful one? (score(), guarded)",
              ("family", "what is planted", "useful block picked", "mean loss decrease of "
               "the picked block's update"),
              tuple((r["family"], dict(PLANTED)[r["family"]],
                     f"{r['useful_picked']} of {r['n']}",
                     f"{r['mean_loss_decrease_of_pick']:+.4g}") for r in grd["planted"]),
              note="Loss 0.5 |w - w*|^2 per block; the useful block's update lowers it, the "
                   "noise block's raises it (a negative decrease). The score never sees "
                   "the loss or the move's size."),
        Table("Scale sweep (seeded)",
              ("arm", "max rel. change under scaling", "max rel. gap to identity",
               "worst case (n, kind, c)"),
              tuple((a, f"{s['max_rel_dev_scale']:.3e}", f"{s['max_rel_dev_identity']:.3e}",
                     f"{s['worst']['n']}, {s['worst']['kind']}, {s['worst']['c']:.3g}")
                    for a, s in sw.items())),
    ]
    figs = [Figure("score_vs_scale", "Score of c x dW against the scale c (score(), guarded)",
                   "log10 c", "Score",
                   tuple({"label": m["layer"], "x": m["log10_c"], "y": m["scaled"]}
                         for m in grd["moves"]),
                   caption="Flat lines: multiplying an update by c changes ||dW|| by |c| and "
                           "the score not at all.")]
    notes = [
        "No premise: the claim is mathematics (what a printed formula evaluates to, and an "
        "algebraic identity), not an effect of the paper's method measured over seeds, so "
        "both parts are derivations (their verdicts are computations, not experiments) and "
        "no part is gated. Each rule can return each of its outcomes (tests drive them with "
        "synthetic inputs): `undefined` is REFUTED if the literal formula were finite on the "
        "std = 0 updates, `scale-invariant` if a scaled update changed its score.",
        "audit.algorithms.fedtlu.score handles std = 0 by a choice of ours (documented in "
        "its docstring): an all-zero update scores 0.0 and a constant non-zero one +inf; "
        "the test for 'constant' is exact equality of the entries, because np.std of a "
        "constant can round above zero (last row of the first table).",
        "Under the guarded choice a frozen layer (all-zero update) ranks last and a "
        "layer moved by the same amount everywhere ranks first; the literal formula gives "
        "nan / inf, and a nan compares false with everything, so a sort over layers would "
        "place it arbitrarily. The paper's text does not settle which.",
        f"Scale invariance: the pattern scaled 1e-3 and 1e3 gets the same score "
        f"({gm['pattern v, scaled 1e-3']['score']:.6g} vs "
        f"{gm['pattern v, scaled 1e3']['score']:.6g}); a tiny one-signed move scores "
        f"{gm['tiny one-signed move (1e-4 +- 10%)']['score']:.4g}, a large zero-mean move "
        f"{gm['large zero-mean move (sd 1)']['score']:.4g}. The score ranks layers by the "
        "consistency of their entries, not by the size of their change.",
    ]
    findings = (Finding(
        f"Our own finding, not the reviewer's: the score equals sqrt(1 + mean^2/var) of the "
        f"update's entries, so it is scale-free (largest relative change under scaling "
        f"{ds:.1e}) and ignores how far the layer moved; part `scale-invariant` "
        f"({parts[1].verdict.value}).", ()),)
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(notes), findings=findings)


QUESTIONS = (
    Question("score-undefined",
             "Does the Section III score have no value when an update's entries do not "
             "vary (a frozen, all-zero update included)?",
             ("referee_report.minor_comments[0]",), ("undefined",), kind="proof"),
    Question("planted-pick",
             "The falsifier's first half: planted a quiet block whose update lowers the "
             "loss against a loud block whose update is noise, does the score fail to pick "
             "the useful one reliably?",
             ("falsifier",), ("planted-pick",), kind="proof",
             decides="the planted families' pick rates (exact binomial intervals)"),
)
# `scale-invariant` is the project's own finding (the reviewer did not raise it): reported
# as a finding and a part, never as the reviewer's question
COMBINATION = questions.combination(QUESTIONS)


CLAIM = Claim(
    id=CLAIM_ID,
    paper=FEDTLU,
    record=RecordRef(RECORDS[FEDTLU.arxiv_id], ("referee_report.minor_comments[0]",
                                                "falsifier")),
    title="layer score undefined at std = 0, and blind to usefulness",
    statement=("Section III's layer score divides by the spread of the update's entries, "
               "so it has no value for a constant update, a frozen (all-zero) one "
               "included; and (the falsifier's first half) it does not pick a quiet, "
               "useful block over a loud, noisy one."),
    arms=ARMS,
    rules=(RULE_UNDEFINED, RULE_INVARIANT, RULE_PLANTED),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=False,
    scales=SCALES,
    run=run,
    analyse=analyse,
    paper_numbers=(PaperNumber("layer score", "||dW|| / (sqrt(n) std(dW))", "Section III",
                               "n_nonfinite_literal"),),
)
