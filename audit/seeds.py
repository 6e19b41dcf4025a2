"""Seed rules: which seeds a run may use, and which of them are reserved for tuning.

At the bottom of the package (it imports only :mod:`audit.errors`), so the run-context
types, the lock file, the runner, the tuning records and the reports all ask one place:

- :func:`resolve_seeds`: the seeds a run uses (a count, a list or the claim's default),
  checked once before any work; at most :func:`max_seeds` of them, each a whole number
  in [0, :data:`MAX_SEED_VALUE`];
- :data:`TUNING_SEED_START` and up are tuning seeds (pilots and searches over settings,
  :mod:`audit.tuning`); a verdict never runs on them, and :func:`is_tuning` refuses a
  set that mixes the two ranges.

``audit.runner`` and ``audit.tuning`` re-export these names where they used to live.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Sequence

from audit.errors import AuditError

TUNING_SEED_START = 1000  # seeds >= this are for tuning only; verdict seeds lie below
MAX_PILOT_SEEDS = 200  # the most tuning seeds one pilot runs


def tuning_seeds(n: int) -> tuple[int, ...]:
    """The first ``n`` tuning seeds (1000, 1001, ...); at most :data:`MAX_PILOT_SEEDS`."""
    if n > MAX_PILOT_SEEDS:
        raise AuditError(f"at most {MAX_PILOT_SEEDS} tuning seeds, got {n}")
    return tuple(range(TUNING_SEED_START, TUNING_SEED_START + int(n)))


def is_tuning(seeds: Sequence[int]) -> bool:
    """True when every seed is a tuning seed; a set mixing the two ranges is an error."""
    tuning = [s for s in seeds if s >= TUNING_SEED_START]
    if tuning and len(tuning) != len(seeds):
        raise AuditError(f"seeds mix verdict seeds (< {TUNING_SEED_START}) and tuning seeds "
                         f"(>= {TUNING_SEED_START}): {list(seeds)}; a run is one or the other")
    return bool(tuning)


MAX_SEEDS = 200  # the most seeds one run may ask for; AUDIT_MAX_SEEDS raises it
MAX_SEED_VALUE = 2**32 - 1  # numpy and torch both take seeds up to here


def max_seeds() -> int:
    """:data:`MAX_SEEDS`, or the whole number in ``$AUDIT_MAX_SEEDS`` (the escape hatch for
    a sweep that really needs more)."""
    raw = os.environ.get("AUDIT_MAX_SEEDS")
    if raw is None:
        return MAX_SEEDS
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 2:
        raise AuditError(f"AUDIT_MAX_SEEDS must be a whole number >= 2, got {raw!r}")
    return n


def resolve_seeds(claim: Any, seeds: int | Sequence[int] | None) -> tuple[int, ...]:
    """The seeds a run uses; bad counts and lists are one AuditError, checked before any
    work. At most :func:`max_seeds` seeds (200 unless ``$AUDIT_MAX_SEEDS`` says more),
    each a whole number in [0, 2**32 - 1]. ``claim``: anything with ``id``,
    ``stochastic`` and ``default_seeds`` (a :class:`audit.claims.Claim`)."""
    if not claim.stochastic:
        return ()
    limit = max_seeds()
    if seeds is None:
        out = tuple(claim.default_seeds)
    elif isinstance(seeds, bool) or isinstance(seeds, (str, bytes, float)):
        raise AuditError(f"seeds must be a count or a list of whole numbers, got {seeds!r}")
    elif isinstance(seeds, numbers.Integral):
        seeds = int(seeds)
        if seeds < 0:
            raise AuditError(f"the seed count must be positive, got {seeds}")
        if seeds > limit:
            raise AuditError(f"{seeds} seeds asked for; at most {limit} (set "
                             f"AUDIT_MAX_SEEDS to allow more)")
        out = tuple(range(seeds))
    else:
        seeds = list(seeds)
        if len(seeds) > limit:
            raise AuditError(f"{len(seeds)} seeds listed; at most {limit} (set "
                             f"AUDIT_MAX_SEEDS to allow more)")
        if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in seeds):
            raise AuditError(f"seeds must be whole numbers: {list(seeds)}")
        out = tuple(int(s) for s in seeds)
    if any(s > MAX_SEED_VALUE for s in out):
        raise AuditError(f"seeds must be at most {MAX_SEED_VALUE}: "
                         f"{[s for s in out if s > MAX_SEED_VALUE][:3]}")
    is_tuning(out)  # a run on tuning seeds only, or on verdict seeds only: never both
    if len(out) < 2:
        raise AuditError(f"claim {claim.id!r} is stochastic and needs at least 2 seeds "
                         f"(got {len(out)})")
    if len(set(out)) != len(out):
        raise AuditError(f"seed list has repeats: {list(out)}")
    if any(s < 0 for s in out):
        raise AuditError(f"seeds must be non-negative integers: {list(out)}")
    return out
