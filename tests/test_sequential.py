"""Sequential seeds: looks planned before the run, alpha spent across them, stability.

The toy claim (tests/toyclaim.py) makes the true effect a config value, so a run can be
made to decide at the first look or to run to the cap."""
import json

import pytest

from audit import claims as claims_mod
from audit.cli import main
from audit.runner import Cache, execute, execute_sequential, make_context
from audit.sequential import plan


def test_a_large_effect_stops_at_the_first_look(toy, tmp_path):
    # the three-way rule decides nothing below six pairs (an exact sign test cannot reach
    # alpha / 2 there), so these plans look first at 10 seeds
    ctx = make_context(toy.CLAIM, "smoke")
    p = plan(20, first=10)
    res = execute_sequential(toy.CLAIM, ctx, p, cache=Cache(tmp_path / "c"), progress=False)
    assert [lk["n"] for lk in res.verdict.looks] == [10]
    assert res.verdict.looks[0]["decided"] and res.verdict.looks[0]["stopped"]
    assert res.verdict.verdict.value == "CONFIRMED"
    assert res.ctx.seeds == tuple(range(10))
    assert res.ctx.alpha_fraction == pytest.approx(p.fractions()[0])
    # the rule printed is the one applied: alpha is the look's share of 0.05
    assert f"alpha {0.05 * p.fractions()[0]:.4g}" in res.verdict.parts[0].rule


def test_the_default_plan_looks_first_at_ten_seeds():
    from audit.sequential import FIRST_LOOK

    assert FIRST_LOOK == 10
    assert plan(20).looks == (10, 20)
    assert plan(10).looks == (10,)  # a cap at the first look is one look
    assert plan(40).looks == (10, 20, 40)


def test_a_first_look_at_five_seeds_cannot_decide(toy, tmp_path):
    # a plan that still looks at 5 seeds (below audit.stats.MIN_PAIRS): that look spends
    # its share of alpha and cannot decide however large the effect; the next one does
    ctx = make_context(toy.CLAIM, "smoke")
    res = execute_sequential(toy.CLAIM, ctx, plan(20, first=5), cache=Cache(tmp_path / "c"),
                             progress=False)
    assert [lk["n"] for lk in res.verdict.looks] == [5, 10]
    assert not res.verdict.looks[0]["decided"] and not res.verdict.looks[0]["stopped"]
    assert res.verdict.looks[0]["verdict"] == "INCONCLUSIVE"
    assert res.verdict.looks[1]["decided"] and res.verdict.looks[1]["stopped"]
    assert res.verdict.verdict.value == "CONFIRMED"


def test_an_undecided_claim_runs_to_the_cap_and_reuses_finished_units(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke", overrides={"effect": 0.02, "noise": 0.5})
    cache = Cache(tmp_path / "c")
    res = execute_sequential(toy.CLAIM, ctx, plan(20), cache=cache, progress=False)
    assert [lk["n"] for lk in res.verdict.looks] == [10, 20]
    assert res.verdict.looks[-1]["stopped"] and not res.verdict.looks[0]["decided"]
    assert res.verdict.looks[-1]["stop_reason"] == "cap"
    assert len(toy.CALLS) == 40  # 2 arms x 20 seeds, each computed once across looks
    # look 2 reads look 1's units from the cache, but they were computed by this run
    assert res.computed == 40 and res.cached == 0
    again = execute_sequential(toy.CLAIM, ctx, plan(20), cache=cache, progress=False)
    assert again.computed == 0 and again.cached == 40 and len(toy.CALLS) == 40
    assert res.ctx.seeds == tuple(range(20))


def test_a_premise_shown_not_reproduced_stops_the_plan(toy, tmp_path):
    # no gain, little noise: the gain (the premise) is equivalent to 0 within d at the
    # first look, and the part it gates is INCONCLUSIVE whatever more seeds would show
    over = {"effect": 0.0, "noise": 0.005, "gated": True}
    ctx = make_context(toy.CLAIM, "smoke", overrides=over)
    res = execute_sequential(toy.CLAIM, ctx, plan(20, first=10), cache=Cache(tmp_path / "c"),
                             progress=False)
    look = res.verdict.looks[-1]
    assert [lk["n"] for lk in res.verdict.looks] == [10]
    assert look["premise"] == "not reproduced" and look["decided"] and look["stopped"]
    assert look["stop_reason"] == "premise not reproduced"
    assert res.verdict.verdict.value == "INCONCLUSIVE"
    assert res.verdict.parts[0].gated and "premise not reproduced" in res.verdict.parts[0].reason
    # the same data without the gate: the part itself decides (REFUTED by equivalence)
    ctx = make_context(toy.CLAIM, "smoke", overrides={**over, "gated": False})
    res = execute_sequential(toy.CLAIM, ctx, plan(20, first=10), cache=Cache(tmp_path / "c2"),
                             progress=False)
    assert res.verdict.verdict.value == "REFUTED"
    assert res.verdict.looks[-1]["stop_reason"] == "decided"


def test_an_undecided_premise_does_not_stop_the_plan(toy, tmp_path):
    # a small gain in much noise: the premise stays undecided, so the gated part keeps
    # the plan going to the cap
    over = {"effect": 0.02, "noise": 0.5, "gated": True}
    ctx = make_context(toy.CLAIM, "smoke", overrides=over)
    res = execute_sequential(toy.CLAIM, ctx, plan(20), cache=Cache(tmp_path / "c"),
                             progress=False)
    assert [lk["n"] for lk in res.verdict.looks] == [10, 20]
    assert [lk["premise"] for lk in res.verdict.looks] == ["undecided", "undecided"]
    assert [lk["stop_reason"] for lk in res.verdict.looks] == [None, "cap"]
    assert not res.verdict.looks[-1]["decided"]


def test_stop_reason_needs_every_open_part_gated():
    from audit.runner import STOP_DECIDED, STOP_PREMISE, stop_reason
    from audit.verdict import ALL_PARTS, Outcome, Part, Premise, Verdict

    class _Claim:
        combination = ALL_PARTS

    def verdict(parts, status):
        return Verdict("x", Outcome.INCONCLUSIVE, "r", "r", parts=tuple(parts),
                       premise=Premise("e", status, "r") if status else None)

    open_gated = Part("a", Outcome.INCONCLUSIVE, "r", "r", gated=True)
    open_free = Part("b", Outcome.INCONCLUSIVE, "r", "r")
    done = Part("c", Outcome.CONFIRMED, "r", "r")
    assert stop_reason(_Claim, verdict([open_gated, done], "not reproduced")) == STOP_PREMISE
    assert stop_reason(_Claim, verdict([open_gated, open_free], "not reproduced")) is None
    assert stop_reason(_Claim, verdict([open_gated], "undecided")) is None
    assert stop_reason(_Claim, verdict([open_gated], "reproduced")) is None
    assert stop_reason(_Claim, verdict([open_gated], None)) is None
    assert stop_reason(_Claim, verdict([done], None)) == STOP_DECIDED


def test_the_report_and_json_show_every_look(toy, tmp_path):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", "--until-decided",
                 "--max-seeds", "20", "--set", "effect=0.02", "--set", "noise=0.5"]) == 0
    data = json.loads((out / "toy-claim.json").read_text())
    assert [lk["n"] for lk in data["looks"]] == [10, 20]
    assert data["plan"]["looks"] == [10, 20] and data["plan"]["spending"] == "pocock"
    assert "--until-decided --max-seeds 20" in data["command"]
    md = (out / "toy-claim.md").read_text()
    assert "## Sequential looks" in md and "stopped at look 2" in md


def test_until_decided_refuses_a_cap_above_the_seed_bound(toy, capsys):
    assert main(["run", "toy-claim", "--until-decided", "--max-seeds", "100000"]) == 2
    assert "--max-seeds 100000" in capsys.readouterr().err


def test_stability_reports_leave_one_out_and_flip(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke", seeds=list(range(10)))
    res = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "c"), progress=False)
    st = res.verdict.stability
    assert st["loo_total"] == 10 and st["loo_agree"] == 10
    assert st["flip_part"] == "gain" and st["flip"] > 10 * st["resolution"]  # effect 1.0
    assert st["fragile"] is False and not res.verdict.fragile


def test_a_verdict_one_seed_can_flip_is_labelled_fragile(toy, tmp_path):
    # an effect just above what the default 8 seeds can show: some leave-one-out subset disagrees
    # or one seed's small move flips it
    ctx = make_context(toy.CLAIM, "smoke", overrides={"effect": 0.12, "noise": 0.1})
    res = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "c"), progress=False)
    st = res.verdict.stability
    if res.verdict.verdict.value != "INCONCLUSIVE":
        fragile = st["loo_agree"] < st["loo_total"] or st["flip"] <= 3 * st["resolution"]
        assert res.verdict.fragile == fragile


def test_printed_rule_changes_with_a_set_margin(toy, tmp_path):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet",
                 "--set", "equivalence_margin=0.2"]) == 0
    rule = json.loads((out / "toy-claim.json").read_text())["parts"][0]["rule"]
    assert "(-0.2, +0.2)" in rule
    assert main(["run", "toy-claim", "--out", str(out), "--quiet",
                 "--set", "equivalence_margin=0.05"]) == 0
    rule = json.loads((out / "toy-claim.json").read_text())["parts"][0]["rule"]
    assert "(-0.05, +0.05)" in rule


def test_locks_record_the_plan_and_the_seeds_it_stopped_at(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke")
    res = execute_sequential(toy.CLAIM, ctx, plan(20, first=10), cache=Cache(tmp_path / "c"),
                             progress=False)
    path = tmp_path / "locks2.json"
    claims_mod.write_lock("toy-claim", "smoke", res.verdict.verdict, res.verdict.parts,
                          res.ctx.seeds, path=path, plan=res.plan.to_dict())
    lock = json.loads(path.read_text())["toy-claim"]["smoke"]
    assert lock["plan"] == {"looks": [10, 20], "spending": "pocock"}
    assert lock["seeds"] == list(range(10))
    claims_mod.read_locks(path)  # the shape check accepts a plan


def test_verify_reruns_a_sequential_lock_with_its_plan(toy, capsys, monkeypatch, tmp_path):
    locks = tmp_path / "seq-locks.json"
    monkeypatch.setenv("AUDIT_LOCKS", str(locks))
    locks.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"}, "seeds": list(range(10)),
        "plan": {"looks": [10, 20], "spending": "pocock"}}}}))
    assert main(["verify", "toy-claim", "--quiet"]) == 0
    assert "look 1 at n = 10 seeds: CONFIRMED (decided)" in capsys.readouterr().err
    # the same lock said it stopped at 20 seeds: this run stops at 10, a change
    locks.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"}, "seeds": list(range(20)),
        "plan": {"looks": [10, 20], "spending": "pocock"}}}}))
    assert main(["verify", "toy-claim", "--quiet"]) == 1
    assert "stopped at n = 10 seeds" in capsys.readouterr().err


def test_the_default_cap_is_one_look_at_smoke_and_two_above(toy, tmp_path):
    from audit.sequential import default_cap

    assert (default_cap("smoke"), default_cap("full"), default_cap("paper")) == (10, 20, 20)
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", "--until-decided"]) == 0
    data = json.loads((out / "toy-claim.json").read_text())
    assert data["plan"]["looks"] == [10] and data["plan"]["fractions"] == [1.0]
    assert "--until-decided --max-seeds 10" in data["command"]


@pytest.mark.parametrize("over", [{"effect": 0.02, "noise": 0.5},  # runs to the cap
                                  {"effect": 1.0, "noise": 0.05},  # stops at look 1
                                  {"effect": 0.0, "noise": 0.005, "gated": True}])  # futility
def test_interim_looks_decide_alone_and_look_as_a_full_analysis_does(toy, tmp_path, over):
    # a claim with ``decide``: a look that does not end the plan runs the decisions only
    # (no report is built for it), and every look says what a full analysis would say
    ctx = make_context(toy.CLAIM, "smoke", overrides=over)
    runs = {}
    for with_decide in (False, True):
        calls = {"analyse": 0, "decide": 0}
        claim = toy.counted(calls, with_decide)
        res = execute_sequential(claim, ctx, plan(40), progress=False,
                                 cache=Cache(tmp_path / f"c{with_decide}"))
        runs[with_decide] = res, calls
    (plain, plain_calls), (fast, fast_calls) = runs[False], runs[True]
    assert fast.verdict.looks == plain.verdict.looks
    assert fast.verdict.verdict == plain.verdict.verdict and fast.ctx.seeds == plain.ctx.seeds
    assert [p.reason for p in fast.verdict.parts] == [p.reason for p in plain.verdict.parts]
    assert fast.verdict.stability == plain.verdict.stability
    # without decide, every look is analysed in full (and so is each leave-one-out subset)
    n = len(plain.ctx.seeds)
    assert plain_calls["analyse"] == sum(1 + lk["n"] for lk in plain.verdict.looks)
    # with it, only the look that ended the plan is reported; the others decide once each,
    # and the last one's decide is checked against its analysis and left out seed by seed
    assert fast_calls["analyse"] == 1
    interim = sum(lk["n"] < 40 for lk in fast.verdict.looks)  # every look before the cap
    assert fast_calls["decide"] == interim + 1 + n
    assert (fast.computed, fast.cached) == (plain.computed, plain.cached)


@pytest.mark.parametrize("with_decide", [False, True])
def test_a_plan_without_the_cache_computes_each_unit_once(toy, tmp_path, with_decide):
    # the looks share the units this run holds: with the cache off, look 2 does not
    # recompute look 1's seeds
    calls = {"analyse": 0, "decide": 0}
    claim = toy.counted(calls, with_decide)
    ctx = make_context(claim, "smoke", overrides={"effect": 0.02, "noise": 0.5})
    res = execute_sequential(claim, ctx, plan(20), progress=False,
                             cache=Cache(tmp_path / "c", enabled=False))
    assert [lk["n"] for lk in res.verdict.looks] == [10, 20]
    assert len(toy.CALLS) == 40 and res.computed == 40 and res.cached == 0
    assert not (tmp_path / "c").exists()  # nothing written with the cache off


def test_an_interim_look_whose_decide_raises_is_analysed_in_full(toy, tmp_path):
    # the decisions alone cannot settle this look: the full analysis runs and says why
    import dataclasses

    def decide(results, ctx):
        raise KeyError("no such metric")

    decide.staged = True  # as kit.staged marks it: an interim look tries it alone
    claim = dataclasses.replace(toy.CLAIM, decide=decide)
    ctx = make_context(claim, "smoke", overrides={"effect": 0.02, "noise": 0.5})
    with pytest.raises(KeyError):  # the stability check calls decide on the full look
        execute_sequential(claim, ctx, plan(20), progress=False, cache=Cache(tmp_path / "c"))


def test_a_decide_not_made_with_its_analyse_never_settles_an_interim_look(toy, tmp_path):
    # a hand-written decide that says "go on" below the cap while the analysis decides:
    # trusted alone, it would carry the run past the look the plan stops at, and no
    # analysis of that look would ever see it. Unmarked, every look is analysed in full,
    # the run stops at look 1, and the decide is caught disagreeing there
    import dataclasses

    from audit.errors import AuditError
    from audit.verdict import Outcome

    def decide(results, ctx):
        a = toy.analyse(results, ctx)
        if len(ctx.seeds) < 20:
            return tuple(dataclasses.replace(p, verdict=Outcome.INCONCLUSIVE)
                         for p in a.parts), a.premise
        return a.parts, a.premise

    claim = dataclasses.replace(toy.CLAIM, decide=decide)
    ctx = make_context(claim, "smoke", overrides={"effect": 1.0, "noise": 0.05})
    with pytest.raises(AuditError, match="its decide gives"):
        execute_sequential(claim, ctx, plan(20), progress=False, cache=Cache(tmp_path / "c"))
    assert len(toy.CALLS) == 20  # the units of look 1 only: the run stopped there
