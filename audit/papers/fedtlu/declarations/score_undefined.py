"""Falsifier ``fedtlu-score-undefined``: FedTLU's layer score at std(dW) = 0, and its scale.

Paper: FedTLU, arXiv 2412.17692v2, Section III: ``Score(W) = ||dW|| / (sqrt(n) std(dW))``
for the aggregated change dW of a layer with n entries. Review record 001
(``referee_report.minor_comments[0]``): the score has no value when std(dW) = 0, which a
frozen or unselected layer produces, and the paper does not say what happens then.

What we compute (no training seeds: two derivations, checked exactly or on a seeded
sweep, and one seeded simulation, ``planted-pick``, an experiment with exact binomial
intervals):

- ``undefined``: the printed formula evaluated literally in float64 (numpy, population
  std, no guard; :func:`literal_score`) on updates whose std is 0: all-zero (a frozen
  layer: 0/0), constant non-zero (x/0), a one-entry layer; beside them, what the
  project's guarded :func:`audit.papers.fedtlu.algorithm.score` returns (imported: all-zero ->
  0.0, constant non-zero -> +inf, its documented choice) and the rounding case (a
  constant whose float64 mean is not exact, so np.std is a few 1e-17 and the literal
  score is a huge finite number instead of inf).
- ``scale-invariant``: with the population std, ||dW||^2 / n = mean^2 + var, so
  Score = sqrt(1 + mean^2 / var) (:func:`audit.papers.fedtlu.algorithm.score_identity`), which
  does not change when dW is multiplied by any c != 0. A seeded sweep (numpy generator
  seeded 0) of random updates (sizes, means, spreads, distributions) and scales c
  (log-uniform in [1e-6, 1e6], random sign): the largest relative change of the score
  under scaling, and the largest relative gap to the identity.
- ``planted-pick`` (the first half of the review's falsifier): on a two-block quadratic
  loss, a quiet block whose update lowers the loss against a loud block whose update is
  noise (it raises the loss), in three planted families that differ only in whether a
  block's entries share a sign; which block does the score pick, and is it the useful
  one? By the identity above the score sees only mean^2 / var of the entries, so the
  answer should follow sign consistency, not usefulness; the seeded instances show it.

The code (the literal formula, the sweeps, the decisions and the presentation) is in
``audit/papers/fedtlu/score_undefined.py``.
"""
from __future__ import annotations

from audit.questions import Question
from audit.claims import FEDTLU, RECORDS, Arm, PaperNumber, RecordRef

CLAIM_ID = "fedtlu-score-undefined"
PAPER = FEDTLU
RECORD = RecordRef(RECORDS[FEDTLU.arxiv_id], ("referee_report.minor_comments[0]",
                                              "falsifier"))
TITLE = "layer score undefined at std = 0, and blind to usefulness"
STATEMENT = ("Section III's layer score divides by the spread of the update's entries, "
             "so it has no value for a constant update, a frozen (all-zero) one "
             "included; and (the falsifier's first half) it does not pick a quiet, "
             "useful block over a loud, noisy one.")
def invariance_tol(sizes, max_mean_over_sd: float) -> float:
    """The largest relative change of the score that float64 rounding alone explains, for
    the sweep's largest update size n and mean/sd up to R: n u (1 + R^2), u = 2^-53 (the
    classic worst-case bound for summing n terms, n u, times the condition number
    1 + mean^2/var of a variance from entries of that mean and spread). Below it the score
    is scale-free up to rounding. (Until 2026-12-04 this was a fixed 1e-12, below that
    bound at full scale: 4000 updates found a change of 4.1e-12 against a bound of 1.1e-11.)"""
    return max(float(n) for n in sizes) * 2.0 ** -53 * (1.0 + float(max_mean_over_sd) ** 2)


DEPENDS_TOL = 1e-6  # a relative change above this under scaling would refute

BASE = {"n_updates": 400, "scales_per_update": 5, "log10_scale": [-6.0, 6.0],
        "sizes": [2, 10, 100, 1000], "max_mean_over_sd": 10.0, "seed": 0,
        # planted-pick: instances per family, entries per block (stated choices: 200
        # instances put an exact binomial interval within about +-0.07 of the rate)
        "n_planted": 200, "planted_size": 64}
# planted-pick: a pick rate whose exact interval lies inside this band, with neither
# one-sided test rejecting 1/2, is a coin flip. The band is a stated choice, fixed before
# the run: +-0.15 around 1/2, twice the half-width (about 0.07) of the exact interval at
# the configured 200 instances, so a rate of exactly 1/2 lands inside it with room to
# spare. PLANT_ALPHA is the family-wise level, split (Bonferroni) over the families
# and the two sides of each.
CHANCE_BAND = (0.35, 0.65)
PLANT_ALPHA = 0.05
# the planted families: (name, what it plants): entries of the useful block's offset
# from the optimum and of the noise block's move, each zero-mean or one-signed
PLANTED = (
    ("both zero-mean", "useful update -0.1 e (e ~ N(0, 1) entries), noise move 10 z "
     "(z ~ N(0, 1))"),
    ("useful one-signed", "useful update -0.1 e with e ~ 1 + 0.1 N(0, 1) (every entry "
     "moves the same way), noise move 10 z"),
    ("noise one-signed", "useful update -0.1 e (e ~ N(0, 1)), noise move 10 (1 + 0.1 z) "
     "(a drift every entry shares)"),
)
SCALES = {"smoke": BASE, "full": {**BASE, "n_updates": 4000},
          "paper": {**BASE, "n_updates": 4000, "sizes": [2, 10, 100, 1000, 100_000]}}

# updates with std = 0 (and one near it), as (label, values)
STD_ZERO_CASES = (
    ("all zero, n = 4 (frozen layer)", [0.0] * 4),
    ("constant 0.5, n = 4", [0.5] * 4),
    ("constant -0.25, n = 1000", [-0.25] * 1000),
    ("one entry, 0.3 (n = 1)", [0.3]),
    ("one entry, 0.0 (n = 1)", [0.0]),
    ("constant 0.1, n = 3 (float64 mean rounds)", [0.1] * 3),
)

ARMS = (
    Arm("literal", "Section III's score evaluated literally in float64 (numpy, population "
        "std, no guard)", "as printed"),
    Arm("guarded", "audit.papers.fedtlu.algorithm.score: std = 0 handled (zero -> 0, constant "
        "-> inf)", "our guard for std = 0, the case the paper leaves open"),
)

# ================================================================== rules (part, text, kind)
RULE_UNDEFINED = dict(part="undefined", kind="derivation", text=(
    "Section III's score evaluated literally in float64 (numpy, population std, IEEE "
    "division, no guard) on updates with std exactly 0: all-zero (n = 4), constant 0.5 "
    "(n = 4), constant -0.25 (n = 1000), one entry 0.3. CONFIRMED when the all-zero update "
    "gives nan and every constant non-zero one gives inf; REFUTED when all are finite; "
    "INCONCLUSIVE otherwise. A derivation: IEEE float64 arithmetic evaluated exactly, no "
    "seeds, no interval."))
RULE_INVARIANT = dict(part="scale-invariant", kind="derivation", text=(
    "A seeded sweep (numpy default_rng({seed})) of random updates (n in {sizes}; "
    "normal, uniform and 80%-sparse entries; |mean|/sd up to {max_mean_over_sd}) each "
    "scaled by {k} random c = +-10^u, u uniform in [{u_lo}, {u_hi}]; the project's "
    "score() (guarded arm) and the literal "
    "formula. CONFIRMED when, in both arms, the largest relative change of the score under "
    "scaling and the largest relative gap to sqrt(1 + mean^2/var) are below {tol}, what "
    "float64 rounding explains (n u (1 + R^2): the largest size n, u = 2^-53, R the largest "
    f"|mean|/sd); REFUTED when a change under scaling exceeds {DEPENDS_TOL:g}; "
    "INCONCLUSIVE otherwise. A derivation (the identity ||dW||^2/n = mean^2 + var), checked "
    "numerically on a seeded sweep; it is reported beside the verdict and does not enter it."))
RULE_PLANTED = dict(part="planted-pick", kind="experiment", text=(
    "Planted two-block quadratics (score() of the guarded arm; {n} seeded instances per "
    "family, {m} entries a block): a quiet block whose update lowers the loss against a "
    "loud block (about 100 times the norm) whose move raises it, in three families "
    "(both zero-mean; the useful update one-signed; the noise move one-signed). For each "
    "family the rate at which the score ranks the useful block higher, with its exact "
    "binomial interval and one-sided exact binomial tests against 1/2, each at "
    "alpha / (2 x families) (Bonferroni, alpha = {alpha}; the interval at the matching "
    "level). CONFIRMED (the score does not pick by usefulness) when in some family the "
    "noise block is picked significantly more often, or neither side rejects and the "
    "interval lies inside [{lo}, {hi}] (a coin flip); REFUTED when the useful block is "
    "picked significantly more often in every family; INCONCLUSIVE otherwise. An "
    "experiment on seeded draws, so its rates carry sampling error (hence the intervals "
    "and tests), not a proof: the identity above predicts it (a score that is a function "
    "of mean^2/var alone flips a coin on the symmetric zero-mean family and follows the "
    "one-signed block in the others), and the rule would separate a score that saw "
    "usefulness."))

# the rules' reasons (templates the decisions fill)
UNDEFINED_CONFIRMED = (
    "the literal formula gives nan (0/0) on the all-zero update and inf (x/0) on every "
    "constant one ({shown}); the project's score() has to choose a value (0 for all-zero, "
    "inf for constant)")
UNDEFINED_REFUTED = "finite on every std = 0 case ({shown})"
UNDEFINED_MIXED = "mixed: {shown}"
UNDEFINED_NEEDS = "a closer look at float64 rounding"
INVARIANT_REASON = (
    "over {n} random updates x {k} scales: max relative change under scaling {s:.2e}, max "
    "relative gap to sqrt(1 + mean^2/var) {i:.2e}")
INVARIANT_DEPENDS = " (the score depends on the scale)"
INVARIANT_NEEDS = "a look at the float64 error of np.std"
PLANTED_ROW = "{family}: useful block picked {k} of {n} ({ci})"
#: PLANTED_ROW's {ci}, filled by audit.stats.ci_text (an undefined interval prints its
#: no-interval text instead, never "nan-nan")
PLANTED_CI = "{level:.4g}% CI {low:.2f}-{high:.2f}"
PLANTED_CHANCE = "a coin flip where {families}"
PLANTED_WRONG = "the noise block picked more often than the useful one where {families}"
PLANTED_CONFIRMED = ("{txt}: the score does not pick by usefulness ({why}); it follows which "
                     "block's entries share a sign")
PLANTED_REFUTED = "{txt}: the useful block is picked in every family"
PLANTED_NEEDS = "more planted instances (n_planted)"

# ================================================================================ questions
#: the reviewer's questions (audit.questions.Question fields), each with its own verdict
QUESTIONS = (
    Question(id="score-undefined",
             asks="Does the Section III score have no value when an update's entries do not "
                  "vary (a frozen, all-zero update included)?",
             fields=("referee_report.minor_comments[0]",), parts=("undefined",), kind="proof"),
    Question(id="planted-pick",
             asks="The falsifier's first half: planted a quiet block whose update lowers the "
                  "loss against a loud block whose update is noise, does the score fail to pick "
                  "the useful one reliably?",
             fields=("falsifier",), parts=("planted-pick",), kind="experiment",
             decides="the planted families' pick rates (exact binomial intervals)"),
)
# `scale-invariant` is the project's own finding (the reviewer did not raise it): reported
# as a finding and a part, never as the reviewer's question

# ======================================================= estimates: name -> (unit, description)
ESTIMATES = {
    "max_rel_dev_under_scaling": ("ratio", "largest |Score(c dW) - Score(dW)| / Score(dW), "
                                           "both arms"),
    "max_rel_dev_from_identity": ("ratio", "largest |Score - sqrt(1 + mean^2/var)| / that, "
                                           "both arms"),
    "literal_score_rounding_constant": ("", "literal formula on [0.1, 0.1, 0.1]: np.std "
                                            "rounds above 0"),
    "literal_std_rounding_constant": ("", "np.std([0.1, 0.1, 0.1]) in float64"),
    "planted_useful_pick_rate": ("fraction", (
        "planted family '{family}': share of instances where the score ranks the useful "
        "block above the noise block")),
    "n_nonfinite_literal": ("cases", "std = 0 cases where the literal score is nan or inf, "
                                     "of {total}"),
}

# ============================================================ tables: (title, columns, note)
TABLE_STD_ZERO = (
    "Updates with std(dW) = 0: the literal formula and the project's score()",
    ("update", "n", "||dW||", "std (np.std)", "literal score", "score() (guarded)"),
    "score() returns 0.0 for an all-zero update and +inf when every entry is equal "
    "(exactly); the last row is constant in value but np.std rounds to a few 1e-17, so the "
    "literal formula returns a huge finite number.")
TABLE_MOVES = ("The score does not see how far a layer moved (score(), guarded)",
               ("layer update", "||dW||", "score"), "")
TABLE_PLANTED = (
    "Planted blocks: does the score pick the useful one? (score(), guarded)",
    ("family", "what is planted", "useful block picked", "mean loss decrease of "
     "the picked block's update"),
    "Loss 0.5 |w - w*|^2 per block; the useful block's update lowers it, the noise block's "
    "raises it (a negative decrease). The score never sees the loss or the move's size.")
TABLE_SWEEP = ("Scale sweep (seeded)",
               ("arm", "max rel. change under scaling", "max rel. gap to identity",
                "worst case (n, kind, c)"), "")
FIGURE_SCALE = ("score_vs_scale", "Score of c x dW against the scale c (score(), guarded)",
                "log10 c", "Score")
FIGURE_SCALE_CAPTION = ("Flat lines: multiplying an update by c changes ||dW|| by |c| and "
                        "the score not at all.")

# ==================================================================================== notes
#: the first note, filled from the parts (their kinds and ids, counted, never typed in)
NOTE_KINDS = (
    "No premise: no part measures an effect of the paper's method over training seeds, so "
    "no part is gated. Of the {n} parts, {kinds}. Each rule can return each of its "
    "outcomes (tests drive them with synthetic inputs): `undefined` is REFUTED if the "
    "literal formula were finite on the std = 0 updates, `scale-invariant` if a scaled "
    "update changed its score, `planted-pick` if the score picked the useful block "
    "significantly more often in every family.")
#: a kind's count and parts in NOTE_KINDS: "{count} {word} ({ids}: {gloss})"
KIND_TEXT = "{count} {word} ({ids}: {gloss})"
#: kind -> (singular, plural, what its verdict is)
KIND_WORDS = {
    "derivation": ("derivation", "derivations", "computations, not experiments"),
    "experiment": ("experiment", "experiments", "seeded draws, decided with exact binomial "
                                                "intervals and tests"),
    "measurement": ("measurement", "measurements", "a number, no verdict"),
}
#: the config keys planted-pick's draws depend on (``_planted`` reads exactly these)
PLANTED_DRAW_KEYS = ("seed", "n_planted", "planted_size")
NOTE_PLANTED_SAME = (
    "planted-pick's draws depend only on {keys} ({values} here), and these are the same at "
    "the scales {scales}: its pick rates there are one computation run again, not a "
    "replication (those scales differ only in {differ}, which planted-pick does not read).")
NOTE_PLANTED_OWN = ("planted-pick's draws depend only on {keys} ({values} here); no other "
                    "scale draws the same instances.")
NOTES = (
    "audit.papers.fedtlu.algorithm.score handles std = 0 by a choice of ours (documented in "
    "its docstring): an all-zero update scores 0.0 and a constant non-zero one +inf; "
    "the test for 'constant' is exact equality of the entries, because np.std of a "
    "constant can round above zero (last row of the first table).",
    "Under the guarded choice a frozen layer (all-zero update) ranks last and a "
    "layer moved by the same amount everywhere ranks first; the literal formula gives "
    "nan / inf, and a nan compares false with everything, so a sort over layers would "
    "place it arbitrarily. The paper's text does not settle which.",
)
NOTE_SCALE = (
    "Scale invariance: the pattern scaled 1e-3 and 1e3 gets the same score ({small:.6g} vs "
    "{large:.6g}); a tiny one-signed move scores {tiny:.4g}, a large zero-mean move "
    "{loud:.4g}. The score ranks layers by the consistency of their entries, not by the "
    "size of their change.")
FINDING = (
    "Our own finding, not the reviewer's: the score equals sqrt(1 + mean^2/var) of the "
    "update's entries, so it is scale-free (largest relative change under scaling {ds:.1e}) "
    "and ignores how far the layer moved; part `scale-invariant` ({verdict}).")

PAPER_NUMBERS = (PaperNumber("layer score", "||dW|| / (sqrt(n) std(dW))", "Section III",
                             "n_nonfinite_literal"),)
