"""GENE-FL, arXiv 2504.14628: its algorithm pieces (``algorithm.py``), one whole simulated
run that both its claims share (``simulation.py``), its claims ``genefl-inverted-cosine``
(``inverted_cosine.py``) and ``genefl-uplink-bytes`` (``uplink_bytes.py``), their
declarations (``declarations/``) and our notes on its review record (``notes.py``). The
layout: :mod:`audit.papers`."""
