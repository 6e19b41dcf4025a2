"""Falsifier ``genefl-uplink-bytes``: GENE-FL's fourfold saving, counted in both directions.

What the claim declares (the paper's numbers, the protocol as read, the reviewer's
thresholds, arms, scales and texts) is in its declarations module,
``audit.papers.genefl.declarations.uplink_bytes``; here: the units (exact, no seed: the
paper's model, its selected learnGene and both protocols' messages, all counted by
:mod:`audit.papers.genefl.simulation` with ``audit.fl.comm``), the parts' decisions and
the evidence they rest on (``evidence``); :mod:`audit.papers.genefl.present.uplink_bytes`
presents it.
"""
from __future__ import annotations

from typing import Mapping

from audit.claims import AuditError, Claim, RunContext, RunSpec
from audit import kit, questions
from audit.papers.genefl.declarations import uplink_bytes as D
from audit.papers.genefl.present import uplink_bytes as P
from audit.verdict import Outcome, Rule


def client_counts(rounds: int, per_round: int) -> list[int]:
    """The distinct-participant counts P swept: B, 2B, ..., R x B."""
    return list(range(per_round, rounds * per_round + 1, per_round))


def run(spec: RunSpec, ctx: RunContext) -> dict:
    import torch

    torch.set_num_threads(1)
    cfg = ctx.config
    if spec.arm == "simulated-run":
        from audit.papers.genefl.simulation import simulate

        sim = dict(cfg["sim"])
        if sim["dataset"] != "digits" and ctx.data_dir is None:
            raise AuditError(f"scale {ctx.scale!r} simulates on {sim['dataset']}: pass "
                             f"--data-dir (or set AUDIT_DATA) to its local copy")
        out = simulate(sim, sim["seed"], "top", data_dir=ctx.data_dir, device=ctx.device,
                       checkpoint=ctx.checkpoint(spec),  # None when caching is off
                       on_round=ctx.on_round)
        out.pop("final_states")
        keep = ("learngene_bytes_per_round", "comm_up_per_round", "comm_down_per_round",
                "participants_per_round", "model_param_bytes", "gene")
        return {"clusters": [{k: c[k] for k in keep} for c in out["clusters"]],
                "gamma": out["gamma"], "n_layers": out["n_layers"]}
    from audit.papers.genefl.simulation import (count_messages, participants, resnet18_meta,
                                                selected_gene, size_variants)

    net = resnet18_meta()
    state = net.state_dict()
    pnames = [n for n, _ in net.named_parameters()]
    res: dict = {"model_bytes": sum(state[k].numel() * state[k].element_size() for k in pnames),
                 "buffer_bytes": sum(v.numel() * v.element_size() for k, v in state.items()
                                     if k not in pnames)}
    if spec.arm == "fedavg":
        res["sizes"] = size_variants(D.MIB, D.PAPER_MODEL_MB)
        gene_state = state  # unused by FedAvg's counts
    elif spec.arm == "genefl-9.04MB":
        n = round(D.PAPER_GENE_MB * D.MIB / 4)  # float32 elements in 9.04 MiB
        gene_state = {"learngene": torch.empty(n, dtype=torch.float32, device="meta")}
        pnames = pnames + ["learngene"]
    elif spec.arm == "genefl-selected":
        gene_state, chosen = selected_gene(net, D.PAPER_GENE_MB * D.MIB)
        res.update(chosen)
    else:
        raise AuditError(f"unknown arm {spec.arm!r}")
    res["learngene_param_bytes"] = sum(v.numel() * v.element_size()
                                       for k, v in gene_state.items() if k in set(pnames))
    res["counts"] = count_messages(state, pnames, gene_state, cfg, once=False)
    res["counts_once"] = count_messages(state, pnames, gene_state, cfg, once=True)
    if spec.arm != "fedavg":  # the once-per-client reading over the client count
        R, B = cfg["rounds"], cfg["clients_per_round"]
        res["n_grid"] = [{"n_clients": n, "participants": participants(R, B, n)}
                         for n in sorted(set(D.N_GRID) | {cfg["n_clients"]})]
    return res


# --------------------------------------------------------------------------- analysis
def formula_readings(model_bytes: int, cfg: Mapping) -> list[dict]:
    """Section IV-B's Comm = R x B x |W| x 2 under each plausible reading of B and |W|,
    in the tables' unit (the tables' 42.66 GB is 1000 x the 42.66 MB model: MiB / 1000)."""
    R, K = cfg["rounds"], cfg["clients_per_round"]
    n_params = model_bytes // 4
    mb = model_bytes / D.MIB

    def gb(x_mib):
        return x_mib / 1000

    values = ((gb(R * K * mb * 2), True), (gb(R * 4 * n_params * 2 / D.MIB), True),
              (gb(R * K * n_params * 2 / D.MIB), True), (gb(R * 1 * mb * 2), True),
              (gb(R * K * mb), False))  # (value, whether the reading keeps the x2)
    return [{"reading": r, "value_gb": v, "has_x2": x2,
             "reproduces": abs(v - D.PAPER_TABLE_GB) <= D.FORMULA_TOL}
            for r, (v, x2) in zip(D.FORMULA_READINGS, values)]


def _ratio_rule_decide(ev):
    # ev holds GENE-FL / FedAvg fractions (the inverse of the ratio_* estimates)
    r, rs, t = ev["ratio_bidirectional"], ev["ratio_bidirectional_selected"], ev["threshold"]
    txt = (f"GENE-FL / FedAvg total bytes = {r:.4f} (9.04 MB learnGene) and {rs:.4f} "
           f"(selected layers)")
    if r > t and rs > t:
        return Outcome.CONFIRMED, txt + f", both above {t}: no 4x in total bytes.", ""
    if r <= t and rs <= t:
        return Outcome.REFUTED, txt + f", both at most {t}: the 4x holds in total.", ""
    return Outcome.INCONCLUSIVE, txt + ": the two readings disagree.", \
        "a statement of the learnGene's size in the protocol"


RULE_RATIO = Rule("bidirectional", D.RULE_RATIO, _ratio_rule_decide, kind="derivation")


def _once_decide(ev):
    t, sweep = ev["threshold_once"], ev["sweep"]  # rows: participants, ratio, ratio_selected
    lo, hi = sweep[0]["participants"], sweep[-1]["participants"]
    at = ev["assumed"]
    txt = (f"with the cluster model sent once per client, the ratio over P = {lo}..{hi} "
           f"distinct participants runs from {sweep[0]['ratio']:.4f} to "
           f"{sweep[-1]['ratio']:.4f} (9.04 MB) "
           f"and from {sweep[0]['ratio_selected']:.4f} to {sweep[-1]['ratio_selected']:.4f} "
           f"(selected); at the assumed N = {ev['n_assumed']} clients (P = "
           f"{at['participants']}): {at['ratio']:.4f} and {at['ratio_selected']:.4f}")
    cross = []
    for bar in (ev["threshold"], t):
        flip = next((r["participants"] for r in sweep
                     if r["ratio"] > bar and r["ratio_selected"] > bar), None)
        cross.append(f"above {bar} (under both readings) from P = {flip} distinct "
                     f"participants on" if flip is not None else
                     f"at most {bar} at every P in the range")
    return Outcome.INCONCLUSIVE, (
        txt + ": a measurement, since the answer turns on how many distinct clients take "
        "part, which the paper does not give: the ratio is " + "; ".join(cross)
        + " (so the 4x holds in total bytes only below the first crossover)"
        + f"{ev.get('n_txt', '')}."), ""


RULE_ONCE = Rule("once-per-client", D.RULE_ONCE, _once_decide, kind="measurement",
                 reachable=("INCONCLUSIVE",))


def _formula_decide(ev):
    rows = ev["formula"]
    with_x2 = [r for r in rows if r["has_x2"] and r["reproduces"]]
    hit = [r["reading"] for r in rows if r["reproduces"]]
    if with_x2:
        return Outcome.REFUTED, f"a reading with the x2 gives the tables' value: {with_x2[0]}", ""
    return Outcome.CONFIRMED, (
        "no reading with the x2 gives 42.66 GB (" + "; ".join(
            f"{r['value_gb']:.2f}" for r in rows if r["has_x2"]) + "); only "
        + (", ".join(hit) if hit else "none") + " does."), ""


RULE_FORMULA = Rule("formula", D.RULE_FORMULA, _formula_decide, kind="derivation",
                    reachable=("CONFIRMED", "REFUTED"))


def evidence(results, ctx: RunContext) -> dict:
    """The counted bytes, the ratios, the once-per-client sweep and the decided parts:
    what :func:`audit.papers.genefl.present.uplink_bytes.analysis` presents (its
    ``EVIDENCE``)."""
    cfg = ctx.config
    fa = results[RunSpec("fedavg")]
    g9 = results[RunSpec("genefl-9.04MB")]
    gs = results[RunSpec("genefl-selected")]
    sim = results.get(RunSpec("simulated-run"))
    M = fa["model_bytes"]
    c9, cs = g9["counts"], gs["counts"]
    fup, fdown = c9["fedavg_up"], c9["fedavg_down"]

    def ratios(c):  # (FedAvg / GENE-FL uplink, FedAvg / GENE-FL up + down)
        return ((c["fedavg_up"] / c["genefl_up"]),
                (c["fedavg_up"] + c["fedavg_down"]) / (c["genefl_up"] + c["genefl_down"]))

    ru, rb = ratios(c9)
    rus, rbs = ratios(cs)
    _, rbo = ratios(g9["counts_once"])
    _, rbos = ratios(gs["counts_once"])
    val = {"model_bytes": M, "buffer_bytes": fa["buffer_bytes"],
           "fedavg_up_bytes_total": fup, "fedavg_down_bytes_total": fdown,
           "genefl_up_bytes_total": c9["genefl_up"], "genefl_down_bytes_total": c9["genefl_down"],
           "ratio_uplink": ru, "ratio_bidirectional": rb,
           "learngene_bytes_selected": gs["selected_param_bytes"],
           "genefl_up_bytes_total_selected": cs["genefl_up"],
           "genefl_down_bytes_total_selected": cs["genefl_down"],
           "ratio_uplink_selected": rus, "ratio_bidirectional_selected": rbs,
           "genefl_down_bytes_total_once": g9["counts_once"]["genefl_down"],
           "ratio_bidirectional_once": rbo, "ratio_bidirectional_once_selected": rbos}
    formula = formula_readings(M, cfg)
    # the rules read the reviewer's fraction GENE-FL / FedAvg, the inverse of our ratios
    R0, K0 = cfg["rounds"], cfg["clients_per_round"]
    fed_total = fup + fdown

    def once_ratio(res_, seen):  # closed form of count_messages(once=True), checked below
        c = res_["counts"]
        return (c["genefl_up"] + seen * M + (c["genefl_down"] - R0 * K0 * M)) / fed_total

    sweep = [{"participants": P, "ratio": once_ratio(g9, P), "ratio_selected": once_ratio(gs, P)}
             for P in client_counts(R0, K0)]
    p_assumed = g9["counts_once"]["participants"]
    assumed = {"participants": p_assumed, "ratio": once_ratio(g9, p_assumed),
               "ratio_selected": once_ratio(gs, p_assumed)}
    # the closed form against the counted messages at the assumed N
    check = abs(assumed["ratio"] - 1 / rbo) + abs(assumed["ratio_selected"] - 1 / rbos)
    if check > 1e-12:
        raise AuditError(f"once-per-client closed form disagrees with the counts ({check})")
    ev = {"ratio_bidirectional": 1 / rb, "ratio_bidirectional_selected": 1 / rbs,
          "threshold": D.THRESHOLD, "threshold_once": D.THRESHOLD_ONCE, "sweep": sweep,
          "assumed": assumed, "n_assumed": cfg["n_clients"], "formula": formula}
    flip_n = {key: next((r["participants"] for r in sweep if r[key] > D.THRESHOLD_ONCE), None)
              for key in ("ratio", "ratio_selected")}
    flip_n25 = {key: next((r["participants"] for r in sweep if r[key] > D.THRESHOLD), None)
                for key in ("ratio", "ratio_selected")}
    grid = g9["n_grid"]  # uniform sampling: distinct participants P for a total of N
    n_for = {key: next((g["n_clients"] for g in grid if flip_n[key] is not None
                        and g["participants"] >= flip_n[key]), None) for key in flip_n}
    ev["n_txt"] = ("" if flip_n["ratio"] is None else
                   f" (with uniform sampling of {K0} a round, P reaches {flip_n['ratio']} "
                   + (f"at a total of N = {n_for['ratio']} clients on our grid)"
                      if n_for["ratio"] else f"at no N of our grid up to {grid[-1]['n_clients']})"))
    parts = (RULE_RATIO(ev, params={"threshold": D.THRESHOLD}),
             RULE_ONCE(ev, params={"threshold_once": D.THRESHOLD_ONCE, "threshold": D.THRESHOLD,
                                   "n_lo": sweep[0]["participants"],
                                   "n_hi": sweep[-1]["participants"]}),
             RULE_FORMULA(ev, params={"rounds": R0, "tol": 0.01}))
    return kit.gather(P.EVIDENCE, locals())


def analyse(results, ctx: RunContext):
    """The report from the evidence (exact: no seed to leave out, so no ``decide``)."""
    return P.analysis(evidence(results, ctx), results, ctx)


QUESTIONS = D.QUESTIONS
COMBINATION = questions.combination(QUESTIONS)


def specs(ctx: RunContext):
    return [RunSpec(a.name) for a in D.ARMS]


CLAIM = Claim(
    id=D.CLAIM_ID,
    paper=D.PAPER,
    record=D.RECORD,
    title=D.TITLE,
    statement=D.STATEMENT,
    arms=D.ARMS,
    rules=(RULE_RATIO, RULE_ONCE, RULE_FORMULA),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=False,
    scales=D.SCALES,
    run=run,
    analyse=analyse,
    specs=specs,
    paper_numbers=D.PAPER_NUMBERS,
)
