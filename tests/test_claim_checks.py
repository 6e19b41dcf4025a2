"""The generic checks (``audit.checks``) over every registered claim, a check a test, and
each check shown able to fail on a claim broken in its way."""
import dataclasses

import pytest

from audit import checks, claims
from audit.questions import Question
from audit.verdict import Outcome, Rule, all_of

CLAIMS = [c for c in claims.registry().values() if isinstance(c, claims.Claim)]


@pytest.mark.parametrize("name,check", checks.CHECKS, ids=[n for n, _ in checks.CHECKS])
@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_every_claim_passes_every_check(claim, name, check):
    assert check(claim) == [], f"{claim.id}: {name}"


def test_the_toy_claim_passes_all_but_the_questions_check(toy):
    # the library's toy declares no reviewer question (its reports derive one per part);
    # every built-in claim must declare them
    import toyclaim

    assert checks.problems(toyclaim.CLAIM) == [
        "questions: the claim declares no reviewer question"]


def _base():
    return claims.get("flayer-masked-zero")


def _decide(ev):
    return Outcome.INCONCLUSIVE, "", ""


@pytest.mark.parametrize("change,expect", [
    (lambda c: {"arms": c.arms + c.arms[:1]}, "arms: arm 'literal' is declared twice"),
    (lambda c: {"rules": c.rules + (Rule("extra", "n in {2, 3}", _decide),)},
     "rules: rule 'extra': text fields must be names"),
    (lambda c: {"rules": c.rules + c.rules[:1]}, "has two rules"),
    (lambda c: {"questions": ()}, "declares no reviewer question"),
    (lambda c: {"questions": c.questions + (Question("q", "?", ("falsifier",), ("nope",)),)},
     "decided by unknown parts ['nope']"),
    (lambda c: {"questions": c.questions + (Question("q", "?", (), ("collapse",)),)},
     "record fields (none) are not field paths"),
    (lambda c: {"questions": c.questions + (Question("q", "?", ("major comment 1",),
                                                     ("collapse",)),)},
     "are not field paths"),
    (lambda c: {"questions": c.questions + (Question("q", "?", ("referee_report.x[9]",),
                                                     ("collapse",)),)},
     "which is no item of the FLAYER record"),
    (lambda c: {"questions": c.questions + (Question("q", "?", ("falsifier",),
                                                     ("collapse",), kind="proof"),)},
     "is a proof but its parts are"),
    (lambda c: {"answers": {"falsifier": "nope"}}, "names part 'nope', which has no rule"),
    # all_of naming a measurement could never be CONFIRMED (it votes INCONCLUSIVE)
    (lambda c: {"combination": all_of(["collapse", "head-size"])},
     "names part 'head-size', a measurement"),
    (lambda c: {"scales": {"full": c.scales["full"]}}, "no smoke scale"),
    (lambda c: {"scales": {**c.scales, "smoke": {"f": object()}}}, "not JSON-able"),
    (lambda c: {"default_seeds": (0, 1, 2, 3, 4)}, "decides nothing below 6"),
    (lambda c: {"default_seeds": tuple(range(9)) + (1000,)}, "is not a verdict seed"),
])
def test_each_check_fails_on_a_claim_broken_its_way(change, expect):
    broken = dataclasses.replace(_base(), **change(_base()))
    found = checks.problems(broken)
    assert any(expect in p for p in found), found


def test_arms_out_of_step_with_their_pieces_are_found():
    genefl = claims.get("genefl-inverted-cosine")
    broken = dataclasses.replace(genefl, arms=genefl.arms[::-1])
    assert any(p.startswith("PIECES") for p in checks.check_arms(broken))


def test_a_lock_naming_a_vanished_part_or_question_is_found(monkeypatch, tmp_path):
    import json

    locks = tmp_path / "locks.json"
    locks.write_text(json.dumps({"flayer-masked-zero": {
        "smoke": {"verdict": "SPLIT", "parts": {"gone": "CONFIRMED"},
                  "questions": {"gone-too": "REFUTED"}},
        "huge": {"verdict": "CONFIRMED"}}}))
    monkeypatch.setenv("AUDIT_LOCKS", str(locks))
    found = checks.check_locks(_base())
    assert any("part 'gone'" in p for p in found)
    assert any("question 'gone-too'" in p for p in found)
    assert any("unknown scale 'huge'" in p for p in found)


STOCHASTIC = [c for c in CLAIMS if c.stochastic]


@pytest.mark.parametrize("claim", STOCHASTIC, ids=[c.id for c in STOCHASTIC])
def test_a_unit_is_json_and_the_same_twice(claim, tmp_path):
    """Every stochastic claim's first smoke unit (one arm at one seed) returns plain JSON
    data (what the run cache stores), with every validation metric the claim declares
    (what `audit tune` may read), and the same data when run again: a unit is a pure
    function of its spec and context, as the cache and the locks assume."""
    import json

    from audit.runner import make_context

    # where the claim reads validation data only under its regime map's fixed overrides
    # (a validation split carved out of training data, off in the verdict's runs), the
    # unit runs under them, and is one of the map's paper arm
    maps = [m for m in claim.regime_maps if m.scale == "smoke"]
    over = dict(maps[0].fixed) if maps else {}
    ctx = dataclasses.replace(make_context(claim, "smoke", seeds=[0, 1], overrides=over),
                              checkpoint_dir=None)
    specs = [s for s in claim.specs(ctx) if s.seed is not None] if claim.specs else None
    if specs and maps:
        arm = maps[0].effect[0].split("/", 1)[0]
        specs = [s for s in specs if s.arm == arm] or specs
    spec = specs[0] if specs else claims.RunSpec(claim.arms[0].name, 0)
    def numbers(result):  # what the unit computed: its wall-clock timings apart
        if isinstance(result, dict):
            return {k: numbers(v) for k, v in result.items()
                    if k != "seconds" and not k.endswith("_seconds")}
        if isinstance(result, list):
            return [numbers(v) for v in result]
        return result

    first = json.dumps(claim.run(spec, ctx), sort_keys=True, allow_nan=True)
    for metric in claim.validation_metrics or ():
        assert isinstance(json.loads(first).get(metric), float), metric
    again = json.dumps(claim.run(spec, ctx), sort_keys=True, allow_nan=True)
    assert json.dumps(numbers(json.loads(again))) == json.dumps(numbers(json.loads(first)))
