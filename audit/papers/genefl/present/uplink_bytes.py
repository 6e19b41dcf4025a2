"""The presentation of ``genefl-uplink-bytes``: its tables, figures, notes and estimates,
built from the evidence :func:`audit.papers.genefl.uplink_bytes.evidence` returns (the
counted bytes, the ratios and the decided parts), and the simulated run's cross-check of
the metered bytes. It decides nothing. It imports the claim's declarations, never the
claim's code.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from audit.claims import Analysis, Figure, RunContext, RunSpec, Table
from audit.papers.genefl.declarations import uplink_bytes as D
from audit.verdict import Estimate

#: what :func:`analysis` reads from the evidence, in the order it unpacks it
EVIDENCE = (
    "fa", "g9", "gs", "sim", "M", "c9", "cs", "val", "formula", "sweep", "assumed",
    "flip_n", "flip_n25", "grid", "K0", "parts")


def analysis(ev: Mapping[str, Any], results: Mapping[RunSpec, Mapping],
             ctx: RunContext) -> Analysis:
    """The claim's :class:`Analysis` from its evidence ``ev`` (keys: :data:`EVIDENCE`);
    ``results`` (the runs) is not read: the evidence holds what the report shows."""
    cfg = ctx.config
    (fa, g9, gs, sim, M, c9, cs, val, formula, sweep, assumed, flip_n, flip_n25,
     grid, K0, parts) = (ev[k] for k in EVIDENCE)
    val = dict(val)  # the estimates' values; the report adds what it derives below
    mb = lambda b: b / D.MIB  # noqa: E731
    tables = [
        Table("Bytes over the run (parameters; MiB; buffers apart)",
              ("protocol", "up", "down", "total", "buffers up+down"),
              tuple((name, round(mb(c[f"{p}_up"]), 2), round(mb(c[f"{p}_down"]), 2),
                     round(mb(c[f"{p}_up"] + c[f"{p}_down"]), 2),
                     round(mb(c[f"{p}_up_buffers"] + c[f"{p}_down_buffers"]), 3))
                    for name, p, c in (("FedAvg", "fedavg", c9),
                                       ("GENE-FL, 9.04 MB gene", "genefl", c9),
                                       ("GENE-FL, selected gene", "genefl", cs),
                                       ("GENE-FL 9.04 MB, model once per client", "genefl",
                                        g9["counts_once"]),
                                       ("GENE-FL selected, model once per client", "genefl",
                                        gs["counts_once"]))),
              note=f"{cfg['rounds']} rounds, {cfg['clients_per_round']} participants a "
                   f"round out of {cfg['n_clients']}, {cfg['n_agnostic']} agnostic clients."),
        Table("Which ResNet-18 convention prints as 42.66 MB",
              ("model", "counted", "unit", "bytes", "size", "prints 42.66"),
              tuple((r["model"], r["counted"], r["unit"], r["bytes"], round(r["size"], 4),
                     r["prints_42.66"]) for r in fa["sizes"])),
        Table("Section IV-B's formula R x B x |W| x 2 (tables' unit: MiB / 1000)",
              ("reading", "value (units of 1000 MiB, the tables' 'GB')", "keeps x2",
               "gives 42.66 GB"),
              tuple((r["reading"], round(r["value_gb"], 3), r["has_x2"], r["reproduces"])
                    for r in formula)),
        Table("The selected learnGene: top layers by Eq. 9 after a short real update",
              ("rank", "layer", "parameters", "xi", "in gene"),
              tuple((i + 1, l, gs["dims"][l], f"{gs['xi'][l]:.3e}", i < gs["gamma"])
                    for i, l in enumerate(gs["order"]))),
    ]
    step = max(1, len(sweep) // 10)
    tables.append(Table(
        "Once-per-client reading over the distinct participants P (GENE-FL / FedAvg bytes)",
        ("P", "ratio (9.04 MB)", "ratio (selected)", f"above {D.THRESHOLD_ONCE}"),
        tuple((r["participants"], round(r["ratio"], 4),
               round(r["ratio_selected"], 4),
               r["ratio"] > D.THRESHOLD_ONCE and r["ratio_selected"] > D.THRESHOLD_ONCE)
              for i, r in enumerate(sweep) if i % step == 0
              or r["participants"] in flip_n.values()),
        note=f"Closed form of the counted messages (checked against the message-by-message "
             f"count at the assumed N = {cfg['n_clients']}, P = "
             f"{assumed['participants']})."))
    for key, lab in (("ratio", ""), ("ratio_selected", "_selected")):
        if flip_n[key] is not None:
            val[f"once_flip_participants{lab}"] = flip_n[key]
    # sweeps: fraction of layers in the gene, and rounds
    sw = gs["sweep"]
    R, K, N, A = cfg["rounds"], cfg["clients_per_round"], cfg["n_clients"], cfg["n_agnostic"]

    def rb_of(g, rounds, once):
        down = (min(N, rounds * K) if once else rounds * K) * M + A * g
        return (rounds * K * g + down) / (2 * rounds * K * M)

    figs = [
        Figure("ratio_vs_clients", "Once-per-client reading: GENE-FL / FedAvg total bytes "
               "against the distinct participants", "distinct participants P",
               "GENE-FL / FedAvg",
               ({"label": "9.04 MB gene", "x": [r["participants"] for r in sweep],
                 "y": [r["ratio"] for r in sweep]},
                {"label": "selected gene", "x": [r["participants"] for r in sweep],
                 "y": [r["ratio_selected"] for r in sweep]},
                {"label": f"reviewer's threshold {D.THRESHOLD_ONCE}",
                 "x": [sweep[0]["participants"], sweep[-1]["participants"]],
                 "y": [D.THRESHOLD_ONCE] * 2})),
        Figure("ratio_vs_gene_fraction", "GENE-FL / FedAvg bytes against the learnGene size",
               "fraction of layers in the learnGene (top by Eq. 9)", "GENE-FL / FedAvg",
               ({"label": "uplink only", "x": [s["fraction_layers"] for s in sw],
                 "y": [s["gene_param_bytes"] / M for s in sw]},
                {"label": "up + down, model every round",
                 "x": [s["fraction_layers"] for s in sw],
                 "y": [rb_of(s["gene_param_bytes"], R, False) for s in sw]},
                {"label": "reviewer's threshold 0.25", "x": [0, 1], "y": [D.THRESHOLD] * 2}),
               caption="From the counted message sizes (closed form of the same counts)."),
        Figure("ratio_vs_rounds", "GENE-FL / FedAvg total bytes against rounds (9.04 MB gene)",
               "rounds", "GENE-FL / FedAvg",
               ({"label": "model every round", "x": list(range(1, R + 1)),
                 "y": [rb_of(g9["learngene_param_bytes"], r, False) for r in range(1, R + 1)]},
                {"label": "model once per client (upper bound: first-time participants "
                          "= min(N, rounds x clients))", "x": list(range(1, R + 1)),
                 "y": [rb_of(g9["learngene_param_bytes"], r, True) for r in range(1, R + 1)]})),
    ]
    notes = [
        D.NOTE_SIZE.format(params=M // 4, nbytes=M, mib=M / D.MIB, conventions="; ".join(
            f"{r['model']}, {r['counted']}, {r['unit']}" for r in fa["sizes"]
            if r["prints_42.66"])),
        D.NOTE_PER_ROUND.format(mib=M / D.MIB, gene=D.PAPER_GENE_MB),
        D.NOTE_SELECTED.format(gamma=gs["gamma"], n_layers=gs["n_layers"],
                               mib=gs["selected_param_bytes"] / D.MIB),
        D.NOTE_ONCE.format(
            n=N, p=g9["counts_once"]["participants"], rounds=R, lo=sweep[0]["participants"],
            hi=sweep[-1]["participants"], threshold_once=D.THRESHOLD_ONCE,
            flip=flip_n["ratio"], flip_sel=flip_n["ratio_selected"], flip25=flip_n25["ratio"],
            flip25_sel=flip_n25["ratio_selected"], k=K,
            grid=", ".join(f"N = {g['n_clients']}: P = {g['participants']}" for g in grid)),
        D.NOTE_DERIVATIONS.format(threshold=D.THRESHOLD, threshold_once=D.THRESHOLD_ONCE),
        D.NOTE_TABLES,
    ]
    if sim is not None:
        # per client per round, from the engine's metered uploads (audit.fl.comm)
        ser = [{"label": f"cluster {i}", "x": list(range(1, len(c["comm_up_per_round"]) + 1)),
                "y": [u / p / c["model_param_bytes"] for u, p in
                      zip(c["comm_up_per_round"], c["participants_per_round"])]}
               for i, c in enumerate(sim["clusters"])]
        figs.append(Figure("learngene_size_over_rounds",
                           "learnGene size over rounds (simulated GENE-FL, top-gamma)",
                           "round", "learnGene / model bytes (mean over clients)", tuple(ser)))
        # cross-check: metered uploads per client vs the algorithm's own count of the
        # selected layers; metered downloads vs participants x full model
        up_diff = max(abs(u / p - g) for c in sim["clusters"] for u, p, g in
                      zip(c["comm_up_per_round"], c["participants_per_round"],
                          c["learngene_bytes_per_round"]))
        down_diff = max(abs(d - p * c["model_param_bytes"]) for c in sim["clusters"]
                        for d, p in zip(c["comm_down_per_round"],
                                        c["participants_per_round"]))
        first = [c["learngene_bytes_per_round"][0] for c in sim["clusters"]]
        last = [c["learngene_bytes_per_round"][-1] for c in sim["clusters"]]
        val.update(sim_metered_minus_selected_bytes=up_diff,
                   sim_metered_down_minus_model_bytes=down_diff,
                   sim_learngene_last_over_first=np.sum(last) / np.sum(first))
        notes.append(D.NOTE_SIMULATED.format(scale=ctx.scale, gamma=sim["gamma"],
                                             n_layers=sim["n_layers"],
                                             ratio=np.sum(last) / np.sum(first)))
    fill = {"gamma": gs["gamma"], "n_layers": gs["n_layers"], "k": K0,
            "threshold_once": D.THRESHOLD_ONCE}
    est = tuple(Estimate(name, float(val[name]), unit=unit, description=d.format(**fill))
                for name, (unit, d) in D.ESTIMATES.items() if name in val)
    return Analysis(estimates=est, parts=parts, tables=tuple(tables),
                    figures=tuple(figs), notes=tuple(notes))
