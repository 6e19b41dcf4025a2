"""Our notes on the items of each paper's review record, for ``audit review``.

One module per audited paper (``flayer``, ``fedtlu``, ``genefl``, ``lips``) defines
``ARXIV_ID`` and ``ITEMS``: for each checkable item of that paper's record, keyed by its
field path (``referee_report.major_comments[0]``), a :class:`Note` with

- ``paraphrase``: what the item says, in OUR words (about 15 words at most; the records'
  sentences are never copied: ``tests/test_coverage.py`` checks that no run of ten words
  is shared with the records);
- ``reason``: why no computation can answer it (presentation, a definition only the
  authors can supply, the paper's private data), used when no claim covers the item;
- ``proposed``: the claim id we expect to declare the item in its ``answers`` once its
  author adds it; shown while that claim does not declare it yet.

Which claim covers an item is declared by the claims themselves (``Claim.record.fields``
and ``Claim.answers``), never here.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

# Reasons used by the paper modules, so the coverage table reads uniformly.
PRESENTATION = "presentation, not checkable by computation"
DEFINITION = "a missing definition that only the authors can supply"
AUTHORS_DATA = "needs the authors' own runs or logs, which are not released"
PAPER_TABLE = "arithmetic on the paper's printed table, not an experiment; no claim transcribes it"


@dataclass(frozen=True)
class Note:
    paraphrase: str
    reason: str = ""
    proposed: str = ""


MODULES = ("audit.papers.flayer", "audit.papers.fedtlu", "audit.papers.genefl",
           "audit.papers.lips")


def paper_modules() -> dict[str, ModuleType]:
    """The paper modules by arXiv id."""
    out = {}
    for name in MODULES:
        module = importlib.import_module(name)
        out[module.ARXIV_ID] = module
    return out


def notes(arxiv_id: str) -> dict[str, Note] | None:
    """Our notes for a paper's record items, or None for a paper we have no module for."""
    module = paper_modules().get(arxiv_id)
    return None if module is None else dict(module.ITEMS)
