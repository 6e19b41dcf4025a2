"""Leave-one-seed-out stability per reviewer question: the runner answers every question
again from each subset's parts, and keeps per question how many subsets agree."""
from __future__ import annotations

import dataclasses

import pytest

from audit import questions
from audit.claims import RunSpec
from audit.questions import Question
from audit.runner import Cache, execute, make_context
from audit.verdict import Outcome, Rule

#: the seed whose unit alone carries the toy's second part
CARRIER = 3


def _decide_lead(peaks):
    if max(peaks) > 0.5:
        return Outcome.CONFIRMED, "a seed peaks above 0.5", ""
    return Outcome.INCONCLUSIVE, "no seed peaks above 0.5", "a seed that peaks"


LEAD = Rule("lead", "CONFIRMED when some seed's peak is above 0.5; INCONCLUSIVE otherwise "
            "(a toy part resting on one seed).", _decide_lead,
            reachable=("CONFIRMED", "INCONCLUSIVE"))


@pytest.fixture
def two_questions(toy):
    """The toy claim with a second part, ``lead``, that only the unit of seed
    :data:`CARRIER` makes CONFIRMED, and one question for each part: leaving that seed
    out changes the answer of ``lead-q`` and never that of ``gain-q``."""
    def run(spec, ctx):
        out = toy.run(spec, ctx)
        out["peak"] = 1.0 if spec.seed == CARRIER else 0.0
        return out

    def analyse(results, ctx):
        a = toy.analyse(results, ctx)
        lead = LEAD([results[RunSpec("better", s)]["peak"] for s in ctx.seeds])
        return dataclasses.replace(a, parts=tuple(a.parts) + (lead,))

    qs = (Question("gain-q", "does better beat base?", ("falsifier",), ("gain",)),
          Question("lead-q", "does some seed peak?", ("falsifier",), ("lead",)))
    return dataclasses.replace(toy.CLAIM, run=run, analyse=analyse, rules=(toy.RULE, LEAD),
                               questions=qs, combination=questions.combination(qs))


def test_one_left_out_seed_flips_one_question_and_not_the_other(two_questions, tmp_path):
    res = execute(two_questions, make_context(two_questions, "smoke"),
                  cache=Cache(tmp_path / "c"), progress=False)
    assert {a["id"]: a["verdict"] for a in res.answers} == {"gain-q": "CONFIRMED",
                                                            "lead-q": "CONFIRMED"}
    st = res.verdict.stability
    seeds = [str(s) for s in res.ctx.seeds]
    per_q = st["questions"]
    assert list(per_q) == ["gain-q", "lead-q"]
    gain, lead = per_q["gain-q"], per_q["lead-q"]
    assert (gain["loo_agree"], gain["loo_total"], gain["fragile"]) == (8, 8, False)
    assert (lead["loo_agree"], lead["loo_total"], lead["fragile"]) == (7, 8, True)
    assert list(lead["loo"]) == seeds  # in the run's seed order, keyed as the claim's loo
    assert lead["loo"][str(CARRIER)] == "INCONCLUSIVE"
    assert all(w == "CONFIRMED" for s, w in lead["loo"].items() if s != str(CARRIER))
    assert set(gain["loo"].values()) == {"CONFIRMED"}
    # the claim-level keys are as before: its word (SPLIT without the carrier) disagrees
    # once, and its own fragile flag reads its own agreement
    assert st["loo_total"] == 8 and st["loo_agree"] == 7
    assert st["loo"][str(CARRIER)] == "SPLIT" and st["fragile"] is True


def test_a_claim_without_questions_has_its_statement_checked(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    st = res.verdict.stability
    (qa,) = res.answers
    assert list(st["questions"]) == [qa["id"]] == ["claim"]
    q = st["questions"]["claim"]
    assert (q["loo_agree"], q["loo_total"]) == (st["loo_agree"], st["loo_total"]) == (8, 8)
    assert q["loo"] == st["loo"] and q["fragile"] is False


def test_too_few_seeds_check_no_question(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke", seeds=[0, 1])
    res = execute(toy.CLAIM, ctx, cache=Cache(tmp_path / "c"), progress=False)
    assert res.verdict.stability["questions"] == {}

