"""Seeds reserved for choosing settings, and the record of each search.

Any pilot or search over settings or hyper-parameters (round counts, learning rates,
model widths, planted handicaps, a scale's size) runs on seeds from
:data:`TUNING_SEED_START` up; a verdict never does. The runner refuses a run that mixes
the two ranges, a run on tuning seeds is labelled a tuning run in its report and JSON,
and no lock is ever written from one. A claim records each search it made in
``Claim.searches`` (one :class:`Search` per scale and question); the report prints them
under "How the settings were chosen", so a reader sees what was tried, on which seeds,
what was chosen and why, and which settings were NOT chosen this way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from audit.errors import AuditError

TUNING_SEED_START = 1000  # seeds >= this are for tuning only; verdict seeds lie below


def tuning_seeds(n: int) -> tuple[int, ...]:
    """The first ``n`` tuning seeds (1000, 1001, ...)."""
    return tuple(range(TUNING_SEED_START, TUNING_SEED_START + int(n)))


def is_tuning(seeds: Sequence[int]) -> bool:
    """True when every seed is a tuning seed; a set mixing the two ranges is an error."""
    tuning = [s for s in seeds if s >= TUNING_SEED_START]
    if tuning and len(tuning) != len(seeds):
        raise AuditError(f"seeds mix verdict seeds (< {TUNING_SEED_START}) and tuning seeds "
                         f"(>= {TUNING_SEED_START}): {list(seeds)}; a run is one or the other")
    return bool(tuning)


@dataclass(frozen=True)
class Search:
    """One search over settings for one scale: what was asked, tried, chosen and why.

    ``seeds`` must all be tuning seeds; ``tried`` lists each candidate with what the pilot
    measured on it (plain text, numbers included). ``verdict_seeds_used`` is True for a
    choice made, before this rule existed, on seeds a verdict also uses: the report then
    says so instead of hiding it."""

    scale: str
    question: str
    seeds: tuple[int, ...]
    tried: tuple[str, ...]
    chosen: str
    why: str
    verdict_seeds_used: bool = False

    def __post_init__(self):
        if not self.verdict_seeds_used and not is_tuning(self.seeds):
            raise AuditError(f"search {self.question!r} at {self.scale}: seeds "
                             f"{list(self.seeds)} are not tuning seeds "
                             f"(>= {TUNING_SEED_START})")

    def to_dict(self) -> dict:
        return {"scale": self.scale, "question": self.question, "seeds": list(self.seeds),
                "tried": list(self.tried), "chosen": self.chosen, "why": self.why,
                "verdict_seeds_used": self.verdict_seeds_used}

    def markdown(self) -> str:
        seeds = ", ".join(str(s) for s in self.seeds) or "none"
        warn = (" **Chosen on verdict seeds** (made before tuning seeds were reserved; "
                "not yet re-chosen)." if self.verdict_seeds_used else "")
        tried = "".join(f"\n  - {t}" for t in self.tried)
        return (f"- **{self.question}** (scale {self.scale}; seeds {seeds}).{warn} "
                f"Tried:{tried}\n  - chosen: {self.chosen}. Why: {self.why}")
