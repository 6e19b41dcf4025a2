"""The audited papers, one folder each: its algorithm pieces, its claims, their
declarations, and our notes on its review record.

Layout (``audit/papers/<paper>/``, for ``flayer``, ``fedtlu``, ``genefl``, ``lips``):

- ``algorithm.py``: the paper's algorithm pieces on the engine (``audit.fl``): as printed,
  corrected and as released; it imports the engine only, never a claim. A paper's whole
  simulated run, where it is more than a few lines, is ``simulation.py`` beside it under
  the same contract (GENE-FL's, used by both GENE-FL claims; FedTLU's FL runs);
- one module per claim (``flayer/masked_zero.py`` is ``flayer-masked-zero``), each with a
  module-level ``CLAIM``; the folders are the registry: ``audit.claims`` lists every module
  of a paper folder that assigns ``CLAIM`` at its top level, read from the source without
  importing anything (``audit list`` stays torch-free), so there is no module list to keep;
- ``declarations/<claim module>.py``: what the claim declares, apart from its code (below);
- ``present/<claim module>.py`` (where a claim's report is large: every claim but the
  two smallest, FLAYER's ``eq4_unbounded`` and FedTLU's ``score_undefined``): its
  presentation, the estimates, tables, figures and notes
  built from the evidence the claim module's ``evidence(results, ctx)`` returns, every
  part already decided there; it imports the declarations, never the engine, the
  runner or tuning (import-linter: ``presentation-decides-nothing``);
- ``notes.py``: ``ARXIV_ID`` and ``ITEMS``, our notes on the record's items (below).

No paper folder imports another (import-linter's ``papers-independent`` contract), and the
engine imports none of them (``engine-knows-no-paper``).

Claims. The contract a claim module fulfils (see ``audit/claims.py`` for the types):

- ``run(spec: RunSpec, ctx: RunContext) -> dict``: ONE unit of work (an arm at a seed, or
  one exact computation), a pure function of ``(spec, ctx)``; it returns JSON-able data
  only (floats, ints, lists, dicts). The runner caches it on disk under a hash of
  (claim, spec, scale, config, device, code version), so it must not read anything else
  that changes its numbers.
- ``specs(ctx) -> list[RunSpec]`` (optional): the units; default every arm x every seed
  (or one unit per arm when the claim is not stochastic). Use ``RunSpec.setting`` for
  sweeps (e.g. ``setting="depth=4"``).
- ``analyse(results: Mapping[RunSpec, dict], ctx) -> Analysis``: estimates (named, with
  intervals from ``audit.stats`` or exact), the parts decided by the claim's ``Rule``
  objects (``rule(evidence) -> Part``), tables, figures as data, and notes saying plainly
  what the test shows and what it does not.
- ``Rule(part, text, decide)``: ``decide`` returns ``(Outcome, reason, needs)``; ``text``
  is printed in the report, so it states the test, alpha, margins and n.
- ``CLAIM.scales``: config dicts for "smoke" (CPU, about a minute), "full", "paper".

Verdicts are about the REVIEWER's claim: CONFIRMED / REFUTED / INCONCLUSIVE.

Declarations. A declaration module holds the claim's data: its id, title, statement and paper, its arms
(names and descriptions), its scales (config dicts), the texts of its rules and questions
(plain strings, or templates filled with ``str.format`` by the code), the margins and
other thresholds fixed before any run, the paper's printed numbers, the premise's effect
text, the notes' fixed prose (templates where a number enters), and the settings searches
(``audit.tuning.Search`` records). It imports only value types and constants (``audit.claims``,
``audit.verdict``, ``audit.questions``, ``audit.tuning``, ``audit.seeds``,
``audit.papers``), never torch, never the claim's code, and computes nothing that depends on a run.

The claim's module keeps what is particular to its code: the pieces each arm changes,
``run`` and ``specs``, the evidence ``analyse`` extracts, any decision that is not a kit
kind (``audit.kit``), its own presentation (or, with a ``present/`` module, ``analyse =
present(evidence(...))``), and the ``Claim`` object that ties the declared texts to those
functions.

Notes, for ``audit review`` and the coverage table. Each paper's ``notes.py`` defines
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
from pathlib import Path
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


def _note_modules() -> tuple[str, ...]:
    """``audit.papers.<paper>.notes`` for every paper folder that has notes, from the folder."""
    here = Path(__file__).parent
    return tuple(f"audit.papers.{p.parent.name}.notes" for p in sorted(here.glob("*/notes.py")))


#: The notes modules, one per paper folder (read from the folders, not kept by hand).
MODULES = _note_modules()


def paper_modules() -> dict[str, ModuleType]:
    """The notes modules by arXiv id, in the order of the ids (the order of the records)."""
    out = {}
    for name in MODULES:
        module = importlib.import_module(name)
        out[module.ARXIV_ID] = module
    return dict(sorted(out.items()))


def notes(arxiv_id: str) -> dict[str, Note] | None:
    """Our notes for a paper's record items, or None for a paper we have no module for."""
    module = paper_modules().get(arxiv_id)
    return None if module is None else dict(module.ITEMS)
