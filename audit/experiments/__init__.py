"""One module per reviewer claim; each defines a module-level ``CLAIM`` (audit.claims.Claim).
The folder is the registry: every module here is a claim (``audit.claims.CLAIM_MODULES`` is
read from it). Code that claims share lives with its paper's algorithm
(``audit.algorithms.genefl_sim``: one whole GENE-FL run, used by both GENE-FL claims).

The contract a claim module fulfils (see ``audit/claims.py`` for the types):

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
"""
