"""Sequential seeds: looks planned before the run, alpha spent across them.

Running 5 seeds, looking, then running more because the answer was close inflates every
error rate unless the looks are planned and alpha is spent across them (docs/STATISTICS.md,
"Sequential looks"). A :class:`Plan` fixes the seed counts of the
looks (10, 20, ... up to the cap) before the run and gives each look a share of every
rule's alpha from a Lan-DeMets spending function of the information fraction t = n / cap:

* ``pocock`` (the default): ``alpha(t) = alpha * ln(1 + (e - 1) t)``, which spends a fair
  share early, so a large effect is decided at the first look;
* ``obrien-fleming``: ``alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``, which keeps
  almost everything for the last look.

Look k runs every rule at ``alpha * (alpha(t_k) - alpha(t_{k-1})) / alpha``: the shares
add up to 1, so by the union bound the chance that ANY look makes a false decision is at
most alpha whatever the stopping rule (stop at the first look where every part that
enters the verdict is decided, or where the premise is decided not reproduced and every
open part is gated by it, or at the cap). This is conservative (it ignores the
correlation between looks); the calibration matrix (``python -m audit.calibration``,
``tests/test_calibration.py``) measures how conservative, and that every one-sided error
rate stays within alpha / 2. The three-way rule decides nothing below
``audit.stats.MIN_PAIRS`` pairs, so a look with fewer seeds spends its share without
being able to decide (valid, but that share is lost to power).

A futility stop ends the plan; the claim keeps that look's verdict, which is INCONCLUSIVE
unless a decided part that is not gated already settles it (REFUTED under ``all_of``
through a REFUTED part, for instance).

Finished units are reused from the cache at each look, so a look costs only its new
seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm

SPENDING = ("pocock", "obrien-fleming")
# the first look: the three-way rule cannot decide below 6 pairs, nor with fewer than 7
# differing pairs at a look's share of alpha, so a look at 5 would spend its share for
# nothing; the default plan looks at 10 and 20 seeds
FIRST_LOOK = 10
DEFAULT_CAP = 20
# The cap by scale. Smoke is the regression scale (CI reruns every falsifier at it on two
# cores): one look at 10 seeds with the whole alpha. The evidence scales (full, paper)
# look at 10 and 20.
SCALE_CAPS = {"smoke": 10}


def default_cap(scale: str) -> int:
    """The cap of ``--until-decided`` when none is given: 10 seeds at smoke scale (one
    look), else :data:`DEFAULT_CAP` (looks at 10 and 20)."""
    return SCALE_CAPS.get(scale, DEFAULT_CAP)


def _spent(t: float, shape: str, alpha: float) -> float:
    """Fraction of alpha spent by information fraction ``t`` (0 at 0, 1 at 1)."""
    if t <= 0:
        return 0.0
    t = min(1.0, t)
    if shape == "pocock":
        return math.log(1.0 + (math.e - 1.0) * t)
    if shape == "obrien-fleming":
        z = norm.ppf(1.0 - alpha / 2.0)
        return float(2.0 - 2.0 * norm.cdf(z / math.sqrt(t))) / alpha
    raise ValueError(f"unknown spending function {shape!r}; choose one of {', '.join(SPENDING)}")


#: the smallest share of alpha a look may spend (a rule at level alpha x 1e-9 still runs)
MIN_SHARE = 1e-9


@dataclass(frozen=True)
class Plan:
    """Seed counts of the looks and the spending function, fixed before the run."""

    looks: tuple[int, ...]
    spending: str = "pocock"
    alpha: float = 0.05  # the nominal level the O'Brien-Fleming shape is computed at

    def __post_init__(self):
        try:  # whole numbers only: a lock's 10.9 is refused, not read as 10
            looks = tuple(int(n) for n in self.looks if float(n) == int(n))
        except (TypeError, ValueError, OverflowError):
            looks = ()
        if not looks or len(looks) != len(tuple(self.looks)) or any(n < 2 for n in looks) \
                or list(looks) != sorted(set(looks)):
            raise ValueError(f"looks must be increasing whole seed counts of at least 2; "
                             f"got {list(self.looks)}")
        if self.spending not in SPENDING:
            raise ValueError(f"unknown spending function {self.spending!r}; choose one of "
                             f"{', '.join(SPENDING)}")
        if isinstance(self.alpha, bool) or not 0.0 < float(self.alpha) < 1.0:
            raise ValueError(f"the plan's alpha must lie strictly between 0 and 1; got "
                             f"{self.alpha!r}")
        object.__setattr__(self, "looks", looks)
        # a look that spends (almost) nothing cannot run a rule at its level (O'Brien-
        # Fleming's first looks at a large cap): refused here, not a traceback mid-run
        starved = [n for n, f in zip(looks, self.fractions()) if not f >= MIN_SHARE]
        if starved:
            raise ValueError(f"the {self.spending} plan with looks at {list(looks)} spends "
                             f"almost no alpha at {starved} seeds (a share below "
                             f"{MIN_SHARE:g}); use fewer looks, a smaller cap or pocock")

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def fractions(self) -> tuple[float, ...]:
        """The share of alpha each look spends (they add up to 1)."""
        cum = [_spent(n / self.cap, self.spending, self.alpha) for n in self.looks]
        cum[-1] = 1.0
        return tuple(c - p for c, p in zip(cum, [0.0] + cum[:-1]))

    def describe(self) -> str:
        shares = ", ".join(f"n = {n}: {f:.3f}" for n, f in zip(self.looks, self.fractions()))
        return (f"looks at {', '.join(str(n) for n in self.looks)} seeds (planned before "
                f"the run), {self.spending} alpha spending (Lan-DeMets shape, spent as "
                f"shares of every rule's alpha: {shares}); stop at the first look where "
                f"every part that enters the verdict is decided, or where the paper's "
                f"own effect (the premise) is decided not reproduced and every part "
                f"still open is gated by it (a futility stop: the claim keeps the verdict "
                f"of that look, INCONCLUSIVE unless a decided part that is not gated "
                f"already settles it, e.g. REFUTED under all_of), "
                f"else at the cap of {self.cap} seeds")

    def to_dict(self) -> dict:
        return {"looks": list(self.looks), "spending": self.spending,
                "fractions": [float(f) for f in self.fractions()]}


def plan(cap: int = DEFAULT_CAP, first: int = FIRST_LOOK, spending: str = "pocock") -> Plan:
    """Looks at ``first``, doubling, up to ``cap`` (always included): 10, 20 for 20."""
    if cap < 2:
        raise ValueError(f"the cap must be at least 2 seeds; got {cap}")
    if first < 2:
        raise ValueError(f"the first look needs at least 2 seeds; got {first}")
    looks, n = [], min(first, cap)
    while n < cap:
        looks.append(n)
        n *= 2
    looks.append(cap)
    return Plan(tuple(looks), spending)
