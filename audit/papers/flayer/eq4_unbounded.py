"""Falsifier ``flayer-eq4-unbounded``: FLAYER's Eq. 4 rate multiplier has no upper bound.

The claim's declarations (paper, record, what is computed, arms, scales, rule texts,
notes) are :mod:`audit.papers.flayer.declarations.eq4_unbounded`, whose docstring
tells the claim; this module holds its code: the ladder, the CNN's gradient norms, the
multipliers of FLAYER's own runs, the two parts and their presentation. The multiplier
is the project's own :func:`audit.papers.flayer.algorithm.eq4_multiplier` (imported, not
re-implemented), called with ``floor=0``: the printed equation.
"""
from __future__ import annotations

import math

import numpy as np

from audit import questions
from audit.claims import Analysis, AuditError, Claim, Figure, RunContext, RunSpec, Table
from audit.papers.flayer.declarations import eq4_unbounded as D
from audit.papers.flayer.declarations.eq4_unbounded import (
    ARMS, CLAIM_ID, FIT_FROM, FLAYER_ARMS, SCALES, SLOPE_TOL, THRESHOLDS)
from audit.verdict import Estimate, Outcome, Rule


def _flayer_runs(ctx: RunContext) -> dict:
    """Run flayer-masked-zero's units for seed 0 at this scale (its setting, sweeps off)
    and keep each round's largest Eq. 4 multiplier."""
    from dataclasses import replace

    from audit.papers.flayer import masked_zero as fmz

    scale = ctx.scale if ctx.scale in fmz.SCALES else "smoke"
    cfg = dict(fmz.SCALES[scale])
    sub = replace(ctx, claim_id=fmz.CLAIM_ID, scale=scale, config=cfg, seeds=(0,),
                  checkpoint_dir=None, on_round=None)
    out = {}
    for arm in FLAYER_ARMS:
        res = fmz.run(RunSpec(arm, 0, ""), sub)
        out[arm] = [float(m["max_lr_mult"]) for m in res["per_round"]]
    return {"scale": scale, "model": cfg["model"], "rounds": cfg["rounds"],
            "lr": cfg["lr"], "per_round": out}


# ------------------------------------------------------------------------------ runs
def _ladder(cfg) -> dict:
    from audit.papers.flayer.algorithm import GRAD_NORM_FLOOR, eq4_multiplier

    L = cfg["depth_L"]
    depths = sorted({1, L // 2, L})
    rows = []
    for e in cfg["exponents"]:
        g = 10.0 ** (-e)
        rows.append({"exponent": e, "grad_norm": g,
                     "m": {str(i): eq4_multiplier(g, i, L, floor=0.0) for i in depths},
                     "m_floored": eq4_multiplier(g, L, L)})  # the project's guard, beside
    return {"L": L, "depths": depths, "rows": rows, "floor": GRAD_NORM_FLOOR,
            "at_zero": eq4_multiplier(0.0, L, L, floor=0.0),
            "at_1e-308": eq4_multiplier(1e-308, L, L, floor=0.0),
            "at_min_subnormal": eq4_multiplier(5e-324, L, L, floor=0.0)}  # 1/g overflows


def _digits(cfg, ctx: RunContext) -> dict:
    import torch
    import torch.nn.functional as F

    from audit.papers.flayer.algorithm import eq4_multiplier
    from audit.fl.data import load_dataset
    from audit.fl.models import build_model

    ds = load_dataset(cfg["dataset"], data_dir=ctx.data_dir, seed=0)  # an AuditError if absent
    dev = ctx.device
    x, y = ds.x_train.to(dev), ds.y_train.to(dev)
    with torch.random.fork_rng():
        torch.manual_seed(cfg["seed"])
        net = build_model(cfg["model"], ds.num_classes, ds.in_channels, ds.image_size,
                          **dict(cfg["model_kw"])).to(dev)
    keys = [n for n, _ in net.named_parameters()]  # layer i = tensor i, as in flayer.py
    L = len(keys)
    gen = torch.Generator().manual_seed(cfg["seed"])
    opt = torch.optim.SGD(net.parameters(), lr=cfg["lr"])

    def norms(xb, yb):
        net.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        return [float(p.grad.double().norm()) for p in net.parameters()]

    out, step = [], 0
    for ck in sorted(set(cfg["checkpoints"]) | set(cfg["beside"])):
        while step < ck:
            idx = torch.randint(0, len(y), (cfg["batch_size"],), generator=gen).to(dev)
            opt.zero_grad()
            F.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
            step += 1
        with torch.no_grad():
            loss = float(F.cross_entropy(net(x), y))
        rec = {"step": ck, "train_loss": loss, "in_rule": ck in cfg["checkpoints"]}
        for reading, (xb, yb) in zip(D.READINGS, ((x[:cfg["probe"]], y[:cfg["probe"]]),
                                                  (x, y))):
            ns = norms(xb, yb)
            rec[reading] = {k: {"i": i, "grad_norm": n,
                                "m": eq4_multiplier(n, i, L, floor=0.0)}
                            for i, (k, n) in enumerate(zip(keys, ns), 1)}
        out.append(rec)
    return {"L": L, "keys": keys, "checkpoints": out}


def run(spec: RunSpec, ctx: RunContext) -> dict:
    import torch

    torch.set_num_threads(1)
    if spec.arm == "ladder":
        return _ladder(ctx.config)
    if spec.arm == "digits-cnn":
        return _digits(ctx.config, ctx)
    if spec.arm == "flayer-runs":
        return _flayer_runs(ctx)
    raise AuditError(f"unknown arm {spec.arm!r}")


# ----------------------------------------------------------------------------- rules
def growth_fit(rows, depth: str) -> tuple[float, float, float]:
    """Least squares of (m - 1) on log(1/||g||) over ||g|| <= 10^-FIT_FROM: slope,
    intercept, max |residual|."""
    pts = [(math.log(1.0 / r["grad_norm"]), r["m"][depth] - 1.0) for r in rows
           if r["exponent"] >= FIT_FROM]
    a = np.array(pts)
    slope, icpt = np.polyfit(a[:, 0], a[:, 1], 1)
    res = np.abs(a[:, 1] - (slope * a[:, 0] + icpt)).max()
    return float(slope), float(icpt), float(res)


def _unbounded_decide(ev):
    m_max, thr = ev["m_max_at_L"], THRESHOLDS
    passed = [t for t in thr if any(m > t for m in ev["m_at_L"])]
    slopes_ok = all(abs(s - q) <= SLOPE_TOL * q for s, q in ev["slopes"])
    mono = ev["monotone"]
    if len(passed) == len(thr) and slopes_ok and mono:
        return Outcome.CONFIRMED, D.UNBOUNDED_HOLDS.format(
            m_max=m_max, last_exponent=ev["last_exponent"], thresholds=list(thr),
            slopes=", ".join(f"{s:.9f} vs {q:.6f}" for s, q in ev["slopes"])), ""
    if m_max < thr[0]:
        return Outcome.REFUTED, D.UNBOUNDED_BOUNDED.format(threshold=thr[0], m_max=m_max), ""
    return Outcome.INCONCLUSIVE, D.UNBOUNDED_OPEN.format(
        passed=passed, thresholds=list(thr), slopes_ok=slopes_ok, monotone=mono), (
        "a ladder reaching smaller norms")


RULE_UNBOUNDED = Rule("unbounded", D.RULE_UNBOUNDED, _unbounded_decide, kind="derivation")


def _practice_decide(ev):
    m_top, layer, reading, step = ev["top"]  # the largest multiplier in the rule
    by_reading = "; ".join(f"{r}: max {m:.2f} ({k}, step {s})"
                           for r, (m, k, s) in ev["per_reading"].items())
    fr = ev.get("flayer_run")
    in_flayer = ("" if not ev.get("flayer") else D.PRACTICE_IN_FLAYER.format(
        factors=", ".join(f"{m:.2f} ({a})" for a, m in ev["flayer"].items()), **fr))
    return Outcome.INCONCLUSIVE, D.PRACTICE_REASON.format(
        m=m_top, layer=layer, reading=reading, step=step, by_reading=by_reading,
        in_flayer=in_flayer), D.PRACTICE_NEEDS


RULE_PRACTICE = Rule("in-practice", D.RULE_PRACTICE, _practice_decide, kind="measurement",
                     reachable=("INCONCLUSIVE",))


# -------------------------------------------------------------------------- analysis
def analyse(results, ctx: RunContext) -> Analysis:
    lad = results[RunSpec("ladder")]
    cnn = results[RunSpec("digits-cnn")]
    L, rows, depths = lad["L"], lad["rows"], lad["depths"]
    sL = str(L)
    m_at_L = [r["m"][sL] for r in rows]
    fits = {d: growth_fit(rows, str(d)) for d in depths}
    crossing = {t: next((r["grad_norm"] for r in rows if r["m"][sL] > t), None)
                for t in THRESHOLDS}
    ev_u = {"m_at_L": m_at_L, "m_max_at_L": max(m_at_L), "last_exponent": rows[-1]["exponent"],
            "monotone": all(b > a for a, b in zip(m_at_L, m_at_L[1:])),
            "slopes": [(fits[d][0], d / L) for d in depths]}

    cks = cnn["checkpoints"]

    def multipliers(in_rule):  # (m, tensor, reading, step) of every reading at every step
        return [(v["m"], k, reading, c["step"]) for c in cks if c["in_rule"] == in_rule
                for reading in D.READINGS for k, v in c[reading].items()]

    cand, beside = multipliers(True), multipliers(False)
    top = max(cand)
    per_reading = {}
    for reading in D.READINGS:
        m, k, _, s = max(t for t in cand if t[2] == reading)
        per_reading[reading] = (m, k, s)
    fr = results.get(RunSpec("flayer-runs"))
    fl_max = ({a: max(v) for a, v in fr["per_round"].items()} if fr else {})
    parts = (RULE_UNBOUNDED(ev_u), RULE_PRACTICE({"top": top, "per_reading": per_reading,
                                                  "flayer": fl_max, "flayer_run": fr}))

    E = Estimate
    ceiling = max(r["m_floored"] for r in rows)
    est = [
        E("m_at_L_grad_1", rows[0]["m"][sL], unit="x", description="Eq. 4 at i = L, ||g|| = 1"),
        E("m_at_L_grad_1e-12", rows[12]["m"][sL], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-12 (the project's floor)"),
        E("m_at_L_grad_1e-300", rows[-1]["m"][sL], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-300"),
        E("m_at_L_grad_1e-308", lad["at_1e-308"], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-308 (near float64's smallest normal)"),
        E("m_floored_max", ceiling, unit="x",
          description=f"with the project's floor ||g|| >= {lad['floor']:g}: its ceiling"),
    ]
    for d in depths:
        s, c, res = fits[d]
        est.append(E(f"slope_i{d}", s, unit="", description=f"fitted slope of (m - 1) on "
                     f"log(1/||g||) at i = {d} (i/L = {d / L:.4f})"))
        est.append(E(f"intercept_i{d}", c, unit="", description="its intercept (0 by hand)"))
    for t in THRESHOLDS:
        est.append(E(f"first_grad_norm_above_{t:g}", crossing[t] or float("nan"), unit="",
                     description=f"largest ladder ||g|| with m(i = L) > {t:g}"))
    est += [
        E("practice_max_multiplier", top[0], unit="x",
          description=f"largest Eq. 4 multiplier, CNN, steps <= 200 ({top[1]}, {top[2]})"),
        E("practice_max_multiplier_probe", per_reading["probe"][0], unit="x",
          description="the same on the 32-sample probe gradient only"),
        E("practice_max_multiplier_full", per_reading["full"][0], unit="x",
          description="the same on the full-training-set gradient only"),
        E("practice_min_multiplier", min(cand)[0], unit="x",
          description="smallest multiplier, CNN, steps <= 200"),
        E("practice_max_multiplier_beside", max(beside)[0] if beside else float("nan"),
          unit="x", description="largest multiplier at the longer runs (not in the rule)"),
    ]
    for a, m in fl_max.items():
        est.append(E(f"flayer_run_max_multiplier_{a}", m, unit="x",
                     description=f"largest Eq. 4 factor of any round of FLAYER's own "
                                 f"training, arm {a} (flayer-masked-zero's setting, seed 0)"))

    tables = [
        Table(D.LADDER_TITLE,
              ("||g||", "log(1/||g||)") + tuple(f"m, i = {d}" for d in depths)
              + ("(i/L) log(1/||g||) + 1 at i = L", "m at i = L, project floor 1e-12"),
              tuple((f"1e-{r['exponent']}", round(math.log(1 / r["grad_norm"]), 4))
                    + tuple(round(r["m"][str(d)], 6) for d in depths)
                    + (round(1 + math.log(1 / r["grad_norm"]), 6), round(r["m_floored"], 6))
                    for r in rows if r["exponent"] in D.SHOWN_EXPONENTS),
              note=D.LADDER_NOTE.format(at_1e308=lad["at_1e-308"], at_zero=lad["at_zero"],
                                        at_min_subnormal=lad["at_min_subnormal"])),
        Table(D.FIT_TITLE, ("i", "i/L", "slope", "intercept", "max |residual|"),
              tuple((d, round(d / L, 6), f"{fits[d][0]:.12f}", f"{fits[d][1]:.3e}",
                     f"{fits[d][2]:.3e}") for d in depths)),
        Table(D.CNN_TITLE, D.CNN_COLUMNS,
              tuple((c["step"], round(c["train_loss"], 4), k, c["probe"][k]["i"],
                     f"{c['probe'][k]['grad_norm']:.3e}", round(c["probe"][k]["m"], 3),
                     f"{c['full'][k]['grad_norm']:.3e}", round(c["full"][k]["m"], 3),
                     c["in_rule"]) for c in cks for k in cnn["keys"]),
              note=D.CNN_NOTE),
    ]
    exps = [r["exponent"] for r in rows]
    figs = [
        Figure("multiplier_vs_log_inverse_norm", "Eq. 4's multiplier as ||g|| -> 0",
               "log10(1/||g||)", "eta_i / eta",
               tuple({"label": f"i/L = {d}/{L}", "x": exps, "y": [r["m"][str(d)] for r in rows]}
                     for d in depths)
               + ({"label": "project floor 1e-12, i = L", "x": exps,
                   "y": [r["m_floored"] for r in rows]},),
               caption="Straight lines in log(1/||g||): no ceiling short of float64's range."),
        Figure("cnn_multiplier_over_training", "Eq. 4 on the CNN's full-set gradients",
               "SGD steps", "eta_i / eta",
               tuple({"label": f"{k} (i = {cks[0]['full'][k]['i']})",
                      "x": [c["step"] for c in cks], "y": [c["full"][k]["m"] for c in cks]}
                     for k in cnn["keys"])),
    ]
    fmt = {"floor": lad["floor"], "ceiling": ceiling, "at_1e308": lad["at_1e-308"],
           "at_zero": lad["at_zero"], "probe": per_reading["probe"][0],
           "full": per_reading["full"][0]}
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(n.format(**fmt) for n in D.NOTES))


QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS)

CLAIM = Claim(
    id=CLAIM_ID,
    paper=D.PAPER,
    record=D.RECORD,
    title=D.TITLE,
    statement=D.STATEMENT,
    arms=ARMS,
    rules=(RULE_UNBOUNDED, RULE_PRACTICE),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=False,
    scales=SCALES,
    run=run,
    analyse=analyse,
    paper_numbers=D.PAPER_NUMBERS,
)
