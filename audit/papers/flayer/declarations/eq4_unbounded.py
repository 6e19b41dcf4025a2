"""Falsifier ``flayer-eq4-unbounded``: FLAYER's Eq. 4 rate multiplier has no upper bound.

Paper: FLAYER, arXiv 2412.07062v3, Eq. 4: the learning rate of layer i of L is
``eta_i = eta * (1 + log(1 + 1/||g_i||) * i / L)``. Review record 000
(``referee_report.minor_comments[2]``): the factor grows without limit as the gradient
norm tends to zero, and the paper says nothing about clipping or a floor on the norm.

What we compute (exact; no seeds). The multiplier is the project's own
:func:`audit.papers.flayer.algorithm.eq4_multiplier` (imported, not re-implemented), called with
``floor=0``, i.e. the printed equation without the guard the project's FLAYER runs use.

- ``unbounded``: the multiplier at depth i = L (and at i/L = 1/2, 1/L beside) on the
  ladder ||g|| = 10^0, 10^-1, ..., 10^-300 in float64, set against the ladder of
  thresholds 10 and 100, and a least-squares fit of (m - 1) against log(1/||g||): the
  growth law m - 1 ~ (i/L) log(1/||g||), i.e. slope i/L and intercept 0. By hand:
  log(1 + 1/g) >= log(1/g), so m > M as soon as g < exp(-(M - 1) L / i); the ladder checks
  that the implementation does what the algebra says.
- ``in-practice`` (a measurement: no verdict, outside the claim's verdict): the engine's
  digits CNN (``build_model("cnn", width=0.5)``, the
  FLAYER smoke model, every parameter tensor one layer as in ``audit.papers.flayer.algorithm``)
  at initialisation (``torch.manual_seed(0)``) and after 10, 50 and 200 SGD steps
  (lr 0.05, batch 32, batches drawn by a generator seeded 0); per tensor the gradient
  norm on two readings of g_i (the paper does not say on which data): the first 32
  training samples (the probe our FLAYER implementation uses) and the whole training
  set; 1000 and 3000 steps are reported beside, outside the rule.

The declarations of the claim (literals only); its code is
:mod:`audit.papers.flayer.eq4_unbounded`.
"""
from __future__ import annotations

from audit.questions import Question
from audit.claims import FLAYER, RECORDS, Arm, PaperNumber, RecordRef

CLAIM_ID = "flayer-eq4-unbounded"
TITLE = "Eq. 4 learning-rate factor unbounded"
STATEMENT = ("The layer-wise rate factor of Eq. 4 has no ceiling: as a layer's gradient "
             "norm shrinks towards zero the factor grows like (i/L) log(1/||g||), and the "
             "paper states no clipping or floor.")
PAPER = FLAYER
RECORD = RecordRef(RECORDS[FLAYER.arxiv_id], ("referee_report.minor_comments[2]",))

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
#: the two readings of g_i: the probe batch and the whole training set
READINGS = ("probe", "full")

# ----------------------------------------------------------------------------- rules
RULE_UNBOUNDED = (
    "Eq. 4 as printed (``eq4_multiplier(g, i, L, floor=0)``, L = 6) on ||g|| = 10^-e, "
    "e = 0..300, float64 (a derivation checked numerically: the verdict is the algebra "
    "log(1 + 1/g) >= log(1/g), not an experiment). CONFIRMED when the multiplier at "
    "i = L increases as ||g|| falls, "
    f"exceeds every threshold of the ladder {list(THRESHOLDS)}, and the least-squares "
    f"slope of (m - 1) on log(1/||g||) over ||g|| <= 1e-{FIT_FROM} equals i/L within a "
    f"relative {SLOPE_TOL:g} at i = 1, L/2, L; REFUTED when it stays below "
    f"{THRESHOLDS[0]:g} on the whole ladder; INCONCLUSIVE otherwise. Exact: no seeds. "
    "The ladder's thresholds 10 and 100 are round numbers (an order of magnitude and two "
    "above the factor 1 + ln 2 = 1.69 at ||g|| = 1), not fitted to any result.")
UNBOUNDED_HOLDS = (
    "at i = L the multiplier rises monotonically to {m_max:.1f} at ||g|| = "
    "1e-{last_exponent}, past every threshold {thresholds}; fitted slopes of (m - 1) on "
    "log(1/||g||) equal i/L ({slopes})")
UNBOUNDED_BOUNDED = "the multiplier stays below {threshold} (max {m_max:.3f}) over the whole ladder"
UNBOUNDED_OPEN = ("thresholds passed {passed} of {thresholds}, slopes match i/L: {slopes_ok}, "
                  "monotone: {monotone}")

RULE_PRACTICE = (
    "Measurement (no verdict, outside the claim's verdict): the engine's digits CNN "
    "(width 0.5, the FLAYER smoke model; seed 0), every parameter tensor a layer "
    "(i = 1..6): per-tensor gradient norms at initialisation and after 10, 50, 200 SGD "
    "steps (lr 0.05, batch 32), on the first 32 training samples (the probe the "
    "project's FLAYER runs use) and on the whole training set; Eq. 4 as printed on each. "
    "The largest multiplier per reading is reported. Steps 1000 and 3000 are reported "
    "beside, and so are the factors FLAYER's own training reaches (flayer-masked-zero's "
    "setting at this scale, seed 0, arms literal and as-released, every round). A finite "
    "run cannot show a bound, and no independent threshold for 'large' "
    "exists, so the part carries no verdict.")
PRACTICE_IN_FLAYER = (
    " Inside FLAYER's own training (flayer-masked-zero, {scale} setting, {model}, lr "
    "{lr:g}, {rounds} rounds, seed 0) the largest factor of any round is {factors}.")
PRACTICE_REASON = (
    "measurement, no verdict: the largest multiplier on these runs is {m:.2f} ({layer}, "
    "{reading} gradient, step {step}); per reading of g_i: {by_reading}.{in_flayer} No "
    "threshold independent of these numbers exists for 'large in practice' (an earlier "
    "threshold of 5.0 was set with the result in view), so none is applied.")
PRACTICE_NEEDS = "a threshold from an independent source (e.g. a step size known to diverge)"

# ------------------------------------------------------------------------ presentation
#: the ladder's exponents shown in its table
SHOWN_EXPONENTS = (0, 1, 2, 3, 4, 6, 9, 12, 16, 20, 30, 43, 50, 100, 200, 300)
LADDER_TITLE = "Eq. 4 as printed against the gradient norm (L = 6)"
LADDER_NOTE = ("At ||g|| = 1e-308 the factor is {at_1e308:.2f}; below about 5.6e-309, "
               "1/||g|| overflows float64 and the printed factor is {at_min_subnormal} (at "
               "5e-324), as it is at ||g|| = 0 ({at_zero}).")
FIT_TITLE = f"Growth law: least squares of (m - 1) on log(1/||g||), ||g|| <= 1e-{FIT_FROM}"
CNN_TITLE = "Eq. 4 on the digits CNN's gradient norms (seed 0)"
CNN_COLUMNS = ("step", "train loss", "tensor", "i", "||g|| probe", "m probe", "||g|| full",
               "m full", "in rule")
CNN_NOTE = ("probe = the first 32 training samples (as audit.papers.flayer.algorithm takes g_i); "
            "full = the whole training set (1437 samples).")

NOTES = (
    "The multiplier is audit.papers.flayer.algorithm.eq4_multiplier, called with floor = 0 "
    "(the printed equation). The project's own FLAYER runs clamp ||g|| at "
    "{floor:g}, which caps the factor at {ceiling:.2f} "
    "for i = L; that clamp is our deviation and is exactly what the paper does not state.",
    "By hand: 1 + (i/L) log(1/g) < m < 1 + (i/L) (log(1/g) + g), so m passes any M once "
    "g < exp(-(M - 1) L / i). In float64 the factor at i = L reaches "
    "{at_1e308:.2f} at 1e-308; once 1/g overflows (g below about 5.6e-309) and "
    "at g = 0 it is {at_zero}, so a layer whose gradient vanishes gets an "
    "infinite rate (and 0 x inf = NaN weights).",
    "In practice (the CNN) the norms lie between about 1e-4 and 2; the largest factors "
    "belong to the "
    "deepest tensors (biases, whose gradients cancel across balanced classes) and grow "
    "as training converges (the longer runs, reported beside). The verdict of the "
    "in-practice part depends on which data g_i is taken on, which the paper leaves "
    "open: both readings are shown. The probe reading (the one the project's FLAYER "
    "runs use) gives at most {probe:.2f}, the full-set reading "
    "{full:.2f} (steps <= 200).",
    "The in-practice part is a measurement: an earlier version decided it against a "
    "threshold of 5.0 that arrived together with the result it judged (5.47), and no "
    "independent source for a threshold of 'large in practice' was found; so the "
    "numbers are reported without a verdict.",
    "Premise: none. The reviewer's claim is about a formula (mathematics); no effect "
    "of the paper is explained here, so there is nothing to reproduce first.",
)

# --------------------------------------------------------------------------- questions
#: the questions (``audit.questions.Question`` fields), built by the claim's code
QUESTIONS = (
    Question(id="eq4-unbounded",
             asks="Does the Eq. 4 learning-rate factor grow without bound as a layer's gradient "
                  "norm goes to zero?", fields=("referee_report.minor_comments[2]",),
             parts=("unbounded",), kind="proof"),
    Question(id="eq4-in-practice",
             asks="How large does the factor get on a real network's gradients?", fields=(),
             parts=("in-practice",), kind="measurement"),
)

PAPER_NUMBERS = (PaperNumber("layer-wise rate", "eta * (1 + log(1 + 1/||g_i||) * i/L)",
                             "Eq. 4", "m_at_L_grad_1e-300"),)
