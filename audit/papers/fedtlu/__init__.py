"""FedTLU, arXiv 2412.17692: its algorithm pieces (``algorithm.py``), its claims
``fedtlu-lower-bound`` (``lower_bound.py``) and ``fedtlu-score-undefined``
(``score_undefined.py``), their declarations (``declarations/``) and our notes on its
review record (``notes.py``). The layout: :mod:`audit.papers`."""
