"""LIPS (arXiv 2506.00932v1): our notes on the record's items (see ``audit.papers``)."""
from audit.papers import DEFINITION, PRESENTATION, Note

ARXIV_ID = "2506.00932"

ITEMS = {
    "skeptic_critique.concrete_test": Note(
        "Middle-layer dropout control tuned on held-out data; also random and all-layer masks.",
        proposed="lips-dropout-control"),
    "skeptic_critique.load_bearing_attack": Note(
        "Gain not isolated from generic regularisation; random masks win; tuned on test sets.",
        proposed="lips-dropout-control"),
    "falsifier": Note(
        "Validation-tuned dropout or weight decay versus LIPS; retune LIPS on held-out data.",
        proposed="lips-dropout-control"),
    "referee_report.major_comments[0]": Note(
        "Random masks match or beat sensitivity masks in Table 4.",
        reason="lips-dropout-control runs a random-mask arm, but no part decides it",
        proposed="lips-dropout-control"),
    "referee_report.major_comments[1]": Note(
        "No dropout, weight-decay or noise control against generic regularisation.",
        proposed="lips-dropout-control"),
    "referee_report.major_comments[2]": Note(
        "tau0 and k picked on the test sets; final versus best-round accuracy unclear.",
        reason="lips-dropout-control reports the selection optimism of its own tuning, "
               "but no part decides it",
        proposed="lips-dropout-control"),
    "referee_report.major_comments[3]": Note(
        "Inertia is blamed on overfitting, yet no overfitting measurement is shown.",
        proposed="lips-dropout-control"),
    "referee_report.major_comments[4]": Note(
        "No ablation of middle-only against all-layer or outer-layer pruning.",
        proposed="lips-dropout-control"),
    "referee_report.minor_comments[0]": Note(
        "Table 2 caption's per-client sample count disagrees with Section 5.",
        reason=PRESENTATION),
    "referee_report.minor_comments[1]": Note(
        "Which layers count as 'middle' for each network is not given.",
        reason=DEFINITION + " (the middle-layer set)"),
    "referee_report.minor_comments[2]": Note(
        "When the mask is applied relative to aggregation should be stated plainly.",
        reason=PRESENTATION + " (the reviewer reads the two descriptions as consistent when "
                              "the end-of-round broadcast counts as the aggregation's outcome; "
                              "a request to say so, which no run of ours tests)"),
    "referee_report.minor_comments[3]": Note(
        "Ablation text and Table 4 list different Dirichlet alphas.", reason=PRESENTATION),
    "referee_report.minor_comments[4]": Note(
        "Figure 7(d) caption probably names the wrong dataset.", reason=PRESENTATION),
}
