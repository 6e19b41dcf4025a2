"""Statistics behind the verdicts: paired intervals, TOST, Holm, power, the three-way rule.

Everything here is a thin, validated layer over scipy and statsmodels; no distribution is
written by hand. The reasoning, with the measurements behind each choice, is in
``docs/STATISTICS.md``. In short:

* The unit of analysis is the seed. Every function takes arrays shaped ``(n_seeds,)``;
  paired functions take two such arrays in the same seed order and work on the per-seed
  differences ``a - b`` (average inside a run first, then compare runs).
* Bootstrap intervals under-cover at the seed counts we run, so no verdict reads one;
  BCa (``scipy.stats.bootstrap``) stays available, asked for by name, for statistics
  reported beside a verdict. Resampling always takes an explicit generator.
* A claim "A beats B by at least m" is decided by the three-way rule :func:`three_way`
  (SUPPORTED / FALSIFIED / INCONCLUSIVE): Hall's skewness-corrected t interval, widened
  at each end by a skewness allowance (clamped at Hall's turning point, past which an end
  would narrow again), and exact sign tests (``scipy.stats.binom``) must
  agree at alpha / 2 per side, on at least :data:`MIN_PAIRS` pairs that are not all
  equal and hold enough differing seeds; otherwise the rule refuses and says why. Its
  error rates are measured by ``audit/calibration.py`` against alpha / 2 per side.
  When INCONCLUSIVE it reports the minimum detectable effect and the seeds needed of
  the rule itself (simulated), not of a textbook t test.
* Several tests in one falsifier are corrected together with Holm
  (``multipletests(method="holm")``; statsmodels' default is "hs").

Input errors raise :class:`ValueError` with one line naming the problem:
``"lengths differ: a has 5 values, b has 4"``, ``"fewer than 2 values in a: got 1"``,
``"NaN present in a at index 2"``, ``"infinite value present in b at index 0"``.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, NamedTuple, Sequence

import numpy as np
from scipy import stats as _sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

__all__ = [
    "ThreeWayCodes",
    "OUTCOMES",
    "Interval",
    "PairedDifference",
    "MeanEstimate",
    "BootstrapEstimate",
    "TostResult",
    "ThreeWay",
    "paired_difference",
    "mean_interval",
    "bootstrap_interval",
    "tost_paired",
    "holm",
    "minimum_detectable_effect",
    "seeds_needed",
    "smallest_signflip_p",
    "three_way",
    "three_way_codes",
    "flip_distance",
    "interval_text",
    "ci_text",
    "no_interval",
]

#: Whether :func:`three_way` computes its flip distance (off inside the leave-one-seed-
#: out re-analyses of the runner, which need outcomes only).
_FLIP = contextvars.ContextVar("audit_stats_flip", default=True)


@contextlib.contextmanager
def without_flip():
    """Skip :func:`flip_distance` inside :func:`three_way` (outcomes are unchanged)."""
    token = _FLIP.set(False)
    try:
        yield
    finally:
        _FLIP.reset(token)


THREE_WAY_BOOTSTRAP_SEED = 20261130  # the seed of verdict_rng()

#: The outcomes of :func:`three_way`, about the claim "A beats B by at least m".
OUTCOMES = ("SUPPORTED", "FALSIFIED", "INCONCLUSIVE")


# --------------------------------------------------------------------------- #
# validation
# --------------------------------------------------------------------------- #


#: The magnitudes a sample's largest |value| may take (0 aside): a cube of either end
#: still lies inside float64's normal range, so a variance or a skewness is computed, not
#: an overflow or an underflow to zero.
MAGNITUDE_RANGE = (1e-100, 1e100)


def _as_sample(x, name: str, min_n: int = 2) -> np.ndarray:
    """Return ``x`` as a 1-D float array, or raise a one-line ValueError."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, shaped (n_seeds,); got shape {arr.shape}")
    if arr.size < min_n:
        raise ValueError(f"fewer than {min_n} values in {name}: got {arr.size}")
    nan = np.flatnonzero(np.isnan(arr))
    if nan.size:
        raise ValueError(f"NaN present in {name} at index {_indices(nan)}")
    inf = np.flatnonzero(np.isinf(arr))
    if inf.size:
        raise ValueError(f"infinite value present in {name} at index {_indices(inf)}")
    mag = float(np.max(np.abs(arr))) if arr.size else 0.0
    if mag > MAGNITUDE_RANGE[1] or 0.0 < mag < MAGNITUDE_RANGE[0]:
        # variances and skewness square and cube the values: outside this range they
        # overflow or underflow float64, and an interval of zero width (or NaN) would
        # decide as if the data had no spread
        raise ValueError(f"{name} holds values of magnitude {mag:.3g}, outside "
                         f"[{MAGNITUDE_RANGE[0]:g}, {MAGNITUDE_RANGE[1]:g}] where their "
                         f"moments stay in float64's range; rescale the metric")
    return arr


def _indices(idx: np.ndarray) -> str:
    return ", ".join(str(int(i)) for i in idx)


def _as_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a_arr = np.asarray(a, dtype=float)
    b_arr = np.asarray(b, dtype=float)
    if a_arr.ndim == 1 and b_arr.ndim == 1 and a_arr.size != b_arr.size:
        raise ValueError(f"lengths differ: a has {a_arr.size} values, b has {b_arr.size}")
    return _as_sample(a_arr, "a"), _as_sample(b_arr, "b")


def _check_level(level: float, name: str = "level") -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1; got {level}")
    return level


def _check_alpha(alpha: float, upper: float = 1.0) -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < upper:
        raise ValueError(f"alpha must lie strictly between 0 and {upper}; got {alpha}")
    return alpha


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)); "
            f"got {type(rng).__name__}"
        )
    return rng


def _check_n(n, min_n: int = 2) -> int:
    if isinstance(n, bool) or int(n) != n:
        raise ValueError(f"n must be an integer; got {n!r}")
    n = int(n)
    if n < min_n:
        raise ValueError(f"n must be at least {min_n}; got {n}")
    return n


def _sd(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1))


def _rounding_tol(scale):
    """The spread that floating-point rounding alone can leave among values of magnitude
    ``scale`` (a float or an array): 8 units in the last place. One definition for
    :func:`_all_equal` and the three-way rule's ``_rule_arrays``, so "all equal" means
    the same thing in a reported interval and in the verdict beside it."""
    return 8 * np.finfo(float).eps * scale


def _all_equal(x: np.ndarray, *inputs: np.ndarray) -> bool:
    """True when every value of ``x`` is the same up to floating-point rounding.

    ``x`` may be computed from ``inputs`` (differences ``a - b``): then rounding
    of the inputs' magnitude counts, so ``b + 0.3`` against ``b`` is constant.
    """
    scale = max([float(np.max(np.abs(v))) for v in (x, *inputs)])
    return bool(np.ptp(x) <= _rounding_tol(scale))


# scipy >= 1.15 renamed bootstrap's ``random_state`` to ``rng``.
_BOOTSTRAP_RNG_KW = "rng" if "rng" in inspect.signature(_sps.bootstrap).parameters else "random_state"


def _scipy_bootstrap(data: tuple, statistic, rng, level, method, n_resamples, paired):
    kwargs = {_BOOTSTRAP_RNG_KW: rng}
    with warnings.catch_warnings():
        # degenerate data: scipy warns and returns NaN; we raise a clear error below
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", _sps.DegenerateDataWarning)
        res = _sps.bootstrap(
            data,
            statistic,
            n_resamples=int(n_resamples),
            paired=paired,
            confidence_level=level,
            method=method,
            **kwargs,
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(
            f"the {method} bootstrap interval is undefined here (degenerate data: "
            "the statistic barely varies over resamples); report the value without an interval"
        )
    return low, high


# --------------------------------------------------------------------------- #
# result types
# --------------------------------------------------------------------------- #


class Interval(NamedTuple):
    """A closed confidence interval ``[low, high]``."""

    low: float
    high: float


#: what stands for the interval of a sample of two or more equal values (the reports
#: say "every seed equal: " before it, the three-way reason "every pair equal: ")
NO_SPREAD = "no spread, no interval"


#: what stands for an interval that is not defined: an end missing, NaN or infinite (one
#: value, a diverged run), or a zero-width "interval" of one value
NO_INTERVAL = "no interval"


def no_interval(est) -> str:
    """The text that stands for the interval of ``est`` (an object with ``low``, ``high``
    and, where known, ``n``) when it has none: :data:`NO_INTERVAL` where an end is missing
    or not finite, or the width is zero from one value; :data:`NO_SPREAD` where the width
    is zero from two or more values (or from an unknown number); "" where it is an
    interval."""
    low, high = getattr(est, "low", None), getattr(est, "high", None)
    if low is None or high is None or not (math.isfinite(float(low))
                                           and math.isfinite(float(high))):
        return NO_INTERVAL
    if float(low) == float(high):
        n = getattr(est, "n", None)
        return NO_SPREAD if n is None or int(n) >= 2 else NO_INTERVAL
    return ""


def ci_text(est, template: str = "[{low:.4g}, {high:.4g}]", paren: bool = False,
            **fields) -> str:
    """``template`` (e.g. ``"95% t CI [{low:.2f}, {high:.2f}]"``) filled with the ends of
    the interval of ``est`` and ``fields`` where it has one; otherwise only the text of
    :func:`no_interval`, in parentheses when ``paren`` (a slot right after a number), so no
    label names an interval that was not computed and a point never reads as one."""
    none = no_interval(est)
    if none:
        return f"({none})" if paren else none
    return template.format(low=float(est.low), high=float(est.high), **fields)


def interval_text(est, fmt: str = ".4g", method: bool = False) -> str:
    """``[low, high]`` of an estimate (an object with ``low``, ``high``, ``n`` and, when
    ``method``, ``method``: the estimates of this module), with `` (method)`` when
    ``method``; :data:`NO_SPREAD` where two or more equal values gave a zero-width
    interval, which no method computed (a point is not an interval, and the rules never
    decide from one), :data:`NO_INTERVAL` where an end is missing or not finite."""
    none = no_interval(est)
    if none:
        return none
    text = f"[{float(est.low):{fmt}}, {float(est.high):{fmt}}]"
    return f"{text} ({est.method})" if method else text


@dataclass(frozen=True)
class PairedDifference:
    """Estimate of mean(a - b) over seeds, with its interval and paired t-test.

    ``sd`` is the SD of the per-seed differences (ddof=1); ``effect_size`` is
    Cohen's dz = mean / sd (``inf``/``-inf`` when sd = 0 and mean != 0, ``nan``
    when both are 0); ``p_value`` is the two-sided paired t-test
    (``scipy.stats.ttest_rel``), whichever method made the interval.
    """

    mean: float
    sd: float
    n: int
    level: float
    low: float
    high: float
    method: str  # "t", "hall" or "bca"
    p_value: float
    effect_size: float

    def confidence_interval(self) -> Interval:
        return Interval(self.low, self.high)


@dataclass(frozen=True)
class MeanEstimate:
    """One-sample mean with its Student-t interval (``method`` is always "t")."""

    mean: float
    low: float
    high: float
    n: int
    sd: float
    level: float
    method: str = "t"

    def confidence_interval(self) -> Interval:
        return Interval(self.low, self.high)


@dataclass(frozen=True)
class BootstrapEstimate:
    """A statistic with a bootstrap interval (``scipy.stats.bootstrap``)."""

    value: float
    low: float
    high: float
    n: int
    level: float
    method: str
    n_resamples: int

    def confidence_interval(self) -> Interval:
        return Interval(self.low, self.high)


@dataclass(frozen=True)
class TostResult:
    """Paired TOST equivalence test of mean(a - b) within (-margin, +margin).

    ``p_value`` is the larger of the two one-sided p-values;
    ``[low90, high90]`` is the (1 - 2 alpha) Student-t CI of the mean
    difference (90 % at alpha = 0.05). ``equivalent`` is ``p_value < alpha``,
    which is the same decision as "the (1 - 2 alpha) CI lies inside
    (-margin, +margin)".
    """

    p_value: float
    low90: float
    high90: float
    margin: float
    equivalent: bool
    alpha: float

    def confidence_interval(self) -> Interval:
        return Interval(self.low90, self.high90)


@dataclass(frozen=True)
class ThreeWay:
    """Outcome of :func:`three_way` for the claim "A beats B by at least ``margin``".

    ``difference`` holds Hall's interval that the rule read; ``tost`` the equivalence
    branch (its ``p_value`` is the exact sign tests' larger one-sided p, its interval
    the same Hall interval, ``equivalent`` whether equivalence decided). ``p_value``: the
    exact sign test's one-sided p of the branch that decided (of the nearest branch when
    INCONCLUSIVE). ``falsified_by``: "wrong side" or "equivalence" (no effect as large as
    d in either direction) when FALSIFIED. ``refused``: the interval alone would have
    decided, a guard of the rule kept it INCONCLUSIVE (the reason says which).

    ``mde`` is the smallest effect (absolute units of the metric) that the rule itself
    decides with probability ``power`` at this n, and ``seeds_needed`` the pairs at which
    it decides the observed effect (mean - margin) with that probability; both simulated
    on normal differences with the observed SD (docs/STATISTICS.md), set only when the
    outcome is INCONCLUSIVE, None where no number is meaningful (SD 0, effect 0, or
    beyond 400 pairs).
    """

    outcome: str
    difference: PairedDifference
    tost: TostResult
    reason: str
    margin: float
    equivalence_margin: float
    alpha: float
    sensitive: bool
    power: float
    mde: float | None = None
    seeds_needed: int | None = None
    flip: float | None = None  # smallest one-seed change of a difference that flips it
    p_value: float | None = None
    falsified_by: str | None = None
    sensitivity_checked: bool = True
    skewness: float = 0.0
    differing: int | None = None
    refused: bool = False

    @property
    def n(self) -> int:
        return self.difference.n

    def text(self) -> str:
        """The rule as applied, generated from the parameters that decided it."""
        return three_way_text(self.margin, self.equivalence_margin, self.alpha, self.n)

    @property
    def seeds_decide(self) -> str | None:
        """The outcome the INCONCLUSIVE reason's seed count is for (the side of mean -
        margin the simulation decides, :func:`_rule_power`): "SUPPORTED" above the margin,
        "FALSIFIED" below it (below the margin, the wrong side; the equivalence route is not
        simulated); None where decided or no count is named."""
        return (_decides_as(float(self.difference.mean) - float(self.margin))
                if self.outcome == "INCONCLUSIVE" and self.difference.sd > 0 else None)

    def seeds_phrase(self, unit: str = "seeds") -> str:
        """``seeds_needed`` in words with ``unit`` ("18 pairs"), "" where None. Where the
        estimate is no more than the pairs run (this sample did not decide, though a
        fresh one of that size would with probability ``power``), it says so, so a count
        at or below n never reads as a request the run already met."""
        if self.seeds_needed is None:
            return ""
        return f"{self.seeds_needed} {unit}" + (
            f" ({_short_text(self.n, self.power)})" if self.seeds_needed <= self.n else "")


def _decides_as(effect: float) -> str | None:
    """The outcome the simulated seed counts are for at distance ``effect`` = mean -
    margin: the rule decides on the side of its sign (SUPPORTED above, FALSIFIED wrong
    side below; the equivalence branch is not simulated). None at 0 or not finite."""
    if not math.isfinite(effect) or effect == 0.0:
        return None
    return "SUPPORTED" if effect > 0 else "FALSIFIED"


def _short_text(n: int, power: float) -> str:
    """The clause for a seeds estimate at or below the ``n`` pairs run."""
    return (f"not more than the {n} already run, which did not decide: a fresh sample of "
            f"that size decides with power {_g(power)}, and this one fell among those "
            f"that do not")


# --------------------------------------------------------------------------- #
# intervals
# --------------------------------------------------------------------------- #


@lru_cache(maxsize=4096)
def _t_quantile(p: float, df: int) -> float:
    """``scipy.stats.t.ppf(p, df)``, remembered: the rule asks for the same few quantiles
    thousands of times (flip distances, calibration)."""
    return float(_sps.t.ppf(p, df))


def _hall_bounds(mean, sd, skew, n: int, level: float):
    """Hall's (1992) skewness-corrected t interval, vectorised.

    With x = (mean - mu) / sd and skewness g, Hall's transformation
    T(x) = x + g x^2 / 3 + g^2 x^3 / 27 + g / (6 n) = ((1 + g x / 3)^3 - 1) / g + g / (6 n)
    is monotone and sqrt(n) T(x) is close to Student-t with n - 1 df even for skewed
    data; inverting it at the t quantiles gives the interval. At g = 0 it is the
    Student-t interval. P. Hall, "On the removal of skewness by transformation",
    JRSS B 54 (1992) 221-228.

    An end is not monotone in g: skewness against it widens it up to a turning point
    (g = -:func:`hall_turning_point` for the lower end, + for the upper) and narrows it
    again beyond, where T's inverse has passed the cubic's flat point (at n = 10 and
    95 %, the lower end is 0.72 SD from the mean at g = 0, 2.96 SD at g = -1.53, and
    back to 1.05 SD at g = -8). So each end reads g clamped at its turning point: a
    sample more skewed against an end never gets that end closer to its mean.
    """
    q = _t_quantile(0.5 + level / 2, n - 1) / math.sqrt(n)
    mean, sd, skew = (np.asarray(v, dtype=float) for v in (mean, sd, skew))
    turn = hall_turning_point(n, level)

    def inverse(y, g):
        with np.errstate(all="ignore"):
            shifted = y - g / (6 * n)
            x = 3.0 / g * (np.cbrt(1.0 + g * shifted) - 1.0)
        return np.where(np.abs(g) < 1e-8, shifted, x)

    return (mean - sd * inverse(q, np.maximum(skew, -turn)),
            mean - sd * inverse(-q, np.minimum(skew, turn)))


@lru_cache(maxsize=None)
def hall_turning_point(n: int, level: float) -> float:
    """The skewness h > 0 at which Hall's interval (:func:`_hall_bounds`, n pairs, two-
    sided ``level``) has its widest upper end; its lower end is widest at -h, the same
    distance. Beyond h the end comes back towards the mean, so the interval clamps g
    there. About 1.05 at n = 6, 1.53 at n = 10 and 2.32 at n = 20 for 95 %.

    The end's distance from the mean in SDs is f(h) = 3 (1 - cbrt(1 - h q - h^2 / (6 n)))
    / h with q the t quantile over sqrt(n): found on a grid, then refined by bounded
    Brent (``scipy.optimize.minimize_scalar``) between the grid's neighbours."""
    from scipy.optimize import minimize_scalar

    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise ValueError(f"n must be a whole number >= 2, not {n!r}")
    q = _t_quantile(0.5 + level / 2, n - 1) / math.sqrt(n)

    def width(h):
        h = np.asarray(h, dtype=float)
        return 3.0 * (1.0 - np.cbrt(1.0 - h * q - h * h / (6 * n))) / h

    # the flat point of T's inverse (where the cube root's argument is 0) comes before
    # the turning point; past it f falls like h^(-1/3), so the grid reaches far enough
    # at 40 / q + 6 n
    hs = np.linspace(1e-3, 40.0 / q + 6.0 * n, 20001)
    i = int(np.argmax(width(hs)))
    lo, hi = hs[max(i - 1, 0)], hs[min(i + 1, hs.size - 1)]
    res = minimize_scalar(lambda h: -float(width(h)), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})
    return float(res.x)


def _skew(d: np.ndarray, axis=-1) -> np.ndarray:
    """Sample skewness (moment form, m3 / s^3 with s the ddof=1 SD); 0 where s = 0."""
    mean = d.mean(axis=axis, keepdims=True)
    sd = d.std(axis=axis, ddof=1)
    m3 = ((d - mean) ** 3).mean(axis=axis)
    with np.errstate(all="ignore"):
        g = np.where(sd > 0, m3 / np.where(sd > 0, sd, 1.0) ** 3, 0.0)
    return g


def paired_difference(
    a,
    b,
    *,
    level: float = 0.95,
    method: str = "auto",
    rng: np.random.Generator | None = None,
    n_resamples: int = 9999,
) -> PairedDifference:
    """Mean of the per-seed differences ``a - b`` with a confidence interval.

    ``method``: ``"t"`` is the Student-t interval of ``scipy.stats.ttest_rel(a, b)
    .confidence_interval(level)``; ``"hall"`` is Hall's skewness-corrected t interval
    (the three-way rule's: skewed differences broke the plain t interval's one-sided
    level in the calibration matrix); ``"bca"`` is the BCa bootstrap
    (``scipy.stats.bootstrap(method="BCa")``) of the mean difference, which
    needs ``rng``; ``"auto"`` is "t" at every n (the calibration matrix measured BCa
    inside the three-way rule at 0.05-0.06 false-SUPPORTED at n = 10, nominal 0.025;
    docs/STATISTICS.md, "Intervals at small n").

    When every difference is equal (up to floating-point rounding of the
    inputs, so sd is reported as 0) the data cannot carry
    sampling error: the interval collapses to the point ``[mean, mean]``, the
    p-value is 0 if mean != 0 and 1 if mean == 0, and ``effect_size`` is
    ``+-inf`` (or ``nan`` when mean == 0). No bootstrap is run then.
    """
    a_arr, b_arr = _as_pair(a, b)
    level = _check_level(level)
    if method not in ("auto", "t", "hall", "bca"):
        raise ValueError(f"method must be 'auto', 't', 'hall' or 'bca'; got {method!r}")
    with np.errstate(over="ignore"):
        d = a_arr - b_arr
        mean = float(np.mean(d))
    if not (np.all(np.isfinite(d)) and math.isfinite(mean)):
        raise ValueError("the differences a - b overflow float64 (inputs near 1e308); "
                         "rescale the metric")
    n = int(d.size)
    if method == "auto":
        method = "t"
    if method == "bca":
        _check_rng(rng)

    sd = _sd(d)
    if _all_equal(d, a_arr, b_arr) or not sd > 0:  # an SD that underflows: constant
        p_value = 0.0 if mean != 0.0 else 1.0
        effect = math.copysign(math.inf, mean) if mean != 0.0 else math.nan
        return PairedDifference(mean, 0.0, n, level, mean, mean, method, p_value, effect)

    with warnings.catch_warnings():
        # near-constant differences trigger scipy's precision-loss warning; the
        # result is still the correct (huge) t statistic.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _sps.ttest_rel(a_arr, b_arr)
        p_value = float(res.pvalue)
        if method == "t":
            ci = res.confidence_interval(confidence_level=level)
            low, high = float(ci.low), float(ci.high)
        if method == "hall":
            lo_, hi_ = _hall_bounds(mean, sd, _skew(d), n, level)
            low, high = float(lo_), float(hi_)
    if method == "bca":
        low, high = _scipy_bootstrap((d,), np.mean, rng, level, "BCa", n_resamples, False)
    return PairedDifference(mean, sd, n, level, low, high, method, p_value, mean / sd)


def verdict_rng() -> np.random.Generator:
    """A new generator of fixed seed, for the resampling behind a verdict.

    Verdicts no longer resample (every interval behind one is Student-t); estimates
    reported beside a verdict with a bootstrap interval pass this, so a report is
    repeatable.
    """
    return np.random.default_rng(THREE_WAY_BOOTSTRAP_SEED)


def mean_interval(x, level: float = 0.95) -> MeanEstimate:
    """Mean of ``x`` with its one-sample Student-t interval (``scipy.stats.ttest_1samp``).

    With all values equal the interval collapses to the point.
    """
    arr = _as_sample(x, "x")
    level = _check_level(level)
    mean = float(np.mean(arr))
    n = int(arr.size)
    if _all_equal(arr):
        return MeanEstimate(mean, mean, mean, n, 0.0, level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = _sps.ttest_1samp(arr, 0.0).confidence_interval(confidence_level=level)
    return MeanEstimate(mean, float(ci.low), float(ci.high), n, _sd(arr), level)


def sd_interval(x, alpha: float = 0.05) -> tuple[float, float, float]:
    """The sample standard deviation of ``x`` (divisor n - 1) with its two-sided
    chi-square interval at level 1 - ``alpha`` (exact for normal data): (sd, low, high),
    all NaN below two values."""
    arr = np.asarray(x, dtype=float)
    n = int(arr.size)
    if n < 2:
        return math.nan, math.nan, math.nan
    sd = float(np.std(arr, ddof=1))
    return (sd, sd * math.sqrt((n - 1) / _sps.chi2.ppf(1 - alpha / 2, n - 1)),
            sd * math.sqrt((n - 1) / _sps.chi2.ppf(alpha / 2, n - 1)))


def bootstrap_interval(
    data,
    statistic: Callable[..., float],
    rng: np.random.Generator,
    level: float = 0.95,
    method: str = "BCa",
    n_resamples: int = 9999,
) -> BootstrapEstimate:
    """Bootstrap interval (``scipy.stats.bootstrap``) for a statistic with no t form.

    ``data`` is one array shaped ``(n_seeds,)``, called as ``statistic(x)``, or a
    tuple/list of such arrays in the same seed order, resampled together
    (paired) and called as ``statistic(x, y, ...)``. ``method`` is any of
    scipy's ("BCa", "percentile", "basic"). Use it from about 10-20 seeds on
    (docs/STATISTICS.md: at n = 3..5 BCa covers only 0.77-0.85 at nominal 0.95).
    Raises ValueError when the interval is undefined (degenerate data).
    """
    _check_rng(rng)
    level = _check_level(level)
    if isinstance(data, (tuple, list)) and len(data) > 0 and np.ndim(data[0]) == 1:
        names = [f"data[{i}]" for i in range(len(data))]
        sizes = [np.asarray(x).size for x in data]
        if len(set(sizes)) > 1:
            raise ValueError(
                "lengths differ: " + ", ".join(f"{nm} has {s} values" for nm, s in zip(names, sizes))
            )
        arrays = tuple(_as_sample(x, nm) for x, nm in zip(data, names))
    else:
        arrays = (_as_sample(data, "data"),)
    value = float(statistic(*arrays))
    low, high = _scipy_bootstrap(arrays, statistic, rng, level, method, n_resamples, len(arrays) > 1)
    return BootstrapEstimate(value, low, high, int(arrays[0].size), level, method, int(n_resamples))


# --------------------------------------------------------------------------- #
# equivalence, multiplicity, power
# --------------------------------------------------------------------------- #


def tost_paired(a, b, margin: float, alpha: float = 0.05) -> TostResult:
    """Paired TOST: is mean(a - b) inside (-margin, +margin)?

    Wraps ``statsmodels.stats.weightstats.ttost_paired(a, b, -margin, margin)``
    and adds the (1 - 2 alpha) Student-t CI of the mean difference
    (``scipy.stats.ttest_rel(...).confidence_interval``); equivalence at level
    alpha is exactly that CI lying inside (-margin, +margin). docs/STATISTICS.md
    warns that equivalence means something only under assay sensitivity; that
    check belongs to the caller (see :func:`three_way`).

    With all differences equal (sd = 0, up to rounding) the CI collapses to the point and the
    p-value is 0 when |mean| < margin, else 1.
    """
    a_arr, b_arr = _as_pair(a, b)
    alpha = _check_alpha(alpha, upper=0.5)
    margin = float(margin)
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number; got {margin}")
    d = a_arr - b_arr
    if _all_equal(d, a_arr, b_arr):
        mean = float(np.mean(d))
        inside = -margin < mean < margin
        return TostResult(0.0 if inside else 1.0, mean, mean, margin, inside, alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p_value = float(ttost_paired(a_arr, b_arr, -margin, margin)[0])
        ci = _sps.ttest_rel(a_arr, b_arr).confidence_interval(confidence_level=1 - 2 * alpha)
    return TostResult(p_value, float(ci.low), float(ci.high), margin, bool(p_value < alpha), alpha)


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm step-down correction over one falsifier's family of p-values.

    Returns ``(adjusted, reject)`` from
    ``statsmodels.stats.multitest.multipletests(pvalues, alpha, method="holm")``
    (note: that function's default method is "hs", Holm-Sidak, not Holm).
    A NaN p-value would make every corrected value NaN, so it raises instead,
    naming the index (docs/STATISTICS.md, "Several claims at once"): handle
    diverged runs before the correction.
    """
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be 1-D; got shape {p.shape}")
    if p.size == 0:
        raise ValueError("fewer than 1 values in pvalues: got 0")
    nan = np.flatnonzero(np.isnan(p))
    if nan.size:
        raise ValueError(
            f"NaN present in pvalues at index {_indices(nan)}; "
            "handle diverged runs before the Holm correction"
        )
    bad = np.flatnonzero((p < 0) | (p > 1))
    if bad.size:
        raise ValueError(f"p-value outside [0, 1] in pvalues at index {_indices(bad)}")
    alpha = _check_alpha(alpha)
    reject, adjusted, _, _ = multipletests(p, alpha=alpha, method="holm")
    return np.asarray(adjusted, dtype=float), np.asarray(reject, dtype=bool)


@lru_cache(maxsize=256)
def _mde_cached(n: int, alpha: float, power: float) -> float:
    return float(
        TTestPower().solve_power(
            effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided"
        )
    )


def minimum_detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest effect, in SD units of the paired differences (dz), that a
    two-sided paired t-test on ``n`` pairs detects with probability ``power``.

    ``statsmodels.stats.power.TTestPower().solve_power(effect_size=None, nobs=n,
    ...)`` coerced with ``float()``. docs/STATISTICS.md's table (alpha 0.05, power
    0.8): n=3 -> 3.26, n=5 -> 1.68, n=10 -> 1.00, n=20 -> 0.66.
    """
    n = _check_n(n)
    return _mde_cached(n, _check_alpha(alpha), _check_level(power, "power"))


#: :func:`seeds_needed` searches no further: a plan past a million seeds is no plan
SEEDS_NEEDED_CAP = 1_000_000


def _paired_t_power(n: int, dz: float, alpha: float) -> float:
    """Power of the two-sided paired t-test with ``n`` pairs at standardized effect
    ``dz``: P(|T| > t_crit) for T = (Z + dz sqrt(n)) / sqrt(V / df), V ~ chi2(df),
    df = n - 1: statsmodels' ``TTestPower().power``, and where its series gives no number
    (a few pairs and a large noncentrality: NaN) the same probability integrated over V
    (``scipy.integrate.quad``; the two agree to 1e-9 where both answer)."""
    from scipy import integrate

    with warnings.catch_warnings():  # statsmodels' series first: fast where it answers
        warnings.simplefilter("ignore")
        p = float(TTestPower().power(effect_size=dz, nobs=n, alpha=alpha,
                                     alternative="two-sided"))
    if math.isfinite(p):
        return min(1.0, max(0.0, p))
    df, nc = n - 1, dz * math.sqrt(n)
    crit = float(_sps.t.ppf(1 - alpha / 2, df))
    chi2 = _sps.chi2(df)

    def tails(v: float) -> float:
        s = crit * math.sqrt(v / df)
        return (float(_sps.norm.sf(s - nc)) + float(_sps.norm.cdf(-s - nc))) * chi2.pdf(v)

    # the chi-square mass lies around df; split there so quad sees the peak
    cut = float(chi2.ppf(0.5))
    p = sum(integrate.quad(tails, a, b, limit=200, epsabs=1e-13, epsrel=1e-11)[0]
            for a, b in ((0.0, cut), (cut, math.inf)))
    return min(1.0, max(0.0, p))


def seeds_needed(effect: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs (seeds) a two-sided paired t-test needs to detect a mean
    difference ``effect`` when the differences have SD ``sd``.

    The smallest n >= 2 whose power (:func:`_paired_t_power`, the noncentral t that
    statsmodels' ``TTestPower`` solves continuously) reaches ``power``: the ceiling of
    ``TTestPower().solve_power(...)``, found by an integer search, which also answers
    where the solver returns no number (an effect of 8 SD or more). Raises ValueError
    when ``effect`` is 0 (no number of seeds detects it), ``sd`` is not positive, or more
    than :data:`SEEDS_NEEDED_CAP` seeds would be needed.
    """
    effect, sd = float(effect), float(sd)
    if not (math.isfinite(effect) and math.isfinite(sd)):
        raise ValueError(f"effect and sd must be finite; got effect={effect}, sd={sd}")
    if effect == 0.0:
        raise ValueError("effect is 0: no number of seeds can detect a zero effect")
    if sd <= 0.0:
        raise ValueError(f"sd must be positive; got {sd}")
    alpha = _check_alpha(alpha)
    power = _check_level(power, "power")
    dz = abs(effect) / sd

    def enough(n: int) -> bool:
        return _paired_t_power(n, dz, alpha) >= power

    if enough(2):
        return 2
    lo, hi = 2, 4  # enough(lo) is False; double hi until enough(hi)
    while not enough(hi):
        if hi >= SEEDS_NEEDED_CAP:
            raise ValueError(f"more than {SEEDS_NEEDED_CAP} seeds would be needed for effect "
                             f"{effect} with sd {sd} (dz = {dz:.3g})")
        lo, hi = hi, min(2 * hi, SEEDS_NEEDED_CAP)
    while hi - lo > 1:  # the power grows with n: the least n that is enough
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def smallest_signflip_p(n: int) -> float:
    """Smallest two-sided p-value an exact sign-flip permutation test (or exact
    Wilcoxon signed-rank test) can give with ``n`` pairs: ``2 / 2**n`` (capped at 1).

    0.25 at n = 3, 0.0625 at n = 5 (docs/STATISTICS.md): p < 0.05 is unreachable
    with five or fewer pairs, which reports should say instead of printing a
    p-value that could never be small.
    """
    n = _check_n(n, min_n=1)
    return min(1.0, 2.0 / 2.0**n)


# --------------------------------------------------------------------------- #
# the three-way rule
# --------------------------------------------------------------------------- #


def _g(x: float) -> str:
    return f"{x:.4g}"


#: Integer codes of :func:`three_way_codes`, in the order of :data:`OUTCOMES`.
SUPPORTED, FALSIFIED, INCONCLUSIVE = 0, 1, 2

#: The skewness allowance of the rule's interval: its lower end is Hall's with the
#: sample skewness g taken as g - SKEW_ALLOWANCE, its upper end with g + SKEW_ALLOWANCE,
#: so each end allows for a population more skewed against it than the sample shows (a
#: small sample rarely shows the long tail). Chosen by the calibration matrix
#: (docs/STATISTICS.md, "The three-way rule").
SKEW_ALLOWANCE = 1.25

#: Fewest pairs at which the rule decides anything: an exact sign test cannot reach
#: 0.025 a side with fewer (docs/STATISTICS.md, "Why the rule refuses").
MIN_PAIRS = 6


def min_differing(alpha_side: float) -> int:
    """Fewest nonzero differences with which an exact sign test can reach a one-sided
    p-value of ``alpha_side``: the smallest k with 2**-k <= alpha_side (6 at 0.025)."""
    alpha_side = _check_alpha(alpha_side)
    return max(1, math.ceil(-math.log2(alpha_side) - 1e-12))


class ThreeWayCodes(NamedTuple):
    """Outcome codes (0 SUPPORTED, 1 FALSIFIED, 2 INCONCLUSIVE) and which branch decided
    (``by_equivalence``: FALSIFIED through equivalence, not through the wrong side);
    ``refused``: the interval alone would have decided but a guard (too few pairs, too
    few differing seeds, a sign test short of alpha / 2, skewness) kept it INCONCLUSIVE."""

    codes: np.ndarray
    by_equivalence: np.ndarray
    refused: np.ndarray | None = None


_SIGN_TABLE = np.ones((1, 1))


def _sign_table(n_max: int) -> np.ndarray:
    """``T[k, N] = scipy.stats.binom.sf(k - 1, N, 1/2)`` for 0 <= k, N <= at least n_max,
    with 1 where N = 0: the sign test's p-values by lookup. One table, rebuilt (one scipy
    call) only when a larger n is asked for; read-only."""
    global _SIGN_TABLE
    if _SIGN_TABLE.shape[0] <= n_max:
        size = max(n_max + 1, 2 * _SIGN_TABLE.shape[0])
        k, N = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
        table = np.asarray(_sps.binom.sf(k - 1, N, 0.5), dtype=float)
        table[:, 0] = 1.0
        table.setflags(write=False)
        _SIGN_TABLE = table
    return _SIGN_TABLE


def _sign_p(pos, neg):
    """One-sided exact sign-test p-value P(X >= pos), X ~ Binomial(pos + neg, 1/2):
    ``scipy.stats.binomtest(pos, pos + neg, alternative="greater").pvalue``, vectorised
    (``scipy.stats.binom.sf``, looked up in :func:`_sign_table`); 1 where no pair
    differs."""
    pos, neg = np.asarray(pos), np.asarray(neg)
    total = pos + neg
    if total.size == 0:
        return np.ones(total.shape)
    return _sign_table(int(total.max()))[pos, total]


def _rule_arrays(D, margin: float, d: float, alpha: float, inputs_scale: float = 0.0):
    """Everything the three-way rule reads, for every row of ``D`` (m rows, n pairs).
    ``inputs_scale``: the largest |a| or |b| the differences came from. Their rounding
    residue is relative to that, not to the differences: (k + 1)/100 - k/100 differs from
    0.01 in the last bits of the inputs, and those bits must not make "all equal" look
    like spread, nor decide on which side of the margin a tie falls."""
    m, n = D.shape
    mean = D.mean(axis=1)
    sd = D.std(axis=1, ddof=1)
    scale = np.maximum(np.max(np.abs(D), axis=1),
                       max(abs(margin) + abs(d), _finite_scale(inputs_scale)))
    tol = _rounding_tol(np.maximum(scale, 1e-300))
    const = np.ptp(D, axis=1) <= tol
    skew = np.where(const, 0.0, _skew(D, axis=1))
    sd0 = np.where(const, 0.0, sd)
    hl, _ = _hall_bounds(mean, sd0, skew - SKEW_ALLOWANCE, n, 1 - alpha)
    _, hh = _hall_bounds(mean, sd0, skew + SKEW_ALLOWANCE, n, 1 - alpha)
    low = np.where(const, mean, hl)
    high = np.where(const, mean, hh)
    t = tol[:, None]
    differ = (np.abs(D) > t).sum(axis=1)
    up = D - margin
    p_sup = _sign_p((up > t).sum(axis=1), (up < -t).sum(axis=1))
    p_wrong = _sign_p((up < -t).sum(axis=1), (up > t).sum(axis=1))
    lo_e, hi_e = D + d, D - d
    p_eq_low = _sign_p((lo_e > t).sum(axis=1), (lo_e < -t).sum(axis=1))  # mean > -d
    p_eq_high = _sign_p((hi_e < -t).sum(axis=1), (hi_e > t).sum(axis=1))  # mean < +d
    return dict(mean=mean, sd=np.where(const, 0.0, sd), skew=skew, const=const, low=low,
                high=high, differ=differ, p_sup=p_sup, p_wrong=p_wrong,
                p_eq=np.maximum(p_eq_low, p_eq_high))


def _decide(r, n: int, margin: float, d: float, alpha: float, sensitive: bool):
    """The rule on the arrays of :func:`_rule_arrays`: codes, by-equivalence, refused."""
    side = alpha / 2
    need = max(min_differing(side), 1)
    enough = (~r["const"]) & (n >= MIN_PAIRS) & (r["differ"] >= need)
    sup_ci = r["low"] > margin
    wrong_ci = ~sup_ci & (r["high"] < margin)
    eq_ci = ~sup_ci & ~wrong_ci & (r["low"] > -d) & (r["high"] < d) & bool(sensitive)
    sup = sup_ci & enough & (r["p_sup"] <= side)
    wrong = wrong_ci & enough & (r["p_wrong"] <= side)
    eq = eq_ci & enough & (r["p_eq"] <= side)
    codes = np.full(sup.shape, INCONCLUSIVE, dtype=np.int8)
    codes[sup] = SUPPORTED
    codes[wrong | eq] = FALSIFIED
    refused = (sup_ci & ~sup) | (wrong_ci & ~wrong) | (eq_ci & ~eq)
    return codes, eq, refused


def _finite_scale(x) -> float:
    x = abs(float(x))
    return x if math.isfinite(x) else 0.0


def three_way_codes(D, *, margin: float = 0.0, equivalence_margin: float,
                    alpha: float = 0.05, sensitive: bool | None = True,
                    inputs_scale: float = 0.0) -> ThreeWayCodes:
    """:func:`three_way`'s outcome for every row of ``D`` (shape ``(m, n)``: m samples of
    n paired differences), without building the result objects.

    The same decisions as :func:`three_way` (a test checks them against each other on
    random data, degenerate rows included). Used by the calibration matrix (millions of
    simulated decisions), by :func:`flip_distance` and by the simulated seeds-needed and
    minimum detectable effect.
    """
    D = np.atleast_2d(np.asarray(D, dtype=float))
    m, n = D.shape
    if n < 2:
        raise ValueError(f"fewer than 2 values per row in D: got {n}")
    alpha = _check_alpha(alpha, upper=0.5)
    d = float(equivalence_margin)
    margin = float(margin)
    sens = True if sensitive is None else bool(sensitive)
    r = _rule_arrays(D, margin, d, alpha, inputs_scale)
    codes, eq, refused = _decide(r, n, margin, d, alpha, sens)
    return ThreeWayCodes(codes, eq, refused)


# --------------------------------------------------------------------------- #
# power of the rule itself, by simulation (normal differences, fixed stream)
# --------------------------------------------------------------------------- #

_POWER_REPS = 4000
_POWER_SEED = 20261217  # fixed: the figures are repeatable; no verdict reads them
_N_MAX = 400


@lru_cache(maxsize=8)
def _power_noise(n: int) -> np.ndarray:
    return np.random.default_rng([_POWER_SEED, n]).standard_normal((_POWER_REPS, n))


def _rule_power(dz: float, n: int, alpha: float) -> float:
    """Share of normal samples of n differences with mean dz (SD 1) that the rule
    decides on the side of dz's sign (margin 0, no equivalence branch)."""
    D = abs(dz) + _power_noise(n)
    codes = three_way_codes(D, margin=0.0, equivalence_margin=1e-9, alpha=alpha,
                            sensitive=False).codes
    return float(np.mean(codes == SUPPORTED))


@lru_cache(maxsize=4096)
def rule_seeds_needed(dz: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Pairs the three-way rule itself needs to decide an effect of ``dz`` SDs of the
    differences with probability ``power``, by simulation of the rule on normal
    differences (4,000 samples a candidate n, one fixed stream); None beyond 400 pairs."""
    dz = abs(float(dz))
    if not math.isfinite(dz) or dz == 0.0:
        return None
    if _rule_power(dz, _N_MAX, alpha) < power:
        return None
    lo, hi = MIN_PAIRS - 1, MIN_PAIRS
    while _rule_power(dz, hi, alpha) < power:
        lo, hi = hi, min(2 * hi, _N_MAX)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _rule_power(dz, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


@lru_cache(maxsize=1024)
def rule_mde(n: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest effect (SD units of the differences) the three-way rule decides with
    probability ``power`` at ``n`` pairs, by simulation on normal differences; None where
    the rule cannot decide at all at this n (fewer than MIN_PAIRS, or alpha / 2 out of the
    exact sign test's reach)."""
    n = _check_n(n)
    if n < MIN_PAIRS or n < min_differing(alpha / 2) or _rule_power(50.0, n, alpha) < power:
        return None
    lo, hi = 0.0, 1.0
    while _rule_power(hi, n, alpha) < power:
        lo, hi = hi, 2 * hi
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if _rule_power(mid, n, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def three_way(
    a,
    b,
    *,
    margin: float = 0.0,
    equivalence_margin: float,
    alpha: float = 0.05,
    sensitive: bool | None = None,
    rng: np.random.Generator | None = None,
    power: float = 0.8,
) -> ThreeWay:
    """Decide the claim "arm A beats arm B by at least ``margin``" from paired seeds.

    The rule (docs/STATISTICS.md, "The three-way rule"), with d = ``equivalence_margin``:
    the INTERVAL (Hall's skewness-corrected t interval at 1 - alpha, each end computed
    with a skewness allowance of :data:`SKEW_ALLOWANCE` against it: method "robust-hall")
    and the TEST (exact sign tests at alpha / 2 per side, scipy's binomial) must agree, on
    a sample that can carry the decision (the GUARDS: at least :data:`MIN_PAIRS` pairs,
    not all equal, at least :func:`min_differing` (alpha / 2) seeds whose arms differ).

    1. SUPPORTED when the interval lies above ``margin`` and the sign test of
       "difference > margin" has p <= alpha / 2. Checked first.
    2. FALSIFIED (wrong side) when the interval lies below ``margin`` and the sign test
       of "difference < margin" has p <= alpha / 2.
       FALSIFIED (equivalence: no effect as large as d either way) when the interval lies
       inside (-d, +d), both sign tests (above -d, below +d) have p <= alpha / 2, and
       ``sensitive`` is not False.
    3. INCONCLUSIVE otherwise; where the interval alone would have decided, the reason
       names the guard that refused ("3 of 10 seeds differ; an exact sign test cannot
       reach alpha / 2 = 0.025 with fewer than 6").

    ``sensitive``: True when the caller showed assay sensitivity, False when it did not
    (equivalence then stays INCONCLUSIVE), None (the default) when this call was not told:
    equivalence still decides, as before, and the reason says that sensitivity was not
    checked here. ``rng`` is accepted for compatibility and checked; nothing resamples.

    When INCONCLUSIVE, ``mde`` (absolute units: the smallest effect the rule decides with
    probability ``power`` at this n, simulated on normal differences with the observed
    SD) and ``seeds_needed`` (pairs at which the rule decides the observed mean - margin
    with that probability, simulated the same way) are set; both are None where no n up
    to 400 suffices or the SD is 0. ``p_value`` is the exact sign test's p of the branch
    that decided (or of the nearest branch when INCONCLUSIVE). Each one-sided error is
    measured at or below alpha / 2 by ``python -m audit.calibration``.
    """
    margin = float(margin)
    if not math.isfinite(margin):
        raise ValueError(f"margin must be finite; got {margin}")
    alpha = _check_alpha(alpha, upper=0.5)
    if isinstance(power, bool) or not 0.0 < float(power) < 1.0:
        raise ValueError(f"power must lie strictly between 0 and 1; got {power!r}")
    if rng is not None:
        _check_rng(rng)
    a_arr, b_arr = _as_pair(a, b)
    hall = paired_difference(a_arr, b_arr, level=1 - alpha, method="hall")
    tost0 = tost_paired(a_arr, b_arr, equivalence_margin, alpha=alpha / 2)
    d = tost0.margin
    sens = True if sensitive is None else bool(sensitive)
    D = (a_arr - b_arr)[None, :]
    inputs_scale = float(max(np.max(np.abs(a_arr)), np.max(np.abs(b_arr))))
    r = _rule_arrays(D, margin, d, alpha, inputs_scale)
    # the interval of the decision: Hall's bounds (the point for constant differences,
    # which the guards then refuse), identical to paired_difference's
    diff = replace(hall, low=float(r["low"][0]), high=float(r["high"][0]),
                   method="robust-hall")
    codes, eq, refused = _decide(r, diff.n, margin, d, alpha, sens)
    code, by_eq, ref = int(codes[0]), bool(eq[0]), bool(refused[0])
    p_sup, p_wrong, p_eq = (float(r[k][0]) for k in ("p_sup", "p_wrong", "p_eq"))
    g, differ = float(r["skew"][0]), int(r["differ"][0])
    n, side = diff.n, alpha / 2
    need = min_differing(side)
    inside = bool((r["low"][0] > -d) and (r["high"][0] < d))
    tost = TostResult(p_eq, diff.low, diff.high, d, bool(by_eq), side)
    const = bool(r["const"][0])
    # a sample with no spread has no interval: its "[x, x]" is the point, not Hall's
    ci = (f"every pair equal: {NO_SPREAD}" if const else
          f"{_g((1 - alpha) * 100)}% CI [{_g(diff.low)}, {_g(diff.high)}] (Hall's, skewness "
          f"allowance {_g(SKEW_ALLOWANCE)})")
    head = f"n = {n} pairs, alpha = {_g(alpha)}: mean(A - B) = {_g(diff.mean)}, {ci}"
    signs = (f"exact sign test p = {_g(p_sup)} (above {_g(margin)}), {_g(p_wrong)} "
             f"(below), {_g(p_eq)} (inside +-{_g(d)})")
    common = dict(difference=diff, tost=tost, margin=margin, equivalence_margin=d,
                  alpha=alpha, sensitive=sens, power=float(power),
                  sensitivity_checked=sensitive is not None, skewness=g, differing=differ,
                  refused=ref)
    if _FLIP.get():
        common["flip"] = flip_distance(a_arr - b_arr, margin=margin, equivalence_margin=d,
                                       alpha=alpha, sensitive=sens,
                                       inputs_scale=inputs_scale)
    if code == SUPPORTED:
        reason = (f"SUPPORTED: {head} lies above the margin {_g(margin)}, and the exact sign "
                  f"test agrees (p = {_g(p_sup)} <= {_g(side)}; {differ} of {n} seeds "
                  f"differ, skewness {_g(g)}).")
        return ThreeWay("SUPPORTED", reason=reason, p_value=p_sup, **common)
    if code == FALSIFIED and not by_eq:
        reason = (f"FALSIFIED (wrong side): {head} lies entirely below the margin "
                  f"{_g(margin)}, and the exact sign test agrees (p = {_g(p_wrong)} <= "
                  f"{_g(side)}; {differ} of {n} seeds differ, skewness {_g(g)}).")
        return ThreeWay("FALSIFIED", reason=reason, p_value=p_wrong,
                        falsified_by="wrong side", **common)
    if code == FALSIFIED:
        sens_txt = ("with assay sensitivity shown by the caller" if sensitive
                    else "assay sensitivity was not checked by this call")
        reason = (f"FALSIFIED (no effect as large as d = {_g(d)} in either direction): "
                  f"{head} lies inside (-{_g(d)}, +{_g(d)}) and both exact sign tests agree "
                  f"(p = {_g(p_eq)} <= {_g(side)}; {differ} of {n} seeds differ, skewness "
                  f"{_g(g)}); {sens_txt}.")
        return ThreeWay("FALSIFIED", reason=reason, p_value=p_eq,
                        falsified_by="equivalence", **common)

    # INCONCLUSIVE: why, then what would decide it
    if r["low"][0] > margin:
        side_txt, p_near = f"lies above the margin {_g(margin)}", p_sup
    elif r["high"][0] < margin:
        side_txt, p_near = f"lies below the margin {_g(margin)}", p_wrong
    elif inside and sens:
        side_txt, p_near = f"lies inside (-{_g(d)}, +{_g(d)})", p_eq
    else:
        side_txt, p_near = None, min(p_sup, p_wrong, p_eq)
    if const:  # never decided (the rule's guard), whichever side the point lies on
        state = (f"{head}; the rule does not decide from it: a sample with no spread "
                 f"carries no evidence of its error")
    elif ref:
        if n < MIN_PAIRS:
            why = (f"n = {n} pairs: below {max(MIN_PAIRS, need)} the rule does not decide (an "
                   f"exact sign test cannot reach alpha / 2 = {_g(side)} with fewer pairs than "
                   f"{max(MIN_PAIRS, need)})")
        elif differ < need:
            why = (f"{differ} of {n} seeds differ; an exact sign test cannot reach alpha / 2 "
                   f"= {_g(side)} with fewer than {need}")
        elif p_near > side:
            why = (f"the exact sign test does not agree (p = {_g(p_near)} > {_g(side)}; "
                   f"{differ} of {n} seeds differ)")
        else:  # pragma: no cover - every refusal has one of the reasons above
            why = "a guard of the rule refused"
        state = f"{head} {side_txt}, but the rule refuses to decide: {why}"
    elif inside and not sens:
        state = (f"{head} lies inside (-{_g(d)}, +{_g(d)}) but there is no assay sensitivity, "
                 f"so equivalence does not count")
    else:
        state = (f"{head} straddles the margin {_g(margin)} and is not inside "
                 f"(-{_g(d)}, +{_g(d)}); {signs}")
    mde = needed = None
    if diff.sd > 0 and _FLIP.get():  # skipped inside the runner's leave-one-out re-analyses
        m_sd = rule_mde(n, alpha, float(power))
        mde = None if m_sd is None else m_sd * diff.sd
        effect = diff.mean - margin
        if effect != 0.0:
            needed = rule_seeds_needed(round(abs(effect) / diff.sd, 6), alpha, float(power))
        if needed and 0 < differ < n:
            # the simulation draws no ties; at the observed share of seeds whose arms
            # differ, the guard wants about need * n / differ pairs before it lets go
            needed = max(needed, math.ceil(need * n / differ))
    effect = diff.mean - margin
    gap = f"the observed distance {_g(effect)} of mean(A - B) from the margin {_g(margin)}"
    as_txt = {"SUPPORTED": " as SUPPORTED",
              "FALSIFIED": " as FALSIFIED (below the margin; the equivalence route, not "
                           "simulated, is not counted)"}.get(
        _decides_as(effect), "")
    if needed:
        ties = (f", and {need} differing seeds at the observed share of {differ} in {n}"
                if 0 < differ < n else "")
        short = f"; {_short_text(n, power)}" if needed <= n else ""
        need_txt = (f"about {needed} pairs would let this rule decide {gap}{as_txt} were the "
                    f"mean and spread to hold (simulated, power {_g(power)}{ties}{short})")
    elif effect == 0.0 or diff.sd == 0.0:
        need_txt = f"no number of seeds can be estimated for {gap}"
    else:
        need_txt = (f"no number of seeds up to {_N_MAX} would let this rule decide "
                    f"{gap}{as_txt}")
    mde_txt = (f"the effect this rule decides with probability {_g(power)} at n = {n} (its "
               f"minimum detectable effect; smaller ones are decided less often) is "
               f"{_g(mde)}" if mde is not None else
               f"the rule cannot decide at n = {n}" if n < MIN_PAIRS or n < need else
               "no minimum detectable effect can be estimated (no spread)")
    reason = f"INCONCLUSIVE: {state}; {mde_txt}, and {need_txt}."
    return ThreeWay("INCONCLUSIVE", reason=reason, mde=mde, seeds_needed=needed,
                    p_value=p_near, **common)


# --------------------------------------------------------------------------- #
# the three-way rule, vectorised: calibration and stability
# --------------------------------------------------------------------------- #

def three_way_text(margin: float, equivalence_margin: float, alpha: float,
                   n: int | None = None) -> str:
    """The three-way rule in words, from the parameters that decide it (printed rules are
    generated from this, so a ``--set`` of a margin changes the text)."""
    n_txt = f"n = {n} pairs" if n is not None else "n = the seeds run"
    side = alpha / 2
    return (f"three-way rule on the paired per-seed differences A - B ({n_txt}): "
            f"SUPPORTED when the two-sided {_g(100 * (1 - alpha))}% CI (Hall's skewness-"
            f"corrected Student-t) lies above the margin m = {_g(margin)} and an exact sign "
            f"test agrees at {_g(side)}; FALSIFIED when both lie below m, or when the CI lies "
            f"inside (-{_g(equivalence_margin)}, +{_g(equivalence_margin)}) and exact sign "
            f"tests agree at {_g(side)} per side (no effect as large as "
            f"{_g(equivalence_margin)}), with assay sensitivity; INCONCLUSIVE otherwise, and "
            f"always with fewer than {MIN_PAIRS} pairs, with all differences equal, or "
            f"with fewer than {min_differing(side)} seeds whose arms differ; the CI's ends "
            f"allow for skewness {_g(SKEW_ALLOWANCE)} beyond the sample's, against each end, "
            f"up to the skewness where Hall's correction would turn back towards the mean. "
            f"Each error (false SUPPORTED, false FALSIFIED) is at most alpha / 2 = {_g(side)}, "
            f"measured by simulation (python -m audit.calibration)")


def flip_distance(d, *, margin: float = 0.0, equivalence_margin: float,
                  alpha: float = 0.05, sensitive: bool = True,
                  max_multiple: float = 64.0, inputs_scale: float = 0.0) -> float | None:
    """The smallest change of ONE seed's paired difference that changes the three-way
    outcome, in the metric's own units (docs/STATISTICS.md, "Flip distance").

    Every seed is moved up and down on a geometric grid of steps (from 1e-6 of the
    scale to ``max_multiple`` times it, the scale being the spread plus the margins),
    and the first change is refined by bisection. ``None`` when no single-seed move
    within that range changes the outcome.
    """
    d = _as_sample(d, "d")
    n = d.size
    base = int(three_way_codes(d[None, :], margin=margin, equivalence_margin=equivalence_margin,
                               alpha=alpha, sensitive=sensitive,
                               inputs_scale=inputs_scale).codes[0])
    scale = float(np.ptp(d) + abs(margin) + abs(equivalence_margin) + np.max(np.abs(d))) or 1.0
    steps = scale * np.geomspace(1e-6, max_multiple, 120)
    best = math.inf
    kw = dict(margin=margin, equivalence_margin=equivalence_margin, alpha=alpha,
              sensitive=sensitive, inputs_scale=inputs_scale)
    for sign in (1.0, -1.0):
        # all seeds x all steps at once: row (i, k) moves seed i by sign * steps[k]
        D = np.repeat(d[None, :], n * steps.size, axis=0)
        idx = np.repeat(np.arange(n), steps.size)
        D[np.arange(D.shape[0]), idx] += sign * np.tile(steps, n)
        changed = (three_way_codes(D, **kw).codes != base).reshape(n, steps.size)
        seeds = [i for i in range(n) if changed[i].any()]
        if not seeds:
            continue
        first = np.array([int(np.flatnonzero(changed[i])[0]) for i in seeds])
        lo = np.where(first == 0, 0.0, steps[np.maximum(first - 1, 0)])
        hi = steps[first].astype(float)
        rows = np.arange(len(seeds))
        for _ in range(60):  # bisection, every seed that changes it at once
            mid = 0.5 * (lo + hi)
            X = np.repeat(d[None, :], len(seeds), axis=0)
            X[rows, seeds] += sign * mid
            flipped = three_way_codes(X, **kw).codes != base
            hi = np.where(flipped, mid, hi)
            lo = np.where(flipped, lo, mid)
        best = min(best, float(hi.min()))
    return None if not math.isfinite(best) else float(best)
