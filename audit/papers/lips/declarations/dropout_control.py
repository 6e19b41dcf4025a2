"""Declarations of the falsifier ``lips-dropout-control`` (its code:
:mod:`audit.papers.lips.dropout_control`): is LIPS's gain more than generic
regularisation?

Paper: LIPS, arXiv 2506.00932v1. Review record: 2506.00932 ``skeptic_critique``
(``load_bearing_attack``, ``concrete_test``). CLAIMS.md section 4.

The reviewer's claim, paraphrased: the paper never runs a regularisation control
(dropout, weight decay or noise on the middle layers), so its accuracy gain is not shown
to come from curing layer inertia; the random-mask ablation beating the sensitivity
score on CIFAR-100 and the lack of a middle-only vs all-layers ablation point the same
way; tau0 and k were chosen on test data.

Premise first: LIPS must beat FedBN here (three-way rule, ``Analysis.premise``); the
parts that explain that gain (``regularisation-controls``, ``layer-targeting``,
``random-mask``) go through ``premise_gate`` and are INCONCLUSIVE where it does not.

Parts: ``regularisation-controls`` and ``layer-targeting`` are the reviewer's own test and
decide their question (any of them, the reviewer's "or"); each its own question, outside
their Bonferroni family: ``random-mask``
(LIPS vs the same pruning with a random mask), ``selection-optimism`` (does choosing
(tau0, k) on test instead of validation add at least the margin d per run: >= 0 by
construction, so tested against d, never against 0, and only where the grid could add
d), and a measurement without a verdict, ``middle-cosine`` (does each
control lift the middle layers' cosine to round 2 off its inertia, as LIPS does; the
reviewer's second criterion, not a threshold because pruning lowers it by construction).

What we run (``audit.papers.lips.algorithm``): FedBN and LIPS as printed, its ablations
(random mask, all layers, the released score with the horizon scaled to the run) and
three controls (dropout on the middle layers, weight decay, Gaussian noise on the middle
layers at LIPS's period), each tuned with the same small grid chosen on the clients'
validation splits; plus two diagnostic arms: a planted handicap of about the margin
(FedBN stopped at 90 % of the rounds, chosen on tuning seeds 1000-1004) for assay
sensitivity at the margin's scale, and the paper's freeze test (middle layers frozen
after round f).

Why this setting can separate arms (a prototype on 8x8 digits with 60 rounds sat at a
98 % ceiling): training is cut to a budget where FedBN is still improving, each client
holds only 20 training images, and every client's test split is drawn from the
held-out digits test set (never seen by any client) with the client's own label
proportions, 30 images each, so the metric has 900 test decisions per seed. The
smoke setting was set with a pilot on seeds 0-2, which are also verdict seeds (stated in
the report); the planted handicap's size was chosen on tuning seeds only. At ``full``
scale (60 rounds) the 90 % cut was not re-calibrated.
"""
from __future__ import annotations

from audit.questions import Question
from audit.claims import LIPS, RECORDS, Arm, PaperNumber, RecordRef
from audit.seeds import tuning_seeds
from audit.tuning import RegimeMap, Search, Setting

CLAIM_ID = "lips-dropout-control"
PAPER = LIPS
RECORD = RecordRef(RECORDS[LIPS.arxiv_id], ("skeptic_critique.load_bearing_attack",
                                            "skeptic_critique.concrete_test", "falsifier",
                                            "referee_report.major_comments[0]",
                                            "referee_report.major_comments[1]",
                                            "referee_report.major_comments[2]",
                                            "referee_report.major_comments[3]",
                                            "referee_report.major_comments[4]"))
TITLE = "dropout control"
STATEMENT = ("The accuracy gain of LIPS is never compared with generic regularisation "
             "of the middle layers (dropout, weight decay, noise) nor with pruning every "
             "layer, so it is not shown to come from curing layer inertia; random masks "
             "do as well as the sensitivity score, and the hyperparameters were picked "
             "on test data.")
# plain `audit run` without seeds: the first sequential look (the three-way rule
# decides nothing below 6 pairs; a lock is reproduced with its own plan)
DEFAULT_SEEDS = tuple(range(10))
# the metric `audit tune` may read: personalised accuracy on the clients' validation
# splits (every other accuracy reads test data)
VALIDATION_METRICS = ("val_acc",)

# ------------------------------------------------------------------------------ arms
ARMS = (
    Arm("fedbn", "FedBN: dense local SGD, norm layers kept local, no server piece",
        "baseline (no LIPS)"),
    Arm("lips", "LIPS as printed: every k rounds prune the lowest |dw * w| fraction "
        "tau0 (1 - t/T) of each middle layer (T = run length)", "as printed (Sec. 4)"),
    Arm("lips-random", "LIPS with a uniformly random mask of the same size",
        "score: random instead of |dw * w| (paper Table 4 ablation)"),
    Arm("lips-all-layers", "LIPS pruning every conv and linear weight, not only the "
        "middle layers", "layer set: all weight layers instead of middle"),
    Arm("lips-released-score", "LIPS with the released code's score |grad * w| (last "
        "local minibatch) and its schedule rule (masking on rounds divisible by k), the "
        "horizon T scaled to the run (the release fixes T = 300 for its 300-round runs, "
        "T/R = 1; --set released_horizon=300 gives the unscaled reading); leaves out that "
        "the release has no FedBN client (norm layers are kept local here, as in every arm)",
        "score |grad * w| instead of |dw * w|; T = R as in the release's own runs"),
    Arm("fedbn-dropout-middle", "FedBN with dropout after every middle layer, rate tuned",
        "control: model option dropout_middle instead of pruning"),
    Arm("fedbn-weight-decay", "FedBN with local SGD weight decay, strength tuned",
        "control: weight decay instead of pruning"),
    Arm("fedbn-noise-middle", "FedBN + Gaussian noise (scale x layer std) added to the "
        "middle layers on LIPS's rounds with LIPS's decay", "control: noise instead of "
        "zeroing"),
    Arm("fedbn-short", "FedBN stopped after short_fraction of the rounds: a planted "
        "handicap of about the equivalence margin (assay sensitivity at the margin's "
        "scale; the fraction was chosen on tuning seeds 1000-1004, never verdict seeds)",
        "rounds: short_fraction x R"),
    Arm("fedbn-freeze-middle", "FedBN whose middle layers get no update after round f "
        "(paper's Table 1 freeze test)", "local lr of middle layers 0 after round f"),
)
CONTROLS = ("fedbn-dropout-middle", "fedbn-weight-decay", "fedbn-noise-middle")

# The tuning grid: the same budget (number of candidates) for every tuned arm.
# LIPS-family candidates are (tau0, k); noise is (sigma0, k); dropout a rate; wd a decay.
_GRID_SMOKE = {
    "lips": [(0.2, 5), (0.5, 5)],
    "lips-random": [(0.2, 5), (0.5, 5)],
    "lips-all-layers": [(0.2, 5), (0.5, 5)],
    "lips-released-score": [(0.2, 5), (0.5, 5)],
    "fedbn-dropout-middle": [0.1, 0.3],
    "fedbn-weight-decay": [1e-3, 1e-2],
    "fedbn-noise-middle": [(0.2, 5), (0.5, 5)],
}

_COMMON = dict(n_clients=30, n_train=20, n_val=10, n_test=30, alpha=0.1,
               model="vgg", width=0.25, batch_size=10, local_epochs=1, momentum=0.0,
               freeze_fraction=1 / 6, short_fraction=0.9, reference_round=2,
               equivalence_margin=2.0, alpha_family=0.05, alpha_beside=0.05,
               alpha_premise=0.05, released_horizon=None, checkpoint_every=10,
               curve_points=10, dataset_kw={})
# short_fraction = 0.9: the planted handicap's size, chosen on TUNING seeds at each scale
# (SEARCHES, at the end of this module). Before, 2/3 of the rounds (a 16.7-point
# handicap) showed only gross sensitivity.

SCALES = {
    "smoke": {**_COMMON, "dataset": "digits", "rounds": 30, "lr": 0.1, "grid": _GRID_SMOKE},
    # rounds and lr chosen on tuning seeds, short_fraction re-checked there (SEARCHES)
    "full": {**_COMMON, "dataset": "digits", "n_clients": 40, "width": 0.5, "rounds": 60,
             "lr": 0.03,
             "grid": _GRID_SMOKE},
    # The paper's main setting (Sec. 5): CIFAR-100, Dir(0.1), 100 clients x 100 samples,
    # ResNet-8, 300 rounds; read from ctx.data_dir on a GPU.
    "paper": {**_COMMON, "dataset": "cifar100", "n_clients": 100, "n_train": 100,
              "n_val": 20, "n_test": 50, "model": "resnet8", "width": 1.0,
              "batch_size": 32, "local_epochs": 1, "rounds": 300, "lr": 0.05,
              "grid": {"lips": [(0.2, 10), (0.5, 10)], "lips-random": [(0.2, 10), (0.5, 10)],
                       "lips-all-layers": [(0.2, 10), (0.5, 10)],
                       "lips-released-score": [(0.2, 10), (0.5, 10)],
                       "fedbn-dropout-middle": [0.1, 0.3],
                       "fedbn-weight-decay": [5e-4, 5e-3],
                       "fedbn-noise-middle": [(0.2, 10), (0.5, 10)]},
              # float32 by default; --set amp=bf16 autocasts the forward on CUDA (every
              # arm trains alike, so it cannot favour one; it was not faster for FLAYER's
              # ResNet-18 on an H200, and was not timed here)
              "amp": None},
}


# ------------------------------------------------------------------ thresholds
N_COMPARISONS = 4  # three controls + all layers
#: Equivalence margin of the middle-layer cosine (to the round-2 weights, at the last
#: round). Source: the paper calls a layer inert when this cosine is above 0.95, a band of
#: 0.05 below 1; e = 0.02 is under half of that band, as d is under half of the paper's
#: accuracy gain. Fixed before any run of the part that uses it.
COS_MARGIN = 0.02
#: The paper's inertia level: a layer is inert when its cosine to round 2 is above it.
INERTIA_LEVEL = 0.95

# ------------------------------------------------------------------------- rules
#: The two combined parts share one text; {what} and {names} are filled per part (below),
#: the other fields when the part is decided.
FAMILY_TEXT = (
    "{what}: for each of {names}, A = LIPS, B = the alternative, personalised test "
    "accuracy in points, margin m = 0, equivalence margin d = {d} points (set before the "
    "runs as under half of the paper's 4.76-point CIFAR-100 gain of LIPS over FedBN), "
    "alpha = {alpha_family} x {alpha_fraction} (share of this look) / {m} (Bonferroni over "
    "the {m} comparisons of the two combined parts) = {alpha}: the {three_way}. "
    "Equivalence counts only where assay sensitivity at the margin's scale is shown: FedBN "
    "beats the planted handicap (FedBN stopped at {short_rounds} of {rounds} rounds, "
    "about d) with the same rule, seeds and alpha (SUPPORTED). CONFIRMED when some "
    "alternative is equivalent to LIPS or better (FALSIFIED); REFUTED when LIPS beats "
    "every one (all SUPPORTED); else INCONCLUSIVE. The part explains LIPS's gain, so it is "
    "INCONCLUSIVE ('premise not reproduced', or 'not shown', 'at this scale') unless the "
    "premise (LIPS beats FedBN) is reproduced. Accuracy alone decides this part; the "
    "middle-layer cosine the reviewer also names is reported per arm in the measurement "
    "part `middle-cosine` and is not a criterion here (pruning and noise change the middle "
    "weights right after aggregation, so their lower cosine to round 2 follows from the "
    "intervention by construction); the reading with both criteria is part "
    "controls-match-both (question regularisation-matches-both).")
FAMILY_PARTS = {
    "regularisation-controls": ("Regularisation controls (the reviewer's own test)",
                                "dropout / weight decay / noise on the middle layers"),
    "layer-targeting": ("Layer targeting (the reviewer's own test, second half)",
                        "LIPS on all weight layers"),
}
RANDOM_TEXT = (
    "Random mask (its own question, which enters the claim's single word as every "
    "question does): A = LIPS, B = LIPS "
    "with a uniformly random mask of the same size (same seeds, same tuning budget, each "
    "at its validation-chosen candidate), margin m = 0, d = {d} points, alpha = "
    "{alpha_beside} x {alpha_fraction} = {alpha} (its own question, outside the "
    "Bonferroni family of the combined parts): the {three_way}. Mapped onto the reviewer "
    "(the score is not needed): FALSIFIED -> CONFIRMED, SUPPORTED -> REFUTED. Equivalence "
    "counts only with the planted handicap detected at this alpha; gated by the premise "
    "(it explains LIPS's gain).")
SELECTION_TEXT = (
    "Selection optimism (its own question, outside the Bonferroni family): in every run "
    "(seed) of LIPS, the candidate (tau0, k) with the highest test accuracy and the one "
    "with the highest validation accuracy are picked (first on ties); the per-seed "
    "optimism is the difference of their test accuracies. It is >= 0 by construction, so "
    "it is never tested against 0: it is tested against d = {d} points, the accuracy "
    "margin fixed before the run (under half the paper's gain: an optimism below d could "
    "not carry a gain of the paper's size). Paired against 0 per seed, margin m = d, "
    "alpha = {alpha_beside} x {alpha_fraction} = {alpha}: the {three_way}. CONFIRMED "
    "(choosing on test flatters LIPS by at least d, as the reviewer worries) on "
    "SUPPORTED; REFUTED (it adds less than d) on FALSIFIED, counted only where the "
    "candidates' test accuracies differ per run by at least d on average (the most any "
    "choice could add: below d, 'less than d' would be foregone); INCONCLUSIVE "
    "otherwise. Not gated by the premise: it is about how the number is reported, "
    "whatever LIPS gains.")
COSINE_TEXT = (
    "Middle-layer cosine (a measurement, no verdict; the reviewer's second comparison "
    "criterion): for LIPS and every control, the mean over seeds of the middle layers' "
    "cosine to their round-2 weights at the last round, and FedBN minus it (paired 95% "
    "Student-t CI over the {n} seeds): does the control lift the middle layers off their "
    "inertia as LIPS does? The paper's inertia level is a cosine above {inertia_level}. "
    "Not decided: LIPS and the noise control lower the cosine by construction (they zero "
    "or perturb the weights after aggregation), dropout and weight decay do not act on "
    "the global weights directly, so a difference says what each intervention does to "
    "the weights, not whether learning resumed.")
OVERFIT_TEXT = (
    "Overfitting (a measurement, no verdict; the paper blames inertia on overfitting "
    "without measuring it): for every arm, the clients' personalised accuracy on their "
    "own training split minus that on their own test split (each the mean over clients, "
    "as the reported accuracy), read every {every} rounds and at the last; reported per "
    "arm as the mean over the {n} seeds of the last round's gap with its 95% Student-t "
    "interval, and the curve. No threshold for 'overfits' exists independently of the "
    "results.")
GAP_TEXT = (
    "Does LIPS narrow the train-test gap (its own question, outside the Bonferroni "
    "family): A = FedBN's gap, B = LIPS's gap (train minus test accuracy at the last "
    "round, points; paired over seeds, each arm at its validation-chosen candidate), "
    "margin m = 0, d = {d} points (the accuracy margin: a gap is a difference of two "
    "accuracies in the same points, and a narrowing smaller than d could not carry a gain "
    "of the paper's size), alpha = {alpha_beside} x {alpha_fraction} = {alpha}: the "
    "{three_way}. Mapped onto the reviewer (the overfitting story is not what LIPS "
    "cures): FALSIFIED (LIPS's gap equivalent to FedBN's or larger) -> CONFIRMED, "
    "SUPPORTED (LIPS narrows it) -> REFUTED. Equivalence counts only with assay "
    "sensitivity shown on the gap itself: the planted handicap (FedBN stopped at "
    "{short_rounds} of {rounds} rounds) must move FedBN's gap by at least d on average, "
    "and the same rule, seeds and alpha must tell its gap apart from FedBN's (SUPPORTED, "
    "or FALSIFIED on the wrong side: the gap may move either way). That handicap is sized "
    "on accuracy, and detecting it there does not carry over to the gap, which it need "
    "not move; where the gap check fails, an equivalence of the gaps leaves the part "
    "INCONCLUSIVE. Gated by the premise (it explains LIPS's gain).")
BEST_ROUND_TEXT = (
    "Best round against last round (a measurement, no verdict): for every arm and seed, "
    "the highest personalised test accuracy over the curve (read every {every} rounds "
    "and at the last) minus the last round's, the mean over the {n} seeds; and LIPS minus "
    "FedBN (paired 95% Student-t CI) read at the last round and at each run's best "
    "round, with whether its sign changes. Best minus last is >= 0 by construction (the "
    "best round is chosen on the test split), so it is reported, not tested.")
BOTH_TEXT = (
    "The reviewer's test in full (accuracy AND middle-layer cosine): for each of dropout "
    "/ weight decay / noise on the middle layers, two three-way comparisons, paired over "
    "seeds, at alpha = {alpha_family} x {alpha_fraction} / {m} (Bonferroni over the {m} "
    "controls; within a control both must hold, so each runs at that alpha) = {alpha}. "
    "Accuracy: A = LIPS, B = the control, personalised test accuracy, m = 0, d = {d} "
    "points (as in regularisation-controls). Cosine: A = the control, B = LIPS, mean "
    "middle-layer cosine to the round-2 weights at the last round, m = 0, equivalence "
    "margin e = {e} (under half of the 0.05 band above the paper's inertia level 0.95, "
    "as d is under half of the paper's gain): 'the control stays more inert than LIPS'. "
    "Both: the {three_way}, with d read as e for the cosine. A control matches LIPS when "
    "both are FALSIFIED (accuracy equivalent or better, cosine equivalent or lower); "
    "CONFIRMED when some control matches, REFUTED when LIPS beats every control on at "
    "least one (a SUPPORTED), else INCONCLUSIVE. Equivalence counts only with assay "
    "sensitivity: on accuracy the planted handicap detected at this alpha; on the cosine "
    "FedBN with its middle layers frozen after round f told apart from FedBN (its cosine "
    "higher, SUPPORTED) at this alpha. Caveat, as in middle-cosine: pruning and noise "
    "lower the cosine by changing the weights after aggregation. Gated by the premise.")
#: what a REFUTED of controls-match-both rests on where one criterion alone decided it
#: (``Part.basis``). One failed criterion is enough for an AND question, but a reader
#: should know which: the cosine is one that pruning moves by construction
BOTH_BASIS_COSINE = ("on the middle-layer cosine: every control leaves it higher than LIPS "
                     "does, and LIPS beats none on accuracy; pruning moves that cosine by "
                     "construction")
BOTH_BASIS_ACCURACY = "on accuracy: LIPS beats every control there, and none on the cosine"

# ------------------------------------------------------ what the decisions say (templates)
NO_SENSITIVITY_FAMILY = ("no assay sensitivity at the margin's scale (the planted handicap "
                         "was not detected), so no equivalence counts; ")
NO_SENSITIVITY = "no assay sensitivity at the margin's scale, so no equivalence counts; "
NO_SENSITIVITY_ON = "no assay sensitivity on {}, so no equivalence counts there; "
#: gap-not-narrowed without assay sensitivity on the gap (``gap_sensitivity``)
NO_SENSITIVITY_GAP = (
    "no assay sensitivity on the gap: the planted handicap moves FedBN's train-test gap by "
    "{shift:+.3g} points ({why}); the sensitivity it shows on accuracy does not carry over "
    "to the gap, so no equivalence of the gaps counts; ")
GAP_SENS_SMALL = "under d = {d:g} in size"
GAP_SENS_APART = "not told apart from FedBN's gap by the rule at this alpha"
GAP_NEEDS_SENSITIVITY = ("a planted handicap that moves the train-test gap by at least d "
                         "(assay sensitivity on the gap itself)")
NEEDS_SEEDS = "seeds that would detect the observed differences: "
NEEDS_PAIRS = "{} would detect the observed difference"
NEEDS_OTHER = "a larger or different setting"
NO_THRESHOLD = "a threshold fixed independently of the results (none exists here)"
SELECTION_REASON = (
    "per-run optimism (test-chosen minus validation-chosen test accuracy, LIPS) against "
    "d = {margin:g}: {reason}; the candidates' test accuracies differ by {grid_range:.3g} "
    "points per run on average, the most any choice could add")
SELECTION_FOREGONE = (
    "the grid cannot show it: its candidates differ by {grid_range:.3g} points per run on "
    "average, under d = {margin:g}, so an optimism below d is foregone; ")
SELECTION_NEEDS = "a tuning grid whose candidates differ by at least d per run"
#: The intervals the texts below print, filled by audit.stats.ci_text: a zero-width or
#: undefined interval prints its no-interval text in their place, never "[x, x]" or "nan"
CI_T_2 = "95% t CI [{low:.2f}, {high:.2f}]"
CI_T_3 = "95% t CI [{low:.3f}, {high:.3f}]"
CI_95_2 = "95% CI [{low:.2f}, {high:.2f}]"
CI_95_3 = "95% CI [{low:.3f}, {high:.3f}]"
CI_CONF_2 = "{conf:.4g}% CI [{low:.2f}, {high:.2f}]"
ENDS_2 = "[{low:.2f}, {high:.2f}]"
COSINE_FEDBN = "fedbn {:.3f}"
COSINE_ARM = "{arm} {mean:.3f} (FedBN minus it {d.mean:.3f}, {d_ci}; {below} {level:g})"
COSINE_REASON = ("measured, not decided: mean middle-layer cosine to the round-2 weights at "
                 "the last round: {}.")
COSINE_NEEDS = "a cosine criterion that the intervention does not meet by construction"
OVERFIT_ARM = "{arm} {m.mean:.2f} {m_ci} (peak {peak:.2f})"
OVERFIT_REASON = ("measured, not decided: train minus test accuracy at the last round, "
                  "points, mean [95% t CI] (largest gap over the curve): {}.")
OVERFIT_NEEDS = ("a threshold for 'overfits' fixed independently of the results (none "
                 "exists here); whether LIPS narrows the gap is question gap-not-narrowed")
BEST_ROUND_REASON = (
    "measured, not decided: best-round minus last-round test accuracy, mean over seeds "
    "(points): {bits}. LIPS - FedBN at the last round {last.mean:+.2f} ({last_ci}), at "
    "each run's best round {best.mean:+.2f} ({best_ci}): the sign {changes} between the "
    "readings.")
BOTH_BIT = "{c}: accuracy {a} ({a_reason}); cosine {k} ({k_reason})"

# ------------------------------------------------------------------------ premise
PREMISE_EFFECT = "LIPS beats FedBN (personalised test accuracy, points)"
PREMISE_ESTIMATE = ("LIPS minus FedBN, {conf:.4g}% {method} CI (paper: +4.76 on CIFAR-100 "
                    "Dir(0.1))")
PREMISE_RULE = "three-way rule on LIPS - FedBN (m = 0, d = {d:g}, alpha = {alpha:.4g})"

# ---------------------------------------------------------------------- questions
PREMISE_NEEDS = ("LIPS's own gain over FedBN must reproduce first, and no cell of the "
                 "two smoke regime maps (data per client, depth, heterogeneity, (tau0, k): "
                 "16 cells; task difficulty down to FedBN at 43 %, the paper's level: 12 "
                 "cells; all on tuning seeds) showed it: the paper's setting would decide "
                 "(--scale paper: CIFAR-100, ResNet-8, 300 rounds; `audit estimate "
                 "lips-dropout-control --scale paper --device cuda --data-dir PATH` gives its "
                 "device time)")

#: The questions: (id, what it asks, the record fields it answers, the parts that decide
#: it, options of audit.questions.Question).
QUESTIONS = (
    Question("regularisation-matches",
             "Does generic regularisation of the middle layers (dropout, weight decay or "
             "noise, tuned on validation data) match or beat LIPS?",
             ("skeptic_critique.concrete_test", "skeptic_critique.load_bearing_attack",
              "falsifier", "referee_report.major_comments[1]"),
             ("regularisation-controls",), decides=PREMISE_NEEDS),
    Question("layer-targeting",
             "Does pruning every weight layer match pruning only the middle ones?",
             ("referee_report.major_comments[4]", "skeptic_critique.concrete_test"),
             ("layer-targeting",),
             decides=PREMISE_NEEDS),
    Question("random-mask",
             "Do random masks of the same size match or beat the sensitivity masks?",
             ("referee_report.major_comments[0]", "skeptic_critique.concrete_test"),
             ("random-mask",),
             decides=PREMISE_NEEDS),
    Question("selection-optimism",
             "Does choosing (tau0, k) on the test set flatter LIPS by at least the margin "
             "d?", ("referee_report.major_comments[2]",), ("selection-optimism",)),
    Question("middle-cosine",
             "How far does each arm move the middle layers off their inertia (cosine to "
             "round 2)?", (), ("middle-cosine",), kind="measurement"),
    # the reviewer's concrete test names two criteria; regularisation-matches keeps the
    # accuracy-only reading (unchanged), this question asks for both at once, so a
    # reader sees each reading with its own verdict
    Question("regularisation-matches-both",
             "Does some regularisation control match LIPS on accuracy AND on the "
             "middle-layer cosine, as the reviewer's test asks?",
             ("skeptic_critique.concrete_test",), ("controls-match-both",),
             decides=PREMISE_NEEDS),
    Question("overfitting",
             "How large is the train-test accuracy gap of every arm, round by round?",
             ("referee_report.major_comments[3]",), ("overfitting",), kind="measurement"),
    Question("gap-not-narrowed",
             "Does LIPS leave the train-test gap no narrower than FedBN's (equivalent or "
             "wider), against what its overfitting story implies? (CONFIRMED: LIPS does not "
             "narrow it; REFUTED: it does)", ("referee_report.major_comments[3]",),
             ("gap-not-narrowed",), decides=PREMISE_NEEDS),
    Question("best-round",
             "How much higher is the best round's accuracy than the last round's, and "
             "does LIPS's comparison with FedBN change sign between the two readings?",
             ("referee_report.major_comments[2]",), ("best-round",), kind="measurement"),
)

#: How the questions combine: the parts explaining LIPS's gain wait for the premise.
COMBINATION_TEXT = ("the parts explaining LIPS's gain are INCONCLUSIVE where that gain (the "
                    "premise) is not reproduced")

# -------------------------------------------------------------- notes and findings
NOTE_PREMISE = (
    "Premise (LIPS beats FedBN): {status}. {reason} Where it is not reproduced, the parts "
    "that explain LIPS's gain ({gated}) are "
    "INCONCLUSIVE with 'premise not reproduced at this scale' (or 'not shown', where the "
    "premise is undecided), whatever their comparisons say (each comparison's own outcome stays in its reason and in the comparisons table).")
NOTE_SETTING = (
    "Setting and why it can separate arms: 8x8 digits, {n_clients} clients with {n_train} "
    "training images each drawn with Dirichlet({alpha}) label proportions (the paper's "
    "per-client draw), {rounds} rounds. A prototype at 60 rounds saturated at about 98% "
    "personalised accuracy for every arm; here training stops where FedBN is still "
    "improving, and every client's test split comes from the held-out test set ({n_test} "
    "images per client, {n_test_seed} per seed, resolution {resolution:.2f} points). How "
    "the rounds, learning rate, width and client count were chosen is recorded under 'How "
    "the settings were chosen' (at smoke scale on seeds 0-2, which are also verdict seeds, "
    "as that section says; at full scale on tuning seeds only).")
NOTE_SENSITIVITY = (
    "Assay sensitivity at the margin's scale: planted handicap: FedBN stopped at "
    "{short_rounds} of {rounds} rounds, its size chosen on tuning seeds to give a gap of "
    "about d (see 'How the settings were chosen'). On the verdict seeds FedBN minus that "
    "arm is {sd.mean:.2f} points ({sd_ci}, three-way "
    "{outcome} at the family's alpha {alpha:.4g}: {detected}; at the random-mask part's "
    "alpha {a_side:.4g}: {detected_side}). An equivalence counts only where it is "
    "detected. Caveat: the handicap is the same FedBN run cut short (its pairs share the "
    "trajectory up to the cut), so its differences vary less than those between two "
    "differently trained arms; the minimum detectable effects of the combined comparisons "
    "(power 0.8, where inconclusive) are: {mdes} points.")
NOTE_SENSITIVITY_GAP = (
    " On the train-test gap (question gap-not-narrowed) the same arm moves FedBN's gap by "
    "{g.mean:+.2f} points ({g_ci}, three-way {outcome}): sensitivity on the gap {shown}. "
    "The handicap is sized on accuracy, and its detection there does not carry over to "
    "the gap, so an equivalence of the gaps counts only where this check is shown (a "
    "shift of at least d, told apart).")
DETECTED = {True: "detected", False: "not detected"}
NO_MDES = "none (all decided)"
NOTE_GAIN = ("LIPS minus FedBN: {g.mean:.2f} points, {g_ci} (paper: +4.76 on CIFAR-100). "
             "{where}. Parts: {decided}.")
#: Where LIPS's gain over FedBN lies: its 95% t CI above 0, below 0, or around 0.
GAIN_WHERE = {
    "above": "LIPS beats FedBN here, so the comparisons speak to a real gain",
    "below": ("LIPS is worse than FedBN here, so the paper's gain did not reproduce in this "
              "setting; the verdict then says only that nothing on these runs ties LIPS's "
              "effect to the middle layers or to its score, not that the paper's gain is "
              "regularisation"),
    "around": ("LIPS is not distinguishable from FedBN here, so the comparisons concern an "
               "effect that may be absent in this setting"),
}
NOTE_TUNING = (
    "Tuning: every tuned arm gets the same number of candidates; the candidate with the "
    "highest mean validation accuracy (clients' validation splits, disjoint from their "
    "training data) is reported; the 'chosen on test' columns show what picking on the "
    "test splits would have reported (selection optimism, at least 0 by construction); "
    "the per-seed optimism picks the best candidate on test in every run separately, as a "
    "per-run peek at the test split would.")
NOTE_INERTIA = (
    "Inertia: FedBN's middle layers end at a mean cosine of {c.mean:.3f} to their round-2 "
    "weights ({c_ci}; the paper reports above 0.95). Freezing them after round {f_round} "
    "changes accuracy by {f.mean:.2f} points ({f_ci}; the paper: under one point lost "
    "after round 50 of 300). Random masks minus sensitivity masks: {r.mean:.2f} points "
    "({r_ci}; the paper's Table 4: +2.30).")
NOTE_BESIDE = (
    "Two questions of their own, outside the Bonferroni family of the combined parts; "
    "both are experiments and enter the claim's single word. Random masks (review comment "
    "on Table 4; question random-mask, gated by the premise): LIPS minus LIPS-random "
    "{r.mean:.2f} points ({r_ci}; three-way: {outcome}). Selection optimism (review "
    "comment on tau0 and k picked on test; question selection-optimism): choosing LIPS's "
    "candidate on test instead of validation in each run adds {opt.mean:.2f} points "
    "({opt_ci}); it is at least 0 by construction, so it is tested against the margin d, "
    "never against 0; the candidates differ by "
    "{grid_range:.2f} points per run on average, which bounds what any choice could add. "
    "What this shows: how much picking among our {n_c} candidates on the test splits "
    "inflates the reported number in this setting. What it does not show: the size of the "
    "optimism in the paper's own numbers (its grid in Figure 7 is larger, optimism grows "
    "with the number of candidates and the spread of their results, and its data, model "
    "and rounds differ), nor anything about reporting the best round instead of the last, "
    "which the comment also raises: the verdicts read the last round; the best-round "
    "reading is the measurement best-round.")
NOTE_FAITHFUL = (
    "Faithful arms. lips-released-score uses the released code's score |grad * w| and its "
    "schedule rule with the horizon T scaled to the run length (the release's T = 300 "
    "equals its own 300-round runs). The earlier reading, T fixed at 300 in a "
    "{rounds}-round run, still pruned about {pruned:.0f}% of the middle weights in the last "
    "pruning round and was evaluated right after, which pushed the released arm down (in "
    "the smoke runs of commit 9965520, the last that used it, by 4.4 points against LIPS; "
    "not a number of this run, and it never entered the verdict); "
    "--set released_horizon=300 restores it. Every arm keeps norm layers local (FedBN); "
    "the release has no FedBN client.")
NOTE_THRESHOLDS = (
    "Thresholds and their sources: d = {d:g} points, under half of the paper's 4.76-point "
    "CIFAR-100 gain (fixed before any run); alpha = 0.05 for the combined family "
    "(Bonferroni over {m} comparisons), 0.05 for the premise and for random-mask, each "
    "times this look's share {frac:.4g}; the inertia level 0.95 is the paper's.")
NOTE_COSINE = (
    "Caveat on the cosine: LIPS, its ablations and the noise control change middle weights "
    "directly after aggregation, so their lower cosine to round 2 partly measures the "
    "perturbation itself, not renewed learning; hence the cosine is measured (part "
    "middle-cosine) and is no criterion of questions regularisation-matches and "
    "layer-targeting, which accuracy alone decides. It is the second criterion of "
    "question regularisation-matches-both (part controls-match-both, with its own margin "
    "e and its own sensitivity check), whose word carries this caveat.")
NOTE_SCALE = (
    "Caveat on scale: this is a small CPU setting (digits, a VGG-style net of width "
    "{width}), not CIFAR-100 with ResNet-8 at 300 rounds; the paper's numbers are shown "
    "beside ours only for orientation. With {n} seeds and a Bonferroni alpha of "
    "{alpha:.4g} equivalence needs a small spread of the differences; the seeds needed are "
    "given when a comparison is inconclusive. A decision needs Hall's interval, widened by "
    "a skewness allowance, to agree with an exact sign test at alpha/2 a side (nothing is "
    "decided below 6 pairs). The paper scale reads CIFAR-100 from --data-dir (ResNet-8, "
    "100 clients x 100 images, 300 rounds); TinyImageNet with ResNet-10 is the same scale "
    "with --set dataset=\"tinyimagenet\" --set model=\"resnet10\".")
FINDING_PREMISE = ("The paper's own effect, LIPS over FedBN, is {status} here ({value:+.2f} "
                   "points); the questions that explain it wait for it.")
FINDING_COSINE = (
    "The middle-layer cosine drop that the paper reads as cured inertia appears with plain "
    "Gaussian noise too: FedBN's final middle cosine minus the arm's is {lips:+.4f} for "
    "LIPS and {noise:+.4f} for the noise control (dropout {dropout:+.4f}); both perturb the "
    "weights right after aggregation.")

# ---------------------------------------------------------------------- estimates
#: The estimates' descriptions (templates where an arm, a comparison or a level enters).
EST = {
    "assay_sensitivity_gap": (
        "FedBN minus FedBN stopped at {short_rounds} of {rounds} rounds (planted handicap "
        "of about d = {d:g}), {conf:.4g}% CI; sensitive when its lower end exceeds 0 "
        "(three-way SUPPORTED)"),
    "assay_sensitive": "1 if the planted handicap was detected at the family's alpha",
    "assay_sensitive_beside": ("1 if the planted handicap was detected at the random-mask "
                               "part's alpha"),
    "metric_resolution": "one test decision per seed (all clients' test splits together)",
    "lips_minus_fedbn": "LIPS gain over FedBN (paper: +4.76 on CIFAR-100)",
    "lips_minus": "LIPS minus {c}, {conf:.4g}% CI (Bonferroni)",
    "mde": "smallest LIPS - {c} difference this comparison detects with power 0.8",
    "lips_random_minus_lips": "random mask minus sensitivity mask (paper Table 4: +2.30)",
    "lips_released_score_minus_lips": ("released score |grad * w| (T scaled to the run) "
                                       "minus the printed one"),
    "freeze_minus_fedbn": ("middle layers frozen after round f, minus FedBN (paper Table 1: "
                           "under one point lost)"),
    "acc": "personalised test accuracy of {arm}",
    "middle_cos_final": ("{arm}: mean middle-layer cosine to the round-2 weights at the last "
                         "round (paper's inertia: above 0.95)"),
    "cos_lift": ("FedBN's final middle cosine minus {arm}'s (how far it lifts the middle "
                 "layers off their inertia)"),
    "selection_optimism": ("{arm}: mean test accuracy of the candidate with the highest "
                           "mean test accuracy minus that of the candidate with the highest "
                           "mean validation accuracy (one pooled choice over the seeds on "
                           "each side)"),
    "selection_optimism_per_seed": ("{arm}: mean over seeds of the best candidate's test "
                                    "accuracy in each run minus the test accuracy of the "
                                    "pooled validation choice (the one candidate with the "
                                    "highest mean validation accuracy over the seeds)"),
    "lips_minus_lips-random": ("LIPS minus LIPS with a random mask (part random-mask), "
                               "{conf:.4g}% CI"),
    "selection_optimism_per_run_lips": (
        "LIPS: per run, test accuracy of the candidate chosen on test minus that of the "
        "candidate chosen on validation in the same run (a per-run choice on both sides, "
        "not the pooled one of selection_optimism_per_seed_lips; part selection-optimism; "
        ">= 0 by construction, tested against d)"),
    "selection_grid_range_lips": ("LIPS: per run, highest minus lowest test accuracy over "
                                  "the tuning candidates (the most a choice could change "
                                  "the number)"),
    "lips_gain_if_tuned_on_test": "LIPS minus FedBN had LIPS been tuned on test",
    "gap_fedbn_minus_lips": ("FedBN's train-test gap minus LIPS's at the last round (part "
                             "gap-not-narrowed), {conf:.4g}% CI"),
    "planted_gap_shift": (
        "FedBN stopped at {short_rounds} of {rounds} rounds: its train-test gap minus "
        "FedBN's at the last round (assay sensitivity on the gap, part gap-not-narrowed), "
        "{conf:.4g}% CI; shown when at least d = {d:g} in size and told apart by the "
        "three-way rule"),
    "gap_sensitive": ("1 if the planted handicap moved the train-test gap by at least d, "
                      "told apart at the gap-not-narrowed part's alpha (assay sensitivity "
                      "on the gap itself)"),
    "lips_minus_fedbn_best_round": ("LIPS minus FedBN, each run read at its best round "
                                    "(test-chosen)"),
    "cosine_margin": ("equivalence margin e of the middle-layer cosine (under half of the "
                      "paper's 0.05 inertia band)"),
    "cosine_sensitive": ("1 if FedBN with frozen middle layers was told apart from FedBN on "
                         "the cosine at the controls-match-both alpha"),
    "cos_freeze_minus_fedbn": ("planted cosine difference: frozen middle layers minus FedBN, "
                               "{conf:.4g}% CI"),
    "cos_minus_lips": ("{c}'s final middle cosine minus LIPS's (part controls-match-both), "
                       "{conf:.4g}% CI"),
    "gap": "{arm}: train minus test accuracy at the last round (overfitting)",
    "best_minus_last": "{arm}: best-round minus last-round test accuracy (>= 0 by construction)",
}
#: The stem of each cosine arm's estimates (``<stem>_middle_cos_final``, ``cos_lift_<stem>``).
COS_STEMS = {"fedbn": "fedbn", "lips": "lips", "fedbn-dropout-middle": "dropout",
             "fedbn-weight-decay": "weight_decay", "fedbn-noise-middle": "noise"}

# ------------------------------------------------------------------ tables, figures
T_ARMS = "Arms: chosen hyperparameters (validation), personalised accuracy (%)"
T_ARMS_COLUMNS = ("arm", "chosen (val)", "val acc", "test acc", "95% t CI", "chosen on test",
                  "test acc if test-tuned", "middle cos (last)", "middle zeros (last)",
                  "s/run")
T_ARMS_NOTE = ("Mean over seeds {seeds}; hyperparameters: LIPS family (tau0, k), noise "
               "(sigma0, k), dropout rate, weight decay.")
T_GRID = "Tuning grid: mean validation and test accuracy per candidate (%)"
T_GRID_COLUMNS = ("arm", "candidate", "val acc", "test acc")
T_GRID_NOTE = ("The same number of candidates for every tuned arm; the choice is by "
               "validation accuracy; test is shown only to measure the selection optimism.")
T_CMP = ("Comparisons of the combined parts, the premise and the planted handicap (points; "
         "paired over seeds)")
T_CMP_COLUMNS = ("comparison", "mean", "(1 - alpha) interval of the rule", "alpha",
                 "equivalence p (exact sign tests)", "three-way outcome", "flip (points)",
                 "seeds needed")
T_CMP_NOTE = (
    "Three-way outcome about 'A beats B' (m = 0); d = {d:g} points; the combined parts' "
    "alpha = {alpha:.4g} (Bonferroni over {m}, times this look's share {frac:.4g}); "
    "equivalence is the same interval inside (-d, +d); flip = the smallest change of one "
    "seed's difference that changes the outcome (resolution {resolution:.3g} points).")
T_SIDE = "Part random-mask, its own question (points; paired over seeds)"
T_SIDE_NOTE = ("Part random-mask; d = {d:g} points; alpha = {alpha:.4g}: its own question "
               "(`random-mask`), outside the Bonferroni family of the combined parts; like "
               "every question it enters the claim's single word.")
T_PER_SEED = "Per-seed personalised test accuracy (%) at the chosen candidate"
T_LAYERS = "Per middle layer: cosine to the round-2 weights at the last round"
T_CURVE = "Overfitting and best round: train-test gap and best vs last round (points)"
T_CURVE_COLUMNS = ("arm", "gap (last round)", "95% t CI", "largest gap", "best-round acc",
                   "last-round acc", "best - last")
T_CURVE_NOTE = ("Curves read every {every} rounds and at the last; mean over seeds {seeds}; "
                "each arm at its validation-chosen candidate. LIPS - FedBN: last round "
                "{last:+.2f}, best round {best:+.2f}.")
T_BOTH = ("The reviewer's test in full: each control against LIPS on accuracy and on the "
          "middle-layer cosine")
T_BOTH_COLUMNS = ("control", "lips - control (points)", "accuracy outcome",
                  "control - lips (cosine)", "cosine outcome")
T_BOTH_NOTE = ("alpha = {alpha:.4g}; d = {d:g} points, e = {e:g}; cosine sensitivity (frozen "
               "minus FedBN): {f.difference.mean:+.4f} {f.outcome}; accuracy sensitivity: "
               "{acc_sens}.")
SHOWN = {True: "shown", False: "not shown"}
ACC_METRIC = "personalised test accuracy, points"  # the misbehaviour table's metric
FIG_COS = ("middle_cosine", "Inertia: mean middle-layer cosine to round-2 weights", "round",
           "cosine")
FIG_COS_CAPTION = ("Mean over seeds, band = min..max over seeds. Pruning zeroes weights, "
                   "which lowers the cosine by construction.")
FIG_ACC = ("accuracy", "Accuracy minus FedBN's, paired over seeds (95% t CI)", "arm",
           "difference (points)")
FIG_ACC_CAPTION = ("Personalised test accuracy at the validation-chosen candidate; dropout, "
                   "wd, noise are the controls; short is the known-worse arm of the "
                   "sensitivity check.")
#: The bar labels of the accuracy figure (every arm but FedBN, in this order).
BAR_LABELS = {"lips": "lips", "lips-random": "random", "lips-all-layers": "all-layers",
              "lips-released-score": "released", "fedbn-dropout-middle": "dropout",
              "fedbn-weight-decay": "wd", "fedbn-noise-middle": "noise",
              "fedbn-freeze-middle": "freeze", "fedbn-short": "short"}
FIG_GAP = ("overfitting_gap", "Overfitting: train minus test accuracy per round", "round",
           "gap (points)")
FIG_GAP_CAPTION = ("Personalised accuracy on the clients' own training splits minus on "
                   "their test splits, mean over seeds, band = min..max.")

# ----------------------------------------------------------------------- searches
#: How the settings were chosen (audit.tuning: tuning seeds only, never a verdict's,
#: except the first smoke record, made before tuning seeds were reserved: it says so).
SEARCHES = (
    Search("smoke", "rounds, learning rate, width and clients at smoke scale (speed, and "
           "accuracy off the ceiling that a 60-round prototype hit)", (0, 1, 2),
           ("a short pilot of FedBN, early-stopped FedBN, LIPS, dropout and all-layer LIPS "
            "(its numbers were not kept)",
            "re-checked on tuning seeds 1000-1004: FedBN still gains 2.24 points (SD 1.13) "
            "over its last 3 of 30 rounds, so the setting is off the ceiling there too"),
           "30 clients x 20 images, VGG width 0.25, 30 rounds, lr 0.1",
           "the fastest setting that left the ceiling; the tuning grids were fixed before "
           "that pilot", verdict_seeds_used=True),
    Search("smoke", "size of the planted handicap (assay sensitivity at the margin d = 2 "
           "points): the fraction of rounds the early-stopped FedBN runs", tuning_seeds(5),
           ("27 of 30 rounds: FedBN - short FedBN 2.24 points (SD 1.13)",
            "26 rounds: 2.00 (SD 1.42)", "24 rounds: 4.84"),
           "short_fraction 0.9 (27 of 30 rounds)",
           "26 and 27 rounds both put the gap at about d (2.00 and 2.24 points); 27 has "
           "the smaller spread; 24 rounds is more than twice d"),
    Search("full", "learning rate and rounds at full scale, where LIPS's own gain over FedBN "
           "(the premise) shows most: the paper's effect given its best chance",
           tuning_seeds(3),
           ("60 rounds, lr 0.1: FedBN 94.53, LIPS (tau0 0.2) 94.96, LIPS (tau0 0.5) 94.27; "
            "LIPS(0.2) - FedBN +0.42 points (SD 0.57)",
            "60 rounds, lr 0.03: FedBN 87.16, LIPS 87.91 and 88.20; +0.76 (SD 0.10)",
            "100 rounds, lr 0.1: FedBN 96.04, LIPS 96.27 and 95.80; +0.22 (SD 0.28)",
            "100 rounds, lr 0.03: FedBN 94.36, LIPS 94.49 and 94.58; +0.13 (SD 0.53)"),
           "60 rounds, lr 0.03 (`audit tune lips-dropout-control --scale full --arms "
           "fedbn,lips --metric test_acc --grid rounds=60,100 --grid lr=0.1,0.03 "
           "--contrast lips/cand=0:fedbn/cand=0`, 50 clients)",
           "the largest LIPS - FedBN gain for both tuning candidates, at the cost of the "
           "60-round settings, with FedBN furthest from the ceiling (87 against 94-96 %)",
           test_metric_read=True),
    Search("full", "clients at full scale: 50 clients would take about 55 minutes at the "
           "cap of 20 seeds (340 units of about 9.5 s measured), so 40; is the learning "
           "rate still the one where LIPS's gain shows most?", tuning_seeds(3),
           ("40 clients, lr 0.1: FedBN 93.81, LIPS 94.00 and 94.28; LIPS(0.2) - FedBN "
            "+0.19 points (SD 0.97)",
            "40 clients, lr 0.03: FedBN 86.64, LIPS 87.31 and 88.14; +0.67 (SD 1.30)"),
           "40 clients, lr 0.03 (`audit tune ... --set n_clients=40 --set rounds=60 "
           "--grid lr=0.1,0.03`)",
           "the time budget sets the clients; lr 0.03 still gives LIPS its larger gain",
           test_metric_read=True),
    Search("full", "size of the planted handicap at full scale (d = 2 points)",
           tuning_seeds(5),
           ("50 clients: short_fraction 0.8 (48 of 60 rounds): FedBN - short FedBN 4.39 "
            "points (SD 0.63); 0.9 (54 rounds): 2.05 (SD 0.28); 0.95 (57 rounds): 0.83 "
            "(SD 0.54)",
            "40 clients (the chosen setting): 0.9: 1.97 (SD 0.83)"),
           "short_fraction 0.9 (54 of 60 rounds)", "the fraction whose gap is closest to d"),
    Search("smoke", "data per client, depth, heterogeneity and LIPS's (tau0, k) at smoke "
           "scale: where LIPS's own gain over FedBN shows on validation data (the regime "
           "map below: 16 cells, 3 tuning seeds each, 6 for the two with the highest "
           "means)", tuning_seeds(6),
           ("20 images a client: LIPS - FedBN from +0.11 to +1.44 points in the six cells "
            "left at 3 seeds, none with its interval above 0",
            "60 images a client: from -1.11 to +0.67, LIPS behind FedBN in 6 of 8 cells",
            "second rung (6 seeds): VGG, 20 images, Dir(0.1), (0.2, 5) +0.22, [-1.54, "
            "+1.99]; ResNet-8, 20 images, Dir(0.5), (0.5, 10) +0.83, [-0.71, +2.37]"),
           "none: the smoke setting is unchanged (VGG width 0.25, 20 images a client, "
           "Dir(0.1), the (tau0, k) grid of the arms)",
           "no cell of the second rung shows the effect; one first-rung cell (VGG, 60 "
           "images, Dir(0.5), (0.2, 5): +0.67 on 3 seeds) did, and fell to -0.06 on 6 in "
           "an earlier run of the map, which is why only second-rung cells may be chosen"),
    Search("smoke", "task difficulty at smoke scale: digits against Gaussian blobs shaped "
           "like digits at noise 2 and 3, by data per client and (tau0, k), with the VGG "
           "and Dir(0.1): where LIPS's own gain over FedBN shows off the ceiling (the "
           "second regime map below: 12 cells, 3 tuning seeds each, 6 for the two with "
           "the highest means among those where FedBN reaches 20 points)", tuning_seeds(6),
           ("digits: LIPS - FedBN from -1.11 to +1.67 points, FedBN at 87-96 %",
            "blobs, noise 2: FedBN at 55 % (20 images a client) and 74 % (60); LIPS - "
            "FedBN from -1.56 to +1.56; second rung (6 seeds): (0.5, 10) +1.56, [-0.59, "
            "+3.71]; (0.2, 5) -0.50, [-5.53, +4.53]",
            "blobs, noise 3: FedBN at 43 % (20 images, the paper's CIFAR-100 level) and "
            "56 % (60); LIPS behind in all four cells, -0.78 to -3.11"),
           "none: the smoke setting is unchanged (digits, VGG width 0.25, 20 images a "
           "client, Dir(0.1), the (tau0, k) grid of the arms)",
           "no cell of the second rung shows the effect, and where FedBN is as far from "
           "the ceiling as in the paper (43 %), LIPS is behind it (-3.11, [-9.43, +3.21] "
           "on 3 seeds): the missing gain is not an artefact of digits being easy"),
)

PAPER_NUMBERS = (
    PaperNumber("FedBN, CIFAR-100 Dir(0.1)", 43.08, "main results table", ours="acc_fedbn"),
    PaperNumber("LIPS, CIFAR-100 Dir(0.1)", 47.84, "main results table", ours="acc_lips"),
    PaperNumber("LIPS-Random, CIFAR-100 Dir(0.1)", 50.14, "Table 4", ours="acc_lips-random"),
    PaperNumber("FedBN, TinyImageNet Dir(0.1)", 36.83, "main results table"),
    PaperNumber("LIPS, TinyImageNet Dir(0.1)", 40.61, "main results table"),
    PaperNumber("accuracy lost by freezing middle layers after round 50", "under 1 point",
                "Table 1", ours="freeze_minus_fedbn"),
)


# ----------------------------------------------------------------------- regime maps
#: Where LIPS's own gain over FedBN appears (issue #30): data per client, depth (the VGG
#: of the smoke scale against the paper's ResNet-8), heterogeneity and LIPS's own (tau0, k),
#: none of which the earlier searches varied; read on the clients' validation splits, on
#: tuning seeds only (`audit regime lips-dropout-control`).
# LIPS's (tau0, k) as a map axis: its arm's only candidate in each cell
_TAU_K = (Setting("(0.2, 5)", {"grid": {**_GRID_SMOKE, "lips": [(0.2, 5)]}}),
          Setting("(0.5, 10)", {"grid": {**_GRID_SMOKE, "lips": [(0.5, 10)]}}))
REGIME_MAPS = (
    RegimeMap(
        "smoke", {"model": ("vgg", "resnet8"), "n_train": (20, 60), "alpha": (0.1, 0.5),
                  "tau0, k": _TAU_K},
        ("lips", "fedbn"), "val_acc",
        "LIPS against FedBN, final personalised accuracy on the clients' validation splits "
        "(points).",
        seeds=3, refine=2, refine_seeds=3, budget_s=900.0, scale_by=100.0, unit="points",
        why="the earlier searches varied lr, rounds and clients, where LIPS's gain stayed "
            "under a point; the paper argues from overfitting on small local data (its "
            "clients hold 100 images) with a ResNet-8, and prunes on its own (tau0, k) "
            "grid, so data per client, depth, heterogeneity and (tau0, k) are where its "
            "effect should turn."),
    # the first map's cells all sat at 86-98 % (digits is easy); the paper's FedBN is at
    # 43 % on CIFAR-100. Gaussian blobs in digits' 8 x 8 shape are made as hard as that
    # by their noise (a check of FedBN on one tuning seed: noise 1 about 91 %, 2 about 46-50 %, 3
    # about 35-38 %), with the VGG and Dir(0.1) of the smoke setting
    RegimeMap(
        "smoke", {"data": (Setting("digits", {"dataset": "digits", "dataset_kw": {}}),
                           Setting("blobs, noise 2", {"dataset": "synthetic",
                                                      "dataset_kw": {"n": 1797, "noise": 2.0}}),
                           Setting("blobs, noise 3", {"dataset": "synthetic",
                                                      "dataset_kw": {"n": 1797, "noise": 3.0}})),
                  "n_train": (20, 60),
                  "tau0, k": _TAU_K},
        ("lips", "fedbn"), "val_acc",
        "LIPS against FedBN off the ceiling: task difficulty, final personalised accuracy "
        "on the clients' validation splits (points).",
        seeds=3, refine=2, refine_seeds=3, budget_s=700.0, scale_by=100.0, unit="points",
        b_floor=20.0,  # twice the 10 % of guessing: FedBN must learn
        why="every cell of the first map sat near the ceiling (86-98 %), where a "
            "regulariser has little to correct; the paper's FedBN is at 43 %. Noisier "
            "data (Gaussian blobs shaped like digits, noise 2 and 3: FedBN about 35-50 % "
            "on one tuning seed) is where overfitting, the paper's own explanation, has "
            "room to act."),
)
