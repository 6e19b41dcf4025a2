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

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from audit.errors import AuditError

# the seed rules live in audit.seeds (below the run-context types and the runner, which
# use them); re-exported here, where claims import them from
from audit.seeds import MAX_PILOT_SEEDS, TUNING_SEED_START, is_tuning, tuning_seeds  # noqa: F401

MAX_GRID_POINTS = 256  # the most grid points (combinations) one pilot runs


@dataclass(frozen=True)
class Search:
    """One search over settings for one scale: what was asked, tried, chosen and why.

    ``seeds`` must all be tuning seeds; ``tried`` lists each candidate with what the pilot
    measured on it (plain text, numbers included). ``verdict_seeds_used`` is True for a
    choice that read results of seeds a verdict also uses (a pilot run before tuning seeds
    were reserved, or a stated setting kept because the premise showed on verdict seeds):
    the report then says so instead of hiding it. ``test_metric_read`` is True for a choice made on a
    test-set metric (before ``audit tune`` refused one): the tuning seeds train other
    models, but the test examples can be the ones the verdict reads, so the report flags
    it."""

    scale: str
    question: str
    seeds: tuple[int, ...]
    tried: tuple[str, ...]
    chosen: str
    why: str
    verdict_seeds_used: bool = False
    test_metric_read: bool = False

    def __post_init__(self):
        if not self.verdict_seeds_used and not is_tuning(self.seeds):
            raise AuditError(f"search {self.question!r} at {self.scale}: seeds "
                             f"{list(self.seeds)} are not tuning seeds "
                             f"(>= {TUNING_SEED_START})")

    def to_dict(self) -> dict:
        return {"scale": self.scale, "question": self.question, "seeds": list(self.seeds),
                "tried": list(self.tried), "chosen": self.chosen, "why": self.why,
                "verdict_seeds_used": self.verdict_seeds_used,
                "test_metric_read": self.test_metric_read}

    def markdown(self) -> str:
        seeds = ", ".join(str(s) for s in self.seeds) or "none"
        warn = (" **Chosen on verdict seeds** (the choice read results of seeds the "
                "verdict also uses; not yet re-chosen on tuning seeds alone)."
                if self.verdict_seeds_used else "")
        if self.test_metric_read:
            warn += (" **Chosen on a test-set metric** (tuning seeds, but test examples "
                     "the verdict may read; not yet re-chosen on validation data).")
        tried = "".join(f"\n  - {t}" for t in self.tried)
        return (f"- **{self.question}** (scale {self.scale}; seeds {seeds}).{warn} "
                f"Tried:{tried}\n  - chosen: {self.chosen}. Why: {self.why}")


# ------------------------------------------------------------------------ regime maps
@dataclass(frozen=True)
class Setting:
    """One value of a regime map's axis that sets several config keys at once (a model and
    its options, say): ``label`` names it in the map, ``overrides`` are the config values."""

    label: str
    overrides: Mapping

    def to_dict(self) -> dict:
        return {"label": self.label, "overrides": dict(self.overrides)}


MAP_LEVELS = (0.8, 0.9, 0.95)  # the interval levels a map's screen may use


@dataclass(frozen=True)
class RegimeMap:
    """A declared search for where the paper's own effect appears (issue #30), run by
    ``audit regime ID`` on tuning seeds only, and printed in the report as a table and a
    figure: the "regime map". Declared (and its budget stated) before it runs.

    - ``axes``: config key -> the values tried (plain config values, or :class:`Setting`
      for a value that sets several keys); every combination is a cell.
    - ``effect``: ``(A, B)`` groups (an arm, or ``arm/setting`` where an arm has several
      settings a seed): the paired per-seed ``metric`` difference A - B, positive where
      the paper's own effect appears (so for a loss or a perplexity A is the baseline).
    - ``metric``: a validation metric of the claim (``Claim.validation_metrics``); a map
      never reads the test data the verdict reads. ``metric_b``: B's metric when it is
      another key (a baseline measured inside A's own units: A and B may then be the
      same group); B reads ``metric`` when empty.
    - ``seeds``: tuning seeds a cell; then the ``refine`` cells with the highest mean
      get ``refine_seeds`` more (successive halving's second rung).
    - ``fixed``: overrides held in every cell (a validation split carved out of training
      data, say: the map's runs then train on slightly less data than the verdict's).
    - ``budget_s``: the CPU seconds (one core) the map was expected to take, stated
      before it ran; the report prints it beside what it took.
    - ``scale_by``: a factor for display (100: accuracy in points).
    - ``level``: the two-sided level of each cell's Student-t interval.
    - ``b_floor``: the least mean B must reach in a cell (display units, e.g. twice the
      accuracy of guessing) for that cell to get more seeds or be chosen: where the
      baseline does not learn, a gain over it is no evidence of the paper's effect.
      None: no floor.

    What the verdict then uses, and why, is a :class:`Search` record of the same scale,
    written after the map ran and before any verdict seed ran at the chosen setting.
    """

    scale: str
    axes: Mapping[str, tuple]
    effect: tuple[str, str]
    metric: str
    effect_text: str
    seeds: int = 3
    refine: int = 0
    refine_seeds: int = 0
    fixed: Mapping = None  # type: ignore[assignment]
    budget_s: float = 0.0
    scale_by: float = 1.0
    unit: str = ""
    level: float = 0.9
    why: str = ""
    metric_b: str = ""
    b_floor: float | None = None

    def metrics(self) -> tuple[str, str]:
        return self.metric, self.metric_b or self.metric

    def __post_init__(self):
        if self.fixed is None:
            object.__setattr__(self, "fixed", {})
        if len(self.effect) != 2 or not all(isinstance(g, str) and g for g in self.effect):
            raise AuditError(f"regime map at {self.scale}: effect must be two groups (A, B)")
        if not self.axes or any(not isinstance(v, tuple) or not v for v in self.axes.values()):
            raise AuditError(f"regime map at {self.scale}: every axis needs a tuple of values")
        for key, values in self.axes.items():  # two cells printed alike would share one
            shown = [v.label if isinstance(v, Setting) else str(v) for v in values]  # square
            if len(set(shown)) != len(shown):
                raise AuditError(f"regime map at {self.scale}: axis {key!r} repeats a "
                                 f"value or label ({', '.join(shown)})")
        if self.seeds < 2 or self.refine < 0 or self.refine_seeds < 0 or \
                self.refine_seeds == 1:
            raise AuditError(f"regime map at {self.scale}: at least 2 seeds a cell, and a "
                             f"second rung of 0 or at least 2 more seeds (a run takes two)")
        if self.level not in MAP_LEVELS:
            raise AuditError(f"regime map at {self.scale}: level must be one of {MAP_LEVELS}")
        if self.b_floor is not None and (isinstance(self.b_floor, bool) or not isinstance(
                self.b_floor, (int, float)) or not math.isfinite(self.b_floor)):
            raise AuditError(f"regime map at {self.scale}: b_floor must be a finite number "
                             f"or None")
        if self.cells() > MAX_GRID_POINTS:
            raise AuditError(f"regime map at {self.scale}: more than {MAX_GRID_POINTS} cells")
        if self.seeds + self.refine_seeds > MAX_PILOT_SEEDS:
            raise AuditError(f"regime map at {self.scale}: at most {MAX_PILOT_SEEDS} tuning "
                             f"seeds a cell")

    def cells(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def budget_units(self) -> int:
        """Runs the map makes at most: two groups (one when B is measured inside A's
        units), every cell, plus the refinement."""
        return len(set(self.effect)) * (self.cells() * self.seeds + min(self.refine, self.cells())
                    * self.refine_seeds)

    def points(self) -> list[tuple[dict, dict]]:
        """Every cell as (labels: axis -> label, overrides), the first axis slowest."""
        out = []
        for point in grid_points(dict(self.axes)):
            labels, over = {}, dict(self.fixed)
            for key, value in point.items():
                if isinstance(value, Setting):
                    labels[key] = value.label
                    over.update(value.overrides)
                else:
                    labels[key] = value if isinstance(value, (int, float, str)) else str(value)
                    over[key] = value
            out.append((labels, over))
        return out

    def to_dict(self) -> dict:
        return {"scale": self.scale,
                "axes": {k: [v.to_dict() if isinstance(v, Setting) else v for v in vs]
                         for k, vs in self.axes.items()},
                "effect": list(self.effect), "metric": self.metric,
                "metric_b": self.metric_b or self.metric,
                "effect_text": self.effect_text, "seeds": self.seeds, "refine": self.refine,
                "refine_seeds": self.refine_seeds, "fixed": dict(self.fixed),
                "budget_s": self.budget_s, "budget_units": self.budget_units(),
                "scale_by": self.scale_by, "unit": self.unit, "level": self.level,
                "why": self.why, "b_floor": self.b_floor}


# ------------------------------------------------------------------------------ pilots
def grid_points(grid: Mapping[str, Sequence]) -> list[dict]:
    """Every combination of a grid ``{key: [v1, v2, ...]}``, in the grid's order (the
    first key varies slowest); ``[{}]`` for an empty grid."""
    import itertools

    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


@dataclass(frozen=True)
class PilotRow:
    """One candidate setting of a pilot: its config overrides, per (arm, setting) group
    the per-seed values of the metric, and the paired contrast (first group minus second)
    when asked for."""

    overrides: dict
    values: dict  # "arm" or "arm/setting" -> [value per seed]
    contrast: tuple[float, float, int] | None = None  # (mean, SD, n) of A - B per seed

    def text(self, metric: str, contrast: Sequence[str] = ()) -> str:
        cand = ", ".join(f"{k}={v}" for k, v in self.overrides.items()) or "the scale's config"
        parts = [f"{g} {np.mean(v):.4g}" for g, v in self.values.items()]
        line = f"{cand}: mean {metric} " + "; ".join(parts)
        if self.contrast is not None:
            m, sd, n = self.contrast
            line += f"; {contrast[0]} - {contrast[1]} {m:+.4g} (SD {sd:.3g}, n = {n})"
        return line


def reads_the_test_set(metric: str) -> bool:
    """Whether a result key names a test-set metric (``test_acc``, ``final_test_loss``,
    ``agnostic_test_acc``, ``testacc``...): a word ``test`` in it, split at ``_``, ``-``
    and ``.``, or a word that starts with ``test``. The verdict reads the test set, so a
    setting chosen on it would be chosen on the verdict's own data."""
    import re

    return any(w.startswith("test")
               for w in re.split(r"[_.\-]+", metric.lower()) if w)


def test_metric_problem(claim, metric: str) -> str:
    """Why ``metric`` is not a validation metric of ``claim`` ("" when it is one): a
    claim that declares ``validation_metrics`` accepts only those keys; otherwise a key
    named like a test-set metric (:func:`reads_the_test_set`) is refused."""
    declared = getattr(claim, "validation_metrics", None)
    if declared is not None:
        if metric in declared:
            return ""
        named = ", ".join(declared) if declared else "none: its runs read no validation data"
        return (f"metric {metric!r} is not a validation metric of {claim.id!r} (declared: "
                f"{named})")
    if reads_the_test_set(metric):
        return f"metric {metric!r} reads the test set, which the verdict reads"
    return ""


def map_problems(claim, rmap: "RegimeMap") -> list[str]:
    """What makes ``rmap`` unrunnable for ``claim``, whichever checks it (the generic
    claim checks, or ``audit regime`` before its first unit): a group that is not an arm
    of the claim, a metric that is not a validation metric (a map never reads the test
    data the verdict reads)."""
    arms = {a.name for a in claim.arms}
    out = [f"{g!r} is not an arm ({', '.join(sorted(arms))})" for g in rmap.effect
           if g.split("/", 1)[0] not in arms]
    out += [problem for metric in dict.fromkeys(rmap.metrics())
            if (problem := test_metric_problem(claim, metric))]
    return out


def group_of(spec) -> str:
    """A unit's group in pilots and regime maps: its arm, or ``arm/setting``."""
    return spec.arm if not spec.setting else f"{spec.arm}/{spec.setting}"


def _check_metric(claim, spec, result: Mapping, metric: str) -> None:
    if metric not in result:
        raise AuditError(f"unit {spec.label()} of {claim.id!r} has no metric {metric!r}; "
                         f"keys: {', '.join(sorted(result))}")
    if isinstance(result[metric], bool) or not isinstance(result[metric], (int, float)):
        raise AuditError(f"metric {metric!r} of {claim.id!r} is not a number (it is "
                         f"{type(result[metric]).__name__}); choose a key whose value is "
                         f"one number a unit")


def pilot(claim, scale: str, grid: Mapping[str, Sequence], arms: Sequence[str],
          metric: str, n_seeds: int = 3, *, cache, overrides: Mapping | None = None,
          contrast: Sequence[str] = (), device: str = "cpu", data_dir: str | None = None,
          progress=None, allow_test_metric: bool = False) -> list[PilotRow]:
    """Run ``arms`` of ``claim`` at ``scale`` on the first ``n_seeds`` tuning seeds, once
    for each point of ``grid`` (config overrides, checked like ``--set``), and read
    ``metric`` (a key of a unit's result) from every unit. Units run through ``cache``
    (the run cache: a pilot resumes, and no verdict seed is ever touched).

    ``contrast``: two groups (arm names, or "arm/setting" for claims with several units an
    arm and seed) whose paired per-seed difference is summarised per candidate. Returns
    one :class:`PilotRow` per grid point; the caller writes the :class:`Search` record.

    A ``metric`` that reads the test set (:func:`reads_the_test_set`) is refused unless
    ``allow_test_metric``: tuning reads a validation metric; the test set is what the
    verdict reads (and its split does not change with the seed range)."""
    problem = test_metric_problem(claim, metric)
    if problem and not allow_test_metric:
        raise AuditError(f"{problem}: tune on a validation metric, or pass "
                         f"--allow-test-metric to run the pilot anyway (flag the Search "
                         f"record it leads to: test_metric_read=True)")
    from audit.runner import make_context, run_units

    if n_seeds < 2:
        raise AuditError(f"a pilot needs at least 2 tuning seeds, got {n_seeds}")
    if n_seeds > MAX_PILOT_SEEDS:  # bounded before a seed list is built
        raise AuditError(f"a pilot runs at most {MAX_PILOT_SEEDS} tuning seeds, got "
                         f"{n_seeds}")
    size = 1
    for key, values in grid.items():
        size *= max(1, len(values))
        if size > MAX_GRID_POINTS:  # bounded before a single point is built or checked
            raise AuditError(f"the grid has more than {MAX_GRID_POINTS} points; split the "
                             f"pilot")
    if not getattr(claim, "stochastic", False):
        raise AuditError(f"claim {claim.id!r} is exact: there is nothing to tune over seeds")
    known = [a.name for a in claim.arms]
    unknown = [a for a in arms if a not in known]
    if unknown or not arms:
        raise AuditError(f"unknown arm(s) {', '.join(unknown) or '(none given)'} of "
                         f"{claim.id!r}; arms: {', '.join(known)}")
    # every grid point's config is checked before the first unit runs
    contexts = [(point, make_context(claim, scale, seeds=list(tuning_seeds(n_seeds)),
                                     device=device, data_dir=data_dir,
                                     overrides={**dict(overrides or {}), **point}))
                for point in grid_points(grid)]
    rows = []
    for point, ctx in contexts:
        specs = [s for s in claim.unit_specs(ctx) if s.arm in arms]
        if not specs:
            raise AuditError(f"no units of arm(s) {', '.join(arms)} in {claim.id!r}; arms: "
                             f"{', '.join(a.name for a in claim.arms)}")
        done = [0]

        def step(spec, result, point=point, n=len(specs)):
            _check_metric(claim, spec, result, metric)  # the first bad unit stops the pilot
            done[0] += 1
            if progress is not None:
                progress(f"pilot {point or '(base)'}: {done[0]}/{n} units computed")

        results, _ = run_units(claim, ctx, specs, cache=cache, on_result=step)
        values: dict[str, dict[int, float]] = {}
        for spec in specs:
            result = results[spec]
            _check_metric(claim, spec, result, metric)  # cached units too
            group = group_of(spec)
            values.setdefault(group, {})[spec.seed] = float(result[metric])
        row_c = None
        if contrast:
            a, b = (values.get(g) for g in contrast)
            if a is None or b is None:
                raise AuditError(f"contrast {contrast[0]} - {contrast[1]}: groups are "
                                 f"{', '.join(values)}")
            d = np.array([a[s] - b[s] for s in sorted(set(a) & set(b))])
            row_c = (float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else 0.0, len(d))
        rows.append(PilotRow(dict(point), {g: [v[s] for s in sorted(v)]
                                           for g, v in values.items()}, row_c))
    return rows
