"""flayer-masked-zero: does FLAYER's Algorithm 1, run as printed, collapse?

The claim's declarations (paper, record, premise, parts, arms, scales, rule texts, notes)
are :mod:`audit.papers.flayer.declarations.masked_zero`, whose docstring tells the
claim; this module holds its code: the units (``specs``, ``run``; one run is
:mod:`audit.papers.flayer.simulation`'s), the evidence and the decisions (``evidence``);
:mod:`audit.papers.flayer.present.masked_zero` presents them. Arms
(``audit.papers.flayer.algorithm``): literal, carry-over, selector-mean, masked-delta (the
server rule is the only difference), as-released, fedavg.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from audit import kit, questions, stats
from audit.analysis import results_table
from audit.claims import Claim, RunContext, RunSpec, Table
from audit.papers.flayer.declarations import masked_zero as D
from audit.papers.flayer.present import masked_zero as P
from audit.papers.flayer.simulation import a_map_of, head_of
from audit.papers.flayer.declarations.masked_zero import (  # noqa: F401 (tests read them here)
    ALPHA, ARMS, CLAIM_ID, EQUIV, IDENTITY_TOL, MARGIN, PREMISE_ARM, SCALES, SEARCHES, X20)
from audit.verdict import Estimate, Outcome, Premise, Rule, on_reviewer, premise_gate

ARM_NAMES = tuple(a.name for a in ARMS)


def _flayer():
    """:mod:`audit.papers.flayer.algorithm`, imported where it is used (it imports torch, which
    listing and reviewing the claims do not need), checked against :data:`ARM_NAMES`."""
    from audit.papers.flayer import algorithm as flayer

    # each arm's piece (its server rule, as-released's client pieces) is declared with it
    # in audit.papers.flayer.algorithm.ARMS, under the same names in the same order
    assert ARM_NAMES == tuple(flayer.ARMS), \
        "arms out of step with audit.papers.flayer.algorithm.ARMS"
    return flayer


# ------------------------------------------------------------------------ decision rules
def _decide_structural(ev: Mapping[str, Any]):
    if ev["rounds_checked"] == 0:
        return Outcome.INCONCLUSIVE, "no literal rounds were run", "run the literal arm"
    where = D.STRUCTURAL_WHERE.format(**ev)
    if ev["max_unselected_nonzero"] > 0 or ev["max_identity_err"] > IDENTITY_TOL:
        return (Outcome.REFUTED, D.STRUCTURAL_BROKEN.format(
            where=where, nonzero=int(ev["max_unselected_nonzero"]), **ev), "")
    if ev["max_shrunk_frac"] <= 0 and ev["max_unselected_frac"] <= 0:
        return (Outcome.INCONCLUSIVE, D.STRUCTURAL_EMPTY.format(where=where),
                "a setting where masks differ between clients")
    return Outcome.CONFIRMED, D.STRUCTURAL_HOLDS.format(where=where, **ev), ""


def sweeps_said(outcomes: Mapping[str, Outcome]) -> str:
    """What the sweeps say beside the base setting's verdict (``outcomes``: setting label
    -> outcome, with "base"): a sweep decided the other way disagrees; an undecided one
    supports nothing (and never "agrees" with an undecided base); none ran, none said."""
    base = outcomes["base"]
    disagree = [lb for lb, o in outcomes.items() if lb != "base"
                and o != Outcome.INCONCLUSIVE and o != base]
    undecided = [lb for lb, o in outcomes.items() if lb != "base"
                 and o == Outcome.INCONCLUSIVE]
    said = []
    if disagree:
        said.append(D.SPEAKS_DISAGREE.format(sweeps=", ".join(disagree))
                    + (D.SPEAKS_NO_CARRY if base != Outcome.INCONCLUSIVE else ""))
    if undecided:
        said.append(D.SPEAKS_UNDECIDED.format(sweeps=", ".join(undecided)))
    if not said:
        said.append(D.SPEAKS_AGREE if len(outcomes) > 1 else D.SPEAKS_NONE)
    return "; ".join(said)


RULE_STRUCTURAL = Rule("structural", D.RULE_STRUCTURAL, _decide_structural, kind="derivation")


def _guarded(ev: Mapping[str, Any], reason: str, missed: str, needs_more):
    """The mapping and guard shared by ``collapse`` and ``carry-over-vs-literal``: the
    reviewer holds when the three-way rule (``ev["three_way"]``) says SUPPORTED; a
    refutation without assay sensitivity at the margin's scale (``ev["sensitive"]``
    false) is INCONCLUSIVE, its ``reason`` prefixed with why (``missed`` ends that
    preface); an INCONCLUSIVE comparison needs ``needs_more(tw)``."""
    tw = ev["three_way"]
    out = on_reviewer(tw.outcome, holds_when="SUPPORTED")
    needs = ""
    if out == Outcome.REFUTED and not ev["sensitive"]:
        out = Outcome.INCONCLUSIVE
        reason = D.NOT_SENSITIVE.format(missed=missed, reason=reason)
        needs = "seeds or a setting that detect a gap of the margin's size"
    elif out == Outcome.INCONCLUSIVE:
        needs = needs_more(tw)
    basis = ""
    head = ev.get("headroom")  # (arm, its mean lead over literal): the run's largest
    if out == Outcome.REFUTED and head is not None and head[1] < tw.margin:
        # no arm of the run comes m above literal, the paper's own fix included: "less
        # than m" was the only outcome this setting allowed, whatever the zeros do
        basis = D.NO_HEADROOM.format(margin=tw.margin, arm=head[0], lead=head[1])
        reason += " " + D.NO_HEADROOM_REASON.format(margin=tw.margin, arm=head[0],
                                                    lead=head[1])
    return out, reason, needs, {"flip": tw.flip, "resolution": ev["resolution"],
                                "unit": "accuracy", "basis": basis}


def _decide_collapse(ev: Mapping[str, Any]):
    """ev: three_way (best corrected vs literal at alpha/k), best, sensitive (bool),
    sensitivity (text), sweep (text), resolution (accuracy of one test example)."""
    def needs_more(tw):
        mde = ("the rule cannot decide any gap at this n" if tw.mde is None else
               f"minimum detectable gap at n = {tw.n} is {tw.mde:.3g}")
        return (f"{mde}; "
                + (f"{tw.seeds_phrase()} would detect the observed distance "
                   f"{tw.difference.mean - tw.margin:+.3g} of the gap from the margin"
                   if tw.seeds_needed else "more seeds or a larger scale"))

    reason = D.COLLAPSE_REASON.format(reason=ev["three_way"].reason, **ev)
    return _guarded(ev, reason, ", so a gap of the margin's size could have been missed",
                    needs_more)


RULE_COLLAPSE = Rule("collapse", D.RULE_COLLAPSE, _decide_collapse)


def _held_without_headroom(part, headroom, margin: float):
    """A part the premise gate holds whose comparison alone refuted on a setting where no
    arm comes m above literal (its ``basis``, set by :func:`_guarded` for that case
    only): the premise reproducing would not let this setting decide it, so what would
    decide it names the headroom too."""
    if not (part.held and part.ungated == Outcome.REFUTED.value and part.basis
            and headroom is not None):
        return part
    return replace(part, needs=part.needs + "; " + D.HEADROOM_NEEDS.format(
        margin=margin, arm=headroom[0], lead=headroom[1]))


def _decide_carry(ev: Mapping[str, Any]):
    """The reviewer's falsifier as written: carry-over against literal, one comparison
    fixed before the run (no best-of-k), mapped and guarded as `collapse`."""
    def needs_more(tw):
        return (f"{tw.seeds_phrase()} would detect the observed distance from the "
                f"margin" if tw.seeds_needed else "more seeds or a larger scale")

    reason = D.CARRY_REASON.format(reason=ev["three_way"].reason, **ev)
    return _guarded(ev, reason, "", needs_more)


RULE_CARRY = Rule("carry-over-vs-literal", D.RULE_CARRY, _decide_carry)


def _sweep_measured(part: str, text: str, value: str, sweep: str, what: str) -> Rule:
    """A measurement over one sweep of the collapse rule (head size s, or the reading of
    Eq. 2's A_l): per row its gap and outcome, and whether the outcome depends on ``what``
    is swept. ``value`` formats a row's swept value; ``sweep`` names the sweep."""
    def decide(ev: Mapping[str, Any]):
        rows = ev["rows"]  # (label, swept value, gap, verdict, premise note)
        if len(rows) < 2:
            return Outcome.INCONCLUSIVE, f"no {sweep} at this scale", ""
        txt = "; ".join(f"{value.format(r)} ({lb}): best corrected - literal {g:+.3f}, "
                        f"collapse rule {v}" + (f", {note}" if note else "")
                        for lb, r, g, v, note in rows)
        same = len({v for _, _, _, v, _ in rows}) == 1
        return Outcome.INCONCLUSIVE, (
            f"measurement: {txt}; the collapse rule's outcome "
            + (f"does not depend on {what} here" if same else f"depends on {what} here")), ""

    return Rule(part, text, decide, kind="measurement", reachable=("INCONCLUSIVE",))


RULE_HEAD = _sweep_measured("head-size", D.RULE_HEAD, "s = {}", "head-size sweep", "s")
RULE_A_MAP = _sweep_measured("weight-map", D.RULE_A_MAP, "A_l {}",
                             "sweep over the readings of Eq. 2", "the reading")


def global_lean(tw) -> str:
    """Which way the global-model reading points, from where the collapse rule (``tw``, its
    three-way result on the global accuracy) puts the gap against the margin: decided
    above m (towards CONFIRMED) or below it; undecided with the mean above or below m and a
    seed count that would decide it (leaning, not deciding); or on the margin, where the
    rule names no seed count (neither way)."""
    margin, mean = float(tw.margin), float(tw.difference.mean)
    if tw.outcome == "SUPPORTED":
        return D.LEAN_ABOVE.format(margin=margin)
    if tw.outcome == "FALSIFIED":
        return D.LEAN_BELOW.format(margin=margin)
    side = tw.seeds_decide
    seeds = tw.seeds_phrase("pairs")
    if seeds and side == "SUPPORTED":
        return D.LEAN_UP.format(dist=mean - margin, margin=margin, seeds=seeds)
    if seeds and side == "FALSIFIED":
        return D.LEAN_DOWN.format(dist=margin - mean, margin=margin, seeds=seeds)
    return D.LEAN_ON_MARGIN.format(mean=mean, margin=margin, signed=mean - margin)


def _decide_collapse_global(ev: Mapping[str, Any]):
    tw = ev["three_way"]
    would = on_reviewer(tw.outcome, holds_when="SUPPORTED").value
    return (Outcome.INCONCLUSIVE,
            D.COLLAPSE_GLOBAL_REASON.format(best=ev["best"], reason=tw.reason, would=would,
                                            lean=global_lean(tw)),
            "")


RULE_COLLAPSE_GLOBAL = Rule("collapse-global", D.RULE_COLLAPSE_GLOBAL,
                            _decide_collapse_global, kind="measurement",
                            reachable=("INCONCLUSIVE",))


def premise_of(tw, arm: str = PREMISE_ARM, sensitivity: str = "") -> Premise:
    """The paper's effect: FLAYER (with a working server rule) beats FedAvg on the
    personalised accuracy. three_way SUPPORTED -> reproduced, FALSIFIED -> not reproduced,
    INCONCLUSIVE -> undecided."""
    est = Estimate.of("premise_flayer_minus_fedavg", tw.difference, "accuracy",
                      D.PREMISE_ESTIMATE.format(arm=arm))
    note = f" Assay sensitivity of this comparison: {sensitivity}." if sensitivity else ""
    return kit.premise(D.PREMISE_EFFECT.format(arm=arm), tw, estimate=est, note=note)


# ---------------------------------------------------------------------------------- runs
def _sweeps(cfg: Mapping) -> list[tuple[str, str, Any]]:
    """(setting, model, clients per round) of every sweep setting but the x20 one."""
    return ([(f"depth={m}", m, "all") for m, _ in cfg["depth_sweep"]]
            + [(f"cpr={c}", cfg["model"], c) for c in cfg["cpr_sweep"]]
            + [(f"layer={u}", cfg["model"], "all") for u in cfg.get("layer_sweep", [])]
            + [(f"head={h}", cfg["model"], "all") for h in cfg.get("head_sweep", [])]
            + [(f"amap={r}", cfg["model"], "all") for r in cfg.get("a_map_sweep", [])])


def specs(ctx: RunContext) -> list[RunSpec]:
    cfg = ctx.config
    out = [RunSpec(a, s, "") for s in ctx.seeds for a in ARM_NAMES]
    sweep_seeds = ctx.seeds[:int(cfg["sweep_seeds"])]
    for st, _, _ in _sweeps(cfg):
        out += [RunSpec(a, s, st) for s in sweep_seeds for a in cfg["sweep_arms"]]
    if cfg.get("lr_x20_sweep"):
        out += [RunSpec("as-released", s, X20) for s in sweep_seeds]
    return out


def run(spec: RunSpec, ctx: RunContext) -> dict:
    """One arm at one seed in one setting: :func:`audit.papers.flayer.simulation.fl_run`."""
    from audit.papers.flayer.simulation import fl_run

    _flayer()  # the arms in step with the algorithm's pieces
    return fl_run(spec.arm, spec.seed, spec.setting, ctx.config, device=ctx.device,
                  data_dir=ctx.data_dir, x20=X20, keep_per_round=D.KEEP_PER_ROUND,
                  checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)


# ------------------------------------------------------------------------------ analysis
def eq4_table() -> Table:
    """Eq. 4's multiplier eta_i / eta as ||g|| -> 0 (printed form, no floor)."""
    eq4_multiplier = _flayer().eq4_multiplier
    rows = []
    for g in D.EQ4_GRAD_NORMS:
        ms = [eq4_multiplier(g, i, 10, floor=0.0) for i in D.EQ4_DEPTHS]
        rows.append((f"{g:.0e}", *[round(m, 3) for m in ms],
                     round((ms[2] - 1.0) / math.log(1.0 / g), 4) if g < 1 else None))
    rows.append(("0", "inf", "inf", "inf", None))
    return Table(D.EQ4_TITLE, D.EQ4_COLUMNS, tuple(rows), D.EQ4_NOTE)


def closest_to_paper(rows) -> tuple[str, str]:
    """The setting closest to the paper's, by a rule on the settings' structure, never on
    their results: the paper trains a deep network (ResNet-18) with all of its 20 clients
    each round, so of the settings run with all clients, the one whose model has the most
    parameter-bearing layers (ties: the base). ``rows``: (label, model, clients per
    round, layers) per setting, the base first."""
    full = [r for r in rows if r[2] == "all"] or list(rows[:1])
    label, model, _, layers = max(full, key=lambda r: (r[3], r[0] == "base"))
    return label, (D.CLOSEST_WHY.format(model=model, layers=layers)
                   + ("" if label == "base" else D.CLOSEST_NOT_BASE))


def _sensitivity(results, seeds, setting, arm, a, b, margin, equiv, alpha):
    """(sensitive, text): the planted drop of ``margin`` in ``arm``'s personal models is
    detected above margin/2 (three_way, alpha), and the minimum detectable gap of the
    decisive differences a - b (power 0.8, alpha) is at most the margin."""
    planted = np.array([results[RunSpec(arm, s, setting)].get("planted_personal_acc",
                                                              float("nan")) for s in seeds])
    if not np.all(np.isfinite(planted)):
        return False, "no planted effect in these runs"
    with stats.without_flip():
        tp = stats.three_way(a, planted, margin=margin / 2, equivalence_margin=equiv,
                             alpha=alpha)
    sd = float(np.std(np.asarray(a) - np.asarray(b), ddof=1))
    # the smallest gap the three-way rule itself decides at this n (simulated from the
    # rule; None where it cannot decide at all), not a plain t-test's
    per_sd = stats.rule_mde(len(seeds), alpha=alpha)
    mde = math.inf if per_sd is None else per_sd * sd
    ok = tp.outcome == "SUPPORTED" and mde <= margin
    d = tp.difference
    mde_txt = ("none: the rule cannot decide at this n" if per_sd is None else
               f"{mde:.4f}")
    return ok, (f"planted drop {margin:g} in {arm}: measured {d.mean:.4f} "
                f"{stats.ci_text(d, '[{low:.4f}, {high:.4f}]', paren=True)} -> "
                f"{'detected' if tp.outcome == 'SUPPORTED' else 'NOT detected'} above "
                f"{margin / 2:g}; minimum detectable gap of the A - B differences at n = "
                f"{len(seeds)}, alpha {alpha:.3g}, power 0.8, by the rule itself: {mde_txt} "
                f"{'<=' if mde <= margin else '>'} m = {margin:g} -> "
                + ("sensitive" if ok else "NOT sensitive at the margin's scale"))


def _structural(results, seeds) -> tuple[dict, list[Estimate]]:
    """The structural part's evidence, from every literal round of every setting, and its
    estimates."""
    lit_runs = [v for k, v in results.items() if k.arm == "literal" and k.seed in seeds]
    rounds = [m for v in lit_runs for m in v["per_round"]]
    ev = {
        "runs": len(lit_runs), "rounds_checked": len(rounds),
        "max_unselected_nonzero": max((m["unselected_nonzero"] for m in rounds), default=0),
        "max_identity_err": max((m["literal_identity_err"] for m in rounds), default=0.0),
        "max_unselected_frac": max((m["unselected_frac"] for m in rounds), default=0.0),
        "mean_unselected_frac": float(np.mean([m["unselected_frac"] for m in rounds])),
        "max_shrunk_frac": max((m["shrunk_frac"] for m in rounds), default=0.0),
        "mean_shrunk_frac": float(np.mean([m["shrunk_frac"] for m in rounds])),
        "mean_p": float(np.nanmean([m["mean_p"] for m in rounds])),
    }
    return ev, [Estimate(name, ev[key], unit=unit, description=what)
                for name, key, unit, what in D.STRUCTURAL_ESTIMATES]


def evidence(results: Mapping[RunSpec, Mapping], ctx: RunContext) -> dict[str, Any]:
    """Every comparison and decided part, and the per-seed tables they rest on: what
    :func:`audit.papers.flayer.present.masked_zero.analysis` presents (its ``EVIDENCE``;
    it builds the estimates from them)."""
    corrected = _flayer().CORRECTED
    cfg, seeds = ctx.config, list(ctx.seeds)

    def compare(arm, a, b, alpha_):  # the three-way rule on a - b and its assay sensitivity
        tw = stats.three_way(a, b, margin=margin, equivalence_margin=equiv, alpha=alpha_)
        return (tw, *_sensitivity(results, seeds, "", arm, a, b, margin, equiv, alpha_))

    pers, glob, ratio, zeros = (results_table(results, key, ARM_NAMES, seeds) for key in (
        "final_personal_acc", "final_global_acc", "norm_ratio", "final_zero_frac"))
    n_test = results[RunSpec("literal", seeds[0], "")]["n_test_global"]

    # ---- structural (exact, every literal round of every setting)
    ev_s, est_s = _structural(results, seeds)
    part_s = RULE_STRUCTURAL(ev_s)

    # ---- parameters of every decision (alpha scaled by the sequential look's share)
    frac = float(getattr(ctx, "alpha_fraction", 1.0))
    alpha = ALPHA * frac
    margin = float(cfg.get("margin", MARGIN))
    equiv = float(cfg.get("equivalence_margin", EQUIV))
    k = len(corrected)
    alpha_k = alpha / k
    n_pers = results[RunSpec("literal", seeds[0], "")].get("n_test_personal", n_test)
    resolution = 1.0 / n_pers  # one personal test example, in the mean over clients

    # ---- premise: FLAYER with a working (the release's) server rule beats FedAvg; an
    # equivalence ("not reproduced") counts only with assay sensitivity shown for this
    # very comparison: a planted drop of m in the premise arm detected, and a minimum
    # detectable gap of its differences with FedAvg at most m
    prem_sens, prem_sens_txt = _sensitivity(results, seeds, "", PREMISE_ARM,
                                            pers[PREMISE_ARM], pers["fedavg"], margin,
                                            equiv, alpha)
    tw_p = stats.three_way(pers[PREMISE_ARM], pers["fedavg"], margin=0.0,
                           equivalence_margin=equiv, alpha=alpha, sensitive=prem_sens)
    premise = premise_of(tw_p, sensitivity=prem_sens_txt)

    # ---- collapse (base setting)
    best = max(corrected, key=lambda a: float(pers[a].mean()))
    # the largest mean lead over literal of any arm run (as released and FedAvg too):
    # where it is under m, a REFUTED of either comparison says so beside its word
    leads = {a: float(np.mean(pers[a] - pers["literal"])) for a in pers if a != "literal"}
    headroom = max(leads.items(), key=lambda kv: kv[1]) if leads else None
    tw, sens_ok, sens_txt = compare(best, pers[best], pers["literal"], alpha_k)

    # ---- sweeps (same rule, same alpha/k; reported, not in the verdict)
    sweep_rows, sweep_txt, sweep_out, sweep_notes, gaps, sweep_gaps = [], [], {}, {}, {}, []
    cpr_base = "all" if cfg["clients_per_round"] is None else cfg["clients_per_round"]
    settings = [("", cfg["model"], cpr_base)] + _sweeps(cfg)
    sweep_ids = [st for st, _, _ in settings[1:]]
    sw_seeds = [s for s in seeds  # the seeds of this subset that have every sweep run
                if sweep_ids and all(RunSpec("literal", s, st) in results for st in sweep_ids)]
    for st, model, cpr in settings:
        arms_here = list(ARM_NAMES) if st == "" else list(cfg["sweep_arms"])
        sds = seeds if st == "" else sw_seeds
        if len(sds) < 2 or "literal" not in arms_here:
            continue
        p = results_table(results, "final_personal_acc", arms_here, sds, st)
        corr = [a for a in arms_here if a in corrected]
        kk = len(corr)
        b = max(corr, key=lambda a: float(p[a].mean()))
        t = stats.three_way(p[b], p["literal"], margin=margin, equivalence_margin=equiv,
                            alpha=alpha / kk)
        o = on_reviewer(t.outcome, holds_when="SUPPORTED")
        row_note = ""
        if st and o == Outcome.REFUTED:
            ok, _ = _sensitivity(results, sds, st, b, p[b], p["literal"], margin, equiv,
                                 alpha / kk)
            o = o if ok else Outcome.INCONCLUSIVE
        if st and "fedavg" in arms_here and PREMISE_ARM in arms_here:
            # the sweep cell's own premise, with FedAvg as its reference arm: a decided
            # row counts only where FLAYER's effect reproduces in that cell
            with stats.without_flip():
                tp = stats.three_way(p[PREMISE_ARM], p["fedavg"], margin=0.0,
                                     equivalence_margin=equiv, alpha=alpha, sensitive=False)
            st_prem = kit.PREMISE_STATUS[tp.outcome]
            row_note = (f"premise here ({PREMISE_ARM} - fedavg {tp.difference.mean:+.3f}): "
                        f"{st_prem}")
            if st_prem != "reproduced" and o != Outcome.INCONCLUSIVE:
                row_note += f"; the comparison alone said {o.value}"
                o = Outcome.INCONCLUSIVE
        elif not st:
            o = RULE_COLLAPSE.decide({"three_way": tw, "best": best, "sensitive": sens_ok,
                                      "sensitivity": "", "sweep": "",
                                      "resolution": resolution})[0]
        zf = results_table(results, "final_zero_frac", ["literal"], sds, st)["literal"]
        nr = results_table(results, "norm_ratio", ["literal"], sds, st)["literal"]
        L = len([q for q in results[RunSpec("literal", sds[0], st)]["per_round"][0]
                 if q.startswith("norm:")])
        d = t.difference
        label = st or "base"
        sweep_out[label], gaps[label], sweep_notes[label] = o, float(d.mean), row_note
        sweep_rows.append((label, model, cpr, len(sds), L, round(float(zf.mean()), 4),
                           round(float(nr.mean()), 3), round(float(p["literal"].mean()), 4),
                           b, round(float(p[b].mean()), 4), round(d.mean, 4),
                           stats.interval_text(d, ".4f"), f"{alpha / kk:.4g}", o.value))
        sweep_txt.append(f"{label}: gap {d.mean:.3f} "
                         f"{stats.ci_text(d, '[{low:.3f}, {high:.3f}]', paren=True)} -> {o.value}")
        if st:
            sweep_gaps.append((st, b, p[b], p["literal"]))
    closest, closest_why = closest_to_paper([(r[0], r[1], r[2], r[4]) for r in sweep_rows])
    setting_rows = tuple({"setting": lb, "verdict": o.value, "base": lb == "base",
                          "closest_to_paper": lb == closest,
                          "why": closest_why if lb == closest else "",
                          "note": sweep_notes.get(lb, "")}
                         for lb, o in sweep_out.items())
    speaks = D.SPEAKS.format(model=cfg["model"], cpr=cpr_base, n_clients=cfg["n_clients"],
                             alpha=cfg["alpha"]) + sweeps_said(sweep_out)
    ev_c = {"three_way": tw, "best": best, "sensitive": sens_ok, "sensitivity": sens_txt,
            "resolution": resolution, "headroom": headroom,
            "sweep": D.SWEEPS.format(rows="; ".join(sweep_txt), speaks=speaks)}
    params = {"n": tw.n, "k": k, "margin": f"{margin:g}", "rule": tw.text(),
              "setting": f"{cfg['model']}, {cfg['n_clients']} clients, {cpr_base} per "
                         f"round, layer = {cfg.get('layer_unit', 'tensor')}"}
    part_c = _held_without_headroom(premise_gate(RULE_COLLAPSE(ev_c, params=params),
                                                 premise), headroom, margin)
    tw_co, co_sens, co_txt = compare("carry-over", pers["carry-over"], pers["literal"], alpha)
    part_co = premise_gate(RULE_CARRY({"three_way": tw_co, "sensitive": co_sens,
                                       "sensitivity": co_txt, "resolution": resolution,
                                       "headroom": headroom},
                                      params={"n": tw_co.n, "rule": tw_co.text(),
                                              "margin": f"{margin:g}"}), premise)
    part_co = _held_without_headroom(part_co, headroom, margin)
    tw_g = stats.three_way(glob[best], glob["literal"], margin=margin,
                           equivalence_margin=equiv, alpha=alpha_k)
    part_g = RULE_COLLAPSE_GLOBAL({"three_way": tw_g, "best": best},
                                  params={"rule": tw_g.text()})
    lean_g = global_lean(tw_g)  # the same phrase for the metric note
    head_rows = [(lb, head_of("" if lb == "base" else lb, cfg),
                  gaps[lb], sweep_out[lb].value, sweep_notes.get(lb, ""))
                 for lb in sweep_out if lb == "base" or lb.startswith("head=")]
    part_h = RULE_HEAD({"rows": head_rows})
    a_rows = [(lb, a_map_of("" if lb == "base" else lb),
               gaps[lb], sweep_out[lb].value, sweep_notes.get(lb, ""))
              for lb in sweep_out if lb == "base" or lb.startswith("amap=")]
    part_a = RULE_A_MAP({"rows": a_rows})
    parts = (part_s, part_c, part_co, part_g, part_h, part_a)
    eq4 = eq4_table()
    return kit.gather(P.EVIDENCE, locals())


analyse, decide = kit.staged(evidence, P.analysis)


QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS, D.COMBINATION)

CLAIM = Claim(
    searches=SEARCHES,
    id=CLAIM_ID,
    paper=D.PAPER,
    record=D.RECORD,
    title=D.TITLE,
    statement=D.STATEMENT,
    arms=ARMS,
    rules=(RULE_STRUCTURAL, RULE_COLLAPSE, RULE_CARRY, RULE_COLLAPSE_GLOBAL, RULE_HEAD,
           RULE_A_MAP),
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
