"""A fourth hostile round (a CLI probe and a statistics probe by helpers): `audit diff`
never hides a difference behind a repeated name or fails on deep nesting, and the
statistics refuse what float64 cannot carry instead of deciding on it."""
from __future__ import annotations

import copy
import json

import pytest

from audit import report
from audit.cli import main
from audit.runner import Cache, execute, make_context


@pytest.fixture
def data(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    return report.to_json(res)


@pytest.mark.parametrize("key, named", [("parts", "id"), ("estimates", "name")])
def test_a_repeated_part_or_estimate_is_a_malformed_report(data, tmp_path, capsys, key,
                                                           named):
    # two parts of one id, the second flipped between the files, and a third named as the
    # diff's own disambiguation ("id#2"): the diff said "no difference in what decides"
    first, second = copy.deepcopy(data), copy.deepcopy(data)
    for d, word in ((first, "CONFIRMED"), (second, "REFUTED")):
        item = copy.deepcopy(d[key][0])
        if key == "parts":
            item["verdict"] = word
        else:
            item["value"] = 1.0 if word == "CONFIRMED" else 999.0
        decoy = dict(copy.deepcopy(d[key][0]), **{named: f"{d[key][0][named]}#2"})
        d[key] += [item, decoy]
    paths = []
    for name, d in (("a", first), ("b", second)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(d))
    assert main(["diff", *map(str, paths)]) == 2
    err = capsys.readouterr().err
    assert "must appear once" in err and "Traceback" not in err


def test_the_diff_names_a_repeat_without_overwriting_an_item_of_that_name():
    items = [{"id": "a", "v": 1}, {"id": "a", "v": 2}, {"id": "a#2", "v": 3}]
    keyed = report._keyed(items, "id")
    assert len(keyed) == 3 and keyed["a#2"]["v"] == 3 and keyed["a#3"]["v"] == 2


def test_the_diff_of_deeply_nested_reports_is_lines_not_a_recursion_error(data):
    def nest(depth, leaf):
        x = leaf
        for _ in range(depth):
            x = [x]
        return x

    first, second = copy.deepcopy(data), copy.deepcopy(data)
    first["config"], second["config"] = {"deep": nest(5000, 1)}, {"deep": nest(5000, 2)}
    found, _ = report.compare(first, second)
    assert len(found) == 1 and found[0].startswith("config.deep[0][0]")
    # the order of the lines is the document's, as with the recursive walk
    a, b = {"x": 1, "y": [1, 2], "z": 3}, {"x": 2, "y": [1], "z": 4}
    out: list[str] = []
    report._walk(a, b, "c", (1e-9, 0.0), out, 10)
    assert [line.split(":")[0] for line in out] == ["c.x", "c.y", "c.z"]


def test_a_data_set_missing_under_data_dir_is_refused_before_out_exists(tmp_path, capsys,
                                                                        monkeypatch):
    # an existing --data-dir without the data set: the run created --out (empty) and
    # computed a unit before the loader said so
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    (data / "cifar-10-batches-py").mkdir()  # half a layout: the batches are missing
    argv = ["run", "flayer-eq4-unbounded", "--scale", "paper", "--data-dir", str(data),
            "--out", str(out), "--quiet", "--no-eta"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cifar10: missing" in err[0] and "data_batch_1" in err[0]
    assert not out.exists() and not (tmp_path / "cache").exists()


def _flayer_record(record_id: str | None, arxiv: str = "2412.07062") -> dict:
    """A record of FLAYER's paper in the reviews' shape, with our own invented text."""
    rec = {"arxiv_id": arxiv,
           "skeptic_critique": {"concrete_test": "x", "load_bearing_attack": "x"},
           "falsifier": "x",
           "referee_report": {"major_comments": [{"comment": "x"}] * 4,
                              "minor_comments": [{"comment": "x"}] * 4}}
    if record_id is not None:
        rec["id"] = record_id
    return rec


def test_review_covers_only_the_record_the_claims_answer(tmp_path):
    # another review of the same paper: the questions name items by position, so its
    # "major_comments[0]" is another point; it was listed as covered, under our
    # paraphrase of the original item
    from audit import claims as claims_mod
    from audit import coverage

    reg = claims_mod.registry()
    known = claims_mod.RECORD_IDS["2412.07062"]
    other = coverage.cover_record(_flayer_record("another-review"), "r.json", reg, tmp_path)
    assert other.problems and "not the review these claims answer" in other.problems[0]
    assert not any(r.covered for r in other.rows)
    assert all(r.reason == coverage.OTHER_RECORD for r in other.rows)
    for rec in (_flayer_record(known), _flayer_record(None),
                _flayer_record(known, arxiv="2412.07062v3")):  # the versioned id is the paper
        cov = coverage.cover_record(rec, "r.json", reg, tmp_path)
        assert not cov.problems and any(r.covered for r in cov.rows)


@pytest.mark.parametrize("dz, alpha, want", [
    # statsmodels' solver returned NaN (no answer) or a NaN-polluted root here: 3 at
    # dz 4.21 and alpha 0.01, where 3 pairs have power 0.42 (a simulation gives 0.417)
    (8.0, 0.05, 3), (10.0, 0.05, 3), (15.0, 0.05, 2), (4.2095, 0.01, 4),
    # and where it answers, the same numbers as before
    (0.5, 0.05, 34), (1.0, 0.05, 10), (0.3, 0.05, 90)])
def test_seeds_needed_answers_for_large_effects(dz, alpha, want):
    from audit import stats

    assert stats.seeds_needed(dz, 1.0, alpha=alpha) == want
    assert stats._paired_t_power(want, dz, alpha) >= 0.8
    assert want == 2 or stats._paired_t_power(want - 1, dz, alpha) < 0.8
    with pytest.raises(ValueError, match="more than"):
        stats.seeds_needed(1e-9, 1.0)


def test_an_alpha_share_that_is_no_share_does_not_count_and_derivations_always_do():
    from audit import questions
    from audit.verdict import Outcome, Part, all_of

    def part(pid, word, share=None, kind="experiment"):
        return Part(pid, Outcome(word), "r", "why", alpha_share=share, kind=kind)

    rest = [part("b", "INCONCLUSIVE"), part("c", "INCONCLUSIVE")]
    for bad in (float("nan"), 0.0, -1.0, "x", "0.1", b"0.1", True):
        assert all_of(["a", "b", "c"])([part("a", "REFUTED", bad)] + rest) == \
            Outcome.INCONCLUSIVE
    assert all_of(["a", "b", "c"])([part("a", "REFUTED", 1 / 3)] + rest) == Outcome.REFUTED
    # a derivation's word is a computation: it counts on both paths
    parts = [part("a", "REFUTED", kind="derivation")] + rest
    q = questions.Question("q", "?", ("falsifier",), ("a", "b", "c"))
    assert all_of(["a", "b", "c"])(parts) == Outcome.REFUTED
    assert questions.answer(q, {p.id: p for p in parts})["verdict"] == "REFUTED"
