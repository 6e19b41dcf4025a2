"""FedTLU (arXiv 2412.17692v2): our notes on the record's items (see ``audit.papers``)."""
from audit.papers import DEFINITION, PRESENTATION, Note

ARXIV_ID = "2412.17692"

ITEMS = {
    "skeptic_critique.concrete_test": Note(
        "Exact one-step loss decrease, full versus subset, on a two-block quadratic, eta*L=3.",
        proposed="fedtlu-lower-bound"),
    "skeptic_critique.load_bearing_attack": Note(
        "Ordering two lower bounds proves nothing; score unlinked to Assumption (b); gains within noise.",
        proposed="fedtlu-lower-bound"),
    "falsifier": Note(
        "Measure the selected blocks' share of squared gradient norm across rounds against 1-delta.",
        proposed="fedtlu-lower-bound"),
    "referee_report.major_comments[0]": Note(
        "Section IV.C compares lower bounds; for eta*L above 2 both are negative.",
        proposed="fedtlu-lower-bound"),
    "referee_report.major_comments[1]": Note(
        "Nothing shows the Section III score picks blocks satisfying Assumption (b).",
        proposed="fedtlu-lower-bound"),
    "referee_report.major_comments[2]": Note(
        "In Table III Random edges out FedTLU, against the 'consistently better' wording.",
        proposed="fedtlu-lower-bound"),
    "referee_report.major_comments[3]": Note(
        "Three runs, no spread reported; tiny perplexity gaps may be noise.",
        proposed="fedtlu-lower-bound"),
    "referee_report.minor_comments[0]": Note(
        "The block score divides by a standard deviation that can be zero.",
        reason="shown in fedtlu-lower-bound's score table, but no part decides it",
        proposed="fedtlu-lower-bound"),
    "referee_report.minor_comments[1]": Note(
        "Grouping blocks 'by parameter sequence' is not defined operationally.",
        reason=DEFINITION + " (the block grouping)"),
    "referee_report.minor_comments[2]": Note(
        "Unclear whether the minimum perplexity is per seed then averaged, or of the mean curve.",
        reason=DEFINITION + " (how the reported minimum is taken)"),
    "referee_report.minor_comments[3]": Note(
        "Figures 1-2 show single curves without spread over repetitions.",
        reason=PRESENTATION),
    "referee_report.minor_comments[4]": Note(
        "Calling two models on two datasets 'extensive' overstates the scope.",
        reason=PRESENTATION),
    "referee_report.minor_comments[5]": Note(
        "Some references are incomplete or inconsistently formatted.", reason=PRESENTATION),
}
