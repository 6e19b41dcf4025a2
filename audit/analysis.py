"""Helpers that claims' ``analyse`` functions share: per-seed tables of results and the
estimates built from them.

- ``results_table(results, key, arms, seeds, setting="")``: per arm, the values of one
  result key over ``seeds`` as an array (paired: position i is seed ``seeds[i]``).
- ``mean_estimate(name, x, unit, description)``: the mean over seeds with its Student-t
  95% interval (``audit.stats.mean_interval``), as an :class:`~audit.verdict.Estimate`.
- ``difference_estimate(name, a, b, unit, description)``: the paired mean difference
  a - b with its Student-t 95% interval (``audit.stats.paired_difference``).
- ``mean_band(rows)``: per-column mean and Student-t 95% band over rows (one row a
  seed), for the figures' shaded bands.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from audit import stats
from audit.claims import RunSpec
from audit.verdict import Estimate

__all__ = ["difference_estimate", "mean_band", "mean_estimate", "results_table"]


def results_table(results: Mapping[RunSpec, Mapping], key: str,
                  arms: Iterable[str], seeds: Sequence[int], setting: str = ""):
    """Per-seed values of ``key`` for each arm, aligned on ``seeds`` (paired)."""
    return {arm: np.array([float(results[RunSpec(arm, s, setting)][key]) for s in seeds])
            for arm in arms}


def mean_estimate(name: str, x, unit: str = "", description: str = "", *,
                  no_spread_point: bool = False) -> Estimate:
    """The mean of ``x`` with its Student-t 95% interval.

    ``no_spread_point``: with fewer than two values, or all values equal, return the
    mean alone (method "mean (no spread)") without computing an interval."""
    if no_spread_point:
        x = np.asarray(x, dtype=float)
        if not (len(x) >= 2 and np.ptp(x) > 0):
            return Estimate(name, float(np.mean(x)), None, None, None, len(x),
                            "mean (no spread)", unit, description)
        return Estimate.of(name, stats.mean_interval(x), unit, description)
    return Estimate.of(name, stats.mean_interval(x, level=0.95), unit, description)


def difference_estimate(name: str, a, b, unit: str = "", description: str = "") -> Estimate:
    """The paired mean difference ``a - b`` with its Student-t 95% interval."""
    return Estimate.of(name, stats.paired_difference(a, b, level=0.95, method="t"), unit,
                       description)


def mean_band(rows: Sequence[Sequence[float]]):
    """(mean, low, high) per column of ``rows`` (one row a seed): the Student-t 95% band
    of the mean; with one row the band is the row itself."""
    a = np.asarray(rows, dtype=float)
    m = a.mean(0)
    if a.shape[0] < 2:
        return m.tolist(), m.tolist(), m.tolist()
    from scipy import stats as sps

    half = sps.t.ppf(0.975, a.shape[0] - 1) * a.std(0, ddof=1) / math.sqrt(a.shape[0])
    return m.tolist(), (m - half).tolist(), (m + half).tolist()
