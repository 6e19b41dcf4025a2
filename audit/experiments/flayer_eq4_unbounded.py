"""Falsifier ``flayer-eq4-unbounded``: FLAYER's Eq. 4 rate multiplier has no upper bound.

Paper: FLAYER, arXiv 2412.07062v3, Eq. 4: the learning rate of layer i of L is
``eta_i = eta * (1 + log(1 + 1/||g_i||) * i / L)``. Review record 000
(``referee_report.minor_comments[2]``): the factor grows without limit as the gradient
norm tends to zero, and the paper says nothing about clipping or a floor on the norm.

What we compute (exact; no seeds). The multiplier is the project's own
:func:`audit.algorithms.flayer.eq4_multiplier` (imported, not re-implemented), called with
``floor=0``, i.e. the printed equation without the guard the project's FLAYER runs use.

- ``unbounded``: the multiplier at depth i = L (and at i/L = 1/2, 1/L beside) on the
  ladder ||g|| = 10^0, 10^-1, ..., 10^-300 in float64, set against the ladder of
  thresholds 10 and 100, and a least-squares fit of (m - 1) against log(1/||g||): the
  growth law m - 1 ~ (i/L) log(1/||g||), i.e. slope i/L and intercept 0. By hand:
  log(1 + 1/g) >= log(1/g), so m > M as soon as g < exp(-(M - 1) L / i); the ladder checks
  that the implementation does what the algebra says.
- ``in-practice`` (a measurement: no verdict, outside the claim's verdict): the engine's
  digits CNN (``build_model("cnn", width=0.5)``, the
  FLAYER smoke model, every parameter tensor one layer as in ``audit.algorithms.flayer``)
  at initialisation (``torch.manual_seed(0)``) and after 10, 50 and 200 SGD steps
  (lr 0.05, batch 32, batches drawn by a generator seeded 0); per tensor the gradient
  norm on two readings of g_i (the paper does not say on which data): the first 32
  training samples (the probe our FLAYER implementation uses) and the whole training
  set; 1000 and 3000 steps are reported beside, outside the rule.
"""
from __future__ import annotations

import math

import numpy as np

from audit.claims import (FLAYER, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit import questions
from audit.questions import Question
from audit.verdict import Estimate, Outcome, Rule

CLAIM_ID = "flayer-eq4-unbounded"
THRESHOLDS = (10.0, 100.0)  # the ladder the multiplier at i = L must pass
SLOPE_TOL = 1e-6  # relative tolerance of the fitted slope against i/L
FIT_FROM = 4  # fit over ||g|| <= 10^-4 (log(1+1/g) - log(1/g) = log(1+g) < 1e-4 there)

BASE = {"exponents": list(range(0, 301)), "depth_L": 6,
        "dataset": "digits", "model": "cnn", "model_kw": {"width": 0.5}, "seed": 0,
        "lr": 0.05, "batch_size": 32, "probe": 32,
        "checkpoints": [0, 10, 50, 200], "beside": [1000, 3000]}
SCALES = {
    "smoke": BASE,
    "full": {**BASE, "model_kw": {}},  # the CNN at full width
    "paper": {**BASE, "dataset": "cifar10", "model": "cnn2", "model_kw": {}},
}

ARMS = (
    Arm("ladder", "Eq. 4 as printed (floor 0) on ||g|| = 10^0 .. 10^-300, float64",
        "as printed"),
    Arm("digits-cnn", "Eq. 4 on real gradient norms of the engine's CNN, init and short "
        "SGD training, seed 0", "as printed; g_i read two ways (probe batch, full set)"),
    Arm("flayer-runs", "the multipliers FLAYER's own runs reach: flayer-masked-zero's "
        "setting at this scale (seed 0, no sweeps), arms literal and as-released, every "
        "round's largest Eq. 4 factor", "as printed, inside real FLAYER training"),
)

#: The arms of flayer-masked-zero whose rounds are read by `flayer-runs`.
FLAYER_ARMS = ("literal", "as-released")


def _flayer_runs(ctx: RunContext) -> dict:
    """Run flayer-masked-zero's units for seed 0 at this scale (its setting, sweeps off)
    and keep each round's largest Eq. 4 multiplier."""
    from dataclasses import replace

    from audit.experiments import flayer_masked_zero as fmz

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
    from audit.algorithms.flayer import GRAD_NORM_FLOOR, eq4_multiplier

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

    from audit.algorithms.flayer import eq4_multiplier
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
        for reading, (xb, yb) in (("probe", (x[:cfg["probe"]], y[:cfg["probe"]])),
                                  ("full", (x, y))):
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
        return Outcome.CONFIRMED, (
            f"at i = L the multiplier rises monotonically to {m_max:.1f} at ||g|| = "
            f"1e-{ev['last_exponent']}, past every threshold {list(thr)}; fitted slopes of "
            "(m - 1) on log(1/||g||) equal i/L (" + ", ".join(
                f"{s:.9f} vs {q:.6f}" for s, q in ev["slopes"]) + ")"), ""
    if m_max < thr[0]:
        return Outcome.REFUTED, (f"the multiplier stays below {thr[0]} (max {m_max:.3f}) "
                                 "over the whole ladder"), ""
    return Outcome.INCONCLUSIVE, (
        f"thresholds passed {passed} of {list(thr)}, slopes match i/L: {slopes_ok}, "
        f"monotone: {mono}"), "a ladder reaching smaller norms"


RULE_UNBOUNDED = Rule(
    "unbounded",
    "Eq. 4 as printed (``eq4_multiplier(g, i, L, floor=0)``, L = 6) on ||g|| = 10^-e, "
    "e = 0..300, float64 (a derivation checked numerically: the verdict is the algebra "
    "log(1 + 1/g) >= log(1/g), not an experiment). CONFIRMED when the multiplier at "
    "i = L increases as ||g|| falls, "
    f"exceeds every threshold of the ladder {list(THRESHOLDS)}, and the least-squares "
    f"slope of (m - 1) on log(1/||g||) over ||g|| <= 1e-{FIT_FROM} equals i/L within a "
    f"relative {SLOPE_TOL:g} at i = 1, L/2, L; REFUTED when it stays below "
    f"{THRESHOLDS[0]:g} on the whole ladder; INCONCLUSIVE otherwise. Exact: no seeds. "
    "The ladder's thresholds 10 and 100 are round numbers (an order of magnitude and two "
    "above the factor 1 + ln 2 = 1.69 at ||g|| = 1), not fitted to any result.",
    _unbounded_decide, kind="derivation")


def _practice_decide(ev):
    top = ev["top"]  # (m, layer, reading, step) of the largest multiplier in the rule
    by_reading = "; ".join(f"{r}: max {m:.2f} ({k}, step {s})"
                           for r, (m, k, s) in ev["per_reading"].items())
    fr = ev.get("flayer_run")
    in_flayer = ("" if not ev.get("flayer") else
                 f" Inside FLAYER's own training (flayer-masked-zero, {fr['scale']} setting, "
                 f"{fr['model']}, lr {fr['lr']:g}, {fr['rounds']} rounds, seed 0) the "
                 f"largest factor of any round is " + ", ".join(
                     f"{m:.2f} ({a})" for a, m in ev["flayer"].items()) + ".")
    return Outcome.INCONCLUSIVE, (
        f"measurement, no verdict: the largest multiplier on these runs is {top[0]:.2f} "
        f"({top[1]}, {top[2]} gradient, step {top[3]}); per reading of g_i: {by_reading}."
        f"{in_flayer} "
        "No threshold independent of these numbers exists for 'large in practice' (an "
        "earlier threshold of 5.0 was set with the result in view), so none is applied."), (
        "a threshold from an independent source (e.g. a step size known to diverge)")


RULE_PRACTICE = Rule(
    "in-practice",
    "Measurement (no verdict, outside the claim's verdict): the engine's digits CNN "
    "(width 0.5, the FLAYER smoke model; seed 0), every parameter tensor a layer "
    "(i = 1..6): per-tensor gradient norms at initialisation and after 10, 50, 200 SGD "
    "steps (lr 0.05, batch 32), on the first 32 training samples (the probe the "
    "project's FLAYER runs use) and on the whole training set; Eq. 4 as printed on each. "
    "The largest multiplier per reading is reported. Steps 1000 and 3000 are reported "
    "beside, and so are the factors FLAYER's own training reaches (flayer-masked-zero's "
    "setting at this scale, seed 0, arms literal and as-released, every round). A finite "
    "run cannot show a bound, and no independent threshold for 'large' "
    "exists, so the part carries no verdict.",
    _practice_decide, kind="measurement", reachable=("INCONCLUSIVE",))


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
    cand = [(v["m"], k, reading, c["step"]) for c in cks if c["in_rule"]
            for reading in ("probe", "full") for k, v in c[reading].items()]
    top = max(cand)
    per_reading = {}
    for reading in ("probe", "full"):
        m, k, _, s = max(t for t in cand if t[2] == reading)
        per_reading[reading] = (m, k, s)
    beside = [(v["m"], k, reading, c["step"]) for c in cks if not c["in_rule"]
              for reading in ("probe", "full") for k, v in c[reading].items()]
    fr = results.get(RunSpec("flayer-runs"))
    fl_max = ({a: max(v) for a, v in fr["per_round"].items()} if fr else {})
    parts = (RULE_UNBOUNDED(ev_u), RULE_PRACTICE({"top": top, "per_reading": per_reading,
                                                  "flayer": fl_max, "flayer_run": fr}))

    E = Estimate
    est = [
        E("m_at_L_grad_1", rows[0]["m"][sL], unit="x", description="Eq. 4 at i = L, ||g|| = 1"),
        E("m_at_L_grad_1e-12", rows[12]["m"][sL], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-12 (the project's floor)"),
        E("m_at_L_grad_1e-300", rows[-1]["m"][sL], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-300"),
        E("m_at_L_grad_1e-308", lad["at_1e-308"], unit="x",
          description="Eq. 4 at i = L, ||g|| = 1e-308 (near float64's smallest normal)"),
        E("m_floored_max", max(r["m_floored"] for r in rows), unit="x",
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

    show = [0, 1, 2, 3, 4, 6, 9, 12, 16, 20, 30, 43, 50, 100, 200, 300]
    tables = [
        Table("Eq. 4 as printed against the gradient norm (L = 6)",
              ("||g||", "log(1/||g||)") + tuple(f"m, i = {d}" for d in depths)
              + ("(i/L) log(1/||g||) + 1 at i = L", "m at i = L, project floor 1e-12"),
              tuple((f"1e-{r['exponent']}", round(math.log(1 / r["grad_norm"]), 4))
                    + tuple(round(r["m"][str(d)], 6) for d in depths)
                    + (round(1 + math.log(1 / r["grad_norm"]), 6), round(r["m_floored"], 6))
                    for r in rows if r["exponent"] in show),
              note=f"At ||g|| = 1e-308 the factor is {lad['at_1e-308']:.2f}; below about "
                   f"5.6e-309, 1/||g|| overflows float64 and the printed factor is "
                   f"{lad['at_min_subnormal']} (at 5e-324), as it is at ||g|| = 0 "
                   f"({lad['at_zero']})."),
        Table(f"Growth law: least squares of (m - 1) on log(1/||g||), ||g|| <= 1e-{FIT_FROM}",
              ("i", "i/L", "slope", "intercept", "max |residual|"),
              tuple((d, round(d / L, 6), f"{fits[d][0]:.12f}", f"{fits[d][1]:.3e}",
                     f"{fits[d][2]:.3e}") for d in depths)),
        Table("Eq. 4 on the digits CNN's gradient norms (seed 0)",
              ("step", "train loss", "tensor", "i", "||g|| probe", "m probe", "||g|| full",
               "m full", "in rule"),
              tuple((c["step"], round(c["train_loss"], 4), k, c["probe"][k]["i"],
                     f"{c['probe'][k]['grad_norm']:.3e}", round(c["probe"][k]["m"], 3),
                     f"{c['full'][k]['grad_norm']:.3e}", round(c["full"][k]["m"], 3),
                     c["in_rule"]) for c in cks for k in cnn["keys"]),
              note="probe = the first 32 training samples (as audit.algorithms.flayer "
                   "takes g_i); full = the whole training set (1437 samples)."),
    ]
    figs = [
        Figure("multiplier_vs_log_inverse_norm", "Eq. 4's multiplier as ||g|| -> 0",
               "log10(1/||g||)", "eta_i / eta",
               tuple({"label": f"i/L = {d}/{L}", "x": [r["exponent"] for r in rows],
                      "y": [r["m"][str(d)] for r in rows]} for d in depths)
               + ({"label": "project floor 1e-12, i = L", "x": [r["exponent"] for r in rows],
                   "y": [r["m_floored"] for r in rows]},),
               caption="Straight lines in log(1/||g||): no ceiling short of float64's range."),
        Figure("cnn_multiplier_over_training", "Eq. 4 on the CNN's full-set gradients",
               "SGD steps", "eta_i / eta",
               tuple({"label": f"{k} (i = {cks[0]['full'][k]['i']})",
                      "x": [c["step"] for c in cks], "y": [c["full"][k]["m"] for c in cks]}
                     for k in cnn["keys"])),
    ]
    notes = [
        "The multiplier is audit.algorithms.flayer.eq4_multiplier, called with floor = 0 "
        "(the printed equation). The project's own FLAYER runs clamp ||g|| at "
        f"{lad['floor']:g}, which caps the factor at {max(r['m_floored'] for r in rows):.2f} "
        "for i = L; that clamp is our deviation and is exactly what the paper does not state.",
        "By hand: 1 + (i/L) log(1/g) < m < 1 + (i/L) (log(1/g) + g), so m passes any M once "
        "g < exp(-(M - 1) L / i). In float64 the factor at i = L reaches "
        f"{lad['at_1e-308']:.2f} at 1e-308; once 1/g overflows (g below about 5.6e-309) and "
        f"at g = 0 it is {lad['at_zero']}, so a layer whose gradient vanishes gets an "
        "infinite rate (and 0 x inf = NaN weights).",
        "In practice (the CNN) the norms lie between about 1e-4 and 2; the largest factors "
        "belong to the "
        "deepest tensors (biases, whose gradients cancel across balanced classes) and grow "
        "as training converges (the longer runs, reported beside). The verdict of the "
        "in-practice part depends on which data g_i is taken on, which the paper leaves "
        "open: both readings are shown. The probe reading (the one the project's FLAYER "
        f"runs use) gives at most {per_reading['probe'][0]:.2f}, the full-set reading "
        f"{per_reading['full'][0]:.2f} (steps <= 200).",
        "The in-practice part is a measurement: an earlier version decided it against a "
        "threshold of 5.0 that arrived together with the result it judged (5.47), and no "
        "independent source for a threshold of 'large in practice' was found; so the "
        "numbers are reported without a verdict.",
        "Premise: none. The reviewer's claim is about a formula (mathematics); no effect "
        "of the paper is explained here, so there is nothing to reproduce first.",
    ]
    return Analysis(estimates=tuple(est), parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(notes))


QUESTIONS = (
    Question("eq4-unbounded",
             "Does the Eq. 4 learning-rate factor grow without bound as a layer's gradient "
             "norm goes to zero?", ("referee_report.minor_comments[2]",), ("unbounded",),
             kind="proof"),
    Question("eq4-in-practice",
             "How large does the factor get on a real network's gradients?", (),
             ("in-practice",), kind="measurement"),
)
COMBINATION = questions.combination(QUESTIONS)


CLAIM = Claim(
    id=CLAIM_ID,
    paper=FLAYER,
    record=RecordRef(RECORDS[FLAYER.arxiv_id], ("referee_report.minor_comments[2]",)),
    title="Eq. 4 learning-rate factor unbounded",
    statement=("The layer-wise rate factor of Eq. 4 has no ceiling: as a layer's gradient "
               "norm shrinks towards zero the factor grows like (i/L) log(1/||g||), and the "
               "paper states no clipping or floor."),
    arms=ARMS,
    rules=(RULE_UNBOUNDED, RULE_PRACTICE),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=False,
    scales=SCALES,
    run=run,
    analyse=analyse,
    paper_numbers=(PaperNumber("layer-wise rate", "eta * (1 + log(1 + 1/||g_i||) * i/L)",
                               "Eq. 4", "m_at_L_grad_1e-300"),),
)
