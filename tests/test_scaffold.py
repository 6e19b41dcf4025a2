"""``audit new``: the claim it writes is importable, runs at smoke scale at once, gets a
verdict, is locked and verified through its own package; bad input is refused."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from audit import checks
from audit import claims as claims_mod
from audit import scaffold
from audit.cli import main
from audit.runner import Cache, execute, make_context
from fakedist import fake_install, forget

CLAIM_ID = "toy-server-step"
MODULE = "toy_server_step"
PKG = "claim_toy_server_step"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("AUDIT_LOCKS", raising=False)  # the new package's own lock file
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUDIT_DATA", raising=False)
    claims_mod.registry()
    # torch imported before pytester snapshots sys.modules: a module imported after it
    # is dropped again at teardown, and torch cannot be imported twice in one process
    import torch  # noqa: F401
    yield tmp_path
    forget(PKG)


def _install(out: Path) -> None:
    """What `pip install -e out` would register, read from the pyproject it wrote."""
    meta = tomllib.loads((out / "pyproject.toml").read_text())
    fake_install(out, meta["project"]["name"], meta["project"]["entry-points"]["audit.claims"])


def _new(env, capsys, monkeypatch, claim_id, pkg, module_name, *side):
    """`audit new` into ``env/mine``, "installed" (what `pip install -e` registers, from
    the pyproject it wrote) and imported: (output folder, what it said, module, claim)."""
    out = env / "mine"
    assert main(["new", claim_id, "--paper", "2401.01234v2", "--out-dir", str(out),
                 *side]) == 0
    said = capsys.readouterr().out
    monkeypatch.syspath_prepend(str(out))
    _install(out)
    module = __import__(f"{pkg}.{module_name}", fromlist=["CLAIM"])
    claim = claims_mod.get(claim_id)
    assert claim.run is module.CLAIM.run
    # the generic declaration checks pass on the template as written (its placeholders
    # are well formed), and it runs on its default seeds: at least 8, since the
    # three-way rule decides nothing below 6 pairs
    assert checks.problems(claim) == []
    assert len(claim.default_seeds) >= 8
    # tuning reads the validation accuracy only: final_acc is the verdict's test set
    assert claim.validation_metrics == ("val_acc",)
    return out, said, module, claim


def _run_and_lock(env, pytester, out, claim, pkg, module_name, passed):
    """Smoke scale on the claim's default seeds: CONFIRMED with the premise reproduced,
    every unit with a validation metric beside the test one (settings are tuned on
    val_acc, never on the test accuracy the verdict reads); then its falsifier records
    the lock beside its module."""
    res = execute(claim, make_context(claim, "smoke"), cache=Cache(env / "cache"),
                  progress=False)
    assert res.verdict.premise.status == "reproduced"
    assert res.verdict.verdict.value == "CONFIRMED"
    assert [(a["id"], a["verdict"], a["kind"]) for a in res.answers] == [
        ("gap", "CONFIRMED", "experiment")]
    units = [json.loads(p.read_text())["result"]
             for p in (env / "cache" / claim.id).glob("*.json")]
    assert len(units) == 2 * len(claim.default_seeds)
    for unit in units:
        assert {"final_acc", "val_acc", "planted_acc"} <= set(unit)
        assert 0.0 <= unit["val_acc"] <= 1.0 and unit["planted_acc"] <= unit["final_acc"]
    pytester.syspathinsert(str(out))
    falsifier = (out / "falsifiers" / f"test_{module_name}.py").read_text()
    pytester.makepyfile(**{f"test_{module_name}": falsifier})
    result = pytester.runpytest_inprocess("-p", "audit.pytest_plugin", "-p", "no:randomly",
                                          "--audit-update-locks")
    result.assert_outcomes(passed=passed)
    locks = json.loads((out / pkg / "locks.json").read_text())
    assert locks[claim.id]["smoke"] == {"verdict": "CONFIRMED", "parts": {"gap": "CONFIRMED"},
                                        "questions": {"gap": "CONFIRMED"},
                                        "seeds": list(claim.default_seeds)}
    return res


def test_new_claim_runs_at_once_and_is_locked_and_verified(env, capsys, pytester,
                                                           monkeypatch):
    out, said, module, claim = _new(env, capsys, monkeypatch, CLAIM_ID, PKG, MODULE)
    for rel in (f"{PKG}/__init__.py", f"{PKG}/{MODULE}.py", f"falsifiers/test_{MODULE}.py",
                "pyproject.toml", "conftest.py"):
        assert (out / rel).is_file() and f"wrote {out / rel}" in said
    assert f"audit run {CLAIM_ID}" in said and "--seeds 3" not in said
    assert claim.locks_path() == out / PKG / "locks.json"
    assert (claim.id, claim.paper.arxiv_id, claim.paper.version) == (CLAIM_ID, "2401.01234",
                                                                    "2")
    assert [a.name for a in claim.arms] == ["literal", "corrected"]
    # it declares its questions, and its single word is theirs
    assert [q.id for q in claim.questions] == ["gap"]
    assert claim.combination.parts == ("gap",)
    assert list(make_context(claim, "smoke").seeds) == list(claim.default_seeds)
    res = _run_and_lock(env, pytester, out, claim, PKG, MODULE, passed=6)
    assert res.verdict.parts[0].reachable == ("CONFIRMED", "REFUTED", "INCONCLUSIVE")
    # listed, run by the CLI (from the cache), then `audit verify` passes on the lock
    assert main(["list"]) == 0 and CLAIM_ID in capsys.readouterr().out
    assert main(["run", CLAIM_ID, "--quiet", "--out", str(env / "r")]) == 0
    assert f"{CLAIM_ID}: CONFIRMED (locked: CONFIRMED)" in capsys.readouterr().out
    report = json.loads((env / "r" / f"{CLAIM_ID}.json").read_text())
    assert [(q["id"], q["verdict"]) for q in report["questions"]] == [("gap", "CONFIRMED")]
    assert any("Assay sensitivity" in n and "shown" in n for n in report.get("notes", ()))
    assert main(["verify", CLAIM_ID, "--quiet"]) == 0


CLIENT_ID, CLIENT_MODULE, CLIENT_PKG = "toy-stragglers", "toy_stragglers", "claim_toy_stragglers"


@pytest.fixture
def client_env(env):
    yield env
    forget(CLIENT_PKG)


def test_new_client_side_claim_runs_and_is_locked(client_env, capsys, pytester, monkeypatch):
    """``--side client``: the arms differ in a client hook (the stragglers' budget); the
    claim runs at smoke scale on its default seeds, decides with the three-way rule, and
    its falsifier (with a test of the piece itself) locks it."""
    out, _, module, claim = _new(client_env, capsys, monkeypatch, CLIENT_ID, CLIENT_PKG,
                                 CLIENT_MODULE, "--side", "client")
    text = (out / CLIENT_PKG / f"{CLIENT_MODULE}.py").read_text()
    assert "def local_steps(" in text and "def on_round_start(" in text
    assert "SERVER_RULES" not in text and "chain(" not in text
    assert [a.name for a in claim.arms] == ["full", "stragglers"] == list(module.ALGORITHMS)
    _run_and_lock(client_env, pytester, out, claim, CLIENT_PKG, CLIENT_MODULE, passed=7)


def test_new_refuses_an_unknown_side(tmp_path):
    with pytest.raises(scaffold.AuditError, match="--side 'middle'"):
        scaffold.render("ok-id", "2401.01234", side="middle")


def test_new_refuses_to_overwrite_and_keeps_existing_package_files(tmp_path, capsys):
    out = tmp_path / "proj"
    out.mkdir()
    (out / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    assert main(["new", CLAIM_ID, "--paper", "2401.01234", "--out-dir", str(out)]) == 0
    said = capsys.readouterr().out
    assert (out / "pyproject.toml").read_text() == "[project]\nname = 'mine'\n"
    assert f"kept  {out / 'pyproject.toml'} (exists)" in said
    assert f'"{CLAIM_ID}" = "{PKG}.{MODULE}"' in said  # the entry point to add
    module = out / PKG / f"{MODULE}.py"
    module.write_text("# edited by hand\n")
    assert main(["new", CLAIM_ID, "--paper", "2401.01234", "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists; refusing to overwrite" in err[0]
    assert module.read_text() == "# edited by hand\n"


@pytest.mark.parametrize("claim_id, paper, message", [
    ("../evil", "2401.01234", "not a safe name"),
    ("9lives", "2401.01234", "must start with a letter"),
    ("ok-id", "12345", "not an arXiv identifier"),
    ("ok-id", "2413.01234", "month"),
    ("ok-id", "2401.01234v0", "not an arXiv identifier"),
    ("flayer-masked-zero", "2412.07062", "already registered"),
    ("declarations", "2401.01234", "shadowed by the package's declarations"),
])
def test_new_refuses_bad_input_in_one_line(tmp_path, capsys, claim_id, paper, message):
    assert main(["new", claim_id, "--paper", paper, "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "o").exists()


def test_a_dotted_claim_id_is_one_entry_point_name(tmp_path, capsys):
    """A safe id may hold dots; TOML would read a bare dotted key as nested tables, so the
    generated pyproject quotes it and the entry point keeps the whole id."""
    out = tmp_path / "dotted"
    assert main(["new", "demo.v2-step", "--paper", "2401.01234", "--out-dir", str(out)]) == 0
    capsys.readouterr()
    meta = tomllib.loads((out / "pyproject.toml").read_text())
    points = meta["project"]["entry-points"]["audit.claims"]
    assert list(points) == ["demo.v2-step"] and isinstance(points["demo.v2-step"], str)


def test_arxiv_forms():
    assert scaffold.parse_arxiv("2412.07062") == ("2412.07062", "1")
    assert scaffold.parse_arxiv("arXiv:2412.07062v3") == ("2412.07062", "3")
    assert scaffold.parse_arxiv("hep-th/9901001v2") == ("hep-th/9901001", "2")
    assert scaffold.parse_arxiv("math.AG/0309136") == ("math.AG/0309136", "1")


def test_a_refused_folder_writes_nothing(tmp_path, capsys):
    """A symlinked falsifiers/ folder was refused after the package files were written,
    and the rerun was refused by them; every folder is now checked first."""
    import os

    out = tmp_path / "o"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", out / "falsifiers")
    assert main(["new", "probe-gap", "--paper", "2401.01234", "--out-dir", str(out)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["falsifiers"]
    assert not any((tmp_path / "elsewhere").iterdir())
