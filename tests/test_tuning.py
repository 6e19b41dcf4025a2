"""Tuning seeds are reserved, searches are recorded, and the report says which setting
and which scale a verdict speaks for."""
import copy

import pytest

from audit import claims, report, tuning
from audit.claims import AuditError
from audit.estimate import eta_line
from audit.runner import Cache, execute, make_context, resolve_seeds


@pytest.fixture
def data(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    return report.to_json(res)


def test_tuning_and_verdict_seeds_never_mix(toy):
    assert tuning.tuning_seeds(3) == (1000, 1001, 1002)
    assert resolve_seeds(toy.CLAIM, [1000, 1001]) == (1000, 1001)
    assert resolve_seeds(toy.CLAIM, [0, 1]) == (0, 1)
    with pytest.raises(AuditError, match="mix verdict seeds"):
        resolve_seeds(toy.CLAIM, [0, 1000])


def test_a_tuning_run_is_labelled_and_never_locked(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke", seeds=[1000, 1001, 1002]),
                  cache=Cache(tmp_path / "c"), progress=False)
    data = report.to_json(res)
    assert data["tuning_run"] is True
    assert "**Tuning run**" in report.render_markdown(data)
    with pytest.raises(AuditError, match="no lock from a tuning run"):
        claims.write_lock(toy.CLAIM.id, "smoke", res.verdict.verdict, res.verdict.parts,
                          seeds=res.ctx.seeds)


def test_a_search_on_verdict_seeds_must_say_so():
    with pytest.raises(AuditError, match="not tuning seeds"):
        tuning.Search("full", "rounds", (0, 1), ("10 rounds: x",), "10", "because")
    s = tuning.Search("smoke", "rounds", (0, 1, 2), ("10 rounds: x",), "10", "because",
                      verdict_seeds_used=True)
    assert "Chosen on verdict seeds" in s.markdown()
    ok = tuning.Search("full", "rounds", tuning.tuning_seeds(2), ("10: a", "20: b"), "20",
                       "premise reproduced")
    assert "seeds 1000, 1001" in ok.markdown() and "chosen: 20" in ok.markdown()


def test_searches_of_the_scale_are_printed(toy, tmp_path, monkeypatch):
    search = tuning.Search("smoke", "how many rounds", (1000, 1001), ("2 rounds: gap 0.1",),
                           "2 rounds", "smallest with a gap")
    other = tuning.Search("full", "width", (1000, 1001), ("w1",), "w1", "only one")
    monkeypatch.setattr(toy, "CLAIM", toy.CLAIM.__class__(
        **{**toy.CLAIM.__dict__, "searches": (search, other)}))
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    data = report.to_json(res)
    assert [s["question"] for s in data["searches"]] == ["how many rounds"]
    md = report.render_markdown(data)
    assert "## How the settings were chosen" in md and "how many rounds" in md
    assert "width" not in md.split("## How the settings were chosen")[1].split("##")[0]


def test_disagreeing_settings_reach_the_headline_and_the_index(data, tmp_path, toy):
    assert report.settings_line([]) is None
    agree = [{"setting": "base", "verdict": "CONFIRMED", "base": True},
             {"setting": "cnn2", "verdict": "CONFIRMED"}]
    assert report.settings_line(agree) is None
    split = copy.deepcopy(data)
    split["settings"] = [{"setting": "base", "verdict": "REFUTED", "base": True},
                         {"setting": "cnn2", "verdict": "CONFIRMED", "closest_to_paper": True,
                          "why": "the deeper model"}]
    md = report.render_markdown(split)
    assert ("**Settings disagree**: base: REFUTED (base); cnn2: CONFIRMED (closest to the "
            "paper). Closest to the paper's setting: **cnn2**: the deeper model.") in md
    same = copy.deepcopy(split)
    same["settings"][0].update(closest_to_paper=True, why="the deepest")
    same["settings"][1].update(closest_to_paper=False)
    assert "decided on the base setting, which is also the one closest to the paper's: " \
        "the deepest." in report.render_markdown(same)
    report.write_data(split, tmp_path)
    text = report.write_index(tmp_path, claims.registry()).read_text()
    assert "(settings split)" in text


def test_an_undecided_setting_is_listed_but_splits_nothing(data, tmp_path, toy):
    """Rows REFUTED and INCONCLUSIVE read "Settings disagree" in the headline and "settings
    split" in the index (GENE-FL's gamma sweep), where no two rows decide opposite ways."""
    mixed = copy.deepcopy(data)
    mixed["settings"] = [{"setting": "base", "verdict": "REFUTED", "base": True},
                         {"setting": "gamma=0.25", "verdict": "INCONCLUSIVE"}]
    md = report.render_markdown(mixed)
    assert "Settings disagree" not in md
    assert ("**Settings** (no two decide opposite ways; an INCONCLUSIVE row decides "
            "nothing): base: REFUTED (base); gamma=0.25: INCONCLUSIVE.") in md
    assert not report.settings_split(mixed["settings"])
    odd = [{"setting": "a", "verdict": ["CONFIRMED"]}, {"setting": "b", "verdict": "REFUTED"}]
    assert report.settings_line(odd) is None and not report.settings_split(odd)
    report.write_data(mixed, tmp_path)
    text = report.write_index(tmp_path, claims.registry()).read_text()
    assert "(settings split)" not in text


def _with(data, verdict, status):
    d = copy.deepcopy(data)
    d["verdict"] = verdict
    d["premise"] = {**d["premise"], "status": status}
    return d


def _answers(word, status="reproduced"):
    return [{"id": "q", "asks": "does it hold?", "kind": "experiment", "verdict": word,
             "caveat": "" if status == "reproduced" else f"premise {status}"}]


def test_disagreeing_scales_are_split_never_one_promoted():
    from audit import questions

    row, = questions.across_scales({"smoke": _answers("CONFIRMED"),
                                    "full": _answers("INCONCLUSIVE", "not reproduced")})
    assert row["combined"] == "SPLIT"
    assert row["by_scale"] == {"smoke": "CONFIRMED", "full": "INCONCLUSIVE"}
    assert "smoke: CONFIRMED" in row["why"] and "full: INCONCLUSIVE" in row["why"]
    assert "premise not reproduced" in row["why"]
    row, = questions.across_scales({"smoke": _answers("REFUTED"),
                                    "full": _answers("REFUTED")})
    assert row["combined"] == "REFUTED" and row["why"] == ""
    # whichever scale reproduces the premise, a disagreement is never resolved to it
    for smoke, full in (("CONFIRMED", "REFUTED"), ("REFUTED", "CONFIRMED"),
                        ("INCONCLUSIVE", "CONFIRMED")):
        row, = questions.across_scales({"smoke": _answers(smoke), "full": _answers(full)})
        assert row["combined"] == "SPLIT"


def test_index_compares_smoke_and_full_question_by_question(data, tmp_path, toy):
    smoke = _with(data, "CONFIRMED", "reproduced")
    smoke["questions"] = _answers("CONFIRMED")
    report.write_data(smoke, tmp_path)
    full = _with(data, "REFUTED", "reproduced")
    full["scale"] = "full"
    full["questions"] = _answers("REFUTED")
    report.write_data(full, tmp_path / "full")
    text = report.write_index(tmp_path, claims.registry()).read_text()
    assert "## Every reviewer question" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| `toy-claim`")
               and "full/toy-claim.md" in ln)
    assert "**SPLIT**" in row and "smoke: CONFIRMED; full: REFUTED" in row
    # one scale only: no across-scales word
    other = tmp_path / "other"
    report.write_data(smoke, other)
    row = next(ln for ln in report.write_index(other, claims.registry()).read_text()
               .splitlines() if ln.startswith("| `toy-claim` | `q`"))
    assert "SPLIT" not in row


def test_eta_line_spans_first_look_to_cap():
    line = eta_line([("a", 6.0, 5, 20), ("b", 3.0, 5, 20)])
    assert "1 min if every claim is decided at its first look, up to 3 min at the cap" in line
    assert "2 claim(s) left" in line
    line = eta_line([("a", 6.0, 10, 10)], elapsed_s=120, ratio=2.0)
    assert line.startswith("ETA: 2 min elapsed; 2 min for 1 claim(s) left")
    assert "x2.00 as measured so far" in line


# ------------------------------------------------------------------------ audit tune
def test_pilot_runs_only_tuning_seeds_over_the_grid_and_reads_the_contrast(toy, tmp_path):
    from audit.runner import Cache
    from audit.tuning import pilot

    claim = claims.get("toy-claim")
    rows = pilot(claim, "smoke", {"effect": [0.0, 2.0]}, ["base", "better"], "score",
                 n_seeds=3, cache=Cache(tmp_path / "c"), contrast=("better", "base"))
    assert [r.overrides for r in rows] == [{"effect": 0.0}, {"effect": 2.0}]
    assert {s.seed for s in toy.CALLS} == {1000, 1001, 1002}  # never a verdict seed
    assert len(toy.CALLS) == 2 * 2 * 3
    # toy: better - base = effect + noise (SD 0.05)
    assert rows[0].contrast[0] == pytest.approx(0.0, abs=0.2)
    assert rows[1].contrast[0] == pytest.approx(2.0, abs=0.2) and rows[1].contrast[2] == 3
    assert "; better - base +1.9" in rows[1].text("score", ("better", "base"))
    # a second pilot over the same points comes from the cache
    toy.CALLS.clear()
    pilot(claim, "smoke", {"effect": [2.0]}, ["base", "better"], "score", n_seeds=3,
          cache=Cache(tmp_path / "c"))
    assert toy.CALLS == []


def test_pilot_refuses_bad_input(toy, tmp_path):
    from audit.runner import Cache
    from audit.tuning import pilot

    claim = claims.get("toy-claim")
    cache = Cache(tmp_path / "c")
    with pytest.raises(AuditError, match="at least 2 tuning seeds"):
        pilot(claim, "smoke", {}, ["base"], "score", n_seeds=1, cache=cache)
    with pytest.raises(AuditError, match="unknown arm"):
        pilot(claim, "smoke", {}, ["base", "nope"], "score", cache=cache)
    toy.CALLS.clear()
    with pytest.raises(AuditError, match="noise must not be negative"):  # the 2nd point
        pilot(claim, "smoke", {"noise": [0.05, -1.0]}, ["base"], "score", cache=cache)
    assert toy.CALLS == []  # refused before the first point ran
    with pytest.raises(AuditError, match="no metric 'nope'"):
        pilot(claim, "smoke", {}, ["base"], "nope", cache=cache)
    with pytest.raises(AuditError, match="no config key"):
        pilot(claim, "smoke", {"nope": [1]}, ["base"], "score", cache=cache)


def test_audit_tune_prints_one_line_per_candidate(toy, tmp_path, capsys):
    from audit.cli import main

    argv = ["tune", "toy-claim", "--arms", "base,better", "--metric", "score",
            "--grid", "effect=0.5,1.5", "--contrast", "better:base", "--seeds", "2",
            "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("pilot of toy-claim at smoke on tuning seeds 1000-1001")
    assert len(out) == 3 and out[1].startswith("  - effect=0.5: mean score")
    assert main(["tune", "toy-claim", "--arms", "base", "--metric", "score",
                 "--contrast", "a:b:c", "--cache-dir", str(tmp_path / "c")]) == 2


def test_a_full_scale_run_prints_an_eta_first_and_quiet_skips_it(toy, tmp_path, capsys):
    from audit.cli import main

    argv = ["run", "toy-claim", "--scale", "full", "--seeds", "3", "--out",
            str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("toy-claim: estimate ") and "per seed at full" in err[0]
    assert err[1].startswith("ETA: ") and "1 claim(s) left" in err[1]
    assert any(line.startswith("ETA: ") and "0 claim(s)" not in line for line in err)
    assert main(argv + ["--quiet"]) == 0
    assert "ETA" not in capsys.readouterr().err
    assert main(["run", "toy-claim", "--scale", "smoke", "--seeds", "3", "--out",
                 str(tmp_path / "s"), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "ETA" not in capsys.readouterr().err  # smoke: about a minute, no ETA


@pytest.mark.parametrize("backend, address, workers", [("local", None, 1), ("ray", None, 4),
                                                       ("ray", "auto", 1)])
def test_the_eta_counts_the_cores_a_local_ray_instance_runs_on(toy, monkeypatch, tmp_path,
                                                                capsys, backend, address,
                                                                workers):
    import argparse

    from audit import cli, estimate
    from audit.runner import Cache, make_context

    monkeypatch.setattr(estimate, "seconds_per_seed", lambda *a, **k: 1200.0)
    import audit.runner as runner

    # the instance gets the cores this process may use (not the machine's cpu_count)
    monkeypatch.setattr(runner, "usable_cores", lambda: 4)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 64)
    args = argparse.Namespace(scale="full", quiet=False, backend=backend, ray_address=address)
    ctx = make_context(toy.CLAIM, "full", seeds=3)
    eta = cli._Eta(args, [(toy.CLAIM, ctx)], {}, Cache(tmp_path / "c"))
    assert eta.todo["toy-claim"] == (1200.0 / workers, 3, 3)
    assert f"ETA: {1200.0 * 3 / workers / 60:.0f} min for 1 claim(s)" in capsys.readouterr().err


def test_a_test_set_metric_is_refused_unless_allowed_and_then_flagged(toy, tmp_path,
                                                                      capsys):
    from audit.cli import main
    from audit.tuning import reads_the_test_set

    assert all(reads_the_test_set(m) for m in ("test_acc", "final_test_loss", "testacc",
                                               "agnostic-test.acc", "TEST_ACC"))
    assert not any(reads_the_test_set(m) for m in ("val_acc", "score", "latest_acc",
                                                   "contest", "val_attest"))
    argv = ["tune", "toy-claim", "--arms", "base", "--metric", "test_score", "--seeds",
            "2", "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "reads the test set" in err and "--allow-test-metric" in err
    # allowed: the pilot reaches the unit (the toy has no such key: its own clear error),
    # so the guard, not the metric lookup, is what refused above
    assert main(argv + ["--allow-test-metric"]) == 2
    assert "has no metric 'test_score'" in capsys.readouterr().err


def test_a_claim_declares_its_validation_metrics_and_tune_reads_only_those(toy, tmp_path,
                                                                          capsys):
    import dataclasses

    from audit import claims as claims_mod
    from audit.tuning import test_metric_problem

    # the flagged full-scale searches read these keys: each is refused now
    for cid, key in (("flayer-masked-zero", "final_personal_acc"),
                     ("fedtlu-lower-bound", "ppl_final"),
                     ("genefl-inverted-cosine", "agnostic_acc"),
                     ("lips-dropout-control", "test_acc")):
        assert test_metric_problem(claims_mod.get(cid), key), (cid, key)
    assert test_metric_problem(claims_mod.get("lips-dropout-control"), "val_acc") == ""
    assert test_metric_problem(claims_mod.get("flayer-masked-zero"),
                               "final_val_personal_acc") == ""
    # undeclared (the toy): only the name decides
    import toyclaim

    assert test_metric_problem(toyclaim.CLAIM, "score") == ""
    declared = dataclasses.replace(toyclaim.CLAIM, validation_metrics=("other",))
    assert "not a validation metric" in test_metric_problem(declared, "score")


def test_tune_refuses_empty_or_repeated_axes_and_prints_strict_json(toy, tmp_path, capsys):
    """An empty axis printed nothing and exited 0; a repeated key dropped the first; a
    metric that overflowed printed NaN and Infinity into --json; a claim without
    validation_metrics is tuned with a warning that only the name was checked."""
    import json

    from audit.cli import main

    base = ["tune", "toy-claim", "--arms", "base,better", "--metric", "score",
            "--seeds", "2", "--cache-dir", str(tmp_path / "c")]
    assert main(base + ["--grid", "effect=[]"]) == 2
    assert "has no values" in capsys.readouterr().err
    assert main(base + ["--grid", "effect=0.1", "--grid", "effect=0.9"]) == 2
    assert "more than once" in capsys.readouterr().err
    assert main(base + ["--grid", "effect=[1.7e308]", "--set", "noise=1e308", "--contrast",
                        "better:base", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert "declares no validation_metrics" in captured.err


def test_a_stored_estimate_is_read_and_written_like_the_cache(toy, tmp_path, capsys):
    """A link at estimates/ was written through; Infinity was read as an estimate; a
    folder in the entry's place stopped full-scale runs before they began."""
    import json
    import os

    from audit.estimate import _stored_path, seconds_per_seed

    ctx = make_context(toy.CLAIM, "full", seeds=[0, 1, 2])
    root = tmp_path / "c"
    path = _stored_path(root, toy.CLAIM, ctx)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"per_seed_s": float("inf")}))
    value = seconds_per_seed(toy.CLAIM, ctx, root, progress=lambda *_: None)
    assert 0 <= value < float("inf")  # measured again, not the stored Infinity
    path.unlink()
    path.mkdir()  # a folder where the entry goes: a warning, and the run goes on
    assert seconds_per_seed(toy.CLAIM, ctx, root, progress=lambda *_: None) >= 0
    assert "was not stored" in capsys.readouterr().err
    outside = tmp_path / "outside"
    outside.mkdir()
    other = tmp_path / "c2"
    other.mkdir()
    os.symlink(outside, other / "estimates")
    seconds_per_seed(toy.CLAIM, ctx, other, progress=lambda *_: None)
    assert not any(outside.iterdir())
