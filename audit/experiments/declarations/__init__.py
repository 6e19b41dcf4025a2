"""What each claim declares, apart from its code: one module per claim, named as the
claim's module in ``audit/experiments/``, holding literals only.

A declaration module holds the claim's data: its id, title, statement and paper, its arms
(names and descriptions), its scales (config dicts), the texts of its rules and questions
(plain strings, or templates filled with ``str.format`` by the code), the margins and
other thresholds fixed before any run, the paper's printed numbers, the premise's effect
text, the notes' fixed prose (templates where a number enters), and the settings searches
(``audit.tuning.Search`` records). It imports only value types and constants (``audit.claims``,
``audit.verdict``, ``audit.questions``, ``audit.tuning``, ``audit.seeds``,
``audit.papers``), never torch, never the claim's code, and computes nothing that depends on a run.

The claim's module keeps what is particular to its code: the pieces each arm changes,
``run`` and ``specs``, the evidence ``analyse`` extracts, any decision that is not a kit
kind (``audit.kit``), its own presentation, and the ``Claim`` object that ties the declared
texts to those functions. This folder is not a claim module: the registry reads only the
``*.py`` files directly under ``audit/experiments/``.
"""
