"""Regime maps: where does the paper's own effect appear, before it is judged?

A claim whose premise (the paper's own effect) does not reproduce at a scale cannot judge
the reviewer's explanation of it: the gated questions stay INCONCLUSIVE. Before that is
reported as a limit, the claim declares an :class:`audit.tuning.RegimeMap` (the knobs
where the effect plausibly turns, a validation metric, tuning seeds, a budget) and
``audit regime ID --scale S`` runs it here:

1. every cell (one combination of the axes) runs the two groups of the effect on the
   first ``seeds`` tuning seeds (1000, 1001, ...; never a verdict seed), through the run
   cache and the process pool like any run;
2. the ``refine`` cells with the highest mean get ``refine_seeds`` more seeds (the
   second rung of successive halving: the screen spends its seeds where the effect
   looks largest);
3. each cell's paired per-seed difference A - B gets a two-sided Student-t interval at
   the map's level; the cell **shows** the effect when the interval lies above 0,
   **reverses** it when it lies below, and is **unclear** otherwise (:func:`cell_status`);
4. the chosen cell is, among the cells of the second rung, the showing one with the
   highest lower bound; none when none of them shows it (:func:`choose`). A screen on three seeds picks the best of many cells, so
   its numbers are optimistic: the verdict runs on fresh seeds, and that run (not the
   map) says whether the effect is there.

The map is written to ``OUT/<id>/regime.json`` and ``regime.png``; the claim's report at
that folder prints it ("Where the paper's own effect appears"). The file is read back
like any report, as hostile input (:func:`read`).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from audit import safeio
from audit.claims import Claim
from audit.errors import AuditError
from audit.tuning import RegimeMap, group_of, map_problems, tuning_seeds

SCHEMA = "audit-regime-map/1"
FILE = "regime.json"
FIGURE = "regime.png"
STATUSES = ("shows", "reverses", "unclear")

RULE = ("A cell **shows** the paper's effect when the two-sided {level:.0%} Student-t "
        "interval of the paired per-seed difference A - B ({a} - {b}, {metric}, validation "
        "data) lies above 0, **reverses** it when the interval lies below 0, and is "
        "**unclear** otherwise. {choice} When none shows it, "
        "none is chosen and the scale keeps its stated setting. A screen on few tuning "
        "seeds picks the best of many cells, so its numbers are optimistic; the verdict is "
        "read on fresh verdict seeds.")
#: RULE's {choice}: with a second rung / without one (refine or refine_seeds 0)
CHOICE_RUNG = ("The cells with the highest means get more seeds (the second rung), and the "
               "chosen cell is the one among them that shows the effect with the highest "
               "lower bound; a cell that shows it on the first rung's seeds alone is not "
               "chosen (among many cells one does by chance).")
CHOICE_ONE_RUNG = ("There is no second rung: the chosen cell is the one that shows the "
                   "effect with the highest lower bound on the first rung's seeds (among "
                   "many cells one may show it by chance, so read the choice with care).")


def cell_stats(diffs: Sequence[float], level: float) -> dict:
    """Mean, SD, n and the two-sided Student-t interval of the paired differences, and
    the cell's status (:func:`cell_status`)."""
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    if n > 1 and sd > 0:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
    elif n > 1:  # every seed the same difference: the interval is that point
        low = high = mean
    else:
        low = high = float("nan")
    return {"mean": mean, "sd": sd, "n": n, "low": low, "high": high,
            "status": cell_status(low, high)}


def cell_status(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "unclear"
    if low > 0:
        return "shows"
    if high < 0:
        return "reverses"
    return "unclear"


FLOOR_RULE = (" A cell where {b}'s mean is below {floor:g}{unit} (the baseline does not "
              "learn there, so a gain over it says nothing of the paper's effect) gets no "
              "more seeds and is not chosen.")


def b_learns(cell: Mapping, floor: float | None) -> bool:
    """Whether B's mean in ``cell`` reaches the map's ``b_floor`` (always, without one)."""
    if floor is None:
        return True
    mean = _mean(cell.get("b"))
    return mean is not None and mean >= floor


def choose(cells: Sequence[Mapping], floor: float | None = None) -> int | None:
    """The index of the showing cell with the highest lower bound (the first on a tie)
    among the cells that reached the second rung (every cell when none did) and whose
    baseline reaches ``floor`` (:func:`b_learns`), or None when none of them shows the
    effect. A cell that shows the effect on the first rung's few seeds alone is not
    chosen: with many cells one shows by chance (the LIPS map's first run had a cell at
    +0.67 on 3 seeds fall to -0.06 on 6)."""
    pool = [i for i, c in enumerate(cells) if c.get("refined")] or range(len(cells))
    pool = [i for i in pool if b_learns(cells[i], floor)]
    best = None
    for i in pool:
        c = cells[i]
        if c["stats"]["status"] == "shows" and (
                best is None or c["stats"]["low"] > cells[best]["stats"]["low"]):
            best = i
    return best


_group = group_of


def _effect_specs(specs, effect: Sequence[str], claim_id: str) -> list:
    """The units of the two groups only: ``arm/setting`` (or an arm's base units, with no
    setting) where such units exist, else every unit of the arm (one setting a seed)."""
    out = []
    for g in effect:
        exact = [s for s in specs if _group(s) == g]
        if not exact:
            exact = [s for s in specs if s.arm == g]
            if len({s.setting for s in exact}) > 1:
                raise AuditError(f"{claim_id}: arm {g!r} has settings "
                                 f"{', '.join(sorted({str(s.setting) for s in exact}))} "
                                 f"a seed; name one as {g}/SETTING")
        if not exact:  # a mistyped arm/setting would map nothing and read as a finding
            raise AuditError(f"{claim_id}: no units of the regime map's group {g!r} (an "
                             f"arm, or ARM/SETTING of a setting the arm has)")
        out += [s for s in exact if s not in out]
    return out


def _values(results: Mapping, group: str, metric: str, claim_id: str) -> dict[int, float]:
    """seed -> metric of ``group``: an ``arm/setting`` name, or an arm with one setting a
    seed (a map whose cells set an arm's only candidate)."""
    exact = {s.seed: r for s, r in results.items() if _group(s) == group}
    if not exact:
        by_arm = [(s, r) for s, r in results.items() if s.arm == group]
        settings = {s.setting for s, _ in by_arm}
        if len(settings) > 1:
            raise AuditError(f"{claim_id}: arm {group!r} has settings "
                             f"{', '.join(sorted(map(str, settings)))} a seed; name one as "
                             f"{group}/SETTING")
        exact = {s.seed: r for s, r in by_arm}
    out = {}
    for seed, r in exact.items():
        v = r.get(metric)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise AuditError(f"{claim_id}: unit {group} seed {seed} has no number "
                             f"{metric!r}; keys: {', '.join(sorted(r))}")
        out[seed] = float(v)
    return out


def _check(claim: Claim, rmap: RegimeMap) -> None:
    if not getattr(claim, "stochastic", False):
        raise AuditError(f"claim {claim.id!r} is exact: there is no effect to map over seeds")
    problems = map_problems(claim, rmap)  # a test-set metric among them: no override
    if problems:
        raise AuditError(f"regime map of {claim.id!r} at {rmap.scale}: {problems[0]}")


def run(claim: Claim, rmap: RegimeMap, *, cache, backend, device: str = "cpu",
        data_dir: str | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """Run one declared map and return it as a JSON-able dict (see the module doc)."""
    from audit.runner import environment, make_context, run_units

    _check(claim, rmap)
    points = rmap.points()
    # every cell's config is checked (like --set) before the first unit runs
    for _labels, over in points:
        make_context(claim, rmap.scale, seeds=list(tuning_seeds(2)), device=device,
                     data_dir=data_dir, overrides=over)
    t0 = time.perf_counter()
    counts = {"computed": 0, "cached": 0}
    done = [0]

    def measure(over: Mapping, seeds: Sequence[int], labels: Mapping):
        ctx = make_context(claim, rmap.scale, seeds=list(seeds), device=device,
                           data_dir=data_dir, overrides=over)
        specs = _effect_specs(claim.unit_specs(ctx), rmap.effect, claim.id)

        def step(_spec, _result):
            done[0] += 1
            if progress is not None:
                progress(f"regime map {claim.id} ({rmap.scale}): {done[0]} of at most "
                         f"{rmap.budget_units()} runs computed; cell "
                         + ", ".join(f"{k} {v}" for k, v in labels.items()))

        results, computed = run_units(claim, ctx, specs, cache=cache, backend=backend,
                                      on_result=step)
        counts["computed"] += computed
        counts["cached"] += len(specs) - computed
        return [_values(results, g, metric, claim.id)
                for g, metric in zip(rmap.effect, rmap.metrics())]

    def summarise(vals: Sequence[Mapping[int, float]]) -> dict:
        a, b = vals
        seeds = sorted(set(a) & set(b))
        diffs = [rmap.scale_by * (a[s] - b[s]) for s in seeds]
        return {"seeds": seeds, "a": [rmap.scale_by * a[s] for s in seeds],
                "b": [rmap.scale_by * b[s] for s in seeds], "diff": diffs,
                "stats": cell_stats(diffs, rmap.level)}

    first = tuning_seeds(rmap.seeds)
    cells, raw = [], []
    for labels, over in points:
        vals = measure(over, first, labels)
        raw.append(vals)
        cells.append({"labels": labels, "overrides": over, **summarise(vals)})
    if rmap.refine and rmap.refine_seeds:
        # successive halving: the cells that look best (highest mean) get more seeds
        order = sorted((i for i in range(len(cells)) if b_learns(cells[i], rmap.b_floor)),
                       key=lambda i: -_mean_of(cells[i]))[:rmap.refine]
        more = tuning_seeds(rmap.seeds + rmap.refine_seeds)[rmap.seeds:]
        for i in order:
            vals = measure(cells[i]["overrides"], more, cells[i]["labels"])
            merged = [{**old, **new} for old, new in zip(raw[i], vals)]
            cells[i] = {**cells[i], **summarise(merged), "refined": True}
    chosen = choose(cells, rmap.b_floor)
    env = environment(device)
    choice = CHOICE_RUNG if rmap.refine and rmap.refine_seeds else CHOICE_ONE_RUNG
    rule = RULE.format(choice=choice, level=rmap.level, a=_name(rmap, 0), b=_name(rmap, 1),
                       metric=" and ".join(dict.fromkeys(rmap.metrics())))
    if rmap.b_floor is not None:
        rule += FLOOR_RULE.format(b=_name(rmap, 1), floor=rmap.b_floor,
                                  unit=f" {rmap.unit}" if rmap.unit else "")
    return {"declared": rmap.to_dict(), "cells": cells, "chosen": chosen, "rule": rule,
            "spent": {"wall_s": round(time.perf_counter() - t0, 1), **counts},
            "environment": {k: env.get(k) for k in ("commit", "torch", "device", "date",
                                                    "code_version")}}


def _name(rmap: RegimeMap, i: int) -> str:
    """Group i of the effect, with its metric when the two groups are told apart by it."""
    g = rmap.effect[i]
    return g if rmap.effect[0] != rmap.effect[1] else f"{g} {rmap.metrics()[i]}"


def _mean_of(cell: Mapping) -> float:
    mean = cell["stats"]["mean"]
    return mean if math.isfinite(mean) else -math.inf


# ---------------------------------------------------------------------- the file
def write(out_dir: Path, claim_id: str, maps: Sequence[Mapping]) -> Path:
    """``OUT/<id>/regime.json`` (and ``regime.png``), replaced atomically."""
    out_dir = Path(out_dir)
    cid = safeio.check_name(claim_id, "id", "regime map")
    folder = safeio.make_dir(out_dir, out_dir / cid)
    doc = {"schema": SCHEMA, "id": cid, "maps": list(maps)}
    text = json.dumps(safeio.strict_json(doc), indent=2, allow_nan=False) + "\n"
    png = figure(doc)
    path = safeio.inside(out_dir, folder / FILE)
    if png is not None:
        safeio.atomic_write(safeio.inside(out_dir, folder / FIGURE), png)
    safeio.atomic_write(path, text)
    return path


def read(out_dir: Path, claim_id: str) -> list[dict] | None:
    """The maps stored for ``claim_id`` in ``out_dir`` (None when there is no file); a file
    that is not a map of that claim is one AuditError naming it."""
    path = Path(out_dir) / claim_id / FILE
    if not path.exists():
        return None
    doc = safeio.read_json(path, "regime map")
    problem = shape_problem(doc, claim_id)
    if problem:
        raise AuditError(f"regime map {path}: {problem}")
    return doc["maps"]


def _num(x: Any) -> bool:
    """None, or a number a float holds (an int of 10**400 is refused: it overflows the
    report's formatting)."""
    if x is None:
        return True
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        float(x)
    except OverflowError:
        return False
    return True


def _real(x: Any) -> bool:
    """A finite number (what a declaration's sizes and levels must be)."""
    return _num(x) and x is not None and math.isfinite(float(x))


def shape_problem(doc: Any, claim_id: str) -> str | None:
    """Why ``doc`` is not a regime-map file of ``claim_id`` (None when it is one)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return f"not a regime-map file (schema {SCHEMA})"
    if doc.get("id") != claim_id:
        return f"it is for {doc.get('id')!r}, not {claim_id!r}"
    maps = doc.get("maps")
    if not isinstance(maps, list) or not maps:
        return "no maps"
    for m in maps:
        if not isinstance(m, dict) or not isinstance(m.get("declared"), dict):
            return "a map without its declaration"
        d = m["declared"]
        if not isinstance(d.get("axes"), dict) or not d["axes"] or \
                not all(isinstance(v, list) for v in d["axes"].values()) or \
                not isinstance(d.get("effect"), list) or len(d["effect"]) != 2 or \
                not all(isinstance(g, str) for g in d["effect"]):
            return "a declaration without axes (lists of values) or an effect (two names)"
        if not all(_num(d.get(k)) for k in ("seeds", "refine", "refine_seeds", "budget_s",
                                            "budget_units", "level", "b_floor")) or \
                not all(_real(d.get(k)) for k in ("seeds", "level")) or \
                not isinstance(d.get("fixed", {}), dict):
            return "a declaration whose sizes are not numbers"
        if not all(isinstance(m.get(k, {}), dict) for k in ("spent", "environment")):
            return "a map whose spending or environment is not an object"
        if not all(_num(v) for v in m.get("spent", {}).values()
                   if isinstance(v, (int, float))):
            return "a map whose spending holds a number too large to read"
        cells = m.get("cells")
        if not isinstance(cells, list) or not cells:
            return "a map without cells"
        for c in cells:
            st = c.get("stats") if isinstance(c, dict) else None
            if not isinstance(st, dict) or st.get("status") not in STATUSES or \
                    not all(_num(st.get(k)) for k in ("mean", "sd", "n", "low", "high")) \
                    or not isinstance(c.get("labels"), dict):
                return "a cell without labels, statistics or a known status"
            if not all(isinstance(c.get(k, []), list) and all(_num(x) for x in c.get(k, []))
                       for k in ("a", "b", "diff", "seeds")):
                return "a cell whose per-seed values are not lists of numbers"
        keys = list(d["axes"])
        placed = [tuple(str(c["labels"].get(k)) for k in keys) for c in cells]
        if len(set(placed)) != len(placed):
            return "two cells with the same labels (one would hide the other in the figure)"
        ch = m.get("chosen")
        if ch is not None and (not isinstance(ch, int) or isinstance(ch, bool)
                               or not 0 <= ch < len(cells)):
            return "a chosen cell that is not one of its cells"
    return None


# ---------------------------------------------------------------------- presentation
def _f(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:+.{digits}g}" if isinstance(x, float) else str(x)


def markdown(maps: Sequence[Mapping], figure_link: str | None = None) -> list[str]:
    """The report's section on the maps (every string made inert by the caller)."""
    lines = ["## Where the paper's own effect appears (regime map)", ""]
    for m in maps:
        d = m["declared"]
        a, b = d["effect"]
        if a == b:  # B measured inside A's own units: tell them apart by metric
            a, b = d.get("metric"), d.get("metric_b")
        cells = m["cells"]
        spent = m.get("spent", {})
        env = m.get("environment", {})
        shows = sum(c["stats"]["status"] == "shows" for c in cells)
        axes = ", ".join(f"`{k}` ({len(v)})" for k, v in d["axes"].items())
        lines += [f"**{d.get('effect_text', '')}** Scale `{d.get('scale')}`; axes {axes}: "
                  f"{len(cells)} cells x {d.get('seeds')} tuning seeds"
                  + (f", the best {d.get('refine')} cells then {d.get('refine_seeds')} more "
                     f"seeds" if d.get("refine") else "")
                  + f"; held fixed: `{json.dumps(d.get('fixed', {}), sort_keys=True)}`. "
                  f"Budget stated before it ran: {d.get('budget_units')} runs, about "
                  f"{_secs(d.get('budget_s'))} of one core; it took {spent.get('computed', '?')}"
                  f" runs computed ({spent.get('cached', 0)} from cache) in "
                  f"{_secs(spent.get('wall_s'))} (commit `{env.get('commit')}`).", ""]
        if d.get("why"):
            lines += [f"Why these knobs: {d['why']}", ""]
        lines += [f"Rule: {m.get('rule', '')}", ""]
        keys = list(d["axes"])
        unit = f" ({d['unit']})" if d.get("unit") else ""
        lines += ["| " + " | ".join(keys + [f"{a}{unit}", f"{b}{unit}", f"{a} - {b}",
                                            f"{d.get('level', 0.9):.0%} CI", "seeds",
                                            "effect"]) + " |",
                  "|" + "---|" * (len(keys) + 6)]
        for i, c in enumerate(cells):
            st = c["stats"]
            mark = " **(the map's pick)**" if m.get("chosen") == i else ""
            if not b_learns(c, d.get("b_floor")):
                mark += f" ({b} below the floor {d['b_floor']:g})"
            lines += ["| " + " | ".join(
                [str(c["labels"].get(k)) for k in keys]
                + [_f(_mean(c.get("a"))).lstrip("+"), _f(_mean(c.get("b"))).lstrip("+"),
                   _f(st["mean"]), f"[{_f(st['low'])}, {_f(st['high'])}]", str(st["n"]),
                   st["status"] + mark]) + " |"]
        lines += [""]
        if m.get("chosen") is None:
            why = (f"{shows} of {len(cells)} cells show{'s' if shows == 1 else ''} it, but "
                   f"none the rule may choose: a cell of the second rung"
                   + (" whose baseline reaches the floor" if d.get("b_floor") is not None
                      else "") if shows else f"0 of {len(cells)} cells within this budget")
            lines += [f"**No cell shows the paper's effect** where the rule can choose it "
                      f"({why}): no setting is chosen by this map, the scale keeps its "
                      f"stated one, and the questions the premise gates stay INCONCLUSIVE "
                      f"for want of the effect they would explain."]
        else:
            c = cells[m["chosen"]]
            lines += [f"{shows} of {len(cells)} cells show the effect; the map's pick is "
                      + ", ".join(f"`{k}` = {c['labels'].get(k)}" for k in keys)
                      + f" ({_f(c['stats']['mean'])}, interval [{_f(c['stats']['low'])}, "
                      f"{_f(c['stats']['high'])}] on {c['stats']['n']} tuning seeds)."]
        lines += ["What the verdict at this scale uses, and why, is under \"How the "
                  "settings were chosen\" above."]
        lines += [""]
    if figure_link:
        lines += [f"![regime map]({figure_link})", ""]
    return lines


def _mean(xs: Any) -> float | None:
    if not isinstance(xs, list) or not xs or not all(_num(x) and x is not None for x in xs):
        return None
    return float(np.mean(xs))


def _secs(s: Any) -> str:
    if not _num(s) or s is None:
        return "?"
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.0f} s"


def figure(doc: Mapping) -> bytes | None:
    """One heatmap panel a map: rows are the combinations of every axis but the last,
    columns the last axis; colour is the mean A - B, the text its status."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    maps = doc["maps"]
    rows = sum(1.4 + 0.45 * len(_rows(m)) for m in maps)
    fig, axes = plt.subplots(len(maps), 1, figsize=(7.5, max(2.5, rows)), squeeze=False)
    try:
        for ax, m in zip(axes[:, 0], maps):
            rows, cols, grid, marks = _rows(m), _cols(m), *_grid(m)
            lim = np.nanmax(np.abs(grid)) if np.isfinite(grid).any() else 1.0
            im = ax.imshow(grid, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
            ax.set_xticks(range(len(cols)), cols, fontsize=8)
            ax.set_yticks(range(len(rows)), rows, fontsize=8)
            keys = list(m["declared"]["axes"])
            ax.set_xlabel(keys[-1])
            if len(keys) > 1:
                ax.set_ylabel(", ".join(keys[:-1]))
            for (r, c), text in marks.items():
                dark = np.isfinite(grid[r, c]) and abs(grid[r, c]) > 0.6 * lim
                ax.text(c, r, text, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")  # legible on the dark ends
            a, b = m["declared"]["effect"]
            if a == b:
                a, b = m["declared"].get("metric"), m["declared"].get("metric_b")
            ax.set_title(f"{a} - {b} (validation, tuning seeds): "
                         f"+ shows, - reverses, ? unclear, * chosen", fontsize=8)
            fig.colorbar(im, ax=ax, shrink=0.8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
        return buf.getvalue()
    finally:
        plt.close(fig)


def _row_key(m: Mapping, c: Mapping) -> tuple:
    """A cell's row: its labels on every axis but the last, as a tuple (joined text would
    put "a, b" / "c" and "a" / "b, c" in one row)."""
    return tuple(str(c["labels"].get(k)) for k in list(m["declared"]["axes"])[:-1])


def _rows(m: Mapping) -> list[str]:
    seen = []
    for c in m["cells"]:
        r = _row_key(m, c)
        if r not in seen:
            seen.append(r)
    return [", ".join(r) or "-" for r in seen]


def _cols(m: Mapping) -> list[str]:
    last = list(m["declared"]["axes"])[-1]
    seen = []
    for c in m["cells"]:
        v = str(c["labels"].get(last))
        if v not in seen:
            seen.append(v)
    return seen


def _grid(m: Mapping):
    rows, cols = _rows(m), _cols(m)
    keys = list(m["declared"]["axes"])
    grid = np.full((len(rows), len(cols)), np.nan)
    marks = {}
    sym = {"shows": "+", "reverses": "-", "unclear": "?"}
    row_keys = list(dict.fromkeys(_row_key(m, c) for c in m["cells"]))
    for i, c in enumerate(m["cells"]):
        r = row_keys.index(_row_key(m, c))
        k = cols.index(str(c["labels"].get(keys[-1])))
        mean = c["stats"]["mean"]
        grid[r, k] = mean if _num(mean) and mean is not None else np.nan
        star = "*" if m.get("chosen") == i else ""
        marks[(r, k)] = f"{_f(mean)}\n{sym[c['stats']['status']]}{star}"
    return grid, marks
