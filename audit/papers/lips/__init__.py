"""LIPS, arXiv 2506.00932: its algorithm pieces (``algorithm.py``), its claim
``lips-dropout-control`` (``dropout_control.py``), its declarations (``declarations/``) and
our notes on its review record (``notes.py``). The layout: :mod:`audit.papers`."""
