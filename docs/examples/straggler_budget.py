"""demo-stragglers: a client-side claim (docs/WRITING_A_CLAIM.md, "A client-side claim").

Reviewer's claim, in our words: when most sampled clients manage only an eighth of their
local steps in a round, FedAvg ends more than MARGIN below the same run with full work.
The arms differ in one client piece: each client's work budget (``local_steps``).
"""
from __future__ import annotations

import numpy as np

from audit import kit, questions, stats
from audit.analysis import results_table
from audit.claims import Analysis, Arm, Claim, Paper, RecordRef, RunContext, RunSpec
from audit.fl.engine import Algorithm
from audit.questions import Question
from audit.verdict import Estimate

MARGIN, ALPHA = 0.05, 0.05  # the margin comes from the paper, never from our runs
# the share of stragglers and their fraction of steps are the claim's own terms (its
# statement), fixed before any run; never tuned on verdict seeds


class Stragglers(Algorithm):
    """FedAvg in which a share of each round's sampled clients are stragglers that take
    only ``fraction`` of their planned minibatch steps (at least one)."""

    name = "stragglers"

    def __init__(self, share: float, fraction: float, seed: int):
        super().__init__()
        self.share, self.fraction, self.seed = share, fraction, seed
        self.slow: set[int] = set()

    def on_round_start(self, round, sampled_client_ids):
        # who straggles depends on the seed and the round only: the same on both paths
        rng = np.random.default_rng([self.seed, 7, round])
        k = int(self.share * len(sampled_client_ids) + 0.5)  # nearest whole
        self.slow = set(rng.choice(sampled_client_ids, k, replace=False).tolist())

    def local_steps(self, client_id, round, planned):
        if client_id not in self.slow:
            return None  # every planned step
        return max(1, int(self.fraction * planned))


ARMS = (
    Arm("full", "FedAvg; every sampled client takes all its planned local steps",
        "as the paper runs it"),
    Arm("stragglers", "as full, but a share of the sampled clients take only a fraction "
        "of their steps", "client: local_steps cut for stragglers"),
)
ARM_NAMES = tuple(a.name for a in ARMS)
SCALES = {s: {"dataset": "digits", "n_clients": 10, "clients_per_round": 5,
              "dirichlet_alpha": 0.5, "rounds": r, "local_epochs": 2, "batch_size": 32,
              "lr": 0.1, "share": 0.8, "fraction": 0.125, "margin": MARGIN}
          for s, r in (("smoke", 10), ("full", 30), ("paper", 100))}


def run(spec: RunSpec, ctx: RunContext) -> dict:
    import torch

    from audit.fl.data import dirichlet_partition, load_dataset, make_federated
    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_model

    cfg = ctx.config
    torch.set_num_threads(1)
    ds = load_dataset(cfg["dataset"], data_dir=ctx.data_dir, seed=0)
    rng = np.random.default_rng([spec.seed, 0])  # the same clients for every arm: paired
    part = dirichlet_partition(ds.y_train, cfg["n_clients"], cfg["dirichlet_alpha"], rng)
    fed = make_federated(ds, part, 0.1, 0.0, rng)
    alg = (Stragglers(cfg["share"], cfg["fraction"], spec.seed) if spec.arm == "stragglers"
           else Algorithm())
    fl = FLConfig(rounds=cfg["rounds"], clients_per_round=cfg["clients_per_round"],
                  local_epochs=cfg["local_epochs"], batch_size=cfg["batch_size"],
                  lr=cfg["lr"], seed=spec.seed, device=ctx.device, eval_every=cfg["rounds"],
                  eval_init=True, eval_personal=False, eval_val=True, layer_metrics=False)
    h = run_federated(lambda: build_model("cnn", 10, 1, 8, width=0.5), fed, alg, fl,
                      checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)
    return {"init_acc": float(h.test_acc[0]), "final_acc": float(h.test_acc[-1]),
            "val_acc": float(h.val_acc[-1]), "n_test": int(len(fed.y_test))}


RULE_GAP = kit.pair_rule(
    "gap", "Paired over seeds, metric = final global test accuracy, A = full, B = stragglers: "
    "{rule}. CONFIRMED when SUPPORTED (stragglers cost more than m = {margin}), REFUTED when "
    "FALSIFIED, INCONCLUSIVE otherwise.", a="full", b="stragglers",
    metric="final accuracy", holds_when="SUPPORTED")  # the reviewer: full wins by > m


def analyse(results, ctx: RunContext) -> Analysis:
    seeds, alpha = list(ctx.seeds), kit.look_alpha(ALPHA, ctx)  # a look's share of alpha
    m = float(ctx.config["margin"])
    final = results_table(results, "final_acc", ARM_NAMES, seeds)
    init = results_table(results, "init_acc", ["full"], seeds)["full"]
    # no planted handicap here, so no equivalence counts (sensitive=False) in either rule
    learns = stats.three_way(final["full"], init, margin=0.0, equivalence_margin=m,
                             alpha=alpha, sensitive=False)
    premise = kit.premise("FedAvg with full work learns (final beats initial accuracy)",
                          learns)
    n_test = int(results[RunSpec("full", seeds[0])]["n_test"])
    tw, part = kit.decide_pair(RULE_GAP, final["full"], final["stragglers"], margin=m,
                               equivalence_margin=m, alpha=alpha, sensitive=False,
                               resolution=1 / n_test, unit="accuracy", gate=premise)
    estimates = (Estimate.of("gap", tw.difference, "accuracy", "full - stragglers"),
                 *kit.arm_means(final, ARM_NAMES, "final_acc", "accuracy",
                                "final global accuracy"))
    return Analysis(estimates, (part,), (), (), (), premise=premise)


QUESTIONS = (Question("gap", "Do stragglers cost more than the margin in final accuracy?",
                      ("falsifier",), ("gap",), kind="experiment",
                      decides="full-work FedAvg must first learn (the premise)"),)
CLAIM = Claim(
    id="demo-stragglers", paper=Paper("2401.01234", "an example paper", "1", "example"),
    record=RecordRef("an example review record", ("falsifier",)),
    title="stragglers' cut local work", statement="When most sampled clients take only an "
    "eighth of their local steps, FedAvg ends more than the margin below full work.",
    arms=ARMS, rules=(RULE_GAP,), combination=questions.combination(QUESTIONS),
    questions=QUESTIONS, stochastic=True, default_seeds=tuple(range(8)), scales=SCALES,
    run=run, analyse=analyse)
