"""A toy claim for testing the harness itself (not registered in the package).

Arm ``better`` draws a per-seed score 1.0 above arm ``base`` (plus noise); the reviewer's
toy claim "better beats base" is decided by the three-way rule. ``effect`` in the config
changes the true difference, so tests can make it CONFIRMED or INCONCLUSIVE at will.
"""
from __future__ import annotations

import os

import numpy as np

from audit import stats
from audit.claims import (FLAYER, Analysis, Arm, Claim, Figure, PaperNumber, RecordRef,
                          RunSpec, Table)
from audit.analysis import results_table
from audit.verdict import ALL_PARTS, Estimate, Premise, Rule, on_reviewer, premise_gate

CALLS: list[RunSpec] = []  # every unit actually computed (tests count cache hits with it)


def run(spec: RunSpec, ctx) -> dict:
    CALLS.append(spec)
    if os.environ.get("TOY_FAIL_SEED") == str(spec.seed):  # simulates a crashed worker
        raise RuntimeError(f"toy failure at seed {spec.seed}")
    rng = np.random.default_rng([spec.seed, 7])
    base = float(rng.normal(0.5, 0.1))
    noise = float(rng.normal(0.0, ctx.config["noise"]))
    value = base + (ctx.config["effect"] + noise if spec.arm == "better" else 0.0)
    return {"score": value, "curve": [value * (r + 1) / 3 for r in range(3)]}


def _decide(tw):
    outcome = on_reviewer(tw.outcome, holds_when="SUPPORTED")
    needs = "" if tw.seeds_needed is None else f"about {tw.seeds_needed} seeds"
    return outcome, tw.reason, needs, {"flip": tw.flip, "resolution": 0.01, "unit": "score"}


RULE = Rule("gain", "Three-way rule on per-seed scores better - base (alpha {alpha:.4g}, "
            "n = {n}): CONFIRMED when the {level:.4g}% CI lies above 0, REFUTED when it "
            "lies within (-{d:g}, +{d:g}) or below 0.", _decide)


def analyse(results, ctx) -> Analysis:
    arr = results_table(results, "score", ["base", "better"], ctx.seeds)
    alpha = 0.05 * getattr(ctx, "alpha_fraction", 1.0)
    d_margin = float(ctx.config.get("equivalence_margin", 0.05))
    tw = stats.three_way(arr["better"], arr["base"], margin=0.0, equivalence_margin=d_margin,
                         alpha=alpha)
    d = tw.difference
    est = (Estimate("gain", d.mean, d.low, d.high, d.level, d.n, d.method),
           Estimate("n_arms", 2))
    fig = Figure("curve", "toy curve", "round", "score",
                 ({"label": "better", "x": [0, 1, 2],
                   "y": results[RunSpec("better", ctx.seeds[0])]["curve"]},))
    table = Table("per seed", ("seed", "base", "better"),
                  tuple((s, float(a), float(b)) for s, a, b in
                        zip(ctx.seeds, arr["base"], arr["better"])))
    params = {"alpha": alpha, "n": d.n, "level": 100 * (1 - alpha), "d": d_margin}
    part = RULE(tw, params=params)
    if ctx.config.get("gated"):
        # the gain itself is the premise, decided by the same three-way rule, and the
        # part is gated by it: a premise FALSIFIED leaves the part nothing to decide
        status = {"SUPPORTED": "reproduced", "FALSIFIED": "not reproduced",
                  "INCONCLUSIVE": "undecided"}[tw.outcome]
        premise = Premise("better scores above base", status, tw.reason, est[0])
        part = premise_gate(part, premise)
    else:
        premise = Premise("better scores above base", "reproduced" if d.mean > 0 else
                          "undecided", "toy premise: the mean gain is positive", est[0])
    return Analysis(est, (part,), (table,), (fig,), ("A toy.",), premise=premise)


CLAIM = Claim(
    id="toy-claim", paper=FLAYER, record=RecordRef("toy.json", ("falsifier",)),
    title="toy", statement="A toy statement for harness tests.",
    arms=(Arm("base", "baseline"), Arm("better", "adds the effect", "toy Eq. 1")),
    rules=(RULE,), combination=ALL_PARTS, stochastic=True,
    scales={"smoke": {"effect": 1.0, "noise": 0.05, "equivalence_margin": 0.05,
                      "gated": False},
            "full": {"effect": 0.0, "noise": 0.5, "equivalence_margin": 0.05,
                     "gated": False}},
    run=run, analyse=analyse,
    paper_numbers=(PaperNumber("toy gain", 1.2, "Table 1", ours="gain"),),
    # the three-way rule decides from 6 pairs on (an exact test must be able to reach
    # alpha / 2): eight seeds let the toy's large effect be decided at one look
    default_seeds=tuple(range(8)),
)


def counted(calls: dict, with_decide: bool = True) -> Claim:
    """The toy claim whose ``analyse`` (and, with ``with_decide``, a ``decide`` of the same
    decisions) count their calls in ``calls["analyse"]`` and ``calls["decide"]``."""
    import dataclasses

    def counting_analyse(results, ctx):
        calls["analyse"] += 1
        return analyse(results, ctx)

    def decide(results, ctx):
        calls["decide"] += 1
        a = analyse(results, ctx)
        return a.parts, a.premise

    # analyse's own decisions, as kit.staged's are, so interim looks may trust it alone
    decide.staged = True
    return dataclasses.replace(CLAIM, analyse=counting_analyse,
                               decide=decide if with_decide else None)
