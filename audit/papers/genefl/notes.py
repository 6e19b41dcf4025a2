"""GENE-FL (arXiv 2504.14628v1): our notes on the record's items (see ``audit.papers``)."""
from audit.papers import DEFINITION, PRESENTATION, Note

ARXIV_ID = "2504.14628"

ITEMS = {
    "skeptic_critique.concrete_test": Note(
        "Count bytes both ways over 100 rounds; ratio against FedAvg versus 0.25; check Comm formula.",
        proposed="genefl-uplink-bytes"),
    "skeptic_critique.load_bearing_attack": Note(
        "The 4x saving counts uploads only; per-round full-model downloads make it about 1.6x.",
        proposed="genefl-uplink-bytes"),
    "falsifier": Note(
        "Perturb one layer and compare its score with an untouched one; top- versus bottom-gamma runs.",
        proposed="genefl-inverted-cosine"),
    "referee_report.major_comments[0]": Note(
        "Headline communication saving is upload-only; downloads of the cluster model are ignored.",
        proposed="genefl-uplink-bytes"),
    "referee_report.major_comments[1]": Note(
        "High cosine means little change, so descending selection contradicts the stated meaning.",
        proposed="genefl-inverted-cosine"),
    "referee_report.major_comments[2]": Note(
        "The printed Comm formula does not give the tables' totals; client count missing.",
        proposed="genefl-uplink-bytes"),
    "referee_report.minor_comments[0]": Note(
        "Text cites the wrong table for the sharding results.", reason=PRESENTATION),
    "referee_report.minor_comments[1]": Note(
        "The FEDFINA baseline is neither described nor cited.", reason=PRESENTATION),
    "referee_report.minor_comments[2]": Note(
        "The likelihood behind the Fisher diagonal (Eq. 5) is not stated.",
        reason=DEFINITION + " (the likelihood of Eq. 5)"),
    "referee_report.minor_comments[3]": Note(
        "No sensitivity study over gamma or the SVD dimension.",
        proposed="genefl-inverted-cosine"),
    "referee_report.minor_comments[4]": Note(
        "Why participants get the full model but newcomers only the learnGene is unexplained.",
        reason=PRESENTATION + "; the bytes it implies are counted by genefl-uplink-bytes"),
}
