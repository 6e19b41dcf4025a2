"""Calibration by simulation: the error rates of every decision path, measured.

STATISTICS.md ("Calibration: measure the rule, not the textbook"): each decision path is
simulated under its null and at its equivalence boundary, for normal, skewed,
heavy-tailed and accuracy-like (bounded, discretised) differences, and each error rate
must stay at or below its nominal level plus three Monte-Carlo standard errors.

Everything is vectorised over replicates through :func:`audit.stats.three_way_codes`
(checked against :func:`audit.stats.three_way` in ``tests/test_calibration.py``), so the
matrix runs in CI in seconds. ``python -m audit.calibration`` prints the table that the
README shows.

Paths simulated:

* the three-way rule at one n (:func:`three_way_rates`): false SUPPORTED under the null
  (true difference = margin) and false FALSIFIED at the equivalence boundary (true
  difference = +-d), each at nominal alpha. Both read one two-sided (1 - alpha) t
  interval, so symmetric differences measure about alpha / 2; skewed ones use part of
  the other half (the matrix shows how much);
* the same rule run over the looks of a :class:`audit.sequential.Plan`
  (:func:`sequential_rates`), stopping at the first decided look;
* the futility stop (:func:`futility_rates`): a part gated by the premise, the plan
  stopping where the premise is decided not reproduced; how often a real effect is
  stopped as "not reproduced", and how often the gated part is falsely decided;
* composites (:func:`any_of_rates`, :func:`best_of_rates`): k alternatives compared with
  one shared arm, the claim decided by any comparison (at alpha / k each) or by the best
  arm picked on the same data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from audit import stats
from audit.sequential import Plan

DISTRIBUTIONS = ("normal", "skewed", "skewed-left", "heavy", "accuracy")
#: accuracy-like differences: per-seed accuracies of two arms on N_TEST test decisions
N_TEST = 200
P_BASE = 0.8


def draw(dist: str, size: tuple[int, int], rng: np.random.Generator, shift: float = 0.0,
         sd: float = 1.0) -> np.ndarray:
    """Paired differences with mean ``shift`` and SD ``sd`` (approximately, for
    ``accuracy``, whose values are multiples of 1 / N_TEST of a bounded accuracy).

    * normal: N(shift, sd);
    * skewed / skewed-left: a standardised gamma(shape 4) (skewness +1 / -1), scaled and
      shifted;
    * heavy: Student t with 3 degrees of freedom, standardised (infinite kurtosis);
    * accuracy: A and B accuracies of Binomial(N_TEST, p) / N_TEST with a shared per-seed
      effect on p; the difference is discretised to 1 / N_TEST and bounded. ``shift`` and
      ``sd`` are in accuracy units here (sd is ignored: the binomial sets it).
    """
    if dist == "normal":
        return shift + sd * rng.standard_normal(size)
    if dist == "skewed":
        k = 4.0
        g = (rng.gamma(k, 1.0, size) - k) / math.sqrt(k)
        return shift + sd * g
    if dist == "skewed-left":
        k = 4.0
        g = (rng.gamma(k, 1.0, size) - k) / math.sqrt(k)
        return shift - sd * g
    if dist == "heavy":
        return shift + sd * rng.standard_t(3, size) / math.sqrt(3.0)
    if dist == "accuracy":
        seed_effect = 0.03 * rng.standard_normal(size)
        p_b = np.clip(P_BASE + seed_effect, 0.0, 1.0)
        p_a = np.clip(p_b + shift, 0.0, 1.0)
        return (rng.binomial(N_TEST, p_a) - rng.binomial(N_TEST, p_b)) / N_TEST
    raise ValueError(f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}")


def accuracy_sd(rng: np.random.Generator, reps: int = 20000) -> float:
    """The SD of :func:`draw`'s accuracy differences (to size margins in SD units)."""
    return float(draw("accuracy", (reps, 1), rng).std())


def mc_se(p: float, reps: int) -> float:
    """Monte-Carlo standard error of a rate p estimated from ``reps`` replicates."""
    return math.sqrt(max(p * (1.0 - p), 1e-12) / reps)


@dataclass(frozen=True)
class Rate:
    """One measured error rate beside its nominal level."""

    path: str
    dist: str
    n: int | str
    error: str  # "false SUPPORTED" | "false FALSIFIED" | "false CONFIRMED" ...
    rate: float
    nominal: float
    reps: int

    @property
    def bound(self) -> float:
        return self.nominal + 3.0 * mc_se(self.nominal, self.reps)

    @property
    def ok(self) -> bool:
        return self.rate <= self.bound


def _scales(dist: str, rng: np.random.Generator) -> tuple[float, float]:
    """(sd of the differences, equivalence margin d) for a distribution: d = 0.5 SD."""
    sd = accuracy_sd(rng) if dist == "accuracy" else 1.0
    return sd, 0.5 * sd


def three_way_rates(n: int, dist: str, rng: np.random.Generator, reps: int = 20000,
                    alpha: float = 0.05) -> list[Rate]:
    """The three-way rule at ``n`` pairs: false SUPPORTED at the null (true difference =
    margin = 0) and false FALSIFIED at each equivalence boundary (+d and -d)."""
    sd, d = _scales(dist, rng)
    out = []
    D = draw(dist, (reps, n), rng, 0.0, sd)
    c = stats.three_way_codes(D, margin=0.0, equivalence_margin=d, alpha=alpha).codes
    out.append(Rate("three-way", dist, n, "false SUPPORTED (null)",
                    float(np.mean(c == stats.SUPPORTED)), alpha, reps))
    for sign, name in ((1.0, "+d"), (-1.0, "-d")):
        D = draw(dist, (reps, n), rng, sign * d, sd)
        r = stats.three_way_codes(D, margin=0.0, equivalence_margin=d, alpha=alpha)
        out.append(Rate("three-way", dist, n, f"false FALSIFIED by equivalence ({name})",
                        float(np.mean(r.by_equivalence)), alpha, reps))
    return out


def sequential_rates(plan: Plan, dist: str, rng: np.random.Generator, reps: int = 20000,
                     alpha: float = 0.05) -> list[Rate]:
    """The three-way rule over the looks of ``plan`` (alpha spent across them), stopping
    at the first decided look: the decision it stops with is wrong how often?"""
    sd, d = _scales(dist, rng)
    fr = plan.fractions()
    out = []
    for truth, err, nominal in ((0.0, "false SUPPORTED (null)", alpha),
                                (d, "false FALSIFIED by equivalence (+d)", alpha)):
        D = draw(dist, (reps, plan.cap), rng, truth, sd)
        final = np.full(reps, stats.INCONCLUSIVE, dtype=np.int8)
        by_eq = np.zeros(reps, dtype=bool)
        open_ = np.ones(reps, dtype=bool)
        for n, f in zip(plan.looks, fr):
            r = stats.three_way_codes(D[open_, :n], margin=0.0, equivalence_margin=d,
                                      alpha=alpha * f)
            idx = np.flatnonzero(open_)
            decided = r.codes != stats.INCONCLUSIVE
            final[idx[decided]] = r.codes[decided]
            by_eq[idx[decided]] = r.by_equivalence[decided]
            open_[idx[decided]] = False
        bad = (final == stats.SUPPORTED) if truth == 0.0 else by_eq
        out.append(Rate(f"sequential {plan.spending} {list(plan.looks)}", dist,
                        f"<= {plan.cap}", err, float(np.mean(bad)), nominal, reps))
    return out


def futility_rates(plan: Plan, dist: str, rng: np.random.Generator, reps: int = 20000,
                   alpha: float = 0.05) -> list[Rate]:
    """The sequential plan with a futility stop (``audit.runner.stop_reason``): one part
    gated by the premise (decided only at a look where the premise is SUPPORTED), the
    plan stopping at the first look where the part is decided with the premise
    reproduced, or where the premise is FALSIFIED (not reproduced), else at the cap.
    Both rules run at the look's share of alpha.

    * a real effect stopped as "not reproduced": the premise's true difference is +d
      (the paper's effect as large as the margin) and the part never settles the run
      (its difference is pure noise around the margin);
    * false SUPPORTED of the gated part: the part's difference sits at its null (the
      margin), the premise clearly reproduced (+3 SD), so the gate is open at every look.
    """
    sd, d = _scales(dist, rng)
    fr = plan.fractions()
    out = []
    for premise_truth, err in ((d, "false 'premise not reproduced' (premise at +d)"),
                               (3.0 * sd, "false SUPPORTED of the gated part (null)")):
        P = draw(dist, (reps, plan.cap), rng, premise_truth, sd)
        Q = draw(dist, (reps, plan.cap), rng, 0.0, sd)
        futile = np.zeros(reps, dtype=bool)
        part = np.full(reps, stats.INCONCLUSIVE, dtype=np.int8)
        open_ = np.ones(reps, dtype=bool)
        for n, f in zip(plan.looks, fr):
            idx = np.flatnonzero(open_)
            p = stats.three_way_codes(P[idx, :n], margin=0.0, equivalence_margin=d,
                                      alpha=alpha * f).codes
            q = stats.three_way_codes(Q[idx, :n], margin=0.0, equivalence_margin=d,
                                      alpha=alpha * f).codes
            stop_futile = p == stats.FALSIFIED
            stop_decided = (p == stats.SUPPORTED) & (q != stats.INCONCLUSIVE)
            futile[idx[stop_futile]] = True
            part[idx[stop_decided]] = q[stop_decided]
            open_[idx[stop_futile | stop_decided]] = False
        bad = futile if premise_truth == d else (part == stats.SUPPORTED)
        out.append(Rate(f"futility stop {plan.spending} {list(plan.looks)}", dist,
                        f"<= {plan.cap}", err, float(np.mean(bad)), alpha, reps))
    return out


def any_of_rates(k: int, n: int, dist: str, rng: np.random.Generator, reps: int = 20000,
                 alpha: float = 0.05) -> list[Rate]:
    """k alternatives each compared with one shared arm at alpha / k (Bonferroni), the
    claim CONFIRMED when ANY comparison shows equivalence (LIPS's controls). Global null:
    every alternative sits at the boundary d; how often is some equivalence found?"""
    sd, d = _scales(dist, rng)
    shared = draw(dist, (reps, n), rng, 0.0, sd / math.sqrt(2))
    hit = np.zeros(reps, dtype=bool)
    for _ in range(k):
        D = shared + draw(dist, (reps, n), rng, d, sd / math.sqrt(2))
        hit |= stats.three_way_codes(D, margin=0.0, equivalence_margin=d,
                                     alpha=alpha / k).by_equivalence
    return [Rate(f"any of {k} (alpha/{k} each)", dist, n, "false CONFIRMED (all at +d)",
                 float(np.mean(hit)), alpha, reps)]


def best_of_rates(k: int, n: int, dist: str, rng: np.random.Generator, reps: int = 20000,
                  alpha: float = 0.05, bonferroni: bool = True) -> list[Rate]:
    """The best of k arms (picked by its mean on the same seeds) against one shared arm,
    SUPPORTED when its CI lies above the margin (FLAYER: best corrected arm vs literal).
    Global null: every arm equals the shared arm plus the margin. With ``bonferroni`` the
    comparison runs at alpha / k, which bounds the selection's optimism (union bound)."""
    sd, d = _scales(dist, rng)
    shared = draw(dist, (reps, n), rng, 0.0, sd / math.sqrt(2))
    arms = np.stack([shared + draw(dist, (reps, n), rng, 0.0, sd / math.sqrt(2))
                     for _ in range(k)])  # (k, reps, n): differences to the shared arm
    best = np.argmax(arms.mean(axis=2), axis=0)
    D = arms[best, np.arange(reps)]
    a = alpha / k if bonferroni else alpha
    c = stats.three_way_codes(D, margin=0.0, equivalence_margin=d, alpha=a).codes
    label = f"best of {k}" + (f" (alpha/{k})" if bonferroni else " (alpha, no correction)")
    return [Rate(label, dist, n, "false SUPPORTED (null)", float(np.mean(c == stats.SUPPORTED)),
                 alpha, reps)]


NS = (3, 5, 8, 10, 15, 20, 30, 50)


def matrix(reps: int = 20000, seed: int = 20261201, ns=NS,
           dists=DISTRIBUTIONS) -> list[Rate]:
    """The whole matrix (the CI test runs it with fewer replicates)."""
    rng = np.random.default_rng(seed)
    out: list[Rate] = []
    for dist in dists:
        for n in ns:
            out += three_way_rates(n, dist, rng, reps)
        for cap in (10, 20, 40):
            for shape in ("pocock", "obrien-fleming"):
                from audit.sequential import plan

                out += sequential_rates(plan(cap, spending=shape), dist, rng, reps)
                out += futility_rates(plan(cap, spending=shape), dist, rng, reps)
        out += any_of_rates(4, 5, dist, rng, reps)
        out += any_of_rates(4, 20, dist, rng, reps)
        out += best_of_rates(3, 5, dist, rng, reps)
        out += best_of_rates(3, 20, dist, rng, reps)
    return out


def table(rates: list[Rate]) -> str:
    lines = ["| path | differences | n | error | rate | nominal | bound (+3 MC SE) | ok |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rates:
        lines.append(f"| {r.path} | {r.dist} | {r.n} | {r.error} | {r.rate:.4f} | "
                     f"{r.nominal:.4f} | {r.bound:.4f} | {'yes' if r.ok else '**no**'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a printing helper

    reps = int(argv[0]) if argv else 20000
    rates = matrix(reps)
    print(table(rates))
    return 0 if all(r.ok for r in rates) else 1


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(main(sys.argv[1:]))
