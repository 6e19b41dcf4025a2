"""Regime maps: a declared search on tuning seeds for where the paper's own effect
appears, written beside the report and printed in it; read back as hostile input."""
import dataclasses
import json

import pytest

from audit import regime, report
from audit.claims import AuditError
from audit.runner import Cache, LocalBackend, execute, make_context
from audit.tuning import RegimeMap, Setting


def _map(**kw):
    base = dict(scale="smoke", axes={"effect": (0.0, 1.0)}, effect=("better", "base"),
                metric="score", effect_text="better beats base (toy).", seeds=3,
                budget_s=1.0)
    base.update(kw)
    return RegimeMap(**base)


def _claim(toy, **kw):
    return dataclasses.replace(toy.CLAIM, validation_metrics=("score",), **kw)


def test_cells_show_reverse_or_stay_unclear_and_the_best_is_chosen(toy, tmp_path):
    claim = _claim(toy)
    m = regime.run(claim, _map(), cache=Cache(tmp_path / "c"), backend=LocalBackend())
    status = [c["stats"]["status"] for c in m["cells"]]
    assert status == ["unclear", "shows"] and m["chosen"] == 1
    assert all(s >= 1000 for c in m["cells"] for s in c["seeds"])  # tuning seeds only
    assert m["spent"]["computed"] == m["declared"]["budget_units"] == 12
    again = regime.run(claim, _map(), cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert again["spent"] == {**again["spent"], "computed": 0, "cached": 12}
    flipped = regime.run(claim, _map(effect=("base", "better")), cache=Cache(tmp_path / "c"),
                         backend=LocalBackend())
    assert [c["stats"]["status"] for c in flipped["cells"]] == ["unclear", "reverses"]
    assert flipped["chosen"] is None
    assert [c["diff"] for c in again["cells"]] == [c["diff"] for c in m["cells"]]


def test_no_showing_cell_chooses_nothing_and_says_so(toy, tmp_path):
    m = regime.run(_claim(toy), _map(axes={"effect": (0.0,)}),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert m["chosen"] is None
    text = "\n".join(regime.markdown([m]))
    assert "No cell shows the paper's effect" in text and "stays INCONCLUSIVE" not in text


def test_refinement_adds_seeds_to_the_best_cells_only(toy, tmp_path):
    m = regime.run(_claim(toy), _map(refine=1, refine_seeds=2),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert [c["stats"]["n"] for c in m["cells"]] == [3, 5]
    assert m["cells"][1]["seeds"] == [1000, 1001, 1002, 1003, 1004]


def test_settings_set_several_keys_and_are_labelled(toy, tmp_path):
    both = Setting("strong, quiet", {"effect": 2.0, "noise": 0.01})
    m = regime.run(_claim(toy), _map(axes={"effect": (both, 0.0)}),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert m["cells"][0]["labels"] == {"effect": "strong, quiet"}
    assert m["cells"][0]["overrides"] == {"effect": 2.0, "noise": 0.01}


def test_a_map_never_reads_a_test_metric_nor_an_unknown_key(toy, tmp_path):
    with pytest.raises(AuditError, match="not a validation metric"):
        regime.run(_claim(toy), _map(metric="curve"), cache=Cache(tmp_path / "c"),
                   backend=LocalBackend())
    with pytest.raises(AuditError, match="reads the test set"):
        regime.run(toy.CLAIM, _map(metric="test_acc"), cache=Cache(tmp_path / "c"),
                   backend=LocalBackend())
    with pytest.raises(AuditError, match="no config key"):
        regime.run(_claim(toy), _map(axes={"nope": (1, 2)}), cache=Cache(tmp_path / "c"),
                   backend=LocalBackend())
    with pytest.raises(AuditError, match="effect must be two groups"):
        _map(effect=("better",))
    with pytest.raises(AuditError, match="at least 2 more seeds"):
        _map(refine=1, refine_seeds=1)


def test_the_map_is_written_beside_the_report_and_printed_in_it(toy, tmp_path):
    claim = _claim(toy)
    out = tmp_path / "out"
    res = execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    report.write(res, out)
    m = regime.run(claim, _map(), cache=Cache(tmp_path / "c"), backend=LocalBackend())
    regime.write(out, claim.id, [m])
    assert (out / claim.id / "regime.png").stat().st_size > 1000
    data = report.load(out, claim.id)
    report.write_data(data, out)
    md = (out / f"{claim.id}.md").read_text()
    assert "## Where the paper's own effect appears (regime map)" in md
    assert "**(the map's pick)**" in md and "regime.png" in md
    stored = json.loads((out / f"{claim.id}.json").read_text())
    assert stored["regime_maps"][0]["chosen"] == 1
    # a map of another scale in the folder is not printed in this scale's report
    other = {**m, "declared": {**m["declared"], "scale": "full"}}
    regime.write(out, claim.id, [other])
    report.write_data({k: v for k, v in data.items() if k != "regime_maps"}, out)
    assert "regime map" not in (out / f"{claim.id}.md").read_text()


def test_a_map_file_of_odd_types_is_refused_before_it_is_rendered(toy, tmp_path):
    """Every type the renderer reads is checked: a hostile file is one clear error, never
    a crash midway through writing a report."""
    m = regime.run(_claim(toy), _map(), cache=Cache(tmp_path / "c"), backend=LocalBackend())
    regime.write(tmp_path, "toy-claim", [m])
    good = json.loads((tmp_path / "toy-claim" / "regime.json").read_text())
    assert regime.shape_problem(good, "toy-claim") is None
    for path, value in ((("declared", "axes"), {"effect": 5}),
                        (("declared", "effect"), ["a", 3]),
                        (("declared", "seeds"), "3"), (("spent",), []),
                        (("cells", 0, "a"), ["x"]), (("cells", 0, "seeds"), 7),
                        # a null level, and ints too large for a float, crashed the report
                        (("declared", "level"), None), (("declared", "budget_s"), 10**400),
                        (("spent", "wall_s"), 10**400), (("cells", 0, "stats", "mean"),
                                                        10**400),
                        # two cells printed alike: one hid the other in the figure
                        (("cells", 1, "labels"), {"effect": 0.0})):
        doc = json.loads(json.dumps(good))
        node = doc["maps"][0]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert regime.shape_problem(doc, "toy-claim"), path


@pytest.mark.parametrize("bad", [
    [], {"schema": "x"}, {"schema": regime.SCHEMA, "id": "other", "maps": []},
    {"schema": regime.SCHEMA, "id": "toy-claim", "maps": [{"declared": {}}]},
    {"schema": regime.SCHEMA, "id": "toy-claim", "maps": [
        {"declared": {"axes": {}, "effect": ["a", "b"]}, "cells": [
            {"labels": {}, "stats": {"status": "__import__('os')", "mean": 0, "sd": 0,
                                     "n": 1, "low": 0, "high": 0}}]}]},
    {"schema": regime.SCHEMA, "id": "toy-claim", "maps": [
        {"declared": {"axes": {}, "effect": ["a", "b"]}, "chosen": 5, "cells": [
            {"labels": {}, "stats": {"status": "shows", "mean": 0, "sd": 0, "n": 1,
                                     "low": 0, "high": 0}}]}]},
])
def test_a_foreign_or_corrupt_map_file_is_one_clear_error(tmp_path, bad):
    (tmp_path / "toy-claim").mkdir()
    (tmp_path / "toy-claim" / "regime.json").write_text(json.dumps(bad))
    with pytest.raises(AuditError, match="regime map"):
        regime.read(tmp_path, "toy-claim")


def test_only_a_cell_of_the_second_rung_is_chosen():
    shows = {"status": "shows", "low": 2.0}
    cells = [{"stats": shows}, {"stats": {"status": "shows", "low": 1.0}, "refined": True},
             {"stats": {"status": "unclear", "low": -1.0}, "refined": True}]
    assert regime.choose(cells) == 1  # cell 0 shows it on the first rung only
    assert regime.choose(cells[:1]) == 0  # no second rung: every cell may be chosen
    assert regime.choose([cells[0], cells[2]]) is None


def test_cell_statistics():
    st = regime.cell_stats([1.0, 1.2, 0.8], 0.9)
    assert st["status"] == "shows" and st["low"] > 0
    assert regime.cell_stats([0.5, 0.5, 0.5], 0.9)["status"] == "shows"  # no spread
    assert regime.cell_stats([-1, 1, 0.1], 0.9)["status"] == "unclear"
    assert regime.choose([{"stats": {"status": "unclear", "low": 5}}]) is None


def test_a_baseline_measured_inside_the_same_units(toy, tmp_path):
    """B may be another key of A's own units (GENE-FL's no-gene accuracy): one group runs,
    and both keys must be validation metrics."""
    claim = dataclasses.replace(toy.CLAIM, validation_metrics=("score",))
    m = regime.run(claim, _map(effect=("better", "better"), metric_b="score"),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert m["declared"]["budget_units"] == 6 and m["spent"]["computed"] == 6
    assert all(c["stats"]["mean"] == 0 for c in m["cells"])
    with pytest.raises(AuditError, match="not a validation metric"):
        regime.run(claim, _map(effect=("better", "better"), metric_b="curve"),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())


def test_the_generic_check_flags_a_map_that_could_not_run(toy):
    from audit.checks import check_regime_maps

    good = _claim(toy, regime_maps=(_map(),))
    assert check_regime_maps(good) == []
    bad = _claim(toy, regime_maps=(_map(metric="test_acc"), _map(axes={"effect": (0.0, -2.0)}),
                                   _map(effect=("better", "nope")), _map(scale="paper")))
    found = " | ".join(check_regime_maps(bad))
    assert "not a validation metric" in found and "must not be negative" in found
    assert "'nope' is not an arm" in found and "unknown scale 'paper'" in found


def test_a_cell_whose_baseline_does_not_learn_is_neither_refined_nor_chosen():
    def cell(b, low, refined=None):
        return {"b": b, "refined": refined, "stats": {"status": "shows", "low": low}}

    cells = [cell([5.0, 7.0], 40.0), cell([30.0, 34.0], 10.0), cell([25.0], 20.0)]
    assert regime.choose(cells) == 0  # no floor: the widest gain
    assert regime.choose(cells, 20.0) == 2  # B at 6 (below 20) cannot be chosen
    assert regime.choose(cells, 28.0) == 1
    assert regime.choose(cells, 50.0) is None
    assert not regime.b_learns({"b": []}, 0.0) and regime.b_learns({"b": []}, None)


def test_the_floor_is_declared_checked_and_printed(toy, tmp_path):
    with pytest.raises(AuditError, match="b_floor must be a finite number"):
        _map(b_floor=float("nan"))
    with pytest.raises(AuditError, match="b_floor must be a finite number"):
        _map(b_floor=True)
    claim = _claim(toy)
    free = regime.run(claim, _map(refine=1, refine_seeds=2), cache=Cache(tmp_path / "c"),
                      backend=LocalBackend())
    assert free["chosen"] == 1 and free["declared"]["b_floor"] is None
    high = max(x for c in free["cells"] for x in c["b"]) + 1.0  # above every B: none learns
    m = regime.run(claim, _map(refine=1, refine_seeds=2, b_floor=high),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert m["chosen"] is None and m["declared"]["b_floor"] == high
    assert [c["stats"]["n"] for c in m["cells"]] == [3, 3]  # no second rung spent on them
    assert "gets no more seeds and is not chosen" in m["rule"]
    text = "\n".join(regime.markdown([m]))
    assert text.count(f"(base below the floor {high:g})") == 2
    assert regime.shape_problem({"schema": regime.SCHEMA, "id": "x", "maps": [
        {**m, "declared": {**m["declared"], "b_floor": "20"}}]}, "x") is not None


def test_a_map_refuses_repeated_labels_and_a_mistyped_group(toy, tmp_path):
    """A repeated axis value drew two cells in one square (the chosen star was lost);
    a mistyped arm/setting group mapped no units and read as "no cell shows it"."""
    with pytest.raises(AuditError, match="repeats a value or label"):
        _map(axes={"effect": (1.0, 0.0, 1.0)})
    with pytest.raises(AuditError, match="repeats a value or label"):
        _map(axes={"s": (Setting("s", {"effect": 0.0}), Setting("s", {"effect": 1.0}))})
    with pytest.raises(AuditError, match="no units of the regime map's group 'better/typo'"):
        regime.run(_claim(toy), _map(effect=("better/typo", "base")),
                   cache=Cache(tmp_path / "c"), backend=LocalBackend())


def test_rows_are_label_tuples_and_a_one_rung_rule_says_so(toy, tmp_path):
    """Labels holding ", " put two rows in one; a map without a second rung printed the
    two-rung rule."""
    m = {"declared": {"axes": {"x": [], "y": []}}, "cells": [
        {"labels": {"x": "a, b", "y": "c"}, "stats": {"mean": 1.0, "status": "shows"}},
        {"labels": {"x": "a", "y": "b, c"}, "stats": {"mean": 2.0, "status": "unclear"}}]}
    grid, marks = regime._grid(m)
    assert grid.shape == (2, 2) and len(marks) == 2
    one = regime.run(_claim(toy), _map(), cache=Cache(tmp_path / "c"), backend=LocalBackend())
    assert "There is no second rung" in one["rule"]
    two = regime.run(_claim(toy), _map(refine=1, refine_seeds=2), cache=Cache(tmp_path / "c"),
                     backend=LocalBackend())
    assert "the second rung" in two["rule"] and "no second rung" not in two["rule"]


def test_audit_regime_reads_the_old_map_before_it_runs(toy, tmp_path, capsys, monkeypatch):
    """A corrupt regime.json in --out was found only after every cell had run."""
    from audit import claims as claims_mod
    from audit.cli import main

    claim = _claim(toy, regime_maps=(_map(),))
    monkeypatch.setattr(claims_mod, "get", lambda cid: claim)
    out = tmp_path / "M"
    (out / "toy-claim").mkdir(parents=True)
    (out / "toy-claim" / "regime.json").write_text('{"schema": "x"}')
    from audit import safeio

    (out / safeio.OUTPUT_MARKER).write_text("audit output\n")  # an audit output folder
    toy.CALLS.clear()
    assert main(["regime", "toy-claim", "--out", str(out), "--cache-dir",
                 str(tmp_path / "c"), "--backend", "local"]) == 2
    err = capsys.readouterr().err
    assert "not a regime-map file" in err and not toy.CALLS, err
