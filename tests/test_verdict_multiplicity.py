"""The union paths of all_of / any_of: Bonferroni over the parts that can decide them."""
import pytest

from audit.verdict import (ALL_OUTCOMES, Outcome, Part, Rule, all_of, any_of,
                           verdict_from_parts)

C, R, I = Outcome.CONFIRMED, Outcome.REFUTED, Outcome.INCONCLUSIVE


def _p(i, v, share=None, reachable=ALL_OUTCOMES):
    return Part(f"p{i}", v, "rule", "reason", alpha_share=share, reachable=reachable)


def test_all_of_counts_a_refuted_part_only_at_its_bonferroni_share():
    comb = all_of(("p0", "p1", "p2"))
    assert comb.union == "REFUTED"
    parts = [_p(0, R, 1.0), _p(1, C, 1.0), _p(2, C, 1.0)]
    assert comb.union_size(parts) == 3
    assert comb(parts) == I  # decided at the full alpha: not counted
    parts = [_p(0, R, 1 / 3), _p(1, C, 1 / 3), _p(2, C, 1 / 3)]
    assert comb(parts) == R
    parts = [_p(0, R), _p(1, I), _p(2, I)]  # undeclared share: not counted when k > 1
    assert comb(parts) == I
    v = verdict_from_parts("c", comb, parts, [])
    assert "not counted toward REFUTED" in v.reason and "above 1/3" in v.reason


def test_all_of_confirmed_path_is_an_intersection_and_needs_no_share():
    comb = all_of(("p0", "p1", "p2"))
    assert comb([_p(0, C), _p(1, C), _p(2, C)]) == C


def test_parts_that_cannot_refute_do_not_count_in_k():
    comb = all_of(("p0", "p1"))
    parts = [_p(0, R), _p(1, C, reachable=("CONFIRMED", "INCONCLUSIVE"))]
    assert comb.union_size(parts) == 1
    assert comb(parts) == R  # the only part that can refute: no correction needed


def test_any_of_counts_a_confirmed_part_only_at_its_share():
    comb = any_of(("p0", "p1"), "a note")
    assert comb.union == "CONFIRMED" and "a note" in comb.text and "1/k" in comb.text
    assert comb([_p(0, C, 1.0), _p(1, I, 1.0)]) == I
    assert comb([_p(0, C, 0.5), _p(1, I, 0.5)]) == C
    assert comb([_p(0, R, 1.0), _p(1, R, 1.0)]) == R  # intersection path: no share needed


def test_rule_passes_the_alpha_share_to_the_part_and_json():
    rule = Rule("x", "text", lambda: ("REFUTED", "why", "", {"alpha_share": 0.25}))
    part = rule()
    assert part.alpha_share == 0.25
    assert Part.from_dict(part.to_dict()) == part
    assert Part.from_dict({k: v for k, v in part.to_dict().items()
                           if k != "alpha_share"}).alpha_share is None


@pytest.mark.parametrize("k", [2, 3, 5])
def test_share_boundary_is_inclusive(k):
    comb = all_of(tuple(f"p{i}" for i in range(k)))
    parts = [_p(0, R, 1 / k)] + [_p(i, I, 1 / k) for i in range(1, k)]
    assert comb(parts) == R
