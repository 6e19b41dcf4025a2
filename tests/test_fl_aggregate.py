"""Aggregation pieces: hand-checked cases and hypothesis properties."""

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from audit.fl.aggregate import (Upload, carry_over, chain, fedavg, keep_local, masked_delta,
                                selector_mean, weighted_mean)

LITERAL = chain(weighted_mean())
CARRY = chain(weighted_mean(), carry_over())
SELECTOR = chain(selector_mean())
DELTA = chain(masked_delta())


def t(*v):
    return torch.tensor(v, dtype=torch.float32)


def b(*v):
    return torch.tensor(v, dtype=torch.bool)


# Prepare: prev = [10, 10, 10]; client A (w=1) selects coords 0,1 with values 1,2;
# client B (w=3) selects coords 1 only with value 4. Coordinate 2: nobody.
PREV = {"w": t(10, 10, 10)}
UPS = [Upload({"w": t(1, 2, 0)}, {"w": b(1, 1, 0)}, 1.0),
       Upload({"w": t(0, 4, 0)}, {"w": b(0, 1, 0)}, 3.0)]


@pytest.mark.parametrize("rule, expected", [
    # (1*1 + 3*0)/4, (1*2 + 3*4)/4, 0
    pytest.param(LITERAL, [0.25, 3.5, 0.0], id="literal-zeros-in"),
    # as literal, coordinate 2 carried over
    pytest.param(CARRY, [0.25, 3.5, 10.0], id="carry-over"),
    # coord0: only A -> 1; coord1: (1*2+3*4)/4 = 3.5; coord2: prev
    pytest.param(SELECTOR, [1.0, 3.5, 10.0], id="selector-mean"),
    # 10 + (1*(1-10) + 0)/4 = 7.75; 10 + (1*(2-10) + 3*(4-10))/4 = 3.5; 10
    pytest.param(DELTA, [7.75, 3.5, 10.0], id="masked-delta"),
])
def test_rules_on_hand_checked_input(rule, expected):
    out = rule(PREV, UPS)
    torch.testing.assert_close(out["w"], t(*expected))


def test_fedavg_weighted_mean_and_int_buffer():
    prev = {"w": t(0, 0), "n": torch.tensor(0)}
    ups = [Upload({"w": t(1, 2), "n": torch.tensor(3)}, None, 1),
           Upload({"w": t(3, 6), "n": torch.tensor(5)}, None, 1)]
    out = fedavg()(prev, ups)
    torch.testing.assert_close(out["w"], t(2, 4))
    assert out["n"].dtype == torch.int64 and int(out["n"]) == 4


def test_keep_local_keeps_previous_value():
    prev = {"bn.weight": t(7), "fc.weight": t(0)}
    ups = [Upload({"bn.weight": t(1), "fc.weight": t(1)}, None, 1),
           Upload({"bn.weight": t(3), "fc.weight": t(3)}, None, 1)]
    out = chain(weighted_mean(), keep_local(lambda k: k.startswith("bn")))(prev, ups)
    assert out["bn.weight"].item() == 7 and out["fc.weight"].item() == 2


def test_bad_weights_rejected():
    with pytest.raises(ValueError, match="positive sum"):
        LITERAL(PREV, [Upload({"w": t(1, 1, 1)}, None, 0.0)])


def test_no_uploads_returns_prev():
    assert CARRY(PREV, [])["w"] is PREV["w"]


# ---------------------------------------------------------------- hypothesis properties

floats = st.floats(-1e3, 1e3, allow_nan=False, width=32)


@st.composite
def problem(draw):
    n = draw(st.integers(1, 6))
    k = draw(st.integers(1, 5))
    prev = torch.tensor(draw(st.lists(floats, min_size=n, max_size=n)))
    states = [torch.tensor(draw(st.lists(floats, min_size=n, max_size=n))) for _ in range(k)]
    masks = [torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
             for _ in range(k)]
    weights = [draw(st.floats(0.1, 100)) for _ in range(k)]
    return prev, states, masks, weights


@settings(max_examples=60, deadline=None)
@given(problem())
def test_fedavg_of_identical_models_is_that_model(p):
    prev, states, _, weights = p
    ups = [Upload({"w": states[0]}, None, w) for w in weights]
    assert torch.equal(fedavg()({"w": prev}, ups)["w"], states[0])


@settings(max_examples=60, deadline=None)
@given(problem())
def test_unselected_coordinate_zero_under_literal_unchanged_under_carry(p):
    prev, states, masks, weights = p
    ups = [Upload({"w": s * m}, {"w": m}, w) for s, m, w in zip(states, masks, weights)]
    nobody = ~torch.stack(masks).any(0)
    lit = LITERAL({"w": prev}, ups)["w"]
    assert torch.all(lit[nobody] == 0)
    for rule in (CARRY, SELECTOR, DELTA):
        assert torch.equal(rule({"w": prev}, ups)["w"][nobody], prev[nobody])


@settings(max_examples=60, deadline=None)
@given(problem())
def test_all_selected_rules_coincide_with_fedavg(p):
    prev, states, _, weights = p
    full = [torch.ones_like(s, dtype=torch.bool) for s in states]
    ups = [Upload({"w": s}, {"w": m}, w) for s, m, w in zip(states, full, weights)]
    ref = fedavg()({"w": prev}, ups)["w"]
    for rule in (CARRY, SELECTOR, DELTA):
        torch.testing.assert_close(rule({"w": prev}, ups)["w"], ref, atol=1e-3, rtol=1e-5)


@settings(max_examples=60, deadline=None)
@given(problem())
def test_selector_mean_is_within_selected_values(p):
    prev, states, masks, weights = p
    ups = [Upload({"w": s}, {"w": m}, w) for s, m, w in zip(states, masks, weights)]
    out = SELECTOR({"w": prev}, ups)["w"]
    S, Mk = torch.stack(states), torch.stack(masks)
    lo = torch.where(Mk, S, torch.inf).min(0).values
    hi = torch.where(Mk, S, -torch.inf).max(0).values
    sel = Mk.any(0)
    assert torch.all(out[sel] >= lo[sel] - 1e-3) and torch.all(out[sel] <= hi[sel] + 1e-3)
