"""``Claim.decide``: the decisions without the presentation, for the stability check, held
to the decisions ``analyse`` makes."""
import ast
import json
import dataclasses
import importlib
from pathlib import Path

import pytest

from audit import claims as claims_mod
from audit.claims import AuditError
from audit.runner import Cache, execute, make_context
from audit.verdict import Outcome


def _run(claim, tmp_path, seeds=range(6)):
    ctx = make_context(claim, "smoke", seeds=list(seeds))
    return execute(claim, ctx, cache=Cache(tmp_path / "cache"), progress=False)


def test_stability_re_decides_with_decide_and_never_builds_the_report(toy, tmp_path):
    calls = {"analyse": 0, "decide": 0}
    res = _run(toy.counted(calls), tmp_path)
    # one report, one check that decide agrees with it, one decision per left-out seed
    assert calls == {"analyse": 1, "decide": 1 + 6}
    assert res.verdict.stability["loo_total"] == 6
    plain = _run(toy.CLAIM, tmp_path / "plain")
    assert res.verdict.stability == plain.verdict.stability
    assert res.verdict.verdict == plain.verdict.verdict == Outcome.CONFIRMED


def test_a_decide_that_disagrees_with_analyse_is_refused(toy, tmp_path):
    def decide(results, ctx):
        a = toy.analyse(results, ctx)
        return tuple(dataclasses.replace(p, verdict=Outcome.REFUTED) for p in a.parts), None

    claim = dataclasses.replace(toy.CLAIM, decide=decide)
    with pytest.raises(AuditError, match="its decide gives"):
        _run(claim, tmp_path)


def test_a_decide_that_disagrees_on_the_premise_alone_is_refused(toy, tmp_path):
    def decide(results, ctx):
        a = toy.analyse(results, ctx)
        return a.parts, dataclasses.replace(a.premise, status="not reproduced")

    with pytest.raises(AuditError, match="its decide gives"):
        _run(dataclasses.replace(toy.CLAIM, decide=decide), tmp_path)


@pytest.mark.parametrize("bad, says", [
    (lambda results, ctx: (["not a part"], None), "must return \\(parts, premise\\)"),
    (lambda results, ctx: 1 / 0, "decide raised ZeroDivisionError"),
])
def test_a_plugins_broken_decide_is_one_error_naming_it(toy, tmp_path, bad, says):
    claim = dataclasses.replace(toy.CLAIM, decide=bad, origin="someone.claims:CLAIM")
    with pytest.raises(AuditError, match=says):
        _run(claim, tmp_path)


def test_without_decide_the_decisions_come_from_analyse(toy, tmp_path):
    ctx = make_context(toy.CLAIM, "smoke", seeds=list(range(6)))
    res = _run(toy.CLAIM, tmp_path)
    results = {s: toy.run(s, ctx) for s in toy.CLAIM.unit_specs(ctx)}
    parts, premise = toy.CLAIM.decided(results, ctx)
    assert [(p.id, p.verdict) for p in parts] == [(p.id, p.verdict) for p in res.verdict.parts]
    assert premise.status == res.verdict.premise.status


@pytest.mark.parametrize("cid", ["flayer-masked-zero", "fedtlu-lower-bound",
                                 "genefl-inverted-cosine", "lips-dropout-control"])
def test_the_large_claims_decide_apart_from_presenting(cid):
    # each builds its report from evidence(results, ctx), whose parts and premise decide
    # is (the agreement itself is checked on every run, above)
    claim = claims_mod.get(cid)
    assert claim.decide is not None
    module = importlib.import_module(claim.analyse.__module__)
    assert claim.decide.__module__ == claim.analyse.__module__
    assert callable(getattr(module, "evidence"))


PAPERS = Path(claims_mod.__file__).resolve().parent / "papers"
PRESENT = sorted(p for p in PAPERS.glob("*/present/*.py") if p.name != "__init__.py")


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, ``from a import b`` counted as ``a`` and ``a.b``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_every_large_claim_has_a_presentation_module():
    assert len(PRESENT) == 5, [p.name for p in PRESENT]


@pytest.mark.parametrize("path", PRESENT, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_a_presentation_imports_no_claim_module(path):
    # it builds the report from the evidence it is given; the claim's code imports it,
    # never the other way (import-linter keeps it off the engine, runner and tuning)
    assert not _imported(path) & set(claims_mod.CLAIM_MODULES)


@pytest.mark.parametrize("cid", ["flayer-masked-zero", "fedtlu-lower-bound",
                                 "genefl-inverted-cosine", "genefl-uplink-bytes",
                                 "lips-dropout-control"])
def test_evidence_assigns_every_name_its_presentation_reads(cid):
    module = importlib.import_module(claims_mod.get(cid).analyse.__module__)
    code = module.evidence.__code__
    assigned = set(code.co_varnames) | set(code.co_cellvars)
    assert set(module.P.EVIDENCE) <= assigned, set(module.P.EVIDENCE) - assigned


# ------------------------------------------------ the committed report, checked by a test
def _committed(toy, tmp_path):
    from audit import report

    res = _run(toy.CLAIM, tmp_path)
    reports = tmp_path / "reports"
    report.write(res, reports)
    return res, reports, reports / f"{toy.CLAIM.id}.json"


def test_a_run_equal_to_its_committed_report_passes(toy, tmp_path):
    from audit.pytest_plugin import check_committed_report

    res, reports, _ = _committed(toy, tmp_path)
    check_committed_report(res, rtol=0.0, atol=0.0, reports=reports)  # no failure


def test_a_moved_number_fails_and_a_small_one_passes_within_the_tolerance(toy, tmp_path):
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    est = data["estimates"][0]
    est["value"] = est["value"] * (1 + 1e-6)
    path.write_text(json.dumps(data))
    check_committed_report(res, rtol=1e-3, atol=0.0, reports=reports)  # within the tolerance
    with pytest.raises(pytest.fail.Exception, match=est["name"]):
        check_committed_report(res, rtol=0.0, atol=0.0, reports=reports)
    est["value"] = est["value"] + 1.0  # a change no tolerance of a kernel explains
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.fail.Exception, match="regenerate the report"):
        check_committed_report(res, rtol=1e-3, atol=1e-9, reports=reports)


def test_no_committed_report_or_other_seeds_is_a_skip(toy, tmp_path):
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    data["seeds"] = [s + 100 for s in data["seeds"]]
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match="other seeds"):
        check_committed_report(res, rtol=0.0, atol=0.0, reports=reports)
    with pytest.raises(pytest.skip.Exception, match="no committed smoke report"):
        check_committed_report(res, rtol=0.0, atol=0.0, reports=tmp_path / "none")


@pytest.mark.parametrize("field", ["cpu", "torch", "libc", "device"])
def test_a_trained_claim_is_compared_only_on_the_machine_its_report_came_from(
        toy, tmp_path, field):
    # same_machine: a report of another processor, library build or device kind is not
    # compared (its last digits may differ); on the same one every number must be equal
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    data["estimates"][0]["value"] += 1e-9  # a last-digit move
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.fail.Exception, match=data["estimates"][0]["name"]):
        check_committed_report(res, reports=reports, same_machine=True)
    env = data["environment"]
    env[field] = "cuda:0 (another)" if field == "device" else "another"
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match=f"another {field}"):
        check_committed_report(res, reports=reports, same_machine=True)
    # an older report without the field is another machine too: nothing to compare
    del env[field]
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception):
        check_committed_report(res, reports=reports, same_machine=True)
    # without same_machine (an exact claim) the move is found whatever the machine
    with pytest.raises(pytest.fail.Exception):
        check_committed_report(res, reports=reports)


def test_units_from_a_cache_or_a_cluster_are_not_compared_as_this_machine_s(toy, tmp_path):
    # the report's environment is where it was assembled: units read from a cache, or run
    # on Ray workers, may have been computed on another machine
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    data["runs"].update(cached=3, cached_elsewhere=1)  # one unit computed elsewhere
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match="from a cache computed on another"):
        check_committed_report(res, reports=reports, same_machine=True)
    del data["runs"]["cached_elsewhere"]  # an older report: its cache's machines unknown
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match="from a cache"):
        check_committed_report(res, reports=reports, same_machine=True)
    # units cached on this machine (their entries say so) are compared as this machine's
    data["runs"].update(cached=3, cached_elsewhere=0)
    path.write_text(json.dumps(data))
    check_committed_report(res, reports=reports, same_machine=True)
    data["runs"]["cached"] = 0
    data["environment"]["backend"] = "on a Ray cluster (2 workers)"
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match="Ray"):
        check_committed_report(res, reports=reports, same_machine=True)
    # another GPU is another device, whatever its index
    data["environment"]["backend"] = res.environment["backend"]
    for env in (data["environment"],):
        env["device"] = "cuda:0 (NVIDIA A100)"
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.skip.Exception, match="device"):
        check_committed_report(res, reports=reports, same_machine=True)


@pytest.mark.parametrize("runs", [[0], "x", 5, {"cached": False}, {"cached": -1}])
def test_a_committed_report_with_malformed_runs_is_one_error(toy, tmp_path, runs):
    from audit.errors import AuditError
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    data["runs"] = runs
    path.write_text(json.dumps(data))
    with pytest.raises(AuditError, match="'runs' must be"):
        check_committed_report(res, reports=reports, same_machine=True)


def test_the_failure_names_the_committed_commit_without_terminal_controls(toy, tmp_path):
    from audit.pytest_plugin import check_committed_report

    res, reports, path = _committed(toy, tmp_path)
    data = json.loads(path.read_text())
    data["estimates"][0]["value"] += 1.0
    data["environment"]["commit"] = "\x1b]0;pwned\x07\x1b[2Jabc"
    path.write_text(json.dumps(data))
    with pytest.raises(pytest.fail.Exception) as failed:
        check_committed_report(res, reports=reports)
    assert "\x1b" not in str(failed.value) and "\x07" not in str(failed.value)
