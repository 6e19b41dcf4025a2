"""Declarations of ``genefl-inverted-cosine``: what does GENE-FL's layer score select? (Its
code: ``audit/papers/genefl/inverted_cosine.py``.)

Paper: GENE-FL, arXiv 2504.14628v1, Eq. 9 (xi_l = cos(theta_l, theta~_l) / dim(theta_l),
normalised to sum 1) and Algorithm 1 lines 11-13 (sort xi descending, keep the top gamma
layers as the learnGene); the prose reads a high xi as strong private-data influence.
Review record 004 (``skeptic_critique.rationale``, ``referee_report.major_comments``,
``pith_extraction.falsifier``): a high cosine means the layer moved LESS, so the prose is
inverted and top-gamma keeps the most stable layers.

Three pieces (issue 6):
1. the reviewer's perturbation test on trained models: a copy with one known layer moved
   by a fixed relative amount; does the untouched layer score higher? (equal sizes, and
   different sizes, where the 1/dim factor enters);
2. the selection statistics on real client updates: the rank correlation of xi with 1/dim
   (``xi_dim_rank_correlation``), and how far top-gamma agrees with "the gamma most stable
   layers" (highest cosine) and with "the gamma smallest layers";
3. the run (a separate, labelled result): agnostic clients initialised from each arm's
   learnGene, accuracy after a fixed number of local steps; known clients' accuracy.
The verdict on the reviewer's claim comes from 1 and 2 only.

Issue 30 (record item ``referee_report.minor_comments[3]``): is top beating bottom fair?
Two controls run on every seed: ``bottom-gamma-bytes`` (a bottom gene of top-gamma's
parameter count, whole layers: ``audit.papers.genefl.algorithm.select_bytes_matched``) and
``bottom-gamma-no-classifier`` (bottom-gamma without the classifier trained on the known
classes); question ``fair-reversal`` compares top-gamma with each (Bonferroni over the
two). A gamma sweep (settings ``gamma=<fraction>``, top- and bottom-gamma on the first
``sweep_seeds`` seeds) repeats the reviewer's test at other gene sizes: question
``gamma-sweep``, one row per gamma, each by the same rule with its own premise.
"""
from __future__ import annotations

from audit.questions import Question
from audit.claims import GENEFL, RECORDS, Arm, PaperNumber, RecordRef
from audit.tuning import RegimeMap, Search, tuning_seeds

CLAIM_ID = "genefl-inverted-cosine"
PAPER = GENEFL
RECORD = RecordRef(RECORDS[GENEFL.arxiv_id], ("falsifier", "referee_report.major_comments[1]"))
TITLE = "inverted cosine score"
STATEMENT = ("A high cosine to the previous weights means a layer moved little, so keeping "
             "the top-scored layers keeps the most stable ones, the opposite of what the "
             "prose says the score measures.")
# plain `audit run` without seeds: the first sequential look (the three-way rule decides
# nothing below 6 pairs; a lock is reproduced with its own plan)
DEFAULT_SEEDS = tuple(range(10))
# the only keys a settings search may read (issue 30): with agnostic_val_fraction > 0 each
# agnostic client holds out that share of its fine-tuning examples, and a unit reports the
# mean accuracy on them after the same local steps, from the gene (`agnostic_val_acc`) and
# from no gene (`agnostic_val_acc_nogene`, the premise's baseline). Every other accuracy
# key reads test data and is refused without --allow-test-metric (the full-scale search
# below read test data: flagged in SEARCHES)
VALIDATION_METRICS = ("agnostic_val_acc", "agnostic_val_acc_nogene")

DELTA = 0.5  # the fixed relative perturbation: ||dtheta_l|| = DELTA * ||theta_l||
# accuracy equivalence margin d: 2 points of agnostic-client accuracy. Source: a stated
# multiple of the metric's resolution (one test example of a smoke agnostic client is
# 1/20 to 1/60 of its accuracy; over 4 clients one example moves the mean by about 0.004
# to 0.012: d is 2 to 5 examples), fixed before the run; `--set equivalence_margin=...`
# changes it and the printed rules.
EQUIV_MARGIN = 0.02
ALPHA = 0.05
# `selection`: Jaccard thresholds, stated choices fixed before the run (0.8: at most about
# one layer in ten differs between the two sets at gamma ~ 8; 0.5: fewer than two thirds
# shared)
J_HIGH, J_LOW = 0.8, 0.5

SMOKE_SIM = {"dataset": "digits", "model": "vgg", "model_kw": {"width": 0.5},
             "known_classes": list(range(7)), "agnostic_classes": list(range(5, 10)),
             "n_known": 6, "n_agnostic": 4, "alpha": 0.5, "clusters": 2, "svd_dim": 4,
             "rounds": 6, "clients_per_round": None, "local_epochs": 1, "batch_size": 32,
             "lr": 0.05, "gamma_fraction": 0.5, "lam_gen": 0.01, "lam_elg": 0.1,
             "fisher_quantile": 0.5, "finetune_steps": 8, "finetune_lr": 0.05,
             "agnostic_min_size": 60, "local_layers": "keep",
             "equivalence_margin": EQUIV_MARGIN,
             # the share of each agnostic client's training examples held out as its
             # validation split (`agnostic_val_acc`, for settings searches on tuning
             # seeds); 0: none, the run exactly as without it (every verdict run)
             "agnostic_val_fraction": 0.0,
             # issue 30: the gamma sweep (top- and bottom-gamma on the first sweep_seeds
             # seeds); 8 seeds: the three-way rule decides nothing on fewer pairs
             "gamma_sweep": [0.25, 0.75], "sweep_seeds": 8}
SCALES = {
    "smoke": SMOKE_SIM,
    # digits' classes 7-9 hold 426 training samples outside the known classes: 6 agnostic
    # clients of at least 50 (the smoke's 60 for 8 clients needed 480)
    # finetune_steps: chosen on tuning seeds (SEARCHES below)
    "full": {**SMOKE_SIM, "n_known": 12, "rounds": 30, "n_agnostic": 6, "clusters": 3,
             "finetune_steps": 10, "agnostic_min_size": 50},
    # CIFAR-10, the engine's CIFAR ResNet-18, shard partition with s = 4 shards a client
    # (our reading of the paper's s); needs --data-dir
    "paper": {**SMOKE_SIM, "dataset": "cifar10", "model": "resnet18", "model_kw": {},
              "partition": "shard", "shards": 4, "n_known": 20, "n_agnostic": 10,
              "clusters": 4, "rounds": 100, "clients_per_round": 10, "local_epochs": 1,
              "batch_size": 64, "lr": 0.01, "finetune_steps": 50, "svd_dim": 10,
              "gamma_sweep": [], "sweep_seeds": 0},
}

ARMS = (
    Arm("top-gamma", "learnGene = the gamma layers with the highest xi", "as printed "
        "(Algorithm 1 lines 11-13)"),
    Arm("bottom-gamma", "learnGene = the gamma layers with the lowest xi",
        "sort order reversed"),
    Arm("random-gamma", "learnGene = gamma layers drawn at random", "no score"),
    Arm("top-gamma-no-dim", "top gamma by cos alone", "Eq. 9 without the 1/dim factor"),
    Arm("top-gamma-reset", "top-gamma, clients restart every round from the full cluster "
        "model (Algorithm 1 line 4 literally)", "never-uploaded layers reset each round: "
        "reported, not in the verdict"),
    Arm("bottom-gamma-bytes", "learnGene = the lowest-xi layers, whole, taken from the "
        "lowest score upward while each brings the gene's parameter count closer to that "
        "of top-gamma on the same client update", "byte-matched control (issue 30)"),
    Arm("bottom-gamma-no-classifier", "learnGene = the gamma lowest-xi layers other than "
        "the classifier (the last linear layer)", "classifier-excluded control (issue 30)"),
)
ARM_NAMES = tuple(a.name for a in ARMS)
#: the arms of every gamma-sweep cell (the reviewer's test at another gene size)
SWEEP_ARMS = ("top-gamma", "bottom-gamma")
#: the fair controls of the reversal: arm -> part id
FAIR = {"bottom-gamma-bytes": "fair-bytes", "bottom-gamma-no-classifier": "fair-no-classifier"}

# ------------------------------------------------------------------------------- rules
RULE_DIRECTION = (
    "A derivation, checked numerically (its verdict is a proof, not an experiment): at "
    "equal size Eq. 9 orders layers by cosine, an untouched layer has cosine exactly 1 and "
    "a layer moved by delta x its norm orthogonally has cosine 1/sqrt(1 + delta^2) < 1, so "
    "the untouched layer must score higher. The reviewer's perturbation test checks it on "
    "each seed's trained model (delta = {delta}): CONFIRMED when the untouched layer scores "
    "higher in every equal-size pair; REFUTED when any moved layer scores higher than an "
    "untouched one of its size (only a numerical failure of the identity could do that); "
    "INCONCLUSIVE when the model has no two layers of equal size.")
RULE_SELECTION = (
    "Selection statistics on the top-gamma arm's real client updates (last round, every "
    "client of every cluster), one mean Jaccard overlap per seed, decided on the "
    "two-sided (1 - alpha) Student-t interval of their mean over the seeds (alpha the "
    "look's): CONFIRMED when the interval of the overlap of top-gamma by xi with the gamma "
    "highest-cosine (most stable) layers lies at or above {j_high}; REFUTED when it lies "
    "below {j_low} while the interval of the overlap with the gamma smallest layers lies at "
    "or above {j_high}; INCONCLUSIVE otherwise. Thresholds are stated choices fixed before "
    "the run (0.8: about one layer in ten differs). (Until 2026-12-04 the thresholds applied "
    "to the mean itself, as if the seeds' mean had no sampling error.)")
RULE_ACCURACY = (
    "The reviewer's own test, in both directions: agnostic-client accuracy after the fixed "
    "local steps, top-gamma (A) vs bottom-gamma (B), paired by seed. {rule}; equivalence "
    "counts only with assay sensitivity (a planted handicap of size d: round(d x n_test) "
    "correct predictions of the top-gamma model, drawn at random, relabelled wrong; "
    "detected by the same rule: CI of top minus planted above 0). Map onto the reviewer: "
    "top beats bottom -> REFUTED; bottom matches (equivalence) or beats top -> CONFIRMED; "
    "else INCONCLUSIVE. Gated by the premise (the gene beats no gene): INCONCLUSIVE where "
    "it is not reproduced.")
#: the fair controls' rule: a template of ``what`` and ``control`` (FAIR_CONTROLS), whose
#: result still holds the fields ``{rule}`` and ``{alpha}`` filled at the decision
RULE_FAIR = (
    "The reviewer's test made fair ({what}): agnostic-client accuracy after the fixed local "
    "steps, top-gamma (A) vs {control} (B), paired by seed over the seeds where the two "
    "cluster genes differ (a seed where they coincide would compare a gene with itself). "
    "{{rule}}, at alpha = {{alpha}} (0.05 split over the two fair controls, Bonferroni); "
    "equivalence counts only with the accuracy part's assay sensitivity. Map onto the "
    "reviewer: top beats the control -> REFUTED; the control matches (equivalence) or "
    "beats top -> CONFIRMED; else INCONCLUSIVE, and INCONCLUSIVE when the genes coincide on "
    "every seed. Gated by the premise (the gene beats no gene).")
#: part id -> what makes the reversal fair
FAIR_CONTROLS = {
    "fair-bytes": (
        "equal gene size: the lowest-xi layers, whole, walked from the lowest score upward, "
        "each taken when it brings the gene's parameter count closer to that of top-gamma "
        "on the same client update"),
    "fair-no-classifier": (
        "no classifier: the gamma lowest-xi layers other than the last linear layer, so the "
        "bottom gene does not carry the classifier trained on the known classes"),
}
FAIR_VACUOUS_NEEDS = ("a model whose layer sizes leave a bottom gene of top-gamma's size "
                      "other than top-gamma's own (or a gene of partial layers), or another "
                      "gamma")
RULE_GAMMA_SWEEP = (
    "The reviewer's accuracy test at each gene size gamma: the base gamma ({base}, all "
    "seeds: the part accuracy-top-vs-bottom) and each gamma of the sweep ({sweep}, the "
    "first {sweep_seeds} seeds), top-gamma vs bottom-gamma with the same three-way rule "
    "at the same alpha, each row gated by its OWN premise (top-gamma at that gamma beats "
    "no gene) and with its own assay sensitivity (a planted handicap in that row's "
    "top-gamma runs). CONFIRMED when every row is CONFIRMED, REFUTED when every row is "
    "REFUTED, INCONCLUSIVE otherwise (rows that disagree: the outcome depends on gamma).")

#: the assay sensitivity in the accuracy parts' reasons (base setting; a sweep cell)
SENSITIVITY = (" Assay sensitivity at d = {d}: top-gamma minus its planted copy (round(d "
               "x n) of each client's n test predictions made wrong) = {mean:.4f}, "
               "{ci} -> {seen}.{short}")
#: SENSITIVITY's {ci}, filled by audit.stats.ci_text (a zero-width or undefined interval
#: prints its no-interval text instead, never "[x, x]" or "nan")
SENSITIVITY_CI = "{level:g}% CI [{low:.4f}, {high:.4f}]"
#: SENSITIVITY's {short}, where the realised handicap is under SHORT_OF_D x d (clients
#: with fewer than about 1/d test examples get a rounded share of 0 or 1 example); the
#: notes (NOTE_THRESHOLDS's {short}) read the same test
SHORT_OF_D = 0.5  # the realised handicap is short of d below this share of d
SENSITIVITY_SHORT = (" The realised handicap is {mean:.4f}, not d: clients hold few test "
                     "examples, so round(d x n) falls short; what was detected is that gap, "
                     "smaller than d.")
SENSITIVITY_CELL = (" Assay sensitivity here: top-gamma minus its planted copy {mean:.4f} "
                    "-> {seen}.")

PREMISE_EFFECT = ("the learnGene (top-gamma, as printed) beats no gene on agnostic clients "
                  "(accuracy after the same local steps)")
PREMISE_RULE = "three-way rule, A = top-gamma gene, B = no gene, margin 0, d = {d}"

#: the questions (``audit.questions.Question`` fields)
QUESTIONS = (
    Question(id="prose-inverted",
             asks="Does a high Eq. 9 score mark the layers that moved least, the reverse of what "
                  "the prose says it measures?",
             fields=("referee_report.major_comments[1]", "falsifier"), parts=("direction",),
             kind="proof"),
    Question(id="top-gamma-keeps-stable",
             asks="On real client updates, does the printed top-gamma selection keep the most "
                  "stable (highest-cosine) layers?", fields=("referee_report.major_comments[1]",),
             parts=("selection",)),
    Question(id="selection-reversal",
             asks="Does reversing the selection (bottom-gamma) match or beat the printed "
                  "top-gamma for agnostic clients (the reviewer's own accuracy test)?",
             fields=("falsifier",), parts=("accuracy-top-vs-bottom",),
             decides="the learnGene's own gain over no gene must reproduce first"),
    Question(id="fair-reversal",
             asks="Made fair (a bottom gene of top-gamma's size; a bottom gene without the "
                  "classifier trained on the known classes), does reversing the selection match "
                  "or beat top-gamma? Yes if it does under either control; no if top-gamma "
                  "beats both.",
             fields=("referee_report.minor_comments[3]",),
             parts=("fair-bytes", "fair-no-classifier"), how="any",
             decides="the learnGene's own gain over no gene must reproduce first"),
    Question(id="gamma-sweep",
             asks="At every gene size gamma of the sweep, does reversing the selection "
                  "(bottom-gamma) match or beat top-gamma? (REFUTED: top-gamma wins at every "
                  "gamma; rows decided both ways leave it INCONCLUSIVE: it depends on gamma)",
             fields=("referee_report.minor_comments[3]",), parts=("gamma-sweep",), sweeps=True,
             decides="each gamma's own premise reproduced, with enough sweep seeds for the rule "
                     "to decide"),
)
CAVEATS = {"gamma-sweep": "gamma only: the clustering's SVD dimension, which the same record "
                          "item names, is not swept"}

# ------------------------------------------------------------------------------- notes
NOTE_PREMISE = (
    "Premise: {effect}: {status} (top minus no gene {mean:.4f}, {ci}). "
    "The accuracy part explains where that gain comes from, so it is gated by it; "
    "`direction` and `selection` are about the score and are not gated.")
NOTE_OWN_TEST = (
    "The reviewer's own test (top- vs bottom-gamma) enters the verdict both ways; here it "
    "says {verdict} (top minus bottom {mean:.4f}, {ci}){tail}")
#: the interval in NOTE_PREMISE, NOTE_OWN_TEST and FAIR_SAID, filled by
#: audit.stats.ci_text: a zero-width or undefined interval prints its no-interval text
#: (the method made no interval then), never "[x, x]" or "nan"
CI_METHOD = "{level:.4g}% CI [{low:.4f}, {high:.4f}], {method}"
#: NOTE_OWN_TEST's tail where the test goes against the reviewer
NOTE_OWN_TEST_AGAINST = (
    ": the consequence the reviewer draws goes against the reviewer, while the derivation "
    "behind it (`prose-inverted`) stands; the two are separate questions with separate "
    "verdicts.")
#: after NOTE_OWN_TEST where the accuracy part is fragile (Part.fragile: decided, and
#: one seed's metric moved by its flip distance, at most three test examples, flips it)
NOTE_OWN_TEST_FRAGILE = (
    " That word is fragile: moving one seed's agnostic accuracy by {flip:.4f} ({examples:.1f} "
    "test examples) would flip the decisive test.")
NOTE_DIRECTION = (
    "Direction is a derivation: at equal size Eq. 9 orders layers by cosine, and a moved "
    "layer's cosine is below 1, so the untouched layer always scores higher; the prose's "
    "reading (high xi = strong private-data influence) is the reverse of what the formula "
    "measures. The perturbation test only checks the identity numerically.")
NOTE_SIZE = (
    "Size: over trained layers the cosines sit near 1 and xi follows 1/dim almost exactly "
    "(Spearman {rho:.3f}); with different sizes the moved SMALLER layer still outscores an "
    "untouched larger one in {smaller:.0%} of pairs. Which layers top-gamma keeps is "
    "therefore mostly a matter of their size.")
NOTE_SELECTION = (
    "Caveat on `selection`: in this model the smallest layers (norm layers, conv1) are also "
    "the ones that move least, so 'most stable' and 'smallest' pick nearly the same set "
    "(Jaccard {js:.3f} and {jz:.3f}). The thresholds {j_high}/{j_low} are stated choices, "
    "not taken from the results.")
NOTE_KNOWN = (
    "Known clients (issue 16, item 7): as printed (Algorithm 1 line 4), a client starts "
    "every round from the FULL cluster model, and the server averages only uploaded layers, "
    "so a layer nobody uploads is reset to its initial value every round. With top-gamma "
    "(the smallest layers) that is nearly every weight: the arm `top-gamma-reset` shows "
    "that literal reading, known-client accuracy {reset:.3f} against a chance level of "
    "{chance:.3f}. The verdict's arms use our stated reading (`local_layers = keep`): every "
    "client trains all layers and keeps its own copy; the cluster model overwrites only "
    "the aggregated layers; known-client accuracy then {keep:.3f}. Which way it pushes: the "
    "reset reading trains the gene's small layers against random large ones, so it "
    "handicaps top-gamma relative to bottom-gamma (whose large layers are shared) - i.e. "
    "towards the reviewer.")
NOTE_THRESHOLDS = (
    "Thresholds: d = {d} (a stated multiple of the resolution, about {examples:.1f} test "
    "examples of the mean agnostic accuracy; one example = {resolution:.4f}); alpha = "
    "{alpha:g} (0.05 x the look's alpha fraction {fraction:g}). Assay sensitivity is "
    "checked with a planted handicap through the model's real predictions (round(d x n) "
    "correct predictions relabelled wrong): {sensitivity}; the handicap it planted, "
    "top-gamma minus its planted copy, is {realised:.4f}{short}. The planted copy shares "
    "the top-gamma arm's training, so it shows only that the metric resolves a handicap of "
    "that size. Between two trained arms the seed noise is far larger, so an equivalence "
    "within d is out of reach at this scale and the reviewer's test can in practice only "
    "go against the reviewer or stay undecided here. {mde}.")
#: NOTE_THRESHOLDS's {short}, where the realised handicap is short of d (SHORT_OF_D)
THRESHOLDS_SHORT = (", under {share:g} x d, not d: agnostic clients hold few test examples, "
                    "so round(d x n) plants less than d")
#: NOTE_THRESHOLDS's {mde}: the rule's minimum detectable effect (audit.stats.rule_mde at
#: the rule's own power, in units of the observed spread of the per-seed differences)
THRESHOLDS_MDE = (
    "At n = {n} the rule decides an effect of top vs bottom of {mde:.4f} with probability "
    "{power:g} (its minimum detectable effect, simulated on normal differences with the "
    "observed spread); smaller effects are decided less often, not never{run}")
#: THRESHOLDS_MDE's {run}, where the accuracy part was decided at an effect below it
THRESHOLDS_MDE_RUN = ": this run decided {verdict} at {mean:.4f}"
THRESHOLDS_NO_MDE = ("At n = {n} the rule decides no effect with probability {power:g} "
                     "(too few pairs, or seeds that differ, for its sign test)")
NOTE_SCALE = (
    "The accuracy part runs on a small setting ({scale}): {n} seeds; one test example is "
    "1/{lo} to 1/{hi} of an agnostic client's accuracy. A decision needs Hall's interval, "
    "widened by a skewness allowance, to agree with an exact sign test at alpha/2 a side; "
    "nothing is decided below 6 pairs.")
NOTE_DEVIATIONS = (
    "Deviations (named in audit/papers/genefl/algorithm.py): clustering by average linkage of "
    "data-subspace distances; the Fisher threshold as a quantile; an empirical Fisher from "
    "one minibatch; the cluster learnGene = the gamma layers most uploaded in the last "
    "round; agnostic clients hold only classes the known clients never see (digits 7-9: "
    "their pool is classes 5-9 minus every sample of the known classes 0-6); known clients "
    "keep their own layers (above).")
NOTE_FAIR = (
    "Fair controls (issue 30): at layer granularity an equal-size bottom gene exists only "
    "where the layer sizes allow it. Byte-matched: walking up from the lowest xi, a layer "
    "is taken when it brings the count closer to top-gamma's; here the gene holds "
    "{bytes_ratio:.2f} x top-gamma's parameters with Jaccard {bytes_jaccard:.2f} to its "
    "layers ({differ} of {n} seeds differ). Classifier excluded: bottom-gamma among the "
    "layers other than the last linear one, {nocls_ratio:.1f} x top-gamma's parameters. "
    "Each is compared with top-gamma at alpha {alpha_fair:g} (Bonferroni over the two), "
    "gated by the same premise. The gamma sweep repeats the reviewer's test with each "
    "gamma's own premise: {rows}.")

#: the tables' notes (paired differences; fair controls; gamma sweep)
TABLE_DIFFS_NOTE = ("Hall's skewness-corrected t intervals at the rule's alpha, descriptive; "
                    "the rule's own interval is wider (a skewness allowance) and must agree "
                    "with an exact sign test.")
TABLE_FAIR_NOTE = ("Paired by seed over the seeds where the genes differ; alpha {alpha_fair:g} "
                   "each (Bonferroni over the two controls); gated by the premise. Gene sizes "
                   "are the cluster genes' parameter counts.")
TABLE_SWEEP_NOTE = ("Agnostic-client accuracy, mean over seeds; each row its own premise "
                    "(top-gamma at that gamma beats no gene) and assay sensitivity.")

# ---------------------------------------------------------------------------- findings
FINDING_SIZE = (
    "In practice the Eq. 9 score is a size ranking: over the trained layers the cosines sit "
    "near 1, so xi follows 1/dim (Spearman {rho:.3f}) and top-gamma is the gamma smallest "
    "layers (Jaccard {jz:.3f}): it picks by size, and whether the smallest layers are also "
    "the most stable ones is the question `top-gamma-keeps-stable` answers.")
FINDING_REVERSAL = (
    "Reversing the selection: agnostic clients from the printed top-gamma gene score "
    "{diff:+.4f} against bottom-gamma (paired by seed), and the gene itself {premise:+.4f} "
    "against no gene.")
FINDING_FAIR = (
    "Made fair, top beating bottom {survives}. Without the classifier trained on the known "
    "classes (gene {nocls_ratio:.1f} x top-gamma's parameters, against {bottom_ratio:.1f} x "
    "for plain bottom-gamma), {nocls}; {bytes}.")
#: FINDING_FAIR's {survives}: both controls REFUTED / either CONFIRMED / otherwise
SURVIVES = ("survives both controls",
            "does not survive: a fair control matches or beats top-gamma",
            "is not decided by them")
#: FINDING_FAIR's {bytes}: the byte-matched gene is top-gamma's own on every seed / not
FAIR_BYTES_VACUOUS = (
    "the byte-matched control is top-gamma's own gene on every seed (the only whole layers "
    "small enough to match top-gamma's {params:.0f} parameters are top-gamma's layers), so "
    "it cannot be compared")
FAIR_BYTES = ("against a bottom gene of about the same size ({ratio:.2f} x top-gamma's "
              "parameters, {differ} of {n} seeds differ) {said}")
#: how one fair control came out, in FINDING_FAIR (compared / not compared)
FAIR_SAID = "top-gamma scores {mean:+.4f} against it ({ci}): {verdict}"
FAIR_NOT_SAID = "cannot be compared"
FINDING_SWEEP = ("Across gene sizes, top minus bottom (agnostic accuracy, paired by seed): "
                 "{rows}; the gamma-sweep question says {verdict}.")

#: How the settings were chosen (audit.tuning: tuning seeds only, never a verdict's).
SEARCHES = (
    Search("full", "agnostic clients' local steps at full scale (finetune_steps), where "
           "the learnGene's own gain over no gene (the premise) stands out most from its "
           "seed-to-seed noise", tuning_seeds(3),
           ("10 steps: top-gamma gene 0.908, no gene 0.789, gene - no gene +0.119 "
            "(SD 0.016)",
            "20 steps: gene 0.954, no gene 0.829, gene - no gene +0.125 (SD 0.095)"),
           "10 steps (`audit tune genefl-inverted-cosine --scale full --arms top-gamma "
           "--metric agnostic_acc --grid finetune_steps=10,20`, then --metric "
           "agnostic_acc_nogene)",
           "the same mean gain with a sixth of the spread, and fewer local steps leave the "
           "agnostic clients' accuracy more dependent on which layers the gene holds, the "
           "comparison the reviewer's test makes; clients, rounds and clusters are sized "
           "to the data (digits' classes 7-9 hold 426 samples) and to about 45 minutes at "
           "the cap of 20 seeds, not by any result",
           test_metric_read=True),
    Search("smoke", "gamma, the SVD dimension and the agnostic clients' local steps at "
           "smoke scale: where the learnGene's own gain over no gene shows on validation "
           "examples (the regime map below: 12 cells, 3 tuning seeds each, 6 for the two "
           "with the highest means)", tuning_seeds(6),
           ("8 local steps: the gene leads by +17.5 to +27.9 points in all 6 cells "
            "(gamma 0.25-0.75, SVD dimension 2 or 4); the no-gene model then still guesses "
            "one class a client",
            "32 local steps: +5.0 to +6.5 points; shown in 5 of 6 cells (gamma 0.25 with "
            "SVD dimension 2 unclear)",
            "the SVD dimension moves nothing at gamma 0.5 (+27.9 and +27.8; +6.47 twice)"),
           "the stated smoke setting, unchanged (gamma 0.5, SVD dimension 4, 8 local "
           "steps); the map's own choice is gamma 0.75, SVD dimension 2, 8 steps (+25.3, "
           "[+14.3, +36.3] on 6 seeds)",
           "the premise is already reproduced at the stated setting on verdict seeds, and "
           "the reviewer's comparisons are made at the paper's gamma; the map answers the "
           "record's sensitivity question instead: the gain is there at every gamma and SVD "
           "dimension tried, and most of it at 8 steps is the no-gene baseline not having "
           "learned yet",
           # keeping the stated setting read the premise on verdict seeds (the map, on
           # tuning seeds, shows the gain there too, but the choice was made on the former)
           verdict_seeds_used=True),
)

PAPER_NUMBERS = (
    PaperNumber("learnGene size", "9.04 MB", "abstract", ""),
    PaperNumber("selection rule", "top gamma by descending xi", "Algorithm 1", ""),
)

#: Where the learnGene's own gain over no gene appears (issue #30): gamma and the SVD
#: dimension (the record's minor comment 3 asks for both) and the agnostic clients' local
#: steps (at 8 steps the no-gene model still predicts one class a client); read on a
#: quarter of each agnostic client's fine-tuning examples held out as validation (the
#: map's clients fine-tune on the other three quarters), on tuning seeds only
#: (`audit regime genefl-inverted-cosine`).
REGIME_MAPS = (
    RegimeMap(
        "smoke", {"gamma_fraction": (0.25, 0.5, 0.75), "svd_dim": (2, 4),
                  "finetune_steps": (8, 32)},
        ("top-gamma", "top-gamma"), "agnostic_val_acc",
        "The learnGene (top-gamma, as printed) against no gene on agnostic clients, "
        "accuracy on their validation examples after the same local steps (points).",
        metric_b="agnostic_val_acc_nogene", seeds=3, refine=2, refine_seeds=3,
        fixed={"agnostic_val_fraction": 0.25}, budget_s=300.0, scale_by=100.0,
        unit="points",
        why="the paper reports neither gamma nor the SVD dimension's effect, and the "
            "premise at smoke compares the gene with a no-gene model that, after 8 local "
            "steps, still guesses one class a client: more steps give the baseline its "
            "chance."),
)
