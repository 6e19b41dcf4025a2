"""Falsifier `fedtlu-lower-bound` (FedTLU, arXiv 2412.17692v2).

The reviewer (record 001, skeptic_critique) says three things, one or more parts each:

1. The proof of Section IV.C compares two lower bounds, which orders nothing, and for
   eta*L > 2 both bounds are negative, where a step need not lower the loss at all.
   Derivations (exact arithmetic, no seeds): ``isotropic-test`` (the reviewer's own
   concrete test; on its instance the bounds equal the changes, so it does not vote),
   ``ordering`` (a counterexample search: REFUTED if
   it finds none) and ``vacuous-regime`` (the sign of the bounds for eta*L > 2).
2. Assumption (b) (||g_S||^2 >= ||g||^2 - delta) is never tied to the score. Part
   ``assumption-b`` (experiment): over FL rounds, the share of the squared gradient norm
   held by the blocks FedTLU updates, against 1 - delta = 0.95. A hypothesis of the
   paper's proof: not gated by the premise.
3. The reported gains are within noise. Part ``noise`` (experiment): FedTLU vs Random at
   the same update portion on a tiny Transformer LM, clean and with 10 % noisy clients,
   paired over seeds, equivalence margin = the paper's own Table III gap (0.227 %), with a
   margin-sized planted handicap for assay sensitivity; Full and Last-layer beside them.
   Part ``three-runs``: could the paper's three runs resolve a gap of its own size at seed
   noise of our order (a question of power)? Part ``printed-tables``: the paper's own
   printed perplexities against its "consistently outperforms" wording.

Premise (the paper's effect): FedTLU beats Random in final perplexity (``premise_of``).
Every decision is ``stats.three_way`` (Hall's interval with a skewness allowance, agreeing
with an exact sign test; docs/STATISTICS.md) at
0.05 x ctx.alpha_fraction / 3 (Bonferroni over the three experimental tests). Each
reviewer question (``QUESTIONS``) has its own verdict; the claim's single word is SPLIT
when they differ.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from audit import kit, stats
from audit.claims import (FEDTLU, RECORDS, Analysis, Arm, AuditError, Claim, Figure,
                          PaperNumber, RecordRef, RunContext, RunSpec, Table)
from audit.analysis import mean_band, results_table
from audit.tuning import Search, tuning_seeds
from audit import questions
from audit.questions import Question
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer

CLAIM_ID = "fedtlu-lower-bound"
ARMS = ("fedtlu", "random", "full", "last", "none")
SETTINGS = ("clean", "noisy")
EXACT = RunSpec(arm="exact", seed=None, setting="proof")
ALPHA = 0.05
ONE_MINUS_DELTA = 0.95  # the reviewer's delta = 0.05 * A, as a share of A
# The size of the paper's FedTLU-Random gap, Table III (Transformer, FedAvg, noisy
# clients, global perplexity 1.768 vs 1.764; there FedTLU's is the higher), as a fraction of
# the perplexity: 0.227 %, the larger of the two gaps quoted (Table I: 0.047 %). It is the
# source of the noise part's equivalence margin (config ``equiv_rel``): "within noise" then
# means "smaller than the gap the paper itself reports", fixed before any run.
PAPER_GAP_REL = (1.768 - 1.764) / 1.764
N_TESTS = 3  # Bonferroni family: assumption-b and the two settings of `noise`

_LM = dict(d_model=16, n_heads=2, n_layers=4)
SCALES = {
    "smoke": dict(dataset="stdlib-chars", max_chars=6_000, seq_len=16, n_clients=10,
                  rounds=14, local_epochs=1, batch_size=17, lr=0.6, portion=0.5,
                  noisy_fraction=0.1, probe_windows=128, threads=1, **_LM,
                  n_random=20_000, equiv_rel=PAPER_GAP_REL),
    # larger than smoke where training length and model size matter for a layer choice
    # (4x the text, 2x the context, 2x the rounds, 2x the width), sized so that the
    # sequential rule's cap (20 seeds, 200 units) ends within about 45 minutes on a 2-core
    # CPU (`audit estimate`: 34 min); the earlier full config (120k chars, d_model 64,
    # 6 layers, 60 rounds x 2 epochs) would have taken about 20 hours
    "full": dict(dataset="stdlib-chars", max_chars=24_000, seq_len=32, n_clients=10,
                 rounds=30, local_epochs=1, batch_size=32, lr=0.5, portion=0.5,
                 noisy_fraction=0.1, probe_windows=256, threads=1, d_model=32, n_heads=4,
                 n_layers=4, n_random=200_000, equiv_rel=PAPER_GAP_REL),
    # the paper's Transformer on Penn Treebank: the sizes are our guess at a small
    # word-level setting (the paper's exact hyper-parameters are not restated here)
    "paper": dict(dataset="ptb", seq_len=35, n_clients=10, rounds=100, local_epochs=1,
                  batch_size=20, lr=0.5, portion=0.5, noisy_fraction=0.1,
                  probe_windows=256, threads=4, d_model=200, n_heads=4, n_layers=6,
                  n_random=200_000, equiv_rel=PAPER_GAP_REL),
}


# ================================================================= part 1: exact proof
def _f(x) -> float:
    return float(x)


def exact_results(cfg) -> dict:
    """Every exact number of part 1 (and the score's properties), JSON-able."""
    from audit.algorithms import fedtlu as tlu

    iso = tlu.isotropic_test(L=3, eta=1, delta_frac=Fraction(1, 20), w_norm2=1)
    # Assumption (b) as an inequality: the subset really holds 0.99 A, the bound is still
    # written with delta = 0.05 A (the sign of (1 - eta*L/2) flips the substitution)
    slack = tlu.TwoBlock(c_S=3, c_R=3, eta=1, A=9, delta=Fraction(9, 20),
                         slack=Fraction(9, 20) - Fraction(9, 100))
    etaL = [Fraction(k, 4) for k in range(1, 17)]  # 0.25 .. 4
    ratios = [Fraction(1, 8), Fraction(1, 4), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3),
              Fraction(1), Fraction(3, 2), Fraction(2), Fraction(3), Fraction(4), Fraction(8)]
    deltas = [Fraction(1, 100), Fraction(1, 20), Fraction(1, 10), Fraction(1, 4),
              Fraction(1, 2)]
    rows = tlu.sweep(etaL, ratios, deltas, looseness=(1, 2))
    tight = [r for r in rows if r.L == max(r.c_S, r.c_R)]
    ce = [r for r in tight if r.counterexample]
    hi = [r for r in tight if r.eta * r.L > 2]
    lb_neg_hi = all(r.lb_full < 0 and r.lb_subset < 0 for r in hi)
    # the analytic region: a counterexample iff eta*L > 2 > eta*c_R (delta > 0)
    region_ok = all(r.counterexample == (r.eta * r.L > 2 and r.eta * r.c_R < 2)
                    for r in tight)
    loose_ce = [r for r in rows if r.L > max(r.c_S, r.c_R) and r.counterexample
                and r.d_full > 0 and r.d_subset > 0]
    simplest = min(ce, key=lambda r: (r.eta * r.L != 3, r.delta != Fraction(1, 20),
                                      -(min(r.c_R, r.c_S) / max(r.c_R, r.c_S)), r.c_R))
    # rescale to the reviewer's numbers (A = 9, eta = 1, L = 3): every D and bound scales by A
    simplest9 = tlu.TwoBlock(c_S=simplest.c_S, c_R=simplest.c_R, eta=1, A=9,
                             delta=simplest.delta * 9)

    # coupled (non-separable) quadratics, indefinite and positive semidefinite
    rand = {}
    for name, neg in (("indefinite", True), ("psd", False)):
        q = tlu.random_quadratics(np.random.default_rng([2412, 17692, int(neg)]),
                                  int(cfg["n_random"]), negative=neg)
        hiq = q["etaL"] > 2
        is_ce = (q["lb_subset"] > q["lb_full"]) & (q["d_full"] > q["d_subset"])
        tol = 1e-9 * (1 + np.abs(q["lb_full"]))
        rand[name] = {
            "n": int(q["etaL"].size), "n_high": int(hiq.sum()),
            "counterexample_frac_high": float(is_ce[hiq].mean()),
            "counterexample_frac_low": float(is_ce[~hiq].mean()),
            "both_increase_frac_high": float(((q["d_full"] < 0) & (q["d_subset"] < 0))[hiq].mean()),
            "lemma_violations": int(((q["d_full"] < q["lb_full"] - tol)
                                     | (q["d_subset"] < q["lb_subset"] - tol)).sum()),
        }

    # curves for the figures: the isotropic test and the simplest counterexample's shape
    grid = [Fraction(k, 10) for k in range(0, 41)]
    curves = {}
    for name, cS, cR in (("isotropic", 3, 3), ("counterexample", simplest9.c_S, simplest9.c_R)):
        pts = [tlu.TwoBlock(c_S=Fraction(cS) * g / 3, c_R=Fraction(cR) * g / 3, eta=1, A=9,
                            delta=Fraction(9, 20)) for g in grid]  # eta*L = g
        curves[name] = {k: [_f(getattr(p, k)) for p in pts]
                        for k in ("d_full", "d_subset", "lb_full", "lb_subset")}
        curves[name]["etaL"] = [_f(g) for g in grid]

    # the score's properties on random updates (fixed generator)
    rng = np.random.default_rng([2412, 1])
    inv_err, id_err = 0.0, 0.0
    for _ in range(200):
        n = int(rng.integers(2, 400))
        x = rng.standard_normal(n) * rng.uniform(0.01, 10) + rng.normal(0, 3)
        s = tlu.score(x)
        id_err = max(id_err, abs(s - tlu.score_identity(x)) / s)
        for c in (1e-3, 0.5, -2.0, 7.0, 1e3):
            inv_err = max(inv_err, abs(tlu.score(c * x) - s) / s)
    return {
        "iso": iso.row(), "slack": slack.row(),
        "sweep_n_tight": len(tight), "sweep_n_high": len(hi),
        "sweep_n_counterexamples": len(ce),
        "sweep_n_both_increase_high": sum(r.both_increase for r in hi),
        "sweep_lb_negative_high": lb_neg_hi, "sweep_region_ok": region_ok,
        "sweep_n_loose_both_decrease_ce": len(loose_ce),
        "loose_example": loose_ce[0].row() if loose_ce else None,
        "simplest": simplest9.row(), "simplest_weights": simplest9.weights(),
        "random": rand, "curves": curves,
        "score_invariance_max_rel_err": inv_err, "score_identity_max_rel_err": id_err,
        "score_constant": tlu.score(np.full(10, 0.3)), "score_zero": tlu.score(np.zeros(10)),
        "score_scaled_example": [tlu.score(c * np.array([1.0, 2.0, 3.0, -1.0]))
                                 for c in (1e-3, 1.0, 1e3)],
    }


# ============================================================== parts 2 and 3: FL runs
@functools.lru_cache(maxsize=4)
def _dataset(name: str, max_chars: int, seq_len: int, data_dir: str | None):
    from audit.fl import data as D

    if name == "stdlib-chars":
        return D.load_stdlib_chars(seq_len=seq_len, max_chars=max_chars)
    if name == "ptb":
        if data_dir is None:
            raise AuditError("the paper scale needs Penn Treebank: pass --data-dir (or set "
                             "AUDIT_DATA) to a folder holding ptb.train.txt, ptb.valid.txt "
                             "and ptb.test.txt")
        return D.load_ptb(data_dir, seq_len=seq_len)  # DatasetNotFound is an AuditError
    raise AuditError(f"unknown dataset {name!r}")


def fl_run(arm: str, seed: int, setting: str, ctx: RunContext) -> dict:
    import torch

    from audit.algorithms import fedtlu as tlu
    from audit.fl import data as D
    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_lm

    cfg = ctx.config
    torch.set_num_threads(int(cfg["threads"]))
    ds = _dataset(cfg["dataset"], int(cfg.get("max_chars", 0)), int(cfg["seq_len"]),
                  ctx.data_dir)
    # non-IID: each client reads its own contiguous stretch of the corpus
    fed = D.make_federated(ds, D.contiguous_partition(len(ds.y_train), cfg["n_clients"]),
                           0.0, 0.0, np.random.default_rng([seed, 20]))
    if setting == "noisy":
        rng = np.random.default_rng([seed, 21])
        k = max(1, round(cfg["noisy_fraction"] * cfg["n_clients"]))
        fed = tlu.shuffle_targets(fed, rng.choice(cfg["n_clients"], k, replace=False).tolist(),
                                  rng)
    probe = None
    if setting == "clean" and arm in ("fedtlu", "random"):
        idx = np.random.default_rng([seed, 22]).choice(len(ds.y_train),
                                                       min(cfg["probe_windows"], len(ds.y_train)),
                                                       replace=False)
        probe = (ds.x_train[np.sort(idx)], ds.y_train[np.sort(idx)])
    alg = tlu.TargetedUpdate(arm, cfg["portion"], probe=probe)
    fl = FLConfig(rounds=cfg["rounds"], local_epochs=cfg["local_epochs"],
                  batch_size=cfg["batch_size"], lr=cfg["lr"], seed=seed, device=ctx.device,
                  eval_every=1, eval_personal=False, layer_metrics=False,
                  fast=bool(cfg.get("fast", True)))
    vocab = ds.num_classes

    def make():
        return build_lm(vocab_size=vocab, max_len=cfg["seq_len"], d_model=cfg["d_model"],
                        n_heads=cfg["n_heads"], n_layers=cfg["n_layers"])

    h = run_federated(make, fed, alg, fl,
                      checkpoint=ctx.checkpoint(RunSpec(arm, seed, setting)),
                      on_round=ctx.on_round)
    ppl = [math.exp(x) for x in h.test_loss]
    out = {"ppl": ppl, "rounds": list(h.rounds), "ppl_final": ppl[-1],
           "ppl_prev": ppl[-2] if len(ppl) > 1 else float("nan"),
           "ppl_min": min(ppl), "seconds": h.seconds, "vocab": int(vocab),
           "n_test_tokens": int(fed.y_test.numel()),
           "selected": [s.selected for s in alg.log]}
    if arm == "random":
        # the planted, margin-sized handicap (assay sensitivity at the margin's scale):
        # Random's own final model abstains on a random fraction of the test tokens
        model = make().to(ctx.device)
        losses = tlu.token_losses(model, h.final_state, fed.x_test.to(ctx.device),
                                  fed.y_test.to(ctx.device))
        pl = tlu.planted_abstention(losses, vocab, float(cfg.get("equiv_rel", PAPER_GAP_REL)),
                                    np.random.default_rng([seed, 23]))
        # on the engine's own number: ppl_final * exp(planted - clean), the same test set
        out["ppl_final_planted"] = ppl[-1] * math.exp(pl["loss"] - float(losses.mean()))
        out["planted_fraction"], out["planted_tokens"] = pl["f"], pl["k"]
    for key in ("ratio_model", "ratio_model_oracle", "ratio_group", "ratio_group_random"):
        if probe is not None:
            out[key] = [a[key] for a in h.algo]
    return out


def run(spec: RunSpec, ctx: RunContext) -> dict:
    if spec == EXACT:
        return exact_results(ctx.config)
    return fl_run(spec.arm, spec.seed, spec.setting, ctx)


def specs(ctx: RunContext) -> list[RunSpec]:
    return [EXACT] + [RunSpec(a, s, st) for st in SETTINGS for a in ARMS for s in ctx.seeds]


# ============================================================================ the rules
def _decide_isotropic(ex):
    r = ex["iso"]
    if math.isclose(r["d_full"], r["lb_full"]) and math.isclose(r["d_subset"],
                                                                r["lb_subset"]):
        side = ("the subset step raises the loss less, as the bounds say"
                if r["d_full"] <= r["d_subset"] else "the full step wins, as the bounds say")
        return Outcome.INCONCLUSIVE, (
            f"this instance cannot separate bounds from changes: exact: LB_full = "
            f"{r['lb_full']:g} = D_full and LB_S = {r['lb_subset']:g} = D_S, because an "
            f"isotropic quadratic with curvature L makes the descent lemma an equality; "
            f"{side}, so it cannot show a bound ordering the changes wrongly, nor rightly "
            f"where they differ; it does not vote"), (
            "an instance where a bound differs from the change it bounds (the `ordering` "
            "search supplies them)")
    if r["d_full"] > r["d_subset"]:
        return Outcome.CONFIRMED, (f"exact: D_full = {r['d_full']:g} > D_S = "
                                   f"{r['d_subset']:g}, as the reviewer expected"), ""
    return Outcome.REFUTED, (
        f"AGAINST THE REVIEWER: exact: D_full = {r['d_full']:g} <= D_S = {r['d_subset']:g}; "
        f"both bounds equal the true changes (LB_full = {r['lb_full']:g}, LB_S = "
        f"{r['lb_subset']:g}) because an isotropic quadratic with curvature L makes the "
        f"descent lemma an equality, so this instance cannot separate bounds from changes; "
        f"the subset step raises the loss less and the paper's ordering holds here"), ""


RULE_ISO = Rule(
    "isotropic-test",
    "The reviewer's own test, computed exactly (fractions): f = 0.5*3*|w|^2 in two blocks, "
    "eta = 1, |w| = 1, the subset holding 0.95 A. CONFIRMED when D_full > D_S (what the "
    "reviewer said would falsify the paper's conclusion), REFUTED otherwise; INCONCLUSIVE "
    "(it does not vote) when both bounds equal the true changes, since such an instance "
    "cannot tell an ordering of bounds from an ordering of changes. A derivation (exact "
    "arithmetic): no seeds, no interval.",
    _decide_isotropic, kind="derivation")


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
        return Outcome.REFUTED, (
            f"no counterexample in the exact sweep ({ex['sweep_n_tight']} cells) nor in the "
            f"coupled random quadratics: on every instance searched the larger lower bound "
            f"ordered the true changes"), ""
    s = ex["simplest"]
    return Outcome.CONFIRMED, (
        f"exact: {ex['sweep_n_counterexamples']} of {ex['sweep_n_tight']} sweep cells "
        f"(tight L) are counterexamples ({n} instances in the whole search); simplest: "
        f"curvatures {s['c_S']:g} (subset) and {s['c_R']:g} (rest), eta = 1, L = {s['L']:g}, "
        f"A = 9, delta = {s['delta']:g}: LB_S = {s['lb_subset']:g} > LB_full = "
        f"{s['lb_full']:g}, yet D_full = {s['d_full']:g} > D_S = {s['d_subset']:g}"), ""


RULE_ORDER = Rule(
    "ordering",
    "Counterexample search, a derivation by exact computation: separable two-block "
    "quadratics in fractions (eta*L in 0.25..4 by 0.25, curvature ratio rest/subset in "
    "1/8 to 8 (11 values), delta/A in 0.01, 0.05, 0.1, 0.25 or 0.5, L the largest curvature) "
    "and "
    "{n_random} coupled random quadratics of each sign class. CONFIRMED when some instance "
    "has LB_S > LB_full and D_full > D_S (a larger lower bound that orders the true "
    "changes the wrong way: one such instance proves the reviewer's point); REFUTED when "
    "the search finds none.", _decide_ordering, kind="derivation",
    reachable=("CONFIRMED", "REFUTED"))


def _decide_vacuous(ex):
    iso = ex["iso"]
    if ex["sweep_lb_negative_high"] and iso["both_increase"]:
        return Outcome.CONFIRMED, (
            f"exact: every sweep cell with eta*L > 2 has both bounds negative "
            f"({ex['sweep_n_high']} cells), {ex['sweep_n_both_increase_high']} of them have "
            f"both steps raising the loss, and in the reviewer's own test both do "
            f"(D_full = {iso['d_full']:g}, D_S = {iso['d_subset']:g})"), ""
    return Outcome.REFUTED, ("a bound was non-negative for some eta*L > 2 cell, or no step "
                             "raised the loss in the reviewer's test"), ""


RULE_VACUOUS = Rule(
    "vacuous-regime",
    "A derivation (algebra, checked by exact computation): for eta*L > 2 the factor "
    "(1 - eta*L/2) is negative, so both printed bounds are negative whenever A > delta >= 0. "
    "CONFIRMED when every sweep cell with eta*L > 2 has both bounds negative and in the "
    "reviewer's own test both steps raise the loss; REFUTED otherwise (reachable only if "
    "the algebra or its implementation were wrong).",
    _decide_vacuous, kind="derivation", reachable=("CONFIRMED", "REFUTED"))


def _decide_assumption(ev):
    tw, orc = ev["three_way"], ev["oracle"]
    d = tw.difference
    txt = (f"mean ratio over seeds = {ONE_MINUS_DELTA - d.mean:.4g}, "
           f"{100 * (1 - tw.alpha):.4g}% interval of the rule [{ONE_MINUS_DELTA - d.high:.4g}, "
           f"{ONE_MINUS_DELTA - d.low:.4g}] (n = {d.n}, alpha = {tw.alpha:.4g})")
    side = (f" (the best choice of the same number of blocks would hold {orc.value:.4g}"
            + (", so the update portion alone already rules (b) out at this delta)"
               if orc.value < ONE_MINUS_DELTA else ")"))
    info = {"flip": tw.flip, "unit": "share of ||g||^2"}
    out = on_reviewer(tw.outcome, holds_when="SUPPORTED")
    if out == Outcome.CONFIRMED:
        return out, f"{txt} lies below 0.95: Assumption (b) fails{side}", "", info
    if out == Outcome.REFUTED:
        return out, f"{txt} lies above 0.95: Assumption (b) holds{side}", "", info
    return out, f"{txt} contains 0.95{side}", "more seeds or rounds", info


RULE_ASSUMPTION = Rule(
    "assumption-b",
    "Per seed, the mean over rounds of ||g_S||^2 / ||g||^2 (gradient of the loss on a fixed "
    "probe of training windows at the pre-round global model; S = every parameter FedTLU "
    "updates), clean setting, FedTLU arm. The three-way rule (stats.three_way: Hall's "
    "interval with a skewness allowance, two-sided {level}%, agreeing with an exact sign "
    "test at alpha/2 a side; alpha = {alpha} = 0.05 x "
    "{alpha_fraction} (this look's share) / {n_tests} (Bonferroni over this test and the "
    "two settings of `noise`), n = {n}) on 0.95 minus the ratio: CONFIRMED when the "
    "interval of the ratio lies below 1 - delta = 0.95 (the reviewer's delta = 0.05 A), "
    "REFUTED when it lies above, INCONCLUSIVE otherwise (no equivalence branch). "
    "Assumption (b) is a hypothesis of the paper's proof, not an explanation of its "
    "empirical gain, so the premise (FedTLU beats Random) does not gate this part.",
    _decide_assumption)


def _decisive(res: dict, outcome: str):
    """The three-way that decides the noise part: the SUPPORTED setting (smallest flip)
    when FedTLU wins somewhere, else the most fragile setting."""
    pool = [tw for tw in res.values() if tw.outcome == outcome] or list(res.values())
    return min(pool, key=lambda tw: tw.flip if tw.flip is not None else math.inf)


def _decide_noise(ev):
    res = ev["three_way"]  # setting -> ThreeWay on Random - FedTLU (positive: FedTLU wins)
    reasons = "; ".join(f"{st}: {tw.reason}" for st, tw in res.items())
    info = {"resolution": ev["resolution"], "unit": "perplexity"}
    if any(tw.outcome == "SUPPORTED" for tw in res.values()):
        tw = _decisive(res, "SUPPORTED")
        return (on_reviewer("SUPPORTED", holds_when="FALSIFIED"),
                "FedTLU beats Random beyond noise in a setting. " + reasons, "",
                {**info, "flip": tw.flip})
    if all(tw.outcome == "FALSIFIED" for tw in res.values()):
        tw = _decisive(res, "FALSIFIED")
        return (on_reviewer("FALSIFIED", holds_when="FALSIFIED"),
                "In every setting FedTLU's gain over Random is below the paper's own gap "
                "(with sensitivity shown), or FedTLU is worse. " + reasons, "",
                {**info, "flip": tw.flip})
    need = ", ".join(f"{st}: {tw.seeds_needed} seeds" for st, tw in res.items()
                     if tw.seeds_needed)
    tw = _decisive(res, "INCONCLUSIVE")
    return (Outcome.INCONCLUSIVE, reasons,
            f"seeds to detect the observed gaps: {need or 'n/a'}", {**info, "flip": tw.flip})


RULE_NOISE = Rule(
    "noise",
    "The reviewer's claim 3. Final global test perplexity, paired over seeds (same init, "
    "data and noisy clients), per setting (clean, noisy), n = {n}: stats.three_way on "
    "'FedTLU beats Random' (A = ppl_Random, B = ppl_FedTLU, margin 0; Hall's skewness-"
    "corrected t, two-sided {level}% interval, alpha = {alpha} = 0.05 x {alpha_fraction} "
    "(this look's share) / {n_tests} (Bonferroni: this part's two settings and "
    "assumption-b)); equivalence margin d = {equiv_pct}% of Random's mean final perplexity "
    "(source: the size of the paper's own FedTLU-Random gap, Table III, 1.768 vs 1.764, the "
    "larger of the two it quotes; so 'within noise' means 'smaller than a gap the paper "
    "reports'). Equivalence counts only with "
    "assay sensitivity at the margin's scale: Random's own final models with a planted "
    "handicap (abstaining on a random fraction of test tokens, sized so the expected "
    "perplexity rise is that same {equiv_pct}%) must be detected as worse than FedTLU by "
    "the same three-way rule (the same seeds, metric, alpha). The part is REFUTED when "
    "FedTLU beats Random in some setting, CONFIRMED when every setting shows Random not "
    "beaten (equivalent within d with sensitivity, or FedTLU worse), INCONCLUSIVE "
    "otherwise. Not gated: this part is the premise's own comparison, read the other way.",
    _decide_noise)

#: The paper reports the mean of this many runs, without their spread.
PAPER_RUNS = 3
#: The paper's printed global perplexities (as the paper's; used only by `printed-tables`)
PRINTED = (("Table III (Transformer, FedAvg, noisy clients)", 1.764, 1.768),
           ("Table I (portion 0.75)", 2.108, 2.107))


def _decide_power(ev):
    """ev: rows of (setting, sd_rel, sd_low, sd_high, mde3_low, mde3_high, need)."""
    g = ev["gap"]
    txt = "; ".join(
        f"{st}: seed SD of Random - FedTLU {100 * sd:.3g}% of the perplexity "
        f"({100 * (1 - ev['alpha']):.4g}% interval [{100 * lo:.3g}, {100 * hi:.3g}]%), "
        f"so {ev['runs']} runs resolve a gap of {100 * m_lo:.3g}-{100 * m_hi:.3g}%; "
        f"{need} seeds would resolve the paper's {100 * g:.3g}%"
        for st, sd, lo, hi, m_lo, m_hi, need in ev["rows"])
    if all(g < r[4] for r in ev["rows"]):
        return Outcome.CONFIRMED, (
            f"{txt}: even at the lowest plausible seed noise, {ev['runs']} runs cannot tell "
            f"a gap of the paper's size ({100 * g:.3g}%) from noise"), ""
    if all(g > r[5] for r in ev["rows"]):
        return Outcome.REFUTED, (
            f"{txt}: even at the highest plausible seed noise, {ev['runs']} runs resolve "
            f"a gap of the paper's size"), ""
    return Outcome.INCONCLUSIVE, txt, "more seeds, to narrow the interval of the seed SD"


RULE_POWER = Rule(
    "three-runs",
    "The reviewer's point about the paper's {runs} runs, decided as a question of power: "
    "per setting, the per-seed relative difference (Random - FedTLU) / Random's mean "
    "final perplexity, its SD over our n = {n} seeds with a chi-square {level}% interval "
    "(alpha = {alpha} = 0.05 x this look's share), and the smallest gap {runs} paired runs "
    "detect (two-sided paired t, alpha 0.05, power 0.8: {factor} x SD). CONFIRMED when "
    "the paper's own gap ({gap_pct}% of the perplexity, Table III) lies below that "
    "smallest gap in every setting even at the interval's LOWER end of the SD (three runs "
    "cannot tell such a gap from noise); REFUTED when it lies above it in every setting "
    "even at the UPPER end; INCONCLUSIVE otherwise. Our model's seed noise stands in for "
    "the paper's, which it does not report: the question is whether a gap of that size is "
    "resolvable by three runs at noise of this order.",
    _decide_power)


def _decide_printed(ev):
    rows = ev["rows"]
    txt = "; ".join(f"{name}: Random {r:g}, FedTLU {f:g}" for name, r, f in rows)
    worse = [name for name, r, f in rows if r < f]
    if worse:
        return Outcome.CONFIRMED, (f"the paper's own numbers: {txt}; Random has the lower "
                                   f"perplexity in {', '.join(worse)}"), ""
    return Outcome.REFUTED, f"the paper's own numbers: {txt}; FedTLU is lower in each", ""


RULE_PRINTED = Rule(
    "printed-tables",
    "Arithmetic on the paper's printed global perplexities (transcribed as the paper's, "
    "not computed here): CONFIRMED when Random's printed perplexity is below FedTLU's in "
    "some table (so FedTLU does not outperform it consistently, as the text says); "
    "REFUTED when FedTLU's is the lower in every transcribed table. Exact: no seeds.",
    _decide_printed, kind="derivation", reachable=("CONFIRMED", "REFUTED"))


def _decide_readings(ev):
    rows = ev["rows"]  # (setting, final, per-seed minimum, minimum of the mean curve)
    txt = "; ".join(f"{st}: Random - FedTLU final {f:+.4g}, per-seed minimum averaged "
                    f"{m:+.4g}, minimum of the mean curves {c:+.4g}" for st, f, m, c in rows)
    flips = [st for st, f, m, c in rows if len({np.sign(f), np.sign(m), np.sign(c)}) > 1]
    return Outcome.INCONCLUSIVE, (
        f"measurement: {txt}; " + (f"the sign of the comparison depends on the reading in "
                                   f"{', '.join(flips)}" if flips else
                                   "the three readings agree in sign in every setting")), ""


RULE_READINGS = Rule(
    "minimum-readings",
    "A measurement (no verdict): the paper's 'minimum perplexity' read three ways, each "
    "as Random - FedTLU averaged over the same seeds: the final round, the minimum over "
    "rounds of each seed's curve then averaged, and the minimum over rounds of the "
    "seed-averaged curve. It shows whether the unstated reading can change the "
    "comparison's sign; only the authors can say which one they used.",
    _decide_readings, kind="measurement", reachable=("INCONCLUSIVE",))


QUESTIONS = (
    Question("bounds-do-not-order-changes",
             "Does a larger lower bound (Sec. IV.C) fail to give a larger true loss "
             "decrease, with both bounds negative once eta*L > 2?",
             ("skeptic_critique.load_bearing_attack", "referee_report.major_comments[0]"),
             ("ordering", "vacuous-regime"), kind="proof"),
    Question("reviewer-quadratic",
             "On the reviewer's own two-block quadratic (eta*L = 3), does the full step "
             "lower the loss more than the subset step?",
             ("skeptic_critique.concrete_test",), ("isotropic-test",), kind="proof",
             decides="an instance where a bound differs from its change (see "
                     "bounds-do-not-order-changes)"),
    Question("score-meets-assumption-b",
             "Do the blocks the score picks fail to hold 1 - delta of the squared gradient "
             "norm, i.e. is Assumption (b) unsupported by the score?",
             ("falsifier", "referee_report.major_comments[1]"), ("assumption-b",)),
    Question("gain-within-noise",
             "On our runs, is FedTLU's gain over Random no larger than the gap the paper "
             "itself reports?", ("referee_report.major_comments[3]",), ("noise",)),
    Question("three-runs-resolve",
             "Can three runs without a spread tell a gap of the paper's size from seed "
             "noise? (CONFIRMED: they cannot)", ("referee_report.major_comments[3]",),
             ("three-runs",)),
    Question("minimum-reading",
             "Does the unstated reading of the minimum perplexity (per seed then averaged, "
             "or of the mean curve) change the comparison?",
             ("referee_report.minor_comments[2]",), ("minimum-readings",),
             kind="measurement"),
    Question("consistently-better-wording",
             "Do the paper's own printed tables contradict 'consistently outperforms'?",
             ("referee_report.major_comments[2]",), ("printed-tables",), kind="proof"),
)

COMBINATION = questions.combination(QUESTIONS)


PREMISE_EFFECT = "FedTLU beats Random block selection (final global test perplexity)"


def premise_of(res: dict) -> Premise:
    """The paper's effect, decided by the rule fixed here: the noise part's three-ways
    (Random - FedTLU, margin 0) read for the paper: reproduced when FedTLU beats Random in
    some setting (SUPPORTED), not reproduced when every setting is FALSIFIED (FedTLU not
    better beyond the paper's own gap, or worse), undecided otherwise."""
    outs = {st: tw.outcome for st, tw in res.items()}
    if any(o == "SUPPORTED" for o in outs.values()):
        st = next(k for k, o in outs.items() if o == "SUPPORTED")
        status = "reproduced"
    elif all(o == "FALSIFIED" for o in outs.values()):
        st, status = "noisy", "not reproduced"
    else:
        st, status = "noisy", "undecided"
    tw = res[st]
    est = Estimate.of(f"premise_ppl_random_minus_fedtlu_{st}", tw.difference, "perplexity",
                      f"{st} (Table III's setting is noisy): Random - FedTLU, positive = "
                      f"FedTLU better, {tw.difference.method} interval at the rule's alpha")
    reason = "; ".join(f"{k}: {o}" for k, o in outs.items())
    return Premise(PREMISE_EFFECT, status,
                   f"three-way per setting (SUPPORTED = FedTLU better): {reason}", est)


# ============================================================================ analysis
def analyse(results, ctx: RunContext) -> Analysis:
    ex = results[EXACT]
    iso, sl, simp = ex["iso"], ex["slack"], ex["simplest"]
    E = []
    for k, name in (("d_full", "isotropic_delta_full"), ("d_subset", "isotropic_delta_subset"),
                    ("lb_full", "isotropic_lb_full"), ("lb_subset", "isotropic_lb_subset")):
        E.append(Estimate(name, iso[k], description=f"reviewer's isotropic test: {k} (exact)"))
    E += [
        Estimate("counterexample_delta_full", simp["d_full"],
                 description="simplest counterexample: true change, full step"),
        Estimate("counterexample_delta_subset", simp["d_subset"],
                 description="simplest counterexample: true change, subset step"),
        Estimate("counterexample_lb_full", simp["lb_full"]),
        Estimate("counterexample_lb_subset", simp["lb_subset"]),
        Estimate("sweep_counterexamples", ex["sweep_n_counterexamples"], unit="cells",
                 description=f"of {ex['sweep_n_tight']} tight-L sweep cells"),
        Estimate("sweep_both_increase_high", ex["sweep_n_both_increase_high"], unit="cells",
                 description=f"of {ex['sweep_n_high']} cells with eta*L > 2"),
        Estimate("slack_subset_bound_gap", sl["d_subset"] - sl["lb_subset"],
                 description="D_S - LB_S when the subset holds 0.99 A but the bound uses "
                             "delta = 0.05 A (negative: the printed bound fails)"),
        Estimate("random_counterexample_frac_high",
                 ex["random"]["indefinite"]["counterexample_frac_high"],
                 description="coupled indefinite quadratics with eta*L > 2"),
        Estimate("random_lemma_violations",
                 ex["random"]["indefinite"]["lemma_violations"]
                 + ex["random"]["psd"]["lemma_violations"],
                 description="implementation check: true change below its bound (must be 0)"),
        Estimate("score_scale_invariance_max_rel_err", ex["score_invariance_max_rel_err"]),
        Estimate("score_identity_max_rel_err", ex["score_identity_max_rel_err"]),
    ]
    parts = [RULE_ISO(ex), RULE_ORDER(ex, params={"n_random": int(ctx.config["n_random"])}),
             RULE_VACUOUS(ex)]

    seeds = ctx.seeds
    n = len(seeds)
    tables, figures = [], []
    ppl = {st: results_table(results, "ppl_final", ARMS, seeds, st) for st in SETTINGS}
    frac = float(getattr(ctx, "alpha_fraction", 1.0))
    alpha = ALPHA * frac / N_TESTS  # every decision below: one Bonferroni share
    equiv_rel = float(ctx.config.get("equiv_rel", PAPER_GAP_REL))
    common = {"alpha": f"{alpha:.4g}", "alpha_fraction": f"{frac:.4g}", "n_tests": N_TESTS,
              "level": f"{100 * (1 - alpha):.4g}", "n": n}

    # assumption (b): per-seed mean ratio, FedTLU, clean
    rat = {a: np.array([np.mean(results[RunSpec(a, s, "clean")]["ratio_model"]) for s in seeds])
           for a in ("fedtlu", "random")}
    grp = np.array([np.mean(results[RunSpec("fedtlu", s, "clean")]["ratio_group"]) for s in seeds])
    grp_rand = np.array([np.mean(results[RunSpec("fedtlu", s, "clean")]["ratio_group_random"])
                         for s in seeds])
    # 0.95 - ratio > 0 is the reviewer's claim; no equivalence branch (sensitive=False)
    tw_ab = stats.three_way(np.full(n, ONE_MINUS_DELTA), rat["fedtlu"], margin=0.0,
                            equivalence_margin=1e-9, alpha=alpha, sensitive=False)
    mi = stats.mean_interval(rat["fedtlu"], level=1 - alpha)
    ab_est = Estimate.of("assumption_b_ratio_fedtlu", mi, "share of ||g||^2",
                         "mean over rounds of ||g_S||^2/||g||^2, FedTLU, clean (t interval "
                         "at the rule's alpha; the decision reads Hall's interval)")
    E.append(ab_est)
    orc = np.array([np.mean(results[RunSpec("fedtlu", s, "clean")]["ratio_model_oracle"])
                    for s in seeds])
    oracle_est = Estimate.of("assumption_b_ratio_oracle", stats.mean_interval(orc),
                             "share of ||g||^2",
                             "the largest share any choice of the same number of blocks "
                             "holds (top blocks by gradient mass), at FedTLU's models")
    E.append(oracle_est)
    E.append(Estimate.of("assumption_b_ratio_random", stats.mean_interval(rat["random"]),
                         "share of ||g||^2", "the same for the Random arm"))
    link = stats.paired_difference(grp, grp_rand, method="t")
    E.append(Estimate.of("score_link_gain", link, "share of group ||g||^2",
                         "measurement, no verdict: within the partly-updated block group, "
                         "share of gradient mass in the blocks FedTLU picks minus the mean "
                         "share of a same-size random pick"))

    # noise: three-way per setting; sensitivity = a planted margin-sized handicap detected
    tw_all, sens_rows, resolution = {}, [], []
    for st in SETTINGS:
        margin = equiv_rel * float(np.mean(ppl[st]["random"]))
        planted = np.array([results[RunSpec("random", s, st)].get("ppl_final_planted", math.nan)
                            for s in seeds])
        if np.all(np.isfinite(planted)):
            with stats.without_flip():
                sens_tw = stats.three_way(planted, ppl[st]["fedtlu"], margin=0.0,
                                          equivalence_margin=margin, alpha=alpha)
            sensitive = sens_tw.outcome == "SUPPORTED"
            pe = stats.paired_difference(planted, ppl[st]["random"], method="t")
            sens_rows.append((st, "planted (margin-sized)", float(pe.mean), sens_tw.difference.low,
                              sens_tw.difference.high, sensitive))
        else:  # results cached before the planted arm existed: no sensitivity shown
            sensitive = False
            sens_rows.append((st, "planted (margin-sized)", math.nan, math.nan, math.nan, False))
        gross = stats.paired_difference(ppl[st]["none"], ppl[st]["random"], method="t")
        sens_rows.append((st, "control `none` (gross)", gross.mean, gross.low, gross.high,
                          bool(gross.low > 0)))
        tw = stats.three_way(ppl[st]["random"], ppl[st]["fedtlu"], margin=0.0,
                             equivalence_margin=margin, alpha=alpha, sensitive=sensitive)
        tw_all[st] = tw
        d = tw.difference
        ntok = [results[RunSpec("random", s, st)].get("n_test_tokens") for s in seeds]
        if all(ntok):  # one test token's loss moved by one nat: ppl / N_test
            resolution.append(float(np.mean(ppl[st]["random"])) / float(np.mean(ntok)))
        E.append(Estimate.of(f"ppl_random_minus_fedtlu_{st}", d, "perplexity",
                             f"{st}: final test perplexity, Random - FedTLU (positive: "
                             f"FedTLU better), the rule's interval at its alpha"))
        E.append(Estimate(f"equivalence_margin_{st}", margin, unit="perplexity",
                          description=f"d = {100 * equiv_rel:.3g}% of Random's mean final "
                                      f"perplexity (the paper's Table III gap)"))
        for arm in ("full", "last"):
            pd = stats.paired_difference(ppl[st]["random"], ppl[st][arm], method="t")
            E.append(Estimate.of(f"ppl_random_minus_{arm}_{st}", pd, "perplexity",
                                 f"{st}: Random - {arm} (positive: {arm} better)"))
        # the other reading of the paper's metric (minimum over rounds): reported, no verdict
        pmin = {a: np.array([results[RunSpec(a, s, st)]["ppl_min"] for s in seeds])
                for a in ("random", "fedtlu")}
        E.append(Estimate.of(f"ppl_min_random_minus_fedtlu_{st}",
                             stats.paired_difference(pmin["random"], pmin["fedtlu"], method="t"),
                             "perplexity", f"{st}: the same on the minimum over rounds (the "
                                           f"paper's reading, unclear in the record); 95% t, "
                                           f"reported beside the verdict"))
        # ONE minimum detectable effect: the three-way rule's own (simulated), at its
        # alpha, power 0.8, the observed SD; NaN where the rule cannot decide at this n
        per_sd = stats.rule_mde(d.n, alpha=alpha)
        mde = math.nan if per_sd is None else per_sd * d.sd
        if per_sd is not None:
            E.append(Estimate(f"mde_{st}", mde, unit="perplexity",
                              description=f"minimum Random - FedTLU gap the three-way "
                                          f"rule decides at n = {d.n}, alpha {alpha:.4g}, "
                                          f"power 0.8 (simulated from the rule), observed "
                                          f"SD {d.sd:.3g}; the paper's gap here is "
                                          f"{margin:.3g}"))
        need = (stats.rule_seeds_needed(margin / d.sd, alpha=alpha)
                if d.sd > 0 and margin > 0 else None)
        if need is not None:
            E.append(Estimate(f"seeds_needed_paper_gap_{st}", need, unit="seeds",
                              description=f"pairs the three-way rule needs to decide a gap "
                                          f"of the paper's size ({margin:.3g} perplexity) "
                                          f"with the observed SD, alpha {alpha:.4g}, power "
                                          f"0.8 (simulated from the rule)"))
    # the reviewer's point about three runs, as a question of power (rows per setting)
    from scipy.stats import chi2

    power_rows = []
    alpha_p = ALPHA * frac
    factor = stats.minimum_detectable_effect(PAPER_RUNS, alpha=ALPHA)
    for st in SETTINGS:
        rel = (ppl[st]["random"] - ppl[st]["fedtlu"]) / float(np.mean(ppl[st]["random"]))
        sd = float(np.std(rel, ddof=1)) if n >= 2 else math.nan
        lo = sd * math.sqrt((n - 1) / chi2.ppf(1 - alpha_p / 2, n - 1))
        hi = sd * math.sqrt((n - 1) / chi2.ppf(alpha_p / 2, n - 1))
        try:
            need = stats.seeds_needed(equiv_rel, sd, alpha=ALPHA) if sd > 0 else "n/a"
        except ValueError:
            need = 2
        power_rows.append((st, sd, lo, hi, factor * lo, factor * hi, need))
        E.append(Estimate(f"mde_{PAPER_RUNS}runs_rel_{st}", factor * sd, factor * lo,
                          factor * hi, 1 - alpha_p, n, "chi2 (SD)", "fraction",
                          f"{st}: smallest relative Random - FedTLU gap {PAPER_RUNS} paired "
                          f"runs detect (alpha 0.05, power 0.8), from our seed SD"))
        if isinstance(need, int):
            E.append(Estimate(f"seeds_for_paper_gap_rel_{st}", need, unit="seeds",
                              description=f"{st}: paired runs that would detect the paper's "
                                          f"{100 * equiv_rel:.3g}% gap at our seed SD "
                                          f"(alpha 0.05, power 0.8)"))
    premise = premise_of(tw_all)
    noise_params = {**common, "equiv_pct": f"{100 * equiv_rel:.3g}"}
    # a hypothesis of the paper's proof: not gated by the premise (it explains no gain)
    parts.append(RULE_ASSUMPTION({"three_way": tw_ab, "oracle": oracle_est}, params=common))
    parts.append(RULE_NOISE({"three_way": tw_all,
                             "resolution": min(resolution) if resolution else None},
                            params=noise_params))
    parts.append(RULE_POWER({"rows": power_rows, "gap": equiv_rel, "runs": PAPER_RUNS,
                             "alpha": alpha_p},
                            params={"runs": PAPER_RUNS, "n": n, "alpha": f"{alpha_p:.4g}",
                                    "level": f"{100 * (1 - alpha_p):.4g}",
                                    "factor": f"{factor:.3g}",
                                    "gap_pct": f"{100 * equiv_rel:.3g}"}))
    parts.append(RULE_PRINTED({"rows": PRINTED}))
    read_rows = []
    for st in SETTINGS:
        curves = {a: np.array([results[RunSpec(a, s, st)]["ppl"] for s in seeds])
                  for a in ("random", "fedtlu")}
        read_rows.append((st, float(np.mean(curves["random"][:, -1] - curves["fedtlu"][:, -1])),
                          float(np.mean(curves["random"].min(axis=1)
                                        - curves["fedtlu"].min(axis=1))),
                          float(curves["random"].mean(axis=0).min()
                                - curves["fedtlu"].mean(axis=0).min())))
    parts.append(RULE_READINGS({"rows": read_rows}))

    # ------------------------------------------------------------------------ tables
    tables.append(Table(
        "The reviewer's isotropic test, exact (L = 3, eta = 1, |w| = 1, A = 9, delta = 0.45)",
        ("quantity", "full step", "subset step"),
        (("true change D = f(w) - f(w')", iso["d_full"], iso["d_subset"]),
         ("lower bound eta*(A - delta)*(1 - eta*L/2)", iso["lb_full"], iso["lb_subset"]),
         ("bound = true change?", iso["d_full"] == iso["lb_full"],
          iso["d_subset"] == iso["lb_subset"])),
        "Positive D is a decrease of the loss. Both steps raise the loss; the subset step "
        "raises it less, exactly as the bounds say, because here the bounds are the changes."))
    tables.append(Table(
        "Counterexamples (exact; A = 9, eta = 1)",
        ("case", "c_S", "c_R", "L", "delta", "D_full", "D_S", "LB_full", "LB_S"),
        (("simplest (tight L)", simp["c_S"], simp["c_R"], simp["L"], simp["delta"],
          simp["d_full"], simp["d_subset"], simp["lb_full"], simp["lb_subset"]),
         ("isotropic (reviewer)", iso["c_S"], iso["c_R"], iso["L"], iso["delta"],
          iso["d_full"], iso["d_subset"], iso["lb_full"], iso["lb_subset"]),
         ("strict (b): subset holds 0.99 A", sl["c_S"], sl["c_R"], sl["L"], sl["delta"],
          sl["d_full"], sl["d_subset"], sl["lb_full"], sl["lb_subset"])),
        "c_S, c_R: curvature of the updated block and of the rest. A counterexample needs "
        "eta*L > 2 > eta*c_R: the rest block must be flat enough that its own step still "
        "lowers the loss. Last row: with Assumption (b) strict, the printed subset bound "
        "is violated (D_S below LB_S) whenever eta*L > 2."))
    rq = ex["random"]
    tables.append(Table(
        "Search summary",
        ("search", "cells / samples", "eta*L > 2", "counterexamples", "both steps raise loss",
         "bound violations"),
        (("separable sweep, tight L", ex["sweep_n_tight"], ex["sweep_n_high"],
          ex["sweep_n_counterexamples"], ex["sweep_n_both_increase_high"], 0),
         ("coupled, indefinite H", rq["indefinite"]["n"], rq["indefinite"]["n_high"],
          f"{rq['indefinite']['counterexample_frac_high']:.3f} of eta*L>2 "
          f"({rq['indefinite']['counterexample_frac_low']:.3f} below)",
          f"{rq['indefinite']['both_increase_frac_high']:.3f} of eta*L>2",
          rq["indefinite"]["lemma_violations"]),
         ("coupled, PSD H", rq["psd"]["n"], rq["psd"]["n_high"],
          f"{rq['psd']['counterexample_frac_high']:.3f} of eta*L>2",
          f"{rq['psd']['both_increase_frac_high']:.3f} of eta*L>2",
          rq["psd"]["lemma_violations"])),
        f"Separable sweep: the counterexample region is exactly eta*L > 2 > eta*c_R "
        f"(checked on every cell: {ex['sweep_region_ok']}). With a loose but valid L "
        f"(twice the largest curvature), {ex['sweep_n_loose_both_decrease_ce']} cells are "
        f"counterexamples in which both steps lower the loss. Coupled: random "
        f"H = Q diag(lam) Q^T, |lam| <= 1 = L, 2+2 coordinates, delta = A - ||g_S||^2."))
    tables.append(Table(
        "The score's properties (population std)",
        ("property", "value"),
        (("max relative change under dW -> c*dW, c in {1e-3, 0.5, -2, 7, 1e3}, 200 draws",
          ex["score_invariance_max_rel_err"]),
         ("max relative gap to sqrt(1 + mean^2/var)", ex["score_identity_max_rel_err"]),
         ("score of [1,2,3,-1] scaled by 1e-3, 1, 1e3", str(ex["score_scaled_example"])),
         ("constant non-zero update (std = 0)", str(ex["score_constant"])),
         ("all-zero update", ex["score_zero"])),
        "The score does not reward layers that moved far: scaling an update leaves it "
        "unchanged. std = 0 is handled as +inf (constant non-zero) and 0 (no movement)."))
    rows = []
    for st in SETTINGS:
        for a in ARMS:
            mi_ = stats.mean_interval(ppl[st][a])
            rows.append((st, a, mi_.mean, mi_.low, mi_.high,
                         " ".join(f"{v:.3f}" for v in ppl[st][a])))
    tables.append(Table("Final global test perplexity (95% t-interval over seeds)",
                        ("setting", "arm", "mean", "low", "high", "per seed"), tuple(rows),
                        f"Seeds {list(seeds)}; update portion {ctx.config['portion']} of the "
                        f"repeated Transformer blocks."))
    tables.append(Table(
        "Decisions (one Bonferroni family, alpha 0.05 x this look's share / 3)",
        ("test", "n", "alpha", "interval (method)", "outcome", "flip distance"),
        (("assumption-b: 0.95 - ratio", n, alpha,
          f"[{tw_ab.difference.low:.4g}, {tw_ab.difference.high:.4g}] ({tw_ab.difference.method})", tw_ab.outcome,
          tw_ab.flip),)
        + tuple((f"noise {st}: Random - FedTLU", n, alpha,
                 f"[{tw.difference.low:.4g}, {tw.difference.high:.4g}] ({tw.difference.method})", tw.outcome,
                 tw.flip) for st, tw in tw_all.items()),
        f"Every decision reads stats.three_way: Hall's interval widened by a skewness "
        f"allowance must agree with an exact sign test at alpha/2 a side (no decision "
        f"below 6 pairs). Flip distance: the smallest change of one seed's "
        f"paired difference that changes the outcome (perplexity, or share of ||g||^2)."))
    tables.append(Table(
        "Assay sensitivity, final perplexity: the planted handicap (Random's own models "
        "abstaining on a random share of test tokens, expected rise = the margin) and the "
        "gross control `none` (repeated blocks frozen)",
        ("setting", "handicap", "mean rise over Random", "low", "high", "detected"),
        tuple(sens_rows),
        "Planted: 'detected' means the three-way rule at the rule's alpha finds the handicapped "
        "Random worse than FedTLU (low/high: that interval of planted - FedTLU); the mean rise "
        "is planted - Random. Gross: paired t interval of none - Random (95%). Only the "
        "planted row licenses an equivalence."))

    # ----------------------------------------------------------------------- figures
    c = ex["curves"]["isotropic"]
    figures.append(Figure(
        "proof_isotropic", "Reviewer's isotropic test: the bounds are the true changes",
        "eta*L", "loss decrease D (negative: increase)",
        tuple({"label": lab, "x": c["etaL"], "y": c[k]} for k, lab in
              (("d_full", "D_full = LB_full"), ("d_subset", "D_S = LB_S"))),
        caption="A = 9, delta = 0.05 A; both steps raise the loss once eta*L > 2"))
    ce_ = ex["curves"]["counterexample"]
    figures.append(Figure(
        "proof_ordering", "Full minus subset: what the bounds say vs what happens",
        "eta*L", "full minus subset (+: full step better)",
        ({"label": "bounds LB_full - LB_S (any curvatures)", "x": c["etaL"],
          "y": [a - b for a, b in zip(c["lb_full"], c["lb_subset"])]},
         {"label": "true D_full - D_S, isotropic", "x": c["etaL"],
          "y": [a - b for a, b in zip(c["d_full"], c["d_subset"])]},
         {"label": f"true D_full - D_S, rest curvature {simp['c_R'] / simp['c_S']:g} x subset's",
          "x": ce_["etaL"], "y": [a - b for a, b in zip(ce_["d_full"], ce_["d_subset"])]}),
        caption="A = 9, delta = 0.05 A. Where the bound difference is negative but the true "
                "difference is positive, the larger subset bound orders the steps wrongly."))
    for st in SETTINGS:
        ser = []
        for a in ARMS:
            m, lo, hi_ = mean_band([results[RunSpec(a, s, st)]["ppl"] for s in seeds])
            ser.append({"label": a, "x": results[RunSpec(a, seeds[0], st)]["rounds"],
                        "y": m, "low": lo, "high": hi_})
        figures.append(Figure(f"ppl_{st}", f"Global test perplexity, {st}", "round",
                              "perplexity", tuple(ser), logy=True,
                              caption="mean over seeds, 95% t band"))
    ser = []
    for a in ("fedtlu", "random"):
        m, lo, hi_ = mean_band([results[RunSpec(a, s, "clean")]["ratio_model"] for s in seeds])
        ser.append({"label": a, "x": list(range(1, len(m) + 1)), "y": m, "low": lo, "high": hi_})
    m, lo, hi_ = mean_band([results[RunSpec("fedtlu", s, "clean")]["ratio_model_oracle"]
                             for s in seeds])
    ser.append({"label": "best same-size choice", "x": list(range(1, len(m) + 1)), "y": m,
                "low": lo, "high": hi_})
    ser.append({"label": "1 - delta = 0.95", "x": [1, len(m)], "y": [0.95, 0.95]})
    figures.append(Figure("ratio_rounds", "Assumption (b): ||g_S||^2 / ||g||^2 per round",
                          "round", "share of squared gradient norm", tuple(ser)))
    figures.append(Figure(
        "ratio_hist", "Assumption (b) ratio, all rounds and seeds (clean)", "ratio", "count",
        tuple({"label": a, "y": [v for s in seeds
                                 for v in results[RunSpec(a, s, "clean")]["ratio_model"]]}
              for a in ("fedtlu", "random")), kind="hist"))

    notes = (
        "What the reviewer's own test shows. On f = 0.5*L*|w|^2 every direction has "
        "curvature exactly L, so the descent lemma holds with equality and the two lower "
        "bounds ARE the true one-step changes: D_full = LB_full = -4.5 and D_S = LB_S = "
        "-4.275. The full step does not reduce the loss more; the subset step raises the "
        "loss less, just as the bounds predict. The test therefore cannot exhibit the "
        "fallacy it was meant to exhibit; what it does show is that at eta*L = 3 both steps "
        "raise the loss (the full step quadruples f), i.e. the paper's 'subset wins' regime "
        "is one where the comparison is between two ways of diverging.",
        "Where the fallacy is real. Give the block outside the subset a curvature c_R with "
        "eta*c_R < 2 while the smoothness constant satisfies eta*L > 2: that block's own step "
        "lowers the loss, so the full step (which also takes it) beats the subset step, "
        "while the subset's bound is the larger. In the separable case this is exactly the "
        "counterexample region (verified on every sweep cell). With a loose but valid L the "
        "same happens while both steps lower the loss. On random coupled quadratics with "
        "eta*L > 2 most draws are counterexamples.",
        "A second slip in the derivation. Assumption (b) is an inequality, "
        "||g_S||^2 >= A - delta. Multiplying it by (1 - eta*L/2), which is negative exactly "
        "when eta*L > 2, reverses it; so the printed bound D_S >= eta*(A - delta)*(1 - eta*L/2) "
        "follows from (b) only when (b) holds with equality. With the subset holding 0.99 A "
        "and delta = 0.05 A, D_S = -4.455 < LB_S = -4.275 in the reviewer's setting.",
        "The score. With the population std, ||dW|| / (sqrt(n) std(dW)) = sqrt(1 + mean^2/var): "
        "scale-free, it measures how uniform an update's entries are, not how far the layer "
        "moved, and nothing in it refers to gradient mass. The FL measurement asks whether it "
        "nonetheless picks high-gradient blocks (score_link_gain: FedTLU's pick against the "
        "average same-size random pick) and whether the updated subset holds 95% of ||g||^2 "
        "(assumption-b). Read assumption_b_ratio_oracle beside it: it is the most that any "
        "choice of the same number of blocks could hold, so when it too is below 0.95 the "
        "failure of (b) at delta = 0.05 A comes from the update portion itself, and the "
        "score could not have rescued it.",
        "Scope. Part 3 is a tiny character-level Transformer (stdlib source, non-IID by "
        "contiguous stretches), short runs; the perplexity is final-round (the paper reports a "
        "minimum over rounds, whose definition the record flags as unclear; the "
        "ppl_min_random_minus_fedtlu_* estimates show that reading beside the verdict: a "
        "minimum over rounds picks each arm's best round on the test set itself, which "
        "favours the arm with the noisier curve, so it can push `noise` either way). Embeddings, "
        "final norm and head are updated in every arm; the arms differ only in which of the "
        "repeated Transformer blocks are updated. Paper scale: Penn Treebank from a local "
        "path.",
    )
    mean = {st: {a: float(np.mean(ppl[st][a])) for a in ARMS} for st in SETTINGS}
    hurt = mean["noisy"]["random"] - mean["clean"]["random"]
    gross = {r[0]: r[2] for r in sens_rows if r[1].startswith("control")}
    planted = {r[0]: r[5] for r in sens_rows if r[1].startswith("planted")}
    notes += (
        "Each reviewer question has its own verdict (the table at the top): the proofs "
        "(`ordering`, `vacuous-regime`) are never merged with the experiments. The "
        "reviewer's own isotropic test does not vote: on that instance the bounds are the "
        "true changes, so it cannot tell an ordering of bounds from one of changes.",
        f"Premise: {premise.effect}: {premise.status} ({premise.reason}). It gates nothing "
        f"here: `assumption-b` is a hypothesis of the paper's proof (checked whether or not "
        f"FedTLU gains), and `noise` is the premise's own comparison, read for the reviewer.",
        f"Margin and alpha. The noise part's equivalence margin is {100 * equiv_rel:.3g}% "
        f"of Random's perplexity, the size of the FedTLU-Random gap the paper reports in "
        f"Table III (1.768 vs 1.764, FedTLU's perplexity the higher there; Table I's gap, "
        f"0.047%, is smaller; config `equiv_rel`), fixed before any run: 'within noise' "
        f"means smaller than a gap the paper itself reports. Which way this pushes: a larger "
        f"margin makes CONFIRMED (equivalence) easier, a smaller one harder. The earlier rule used 1% (about 4.4 times the "
        f"paper's gap), which would have found 'within noise' even if FedTLU had exactly the "
        f"paper's advantage. Every decision is stats.three_way at alpha = {alpha:.4g} "
        f"(0.05 x look share {frac:.4g} / {N_TESTS}, Bonferroni); one minimum detectable "
        f"effect per setting is reported (mde_*), at that same alpha.",
        f"Assay sensitivity at the margin's scale: Random's own final models abstain on a "
        f"random share of test tokens sized for an expected perplexity rise equal to the "
        f"margin; detected as worse than FedTLU: clean {planted.get('clean')}, noisy "
        f"{planted.get('noisy')}. Without that, an equivalence does not count. The gross "
        f"control (`none`, repeated blocks frozen) ends {gross.get('clean', math.nan):.3g} "
        f"(clean) and {gross.get('noisy', math.nan):.3g} (noisy) perplexity above Random: "
        f"it shows the pipeline trains, not that margin-sized gaps are visible.",
        f"This run, in numbers. Final perplexities sit near {mean['clean']['random']:.3g} "
        f"(clean, Random) for a vocabulary of "
        f"{results[RunSpec('random', seeds[0], 'clean')]['vocab']} characters: the tiny "
        f"model is early in training. One test token moved by one nat moves the perplexity "
        f"by about {min(resolution) if resolution else math.nan:.3g} (the part's resolution), "
        f"against a margin of {equiv_rel * mean['clean']['random']:.3g}. The noisy clients "
        + (f"do not hurt here (Random's noisy perplexity is {-hurt:.3g} lower than clean; "
           f"shuffled next-character targets still carry the client's character frequencies), "
           f"so the noisy setting is a weak stand-in for the paper's noise condition."
           if hurt <= 0 else f"raise Random's perplexity by {hurt:.3g}."),
    )
    for st in ppl:
        tables.append(kit.misbehaviour_table(
            kit.misbehaving_seeds(ppl[st], ARMS, seeds, higher_is_better=False),
            len(seeds), f"final global test perplexity, {st} setting"))
    return Analysis(tuple(E), tuple(parts), tuple(tables), tuple(figures), notes,
                    premise=premise)


#: How the settings were chosen (audit.tuning: tuning seeds only, never a verdict's).
SEARCHES = (
    Search("full", "learning rate at full scale, where FedTLU's own gain over Random (the "
           "premise) shows most: the paper's effect given its best chance",
           tuning_seeds(3),
           ("lr 0.5: Random - FedTLU final perplexity, noisy clients, +0.139 (SD 0.179); "
            "clean +0.22; FedTLU 18.18 clean, 18.32 noisy",
            "lr 0.25: noisy +0.037 (SD 0.054); clean +0.07; FedTLU 19.69 clean, 20.14 noisy"),
           "lr 0.5 (`audit tune fedtlu-lower-bound --scale full --arms fedtlu,random "
           "--metric ppl_final --grid lr=0.5,0.25 --contrast random/noisy:fedtlu/noisy`)",
           "the larger premise effect and the lower perplexity; the other full settings "
           "(text size, context, rounds, width) are sized by `audit estimate` to end within "
           "about 45 minutes at the cap of 20 seeds, not by any result",
           test_metric_read=True),
)


CLAIM = Claim(
    searches=SEARCHES,
    id=CLAIM_ID,
    paper=FEDTLU,
    record=RecordRef(RECORDS[FEDTLU.arxiv_id],
                     ("skeptic_critique.load_bearing_attack", "skeptic_critique.concrete_test",
                      "falsifier")),
    title="lower-bound fallacy, score link and noise",
    statement=("Ordering two lower bounds does not order the true loss decreases, and at "
               "eta*L > 2 both bounds are negative; the score is never tied to the "
               "gradient-mass assumption; the gains over random block choice sit inside "
               "run-to-run noise."),
    arms=(Arm("fedtlu", "FedAvg, then update only the top-scored blocks of each group",
              "Algorithm 1 as printed (score of Section III); std(dW) = 0, which the paper "
              "leaves open, is scored 0 for an unmoved block and +inf for a constant one "
              "(our choice; see fedtlu-score-undefined)"),
          Arm("random", "the same number of blocks, chosen uniformly each round",
              "selector: uniform instead of the score"),
          Arm("full", "every block updated (plain FedAvg)", "selector: all blocks"),
          Arm("last", "the deepest blocks of each group", "selector: last S blocks"),
          Arm("none", "control: no repeated block ever updated (known worse)",
              "selector: no block; used only for assay sensitivity")),
    rules=(RULE_ISO, RULE_ORDER, RULE_VACUOUS, RULE_ASSUMPTION, RULE_NOISE, RULE_POWER,
           RULE_PRINTED, RULE_READINGS),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=True,
    # plain `audit run` without seeds: the first sequential look (the three-way rule
    # decides nothing below 6 pairs; a lock is reproduced with its own plan)
    default_seeds=tuple(range(10)),
    # no run reads validation data, so `audit tune` refuses every metric without
    # --allow-test-metric (the full-scale search read test data: flagged in SEARCHES)
    validation_metrics=(),
    scales=SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
    paper_numbers=(
        PaperNumber("global ppl, Random - FedTLU (Transformer, FedAvg, noisy clients)",
                    "1.764 - 1.768 = -0.004", "Table III",
                    ours="ppl_random_minus_fedtlu_noisy"),
        PaperNumber("global ppl, Random - FedTLU (portion 0.75)", "2.108 - 2.107 = 0.001",
                    "Table I", ours="ppl_random_minus_fedtlu_clean"),
    ),
)
