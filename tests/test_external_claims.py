"""A claim in a separately installed package: found through the ``audit.claims`` entry
point, listed, run, locked beside its module, verified, and checked by the pytest plugin;
a broken plugin is skipped with one warning line, a duplicate id is an error."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from audit import claims as claims_mod
from audit.cli import main
from fakedist import fake_install, forget

PKG = "extclaim_demo"
CLAIM_ID = "ext-demo"

CLAIM_SOURCE = '''"""ext-demo: a tiny claim outside the audit repository (numpy only)."""
import numpy as np

from audit import stats
from audit.claims import Analysis, Arm, Claim, Paper, RecordRef, RunSpec
from audit.verdict import Estimate, Premise, Rule, all_of, on_reviewer


def run(spec, ctx):
    base = float(np.random.default_rng([spec.seed, 1]).normal(0.5, 0.05))
    noise = float(np.random.default_rng([spec.seed, 2, len(spec.arm)]).normal(0, 0.01))
    return {"score": base + noise + (ctx.config["effect"] if spec.arm == "corrected" else 0)}


def _decide(tw):
    return on_reviewer(tw.outcome, holds_when="SUPPORTED"), tw.reason, "more seeds"


RULE = Rule("gap", "three-way rule, corrected - literal above m = {m}", _decide)


def analyse(results, ctx):
    arr = {a: [results[RunSpec(a, s)]["score"] for s in ctx.seeds]
           for a in ("literal", "corrected")}
    tw = stats.three_way(arr["corrected"], arr["literal"], margin=ctx.config["margin"],
                         equivalence_margin=ctx.config["margin"],
                         alpha=0.05 * ctx.alpha_fraction)
    est = Estimate.of("gap", tw.difference, "score")
    premise = Premise("corrected scores", "reproduced", "by construction", est)
    return Analysis((est,), (RULE(tw, params={"m": ctx.config["margin"]}),),
                    premise=premise)


CLAIM = Claim(
    id="ext-demo", paper=Paper("2401.00001", "An external paper", "1", "EXT"),
    record=RecordRef("external review", ("claim",)), title="external demo",
    statement="The corrected arm beats the literal one.",
    arms=(Arm("literal", "as printed", "as printed"),
          Arm("corrected", "one piece changed", "the piece")),
    rules=(RULE,), combination=all_of(("gap",)), stochastic=True,
    scales={"smoke": {"effect": 0.3, "margin": 0.05}}, run=run, analyse=analyse,
    default_seeds=tuple(range(8)))  # the three-way rule decides nothing below 6 pairs
'''

FALSIFIER = '''
from audit.pytest_plugin import check_lock


def test_ext_demo_is_locked(audit_run):
    check_lock(audit_run("ext-demo"))
'''

BUILTIN_LOCKS = Path(claims_mod.__file__).with_name("locks.json")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The package ``extclaim-demo`` "installed" (a dist-info on sys.path), its lock file
    beside its module; the repository's own lock file must stay untouched."""
    site = fake_install(tmp_path / "site", "extclaim-demo", {CLAIM_ID: f"{PKG}.claim"},
                        {f"{PKG}/__init__.py": "", f"{PKG}/claim.py": CLAIM_SOURCE})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("AUDIT_LOCKS", raising=False)  # the package's own lock file
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUDIT_DATA", raising=False)
    before = BUILTIN_LOCKS.read_bytes()
    claims_mod.registry()  # torch and the built-in claims imported before pytester's
    yield site             # snapshot of sys.modules (which would drop them afterwards)
    forget(PKG)
    assert BUILTIN_LOCKS.read_bytes() == before


def test_list_run_lock_verify_and_pytest_plugin(plugin, tmp_path, capsys, pytester):
    # list: after the built-in claims, with where it came from
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(CLAIM_ID) and "EXT" in lines[-1] and "no lock" in lines[-1]
    assert main(["list", "--json"]) == 0
    item = [i for i in json.loads(capsys.readouterr().out) if i["id"] == CLAIM_ID][0]
    assert "entry point 'ext-demo = extclaim_demo.claim' (package extclaim-demo 0.1)" \
        in item["origin"]
    claim = claims_mod.get(CLAIM_ID)
    assert claim.locks_path() == plugin / PKG / "locks.json"

    # run: a verdict and its report
    out = tmp_path / "reports"
    assert main(["run", CLAIM_ID, "--out", str(out), "--quiet"]) == 0
    assert "ext-demo: CONFIRMED (locked: none)" in capsys.readouterr().out
    data = json.loads((out / f"{CLAIM_ID}.json").read_text())
    assert data["verdict"] == "CONFIRMED"
    assert [(q["id"], q["verdict"]) for q in data["questions"]] == [("claim", "CONFIRMED")]
    assert CLAIM_ID in (out / "README.md").read_text()

    # verify without a lock fails and says so
    assert main(["verify", CLAIM_ID, "--quiet"]) == 1
    assert "NO LOCK ext-demo" in capsys.readouterr().err

    # the pytest plugin (in process: the package is on sys.path here): records the lock
    # beside the package's module, then checks it
    pytester.makepyfile(test_ext=FALSIFIER)
    args = ("-p", "audit.pytest_plugin", "-p", "no:randomly", "-p", "no:cacheprovider")
    pytester.runpytest_inprocess(*args).assert_outcomes(failed=1)  # no lock yet
    result = pytester.runpytest_inprocess(*args, "--audit-update-locks")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*audit verdicts*", "ext-demo*CONFIRMED*"])
    lock_file = plugin / PKG / "locks.json"
    lock = json.loads(lock_file.read_text())[CLAIM_ID]["smoke"]
    assert lock["verdict"] == "CONFIRMED"
    # a plugin written before questions existed answers one, `claim`, by its combination
    assert lock["questions"] == {"claim": "CONFIRMED"}
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=1)

    # verify against the package's lock: passes, and a changed lock is a flip
    assert main(["verify", CLAIM_ID, "--quiet"]) == 0
    locks = json.loads(lock_file.read_text())
    locks[CLAIM_ID]["smoke"]["verdict"] = "REFUTED"
    lock_file.write_text(json.dumps(locks))
    capsys.readouterr()
    assert main(["verify", CLAIM_ID, "--quiet"]) == 1
    assert "FLIPPED ext-demo: locked REFUTED, now CONFIRMED" in capsys.readouterr().err
    pytester.runpytest_inprocess(*args).assert_outcomes(failed=1)


@pytest.mark.slow  # a fresh interpreter imports torch and the built-in claims: ~8 s
def test_the_pytest_plugin_in_a_fresh_process(plugin, pytester, monkeypatch):
    # as a user runs it: another process that finds the package through PYTHONPATH
    monkeypatch.setenv("PYTHONPATH", str(plugin))
    pytester.makepyfile(test_ext=FALSIFIER)
    result = pytester.runpytest_subprocess("-p", "audit.pytest_plugin", "-p", "no:randomly",
                                           "--audit-update-locks")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ext-demo*CONFIRMED*locked=*"])
    assert (plugin / PKG / "locks.json").exists()


def test_a_change_in_the_plugin_source_invalidates_its_cached_runs(plugin, capsys):
    assert main(["run", CLAIM_ID, "--out", str(plugin / "r"), "--quiet"]) == 0
    assert "[16 run(s) computed, 0 cached]" in capsys.readouterr().out
    assert main(["run", CLAIM_ID, "--out", str(plugin / "r"), "--quiet"]) == 0
    assert "[0 run(s) computed, 16 cached]" in capsys.readouterr().out
    src = plugin / PKG / "claim.py"
    src.write_text(src.read_text() + "\n# edited\n")
    assert main(["run", CLAIM_ID, "--out", str(plugin / "r"), "--quiet"]) == 0
    assert "[16 run(s) computed, 0 cached]" in capsys.readouterr().out


def test_a_broken_plugin_is_one_warning_and_the_others_still_work(tmp_path, monkeypatch,
                                                                  capsys):
    site = fake_install(tmp_path / "a", "broken-claims",
                        {"broken": "extbroken_a.claim", "empty": "extbroken_b"},
                        {"extbroken_a/__init__.py": "",
                         "extbroken_a/claim.py": "import no_such_module_here\n",
                         "extbroken_b/__init__.py": "X = 1\n"})
    monkeypatch.syspath_prepend(str(site))
    try:
        assert main(["list"]) == 0
        io = capsys.readouterr()
        assert "flayer-masked-zero" in io.out  # the built-in claims are all there
        err = io.err.strip().splitlines()
        assert len(err) == 2 and all(e.startswith("audit: warning: entry point '")
                                     for e in err)
        assert "'broken = extbroken_a.claim' (package broken-claims 0.1)" in err[0]
        assert "ModuleNotFoundError: No module named 'no_such_module_here'" in err[0]
        assert "'empty = extbroken_b'" in err[1] and "defines no CLAIM" in err[1]
        # a command that reads the registry several times (run: select, then the
        # index) still warns once per broken entry point
        assert main(["run", "flayer-eq4-unbounded", "--out", str(tmp_path / "r"),
                     "--quiet"]) == 0
        assert len([e for e in capsys.readouterr().err.splitlines()
                    if e.startswith("audit: warning: entry point")]) == 2
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            reg = claims_mod.registry()
        assert {type(w.message) for w in seen} == {claims_mod.ClaimPluginWarning}
        assert len(reg) == len(claims_mod.CLAIM_MODULES)
    finally:
        forget("extbroken_a", "extbroken_b")


def test_a_duplicate_claim_id_is_an_error_naming_both(tmp_path, monkeypatch, capsys):
    source = CLAIM_SOURCE.replace('id="ext-demo"', 'id="flayer-masked-zero"')
    site = fake_install(tmp_path / "d", "dup-claims", {"dup": "extdup.claim"},
                        {"extdup/__init__.py": "", "extdup/claim.py": source})
    monkeypatch.syspath_prepend(str(site))
    try:
        with pytest.raises(claims_mod.AuditError, match=r"defined twice: by the built-in "
                           r"module audit\.papers\.flayer\.masked_zero and by entry "
                           r"point 'dup = extdup\.claim'"):
            claims_mod.registry()
        assert main(["list"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "defined twice" in err[0]
    finally:
        forget("extdup")
