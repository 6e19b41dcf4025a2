"""The cache's code version per claim (audit.keys.claim_code_version): a claim's cached
runs are keyed on the source its ``run`` can reach by import, so a change to the CLI,
the reports or another paper's claim keeps them, and a change to anything it imports
(at any depth, inside functions too) recomputes them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import audit.keys as keys

FLAYER = "audit.papers.flayer.masked_zero"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    """A private copy of the package source, so edits here touch no other test."""
    root = tmp_path / "audit"
    shutil.copytree(keys.PACKAGE_DIR, root,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.json"))
    monkeypatch.setattr(keys, "PACKAGE_DIR", root)
    return root


def test_closure_holds_what_the_claim_imports_and_nothing_it_does_not():
    closure = set(keys.module_closure(FLAYER))
    # its declarations, its paper's algorithm (imported inside a function), the engine
    assert {FLAYER, "audit.papers.flayer.declarations.masked_zero",
            "audit.papers.flayer.algorithm", "audit.fl.engine", "audit.stats",
            "audit.claims", "audit", "audit.fl"} <= closure
    # the CLI, the reports, the pool, other papers' claims and algorithms
    assert not closure & {"audit.cli", "audit.report", "audit.regime", "audit.pool",
                          "audit.coverage", "audit.papers.lips.dropout_control",
                          "audit.papers.lips.algorithm", "audit.papers.genefl.algorithm"}


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.mark.parametrize("outside", ["cli.py", "report.py", "papers/lips/dropout_control.py",
                                     "papers/lips/algorithm.py", "papers/flayer/notes.py",
                                     # the claim's own presentation: it runs in no unit
                                     "papers/flayer/present/masked_zero.py",
                                     "papers/flayer/present/__init__.py"])
def test_an_edit_outside_the_closure_keeps_the_version(tree, outside):
    before = keys.claim_code_version(FLAYER)
    _edit(tree / outside)
    assert keys.claim_code_version(FLAYER) == before
    assert keys.code_version() != before  # the whole package's version did move


@pytest.mark.parametrize("inside", ["fl/training.py", "papers/flayer/algorithm.py", "stats.py",
                                    "papers/flayer/declarations/masked_zero.py",
                                    "papers/flayer/__init__.py", "__init__.py"])
def test_an_edit_inside_the_closure_changes_the_version(tree, inside):
    before = keys.claim_code_version(FLAYER)
    _edit(tree / inside)
    assert keys.claim_code_version(FLAYER) != before


def test_relative_nested_and_submodule_imports_are_followed(tree):
    pkg = tree / "toykeys"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def run():\n    from . import b\n    return b\n")
    (pkg / "b.py").write_text("from .c import x\n")
    (pkg / "c.py").write_text("import audit.errors\nx = 1\n")
    (pkg / "d.py").write_text("y = 2\n")
    assert keys.module_closure("audit.toykeys.a") == [
        "audit", "audit.errors", "audit.toykeys", "audit.toykeys.a", "audit.toykeys.b",
        "audit.toykeys.c"]
    before = keys.claim_code_version("audit.toykeys.a")
    _edit(pkg / "d.py")
    assert keys.claim_code_version("audit.toykeys.a") == before
    _edit(pkg / "c.py")
    assert keys.claim_code_version("audit.toykeys.a") != before


def test_a_claim_outside_the_package_keys_on_the_whole_package(toy):
    from audit.runner import make_context

    assert toy.CLAIM.code_module() == ""
    assert make_context(toy.CLAIM, "smoke").cache_version() == keys.code_version()
    assert keys.claim_code_version("") == keys.code_version()
    assert keys.claim_code_version("json") == keys.code_version()


def test_a_built_in_claim_keys_on_its_closure():
    from audit.claims import get
    from audit.runner import make_context

    claim = get("flayer-masked-zero")
    ctx = make_context(claim, "smoke")
    assert ctx.code_module == FLAYER
    assert ctx.cache_version() == keys.claim_code_version(FLAYER) != keys.code_version()
    # the workers' copy of the context keys the same
    from audit.claims import RunContext

    assert RunContext.from_dict(ctx.to_dict()).cache_version() == ctx.cache_version()


@pytest.mark.parametrize("harness", ["runner.py", "pool.py", "distributed.py", "claims.py",
                                     "keys.py"])
def test_the_harness_every_result_passes_through_is_in_every_version(tree, harness):
    # the pool's and Ray's unit wrappers and the runner's checked_result turn what run
    # returns into what is cached, whichever claim it is
    before = {m: keys.claim_code_version(m) for m in
              (FLAYER, "audit.papers.fedtlu.score_undefined",
               "audit.papers.genefl.uplink_bytes")}
    _edit(tree / harness)
    assert all(keys.claim_code_version(m) != v for m, v in before.items())


def test_a_wrapped_run_is_keyed_on_the_wrapper_s_module(tmp_path):
    import dataclasses
    import functools

    from audit.claims import get

    claim = get("flayer-masked-zero")
    assert claim.code_module() == FLAYER
    inner = get("lips-dropout-control").run

    @functools.wraps(inner)  # copies lips's __module__; the code is in this test file
    def wrapped(spec, ctx):
        return inner(spec, ctx)

    assert wrapped.__module__ == "audit.papers.lips.dropout_control"
    assert dataclasses.replace(claim, run=wrapped).code_module() == ""  # the whole package
    assert dataclasses.replace(claim, run=functools.partial(inner)).code_module() == ""
    assert keys.package_module(keys.PACKAGE_DIR / "fl" / "engine.py") == "audit.fl.engine"
    assert keys.package_module(keys.PACKAGE_DIR / "fl" / "__init__.py") == "audit.fl"
    assert keys.package_module(tmp_path / "x.py") == ""
