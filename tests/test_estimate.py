"""``audit estimate``: time a few rounds of a claim's units, extrapolate the whole claim."""
import json

import pytest

from audit import claims
from audit.cli import main
from audit.estimate import MAX_MEASURED_ROUNDS, estimate, measured_rounds, rounds_key
from audit.runner import make_context


def test_rounds_key_finds_top_level_and_nested_counts():
    assert rounds_key({"rounds": 5, "lr": 0.1}) == ("rounds",)
    assert rounds_key({"sim": {"rounds": 3}, "n": 2}) == ("sim", "rounds")
    assert rounds_key({"n_updates": 10}) is None


@pytest.mark.parametrize("R, expected", [(None, (1, 2)), (2, (1, 2)), (5, (1, 2)),
                                         (30, (1, 5)), (40, (2, 6)), (60, (3, 10)),
                                         (300, (3, 10))])
def test_measured_rounds_grow_with_the_run_and_stop_at_ten(R, expected):
    assert measured_rounds(R) == expected


@pytest.mark.parametrize("R", [1, 3, 4, 7, 11, 13, 18, 19, 25, 59, 61, 99, 1000])
def test_measured_rounds_are_two_increasing_counts_within_the_run(R):
    r1, r2 = measured_rounds(R)
    assert 0 < r1 < r2 <= max(2, min(R, MAX_MEASURED_ROUNDS))


def test_estimate_measures_one_arm_and_extrapolates_the_rest(monkeypatch):
    import audit.estimate as E

    # the units run, but the clock is a model of it (0.5 s + 0.01 s a round): a test must
    # not depend on the machine's load, which can make 10 rounds time below 3
    real = E._time_unit

    def modelled(claim, ctx, spec):
        real(claim, ctx, spec)
        key = rounds_key(ctx.config)
        rounds = ctx.config[key[0]] if len(key) == 1 else ctx.config[key[0]][key[1]]
        return 0.5 + 0.01 * rounds

    monkeypatch.setattr(E, "_time_unit", modelled)
    claim = claims.get("flayer-masked-zero")
    lines = []
    est = estimate(claim, "smoke", seeds=2, arms=["fedavg"], progress=lines.append)
    specs = claim.unit_specs(make_context(claim, "smoke", seeds=2))
    assert est["units"] == len(specs) and est["seeds"] == [0, 1]
    assert est["rounds"] == claim.scales["smoke"]["rounds"]
    assert est["measured_rounds"] == list(measured_rounds(est["rounds"]))
    fit = est["fits"]["fedavg"]
    assert fit["per_round_s"] == pytest.approx(0.01) and len(fit["runs_s"]) == 2
    assert fit["setup_s"] == pytest.approx(0.5)
    assert set(est["extrapolated_arms"]) == {s.arm for s in specs} - {"fedavg"}
    # the total is the sum over units of setup + rounds x per-round time
    assert est["total_s"] == pytest.approx(sum(est["per_arm_s"].values()))
    n_fedavg = sum(s.arm == "fedavg" for s in specs)
    assert est["per_arm_s"]["fedavg"] == pytest.approx(
        n_fedavg * (fit["setup_s"] + est["rounds"] * fit["per_round_s"]))
    assert lines and "fedavg" in lines[0]


def test_estimate_cli_prints_json_last(capsys):
    assert main(["estimate", "genefl-uplink-bytes", "--arms", "fedavg"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    est = json.loads(out[-1])
    assert est["claim"] == "genefl-uplink-bytes" and est["label"].startswith("estimate")
    assert "about" in out[0]


@pytest.mark.parametrize("argv, message", [
    (["estimate", "flayer-masked-zero", "--arms", "nonsense"], "unknown arm"),
    (["estimate", "no-such-claim"], "no-such-claim"),
])
def test_estimate_bad_input_is_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_estimate_rejects_a_bad_round_pair(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "flayer-masked-zero", "--rounds", "3,1"])
    assert exc.value.code == 2 and "r1 < r2" in capsys.readouterr().err
