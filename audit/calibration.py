"""Calibration by simulation: the error rates of every decision path, measured.

docs/STATISTICS.md ("Calibration"): each decision path is simulated under its null and at
its equivalence boundary, for the differences runs produce when they behave and when they
misbehave, and each one-sided error rate must stay at or below the level the rule promises
(alpha / 2 per side: the three-way rule reads a two-sided (1 - alpha) interval) plus three
Monte-Carlo standard errors. Where the rule refuses to decide, the matrix says how often,
and what power it keeps (a 1-SD effect at n = 10 and 20).

Every cell draws from its own random stream, seeded from a hash of the cell's name
(:func:`cell_rng`), so adding, removing or reordering cells moves no other cell's number.
Everything is vectorised over replicates through :func:`audit.stats.three_way_codes`
(checked against :func:`audit.stats.three_way` in ``tests/test_calibration.py``).

``python -m audit.calibration --markdown`` prints the README's tables (20,000 runs a
cell); ``--reps N`` changes the size, ``--full`` prints every cell. CI
(``tests/test_calibration.py``) runs the same cells with fewer runs.

Paths simulated:

* the three-way rule at one n (:func:`three_way_rates`): false SUPPORTED and false
  wrong-side FALSIFIED under the null (true difference = margin), false FALSIFIED by
  equivalence at each boundary (true difference = +d, -d);
* the same rule over the looks of a :class:`audit.sequential.Plan`
  (:func:`sequential_rates`), stopping at the first decided look;
* the futility stop (:func:`futility_rates`);
* composites: k comparisons with one shared arm under any-of (:func:`any_of_rates`), the
  best of k arms (:func:`best_of_rates`), and claims of three correlated parts under
  ``all_of`` / ``any_of`` with Bonferroni on the deciding union path
  (:func:`claim_rates`, ``audit.verdict``);
* collapse mixtures (:func:`collapse_rates`): a share of seeds where one arm falls to
  chance. No test of a sample holds its level there (a sample that happens to hold no
  collapse looks clean), so these rows are measured and stated, not required.
"""
from __future__ import annotations

import argparse
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from audit import stats
from audit.sequential import Plan, plan

ALPHA = 0.05

#: every distribution of the matrix (each required to hold its level)
DISTRIBUTIONS = ("normal", "exp-right", "exp-left", "lognormal-right", "lognormal-left",
                 "t3", "accuracy-100", "accuracy-1000", "sparse-ties", "near-constant")
#: collapse mixtures: measured and stated (no rule of a sample can hold them)
COLLAPSES = ("collapse-B-5%", "collapse-B-15%", "collapse-A-5%", "collapse-A-15%")
P_BASE = 0.8
LOGNORMAL_SIGMA = 1.0  # skewness (e^s2 + 2) sqrt(e^s2 - 1) = 6.18
SPARSE_ZERO = 0.7  # share of seeds with no difference at all
COLLAPSE_JUMP = 10.0  # a collapsed seed's difference, in SDs of the ordinary seeds

NS = (5, 6, 8, 10, 15, 20, 30, 50)
CAPS = (10, 20, 40)
SHAPES = ("pocock", "obrien-fleming")
RHOS = (0.0, 0.5, 0.9)
#: distributions whose correlated parts are built by mixing draws (a shared and an own
#: draw, seed by seed); mixing would dissolve the ties and the constant samples that
#: define sparse-ties and near-constant, so those two are simulated one part at a time
CORRELATABLE = tuple(d for d in DISTRIBUTIONS if d not in ("sparse-ties", "near-constant"))


def cell_rng(name: str) -> np.random.Generator:
    """The cell's own stream: seeded from the SHA-256 of its name."""
    return np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8],
                                                "little"))


def draw(dist: str, size: tuple[int, int], rng: np.random.Generator, shift: float = 0.0,
         sd: float = 1.0) -> np.ndarray:
    """Paired differences with mean exactly ``shift`` (in the distribution's own units,
    see :func:`scale_of`) and SD ``sd`` for the continuous ones.

    * normal: N(shift, sd);
    * exp-right / exp-left: a standardised exponential (skewness +2 / -2);
    * lognormal-right / -left: a standardised lognormal, sigma 1 (skewness +-6.2);
    * t3: Student t with 3 degrees of freedom, standardised (infinite kurtosis);
    * accuracy-100 / -1000: A and B accuracies Binomial(N, p) / N with a shared per-seed
      effect on p (base 0.8, SD 0.03): differences are multiples of 1 / N;
    * sparse-ties: 70 % of seeds exactly 0, the others shift / 0.3 + (+-1 or +-2) / 100;
    * near-constant: every seed shift + 1/100, except a 10 % of seeds at shift - 9/100
      (most samples of 10 are all equal; the rare seed keeps the mean at shift);
    * collapse-B-f / collapse-A-f: normal differences, except a share f of seeds where
      arm B (A) falls to chance: the difference jumps by +10 SD (-10 SD); the ordinary
      seeds sit at shift -+ 10 f / (1 - f) so that the mean is shift.
    """
    if dist == "normal":
        return shift + sd * rng.standard_normal(size)
    if dist in ("exp-right", "exp-left"):
        e = rng.exponential(1.0, size) - 1.0
        return shift + sd * (e if dist == "exp-right" else -e)
    if dist in ("lognormal-right", "lognormal-left"):
        s2 = LOGNORMAL_SIGMA ** 2
        e = (rng.lognormal(0.0, LOGNORMAL_SIGMA, size) - math.exp(s2 / 2)) / math.sqrt(
            (math.exp(s2) - 1) * math.exp(s2))
        return shift + sd * (e if dist == "lognormal-right" else -e)
    if dist == "t3":
        return shift + sd * rng.standard_t(3, size) / math.sqrt(3.0)
    if dist.startswith("accuracy-"):
        n_test = int(dist.split("-")[1])
        seed_effect = 0.03 * rng.standard_normal(size)
        p_b = np.clip(P_BASE + seed_effect, 0.0, 1.0)
        p_a = np.clip(p_b + shift, 0.0, 1.0)
        return (rng.binomial(n_test, p_a) - rng.binomial(n_test, p_b)) / n_test
    if dist == "sparse-ties":
        q = 1.0 - SPARSE_ZERO
        nz = rng.random(size) < q
        step = rng.choice([-2.0, -1.0, 1.0, 2.0], size) / 100
        return np.where(nz, shift / q + step, 0.0)
    if dist == "near-constant":
        rare = rng.random(size) < 0.1
        return shift + np.where(rare, -0.09, 0.01)
    if dist.startswith("collapse-"):
        arm, f = dist.split("-")[1], float(dist.split("-")[2].rstrip("%")) / 100
        sign = 1.0 if arm == "B" else -1.0
        hit = rng.random(size) < f
        base = shift - sign * sd * COLLAPSE_JUMP * f / (1 - f)
        return base + sd * rng.standard_normal(size) + np.where(hit, sign * sd * COLLAPSE_JUMP
                                                                / (1 - f), 0.0)
    raise ValueError(f"unknown distribution {dist!r}; choose one of "
                     f"{', '.join(DISTRIBUTIONS + COLLAPSES)}")


def scale_of(dist: str) -> float:
    """The SD of one seed's difference (the unit of margins and effects)."""
    if dist.startswith("accuracy-"):
        x = draw(dist, (40000, 1), cell_rng(f"sd:{dist}"))
        return float(x.std())
    if dist == "sparse-ties":
        return math.sqrt((1 - SPARSE_ZERO) * 2.5) / 100
    if dist == "near-constant":
        return math.sqrt(0.9 * 0.01 ** 2 + 0.1 * 0.09 ** 2)
    return 1.0


def mc_se(p: float, reps: int) -> float:
    """Monte-Carlo standard error of a rate p estimated from ``reps`` replicates."""
    return math.sqrt(max(p * (1.0 - p), 1e-12) / reps)


@dataclass(frozen=True)
class Rate:
    """One measured error rate beside the level the rule promises (alpha / 2 a side)."""

    path: str
    dist: str
    n: int | str
    error: str
    rate: float
    nominal: float
    reps: int
    required: bool = True  # collapse mixtures are measured and stated, not required

    @property
    def bound(self) -> float:
        return self.nominal + 3.0 * mc_se(self.nominal, self.reps)

    @property
    def ok(self) -> bool:
        return self.rate <= self.bound or not self.required


def _codes(D, d, alpha, margin=0.0, sensitive=True):
    return stats.three_way_codes(D, margin=margin, equivalence_margin=d, alpha=alpha,
                                 sensitive=sensitive)


def three_way_rates(n: int, dist: str, reps: int = 20000, alpha: float = ALPHA) -> list[Rate]:
    """The three-way rule at ``n`` pairs, margin 0, d = half an SD: false SUPPORTED and
    false wrong-side FALSIFIED at the null, false equivalence at +d and at -d."""
    sd = scale_of(dist)
    d = 0.5 * sd
    req = dist not in COLLAPSES
    out = []
    r = _codes(draw(dist, (reps, n), cell_rng(f"three-way/{dist}/{n}/null"), 0.0, sd), d, alpha)
    out.append(Rate("three-way", dist, n, "false SUPPORTED (null)",
                    float(np.mean(r.codes == stats.SUPPORTED)), alpha / 2, reps, req))
    out.append(Rate("three-way", dist, n, "false FALSIFIED, wrong side (null)",
                    float(np.mean((r.codes == stats.FALSIFIED) & ~r.by_equivalence)),
                    alpha / 2, reps, req))
    for sign, name in ((1.0, "+d"), (-1.0, "-d")):
        D = draw(dist, (reps, n), cell_rng(f"three-way/{dist}/{n}/{name}"), sign * d, sd)
        out.append(Rate("three-way", dist, n, f"false FALSIFIED, equivalence ({name})",
                        float(np.mean(_codes(D, d, alpha).by_equivalence)), alpha / 2, reps,
                        req))
    return out


def power_rows(dist: str, ns=(10, 20), reps: int = 20000, alpha: float = ALPHA) -> list[dict]:
    """Power at a 1-SD effect (SUPPORTED at margin 0) and how often the rule refuses
    where the interval alone would decide, for ``dist`` at each n."""
    sd = scale_of(dist)
    rows = []
    for n in ns:
        D = draw(dist, (reps, n), cell_rng(f"power/{dist}/{n}"), sd, sd)
        r = _codes(D, 0.5 * sd, alpha)
        rows.append({"dist": dist, "n": n, "power": float(np.mean(r.codes == stats.SUPPORTED)),
                     "refused": float(np.mean(r.refused))})
    return rows


def sequential_rates(plan_: Plan, dist: str, reps: int = 20000,
                     alpha: float = ALPHA) -> list[Rate]:
    """The three-way rule over the looks of ``plan_`` (alpha spent across them), stopping
    at the first decided look: the decision it stops with is wrong how often?"""
    sd = scale_of(dist)
    d = 0.5 * sd
    fr = plan_.fractions()
    name = f"sequential {plan_.spending} {list(plan_.looks)}"
    out = []
    for truth, err in ((0.0, "false SUPPORTED (null)"),
                       (d, "false FALSIFIED, equivalence (+d)")):
        D = draw(dist, (reps, plan_.cap), cell_rng(f"{name}/{dist}/{err}"), truth, sd)
        final = np.full(reps, stats.INCONCLUSIVE, dtype=np.int8)
        by_eq = np.zeros(reps, dtype=bool)
        open_ = np.ones(reps, dtype=bool)
        for n, f in zip(plan_.looks, fr):
            idx = np.flatnonzero(open_)
            r = _codes(D[idx, :n], d, alpha * f)
            decided = r.codes != stats.INCONCLUSIVE
            final[idx[decided]] = r.codes[decided]
            by_eq[idx[decided]] = r.by_equivalence[decided]
            open_[idx[decided]] = False
        bad = (final == stats.SUPPORTED) if truth == 0.0 else by_eq
        out.append(Rate(name, dist, f"<= {plan_.cap}", err, float(np.mean(bad)), alpha / 2,
                        reps))
    return out


def futility_rates(plan_: Plan, dist: str, reps: int = 20000,
                   alpha: float = ALPHA) -> list[Rate]:
    """The sequential plan with a futility stop (``audit.runner.stop_reason``): one part
    gated by the premise, the plan stopping where the part is decided with the premise
    reproduced, or where the premise is FALSIFIED (not reproduced), else at the cap.

    * a real effect stopped as "not reproduced": the premise's true difference is +d and
      the part never settles the run (its difference is noise around its margin);
    * false SUPPORTED of the gated part: its difference sits at its null, the premise
      clearly reproduced (+3 SD), so the gate is open at every look.
    """
    sd = scale_of(dist)
    d = 0.5 * sd
    fr = plan_.fractions()
    name = f"futility stop {plan_.spending} {list(plan_.looks)}"
    out = []
    for premise_truth, err in ((d, "false 'premise not reproduced' (premise at +d)"),
                               (3.0 * sd, "false SUPPORTED of the gated part (null)")):
        rng = cell_rng(f"{name}/{dist}/{err}")
        P = draw(dist, (reps, plan_.cap), rng, premise_truth, sd)
        Q = draw(dist, (reps, plan_.cap), rng, 0.0, sd)
        futile = np.zeros(reps, dtype=bool)
        part = np.full(reps, stats.INCONCLUSIVE, dtype=np.int8)
        open_ = np.ones(reps, dtype=bool)
        for n, f in zip(plan_.looks, fr):
            idx = np.flatnonzero(open_)
            p = _codes(P[idx, :n], d, alpha * f).codes
            q = _codes(Q[idx, :n], d, alpha * f).codes
            stop_futile = p == stats.FALSIFIED
            stop_decided = (p == stats.SUPPORTED) & (q != stats.INCONCLUSIVE)
            futile[idx[stop_futile]] = True
            part[idx[stop_decided]] = q[stop_decided]
            open_[idx[stop_futile | stop_decided]] = False
        bad = futile if premise_truth == d else (part == stats.SUPPORTED)
        out.append(Rate(name, dist, f"<= {plan_.cap}", err, float(np.mean(bad)), alpha / 2,
                        reps))
    return out


def _shared_arm(dist, reps, n, k, sd, shift, rng):
    """k differences against one shared arm (each difference SD ``sd``)."""
    shared = draw(dist, (reps, n), rng, 0.0, sd / math.sqrt(2))
    return [shared + draw(dist, (reps, n), rng, shift, sd / math.sqrt(2)) for _ in range(k)]


def any_of_rates(k: int, n: int, dist: str, reps: int = 20000,
                 alpha: float = ALPHA) -> list[Rate]:
    """k alternatives each compared with one shared arm at alpha / k (Bonferroni), the
    claim CONFIRMED when ANY comparison shows equivalence (LIPS's controls). Global null:
    every alternative at the boundary d."""
    sd = scale_of(dist)
    d = 0.5 * sd
    name = f"any of {k} equivalences (alpha/{k} each)"
    hit = np.zeros(reps, dtype=bool)
    for D in _shared_arm(dist, reps, n, k, sd, d, cell_rng(f"{name}/{dist}/{n}")):
        hit |= _codes(D, d, alpha / k).by_equivalence
    return [Rate(name, dist, n, "false CONFIRMED (all at +d)", float(np.mean(hit)), alpha / 2,
                 reps)]


def best_of_rates(k: int, n: int, dist: str, reps: int = 20000,
                  alpha: float = ALPHA) -> list[Rate]:
    """The best of k arms (picked by its mean on the same seeds) against one shared arm at
    alpha / k, SUPPORTED when the rule says so (FLAYER). Global null: every arm at the
    margin."""
    sd = scale_of(dist)
    name = f"best of {k} (alpha/{k})"
    arms = np.stack(_shared_arm(dist, reps, n, k, sd, 0.0, cell_rng(f"{name}/{dist}/{n}")))
    best = np.argmax(arms.mean(axis=2), axis=0)
    D = arms[best, np.arange(reps)]
    c = _codes(D, 0.5 * sd, alpha / k).codes
    return [Rate(name, dist, n, "false SUPPORTED (null)", float(np.mean(c == stats.SUPPORTED)),
                 alpha / 2, reps)]


def _correlated_parts(dist, reps, n, k, rho, shift, sd, rng):
    """k parts' differences, correlated rho across parts seed by seed."""
    shared = draw(dist, (reps, n), rng, 0.0, 1.0)
    return [shift + sd * (math.sqrt(rho) * shared
                          + math.sqrt(1 - rho) * draw(dist, (reps, n), rng, 0.0, 1.0))
            for _ in range(k)]


def claim_rates(k: int, n: int, dist: str, rho: float, reps: int = 20000,
                alpha: float = ALPHA) -> list[Rate]:
    """Claims of k correlated three-way parts (reviewer right when SUPPORTED), each part
    decided at alpha / k, as ``audit.verdict.all_of`` / ``any_of`` require on their union
    paths (Bonferroni over the parts that can decide that way):

    * ``all_of``: REFUTED when any part is FALSIFIED. Every part at +d (the claim true:
      each effect is d above the margin 0): false REFUTED;
    * ``any_of``: CONFIRMED when any part is SUPPORTED. Every part at the margin: false
      CONFIRMED.
    """
    sd = scale_of(dist)
    d = 0.5 * sd
    out = []
    for comb, truth, err in (("all_of", d, "false REFUTED (every part at +d)"),
                             ("any_of", 0.0, "false CONFIRMED (every part at the margin)")):
        name = f"{comb} of {k} parts (alpha/{k} each), rho {rho:g}"
        parts = _correlated_parts(dist, reps, n, k, rho, truth, sd,
                                  cell_rng(f"{name}/{dist}/{n}"))
        hit = np.zeros(reps, dtype=bool)
        for D in parts:
            c = _codes(D, d, alpha / k).codes
            hit |= (c == stats.FALSIFIED) if comb == "all_of" else (c == stats.SUPPORTED)
        out.append(Rate(name, dist, n, err, float(np.mean(hit)), alpha / 2, reps))
    return out


def collapse_rates(reps: int = 20000, ns=(10, 20), alpha: float = ALPHA) -> list[Rate]:
    """Collapse mixtures at the null: measured and stated, not required."""
    return [r for dist in COLLAPSES for n in ns for r in three_way_rates(n, dist, reps, alpha)
            if r.error in ("false SUPPORTED (null)", "false FALSIFIED, wrong side (null)")]


def matrix(reps: int = 20000, ns=NS, dists=DISTRIBUTIONS, caps=CAPS) -> list[Rate]:
    """The whole matrix (the CI test runs it with fewer replicates)."""
    out: list[Rate] = []
    for dist in dists:
        for n in ns:
            out += three_way_rates(n, dist, reps)
        for cap in caps:
            for shape in SHAPES:
                out += sequential_rates(plan(cap, spending=shape), dist, reps)
                out += futility_rates(plan(cap, spending=shape), dist, reps)
        for n in (10, 20):
            out += any_of_rates(4, n, dist, reps)
            out += best_of_rates(3, n, dist, reps)
            if dist in CORRELATABLE:
                for rho in RHOS:
                    out += claim_rates(3, n, dist, rho, reps)
    return out


def _family(r: Rate) -> str:
    path = r.path
    for shape in SHAPES:
        if path.startswith(f"sequential {shape}"):
            return f"sequential, {shape}"
        if path.startswith(f"futility stop {shape}"):
            return f"futility stop, {shape}"
    return path


def table(rates: list[Rate]) -> str:
    """Every cell, one line each."""
    lines = ["| path | differences | n | error | rate | nominal | bound (+3 MC SE) | ok |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rates:
        ok = "yes" if r.ok else "**no**"
        if not r.required:
            ok = "stated"
        lines.append(f"| {r.path} | {r.dist} | {r.n} | {r.error} | {r.rate:.4f} | "
                     f"{r.nominal:.4f} | {r.bound:.4f} | {ok} |")
    return "\n".join(lines)


def summary(rates: list[Rate], dists=DISTRIBUTIONS) -> str:
    """The README's table: the largest rate of each path and error over n (or caps),
    one column a distribution; a cell over its bound is marked."""
    cells: dict[tuple[str, str], dict[str, Rate]] = {}
    for r in rates:
        key = (_family(r), r.error)
        cur = cells.setdefault(key, {}).get(r.dist)
        if cur is None or r.rate > cur.rate:
            cells[key][r.dist] = r
    head = "| decision path | error | " + " | ".join(dists) + " |"
    lines = [head, "|---|---|" + "---|" * len(dists)]
    for (fam, err), row in cells.items():
        vals = []
        for dist in dists:
            r = row.get(dist)
            vals.append("" if r is None else f"{r.rate:.3f}" + ("" if r.ok else " **!**"))
        lines.append(f"| {fam} | {err} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def power_table(reps: int = 20000, dists=DISTRIBUTIONS) -> str:
    rows = {(r["dist"], r["n"]): r for dist in dists for r in power_rows(dist, reps=reps)}
    lines = ["| | " + " | ".join(dists) + " |", "|---|" + "---|" * len(dists)]
    for n in (10, 20):
        lines.append(f"| power, 1-SD effect, n = {n} | "
                     + " | ".join(f"{rows[(d, n)]['power']:.2f}" for d in dists) + " |")
        lines.append(f"| refused where the interval alone decides, n = {n} | "
                     + " | ".join(f"{rows[(d, n)]['refused']:.2f}" for d in dists) + " |")
    return "\n".join(lines)


def collapse_table(rates: list[Rate]) -> str:
    lines = ["| mixture (share of seeds where one arm falls to chance) | n | false SUPPORTED "
             "| false FALSIFIED, wrong side | nominal |", "|---|---|---|---|---|"]
    by = {}
    for r in rates:
        by.setdefault((r.dist, r.n), {})[r.error] = r.rate
    for (dist, n), e in by.items():
        lines.append(f"| {dist} | {n} | {e['false SUPPORTED (null)']:.3f} | "
                     f"{e['false FALSIFIED, wrong side (null)']:.3f} | {ALPHA / 2:.3f} |")
    return "\n".join(lines)


def markdown(reps: int = 20000) -> str:
    rates = matrix(reps)
    bad = [r for r in rates if not r.ok]
    parts = [summary(rates), "", power_table(reps), "", collapse_table(collapse_rates(reps))]
    if bad:
        parts += ["", f"{len(bad)} cells over their bound:", "", table(bad)]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a printing helper
    ap = argparse.ArgumentParser(prog="python -m audit.calibration",
                                 description="the calibration matrix of the decision rules")
    ap.add_argument("--reps", type=int, default=20000, help="simulated runs a cell")
    ap.add_argument("--markdown", action="store_true", help="the README's tables")
    ap.add_argument("--full", action="store_true", help="every cell, one line each")
    args = ap.parse_args(argv)
    if args.full:
        rates = matrix(args.reps) + collapse_rates(args.reps)
        print(table(rates))
        return 0 if all(r.ok for r in rates) else 1
    print(markdown(args.reps))
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(main(sys.argv[1:]))
