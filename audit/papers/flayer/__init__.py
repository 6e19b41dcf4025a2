"""FLAYER, arXiv 2412.07062: its algorithm pieces (``algorithm.py``), its claims
``flayer-masked-zero`` (``masked_zero.py``) and ``flayer-eq4-unbounded``
(``eq4_unbounded.py``), their declarations (``declarations/``) and our notes on its review
record (``notes.py``). The layout: :mod:`audit.papers`."""
