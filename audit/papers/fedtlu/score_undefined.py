"""Falsifier ``fedtlu-score-undefined``: FedTLU's layer score at std(dW) = 0, and its scale.

What the claim declares (the parts and what each computes, the std = 0 cases, the planted
families, the tolerances, rule texts, questions and notes) is in
``audit/papers/fedtlu/declarations/score_undefined.py``. Here: the literal formula,
the sweeps and planted instances, the decisions, and the presentation.
"""
from __future__ import annotations

import math

import numpy as np

from audit.claims import Analysis, AuditError, Claim, Figure, RunContext, RunSpec, Table
from audit import questions, stats
from audit.papers.fedtlu.declarations import score_undefined as D
from audit.papers.fedtlu.declarations.score_undefined import (  # noqa: F401 (tests)
    BASE, CHANCE_BAND, CLAIM_ID, DEPENDS_TOL, PLANT_ALPHA, PLANTED, SCALES,
    STD_ZERO_CASES)
from audit.questions import Finding
from audit.verdict import Estimate, Outcome, Rule


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
        from audit.papers.fedtlu.algorithm import score

        return score
    raise AuditError(f"unknown arm {arm!r}")


def _sweep(cfg, f) -> dict:
    from audit.papers.fedtlu.algorithm import score_identity

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
    seed, n_planted, m = (int(cfg[k]) for k in D.PLANTED_DRAW_KEYS)
    rng = np.random.default_rng([seed, 7])
    out = []
    for fam, _ in PLANTED:
        picks_useful, gains = 0, []
        for _ in range(n_planted):
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
        out.append({"family": fam, "n": n_planted, "useful_picked": picks_useful,
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
        return Outcome.CONFIRMED, D.UNDEFINED_CONFIRMED.format(shown=shown), ""
    if all(math.isfinite(v) for v in [zero] + const):
        return Outcome.REFUTED, D.UNDEFINED_REFUTED.format(shown=shown), ""
    return Outcome.INCONCLUSIVE, D.UNDEFINED_MIXED.format(shown=shown), D.UNDEFINED_NEEDS


def _invariant_decide(ev):
    s, i = ev["max_rel_dev_scale"], ev["max_rel_dev_identity"]
    txt = D.INVARIANT_REASON.format(n=ev["n"], k=ev["k"], s=s, i=i)
    tol = ev.get("tol", D.invariance_tol(BASE["sizes"], BASE["max_mean_over_sd"]))
    if s < tol and i < tol:
        return Outcome.CONFIRMED, txt, ""
    if s > DEPENDS_TOL:
        return Outcome.REFUTED, txt + D.INVARIANT_DEPENDS, ""
    return Outcome.INCONCLUSIVE, txt, D.INVARIANT_NEEDS


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
        # an exact binomial interval: it has width whenever n >= 1
        rows.append(D.PLANTED_ROW.format(family=r["family"], k=k, n=n, ci=stats.ci_text(
            ci, D.PLANTED_CI, level=100 * (1 - 2 * side))))
        if p_less < side:
            wrong.append(r["family"])
        elif p_more < side:
            right.append(r["family"])
        elif lo <= ci.low and ci.high <= hi:
            chance.append(r["family"])
    txt = "; ".join(rows)
    if chance or wrong:
        why = [t.format(families=", ".join(f)) for t, f in ((D.PLANTED_CHANCE, chance),
                                                            (D.PLANTED_WRONG, wrong)) if f]
        return Outcome.CONFIRMED, D.PLANTED_CONFIRMED.format(txt=txt, why="; ".join(why)), ""
    if len(right) == len(ev["rows"]):
        return Outcome.REFUTED, D.PLANTED_REFUTED.format(txt=txt), ""
    return Outcome.INCONCLUSIVE, txt, D.PLANTED_NEEDS


RULE_UNDEFINED = Rule(**D.RULE_UNDEFINED, decide=_undefined_decide)
RULE_INVARIANT = Rule(**D.RULE_INVARIANT, decide=_invariant_decide)
RULE_PLANTED = Rule(**D.RULE_PLANTED, decide=_planted_decide)
QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS)


# -------------------------------------------------------------------------- analysis
def _est(name: str, value, key: str | None = None, n: int | None = None, **fmt) -> Estimate:
    """An estimate whose unit and description are declared (``D.ESTIMATES[key or name]``)."""
    unit, text = D.ESTIMATES[key or name]
    return Estimate(name, value, unit=unit, n=n, description=text.format(**fmt))


def _table(decl: tuple, rows) -> Table:
    """A table whose title, columns and note are declared."""
    title, columns, note = decl
    return Table(title, columns, tuple(rows), note)


def note_kinds(parts) -> str:
    """NOTE_KINDS: how many parts there are of each kind, and which, from the parts."""
    by_kind: dict[str, list[str]] = {}
    for p in parts:
        by_kind.setdefault(p.kind, []).append(p.id)
    texts = []
    for kind, ids in by_kind.items():
        one, many, gloss = D.KIND_WORDS.get(kind, (kind, kind + "s", ""))
        texts.append(D.KIND_TEXT.format(count=len(ids), word=one if len(ids) == 1 else many,
                                        ids=", ".join(f"`{i}`" for i in ids), gloss=gloss))
    kinds = (texts[0] if len(texts) == 1 else
             ", ".join(texts[:-1]) + " and " + texts[-1])
    return D.NOTE_KINDS.format(n=len(parts), kinds=kinds)


def note_planted_scales(cfg, scales=SCALES) -> str:
    """Whether other scales draw planted-pick's very instances (the same values of
    ``D.PLANTED_DRAW_KEYS`` as ``cfg``): then its results there are one computation, not
    a replication; said from the configs, never typed in."""
    keys = D.PLANTED_DRAW_KEYS
    same = [name for name, c in scales.items() if all(c.get(k) == cfg.get(k) for k in keys)]
    fields = {"keys": ", ".join(keys), "values": ", ".join(str(cfg[k]) for k in keys)}
    if len(same) < 2:
        return D.NOTE_PLANTED_OWN.format(**fields)
    differ = sorted({k for a in same for b in same for k in set(scales[a]) | set(scales[b])
                     if scales[a].get(k) != scales[b].get(k)})
    return D.NOTE_PLANTED_SAME.format(scales=", ".join(same),
                                      differ=", ".join(differ) or "nothing", **fields)


def analyse(results, ctx: RunContext) -> Analysis:
    cfg = ctx.config
    lit, grd = results[RunSpec("literal")], results[RunSpec("guarded")]
    sw = {a: results[RunSpec(a)]["sweep"] for a in ("literal", "guarded")}
    ds = max(s["max_rel_dev_scale"] for s in sw.values())
    di = max(s["max_rel_dev_identity"] for s in sw.values())
    tol = D.invariance_tol(cfg["sizes"], cfg["max_mean_over_sd"])
    parts = (RULE_UNDEFINED({"literal": lit["cases"]}),
             RULE_INVARIANT({"max_rel_dev_scale": ds, "max_rel_dev_identity": di,
                             "n": cfg["n_updates"], "k": cfg["scales_per_update"],
                             "tol": tol},
                            params={"sizes": ", ".join(str(int(s)) for s in cfg["sizes"]),
                                    "seed": cfg["seed"], "k": cfg["scales_per_update"],
                                    "max_mean_over_sd": f"{float(cfg['max_mean_over_sd']):g}",
                                    "u_lo": f"{float(cfg['log10_scale'][0]):g}",
                                    "u_hi": f"{float(cfg['log10_scale'][1]):g}",
                                    "tol": f"{tol:.3g}"}),
             RULE_PLANTED({"rows": grd["planted"], "band": CHANCE_BAND, "alpha": PLANT_ALPHA},
                          params={"n": cfg["n_planted"], "m": cfg["planted_size"],
                                  "alpha": PLANT_ALPHA, "lo": CHANCE_BAND[0],
                                  "hi": CHANCE_BAND[1]}))

    def fin(v):  # estimates carry finite numbers; nan / inf are shown in the table
        return v if math.isfinite(v) else float("nan")

    rnd = {c["case"]: c for c in lit["cases"]}[STD_ZERO_CASES[5][0]]
    est = [
        _est("max_rel_dev_under_scaling", ds), _est("max_rel_dev_from_identity", di),
        _est("literal_score_rounding_constant", fin(rnd["score"])),
        _est("literal_std_rounding_constant", rnd["std"]),
        *(_est(f"planted_useful_pick_rate_{r['family'].replace(' ', '_').replace('-', '_')}",
               r["useful_picked"] / r["n"], "planted_useful_pick_rate", n=r["n"],
               family=r["family"]) for r in grd["planted"]),
        _est("n_nonfinite_literal", sum(not math.isfinite(c["score"]) for c in lit["cases"]),
             total=len(lit["cases"])),
    ]
    gm = {m["layer"]: m for m in grd["moves"]}
    tables = [
        _table(D.TABLE_STD_ZERO, ((c["case"], c["n"], f"{c['norm']:.6g}", f"{c['std']:.3e}",
                                   f"{c['score']:.6g}", f"{g['score']:.6g}")
                                  for c, g in zip(lit["cases"], grd["cases"]))),
        _table(D.TABLE_MOVES, ((m["layer"], f"{m['norm']:.4g}", f"{m['score']:.6g}")
                               for m in grd["moves"])),
        _table(D.TABLE_PLANTED, ((r["family"], dict(PLANTED)[r["family"]],
                                  f"{r['useful_picked']} of {r['n']}",
                                  f"{r['mean_loss_decrease_of_pick']:+.4g}")
                                 for r in grd["planted"])),
        _table(D.TABLE_SWEEP, ((a, f"{s['max_rel_dev_scale']:.3e}",
                                f"{s['max_rel_dev_identity']:.3e}",
                                f"{s['worst']['n']}, {s['worst']['kind']}, {s['worst']['c']:.3g}")
                               for a, s in sw.items())),
    ]
    figs = [Figure(*D.FIGURE_SCALE, tuple({"label": m["layer"], "x": m["log10_c"],
                                           "y": m["scaled"]} for m in grd["moves"]),
                   caption=D.FIGURE_SCALE_CAPTION)]
    notes = [note_kinds(parts), note_planted_scales(cfg), *D.NOTES, D.NOTE_SCALE.format(
        small=gm["pattern v, scaled 1e-3"]["score"], large=gm["pattern v, scaled 1e3"]["score"],
        tiny=gm["tiny one-signed move (1e-4 +- 10%)"]["score"],
        loud=gm["large zero-mean move (sd 1)"]["score"])]
    findings = (Finding(D.FINDING.format(ds=ds, verdict=parts[1].verdict.value), ()),)
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(notes), findings=findings)


CLAIM = Claim(
    id=CLAIM_ID, paper=D.PAPER, record=D.RECORD, title=D.TITLE, statement=D.STATEMENT,
    arms=D.ARMS, rules=(RULE_UNDEFINED, RULE_INVARIANT, RULE_PLANTED),
    combination=COMBINATION, questions=QUESTIONS, stochastic=False, scales=SCALES,
    run=run, analyse=analyse, paper_numbers=D.PAPER_NUMBERS,
)
