"""FLAYER (arXiv 2412.07062v3): our notes on the record's items (see ``audit.papers``)."""
from audit.papers import AUTHORS_DATA, DEFINITION, PRESENTATION, Note

ARXIV_ID = "2412.07062"

ITEMS = {
    "skeptic_critique.concrete_test": Note(
        "Run Algorithm 1 literally; track global sparsity and norm; expect accuracy collapse.",
        proposed="flayer-masked-zero"),
    "skeptic_critique.load_bearing_attack": Note(
        "Zero-masked uploads averaged as printed zero or shrink global weights; rule unstated.",
        proposed="flayer-masked-zero"),
    "falsifier": Note(
        "Literal zero-entering average versus carry-over of old global values, one training run each.",
        proposed="flayer-masked-zero"),
    "referee_report.major_comments[0]": Note(
        "Server step (Alg. 1 line 12, Eq. 9) zeroes unselected coordinates, shrinks others.",
        proposed="flayer-masked-zero"),
    "referee_report.major_comments[1]": Note(
        "Stopping rule behind the time-to-convergence counts of Table 3 is never defined.",
        reason=DEFINITION + " (the convergence criterion)"),
    "referee_report.major_comments[2]": Note(
        "How local accuracy becomes the head-mixing weight of Eq. 2 is unspecified.",
        reason=DEFINITION + " (the accuracy-to-weight map of Eq. 2)",
        proposed="flayer-masked-zero"),
    "referee_report.minor_comments[0]": Note(
        "The 5.40 average gain holds only as absolute points over all baseline pairs.",
        reason="arithmetic on the paper's Table 2 (42 baseline-task pairs), whose values "
               "are not transcribed here, so no claim can check it"),
    "referee_report.minor_comments[1]": Note(
        "Two Table 5 baselines lack description, one lacks a citation.",
        reason=PRESENTATION),
    "referee_report.minor_comments[2]": Note(
        "Eq. 4 learning rate is unbounded as the layer gradient norm tends to zero.",
        reason="computed exactly in flayer-masked-zero's Eq. 4 table, but no part decides it",
        proposed="flayer-masked-zero"),
    "referee_report.minor_comments[3]": Note(
        "How head size s was chosen outside CIFAR-100, and its stability, is unreported.",
        reason=AUTHORS_DATA + " (their tuning of s per dataset)"),
    "referee_report.minor_comments[4]": Note(
        "Stray marker in one Table 3 cell.", reason=PRESENTATION),
}
