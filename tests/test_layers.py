"""The package's layers: import contracts, torch-free listing, one RunContext serialisation.

- ``lint-imports`` (import-linter, the contracts in ``pyproject.toml``) passes;
- ``audit list`` and ``audit review`` import no torch: neither the core (the CLI, the claim
  registry, reports, coverage) nor any claim module at import time (a claim imports torch,
  and its algorithm pieces, where it runs); the module that led to an import is named;
- the low modules (``audit.keys``, ``audit.seeds``) are what the old names re-export, and
  the FLAYER server compositions are the engine's named ones, the same objects.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit.claims import CLAIM_MODULES

ROOT = Path(__file__).resolve().parents[1]

# Runs a CLI command with every `import torch...` statement watched: for each, the
# innermost claim module on the stack (the one whose import led there), else the module
# running the statement, is recorded.
_WATCH = textwrap.dedent("""
    import builtins, json, sys
    from audit.claims import CLAIM_MODULES  # read from the folders; imports no torch
    blamed, real = set(), builtins.__import__

    def watch(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "torch" or name.startswith("torch.")):
            here = sys._getframe(1).f_globals.get("__name__", "")
            f, claim = sys._getframe(1), None
            while f is not None and claim is None:  # the innermost claim module
                mod = f.f_globals.get("__name__", "")
                if mod in CLAIM_MODULES:
                    claim = mod
                f = f.f_back
            blamed.add(claim or here)
        return real(name, globals, locals, fromlist, level)

    builtins.__import__ = watch
    from audit import cli
    try:
        rc = cli.main(sys.argv[1:])
    except SystemExit as exc:
        rc = exc.code
    print(json.dumps({"rc": rc, "torch": "torch" in sys.modules,
                      "blamed": sorted(blamed)}))
""")


def _run_watched(*args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _WATCH, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-2000:]
    return json.loads(lines[-1])


def _check_torch_free(result: dict) -> None:
    blamed = set(result["blamed"])
    core = sorted(b for b in blamed if b not in CLAIM_MODULES)
    assert not core, f"the core imports torch on this path: {core}"
    claims = sorted(blamed - set(core))
    assert not claims, f"claim modules import torch at import time: {claims}"
    assert not result["torch"], "torch was imported on this path (by no import statement)"


def test_audit_list_imports_no_torch():
    result = _run_watched("list")
    assert result["rc"] == 0
    _check_torch_free(result)


def test_audit_review_imports_no_torch(tmp_path):
    rec = tmp_path / "record.json"
    rec.write_text(json.dumps({"referee_report": {"major_comments": [],
                                                  "minor_comments": []}}))
    result = _run_watched("review", str(rec), "--out", str(tmp_path / "out"))
    assert result["rc"] in (0, 1)  # a record no claim reads may be reported; no crash
    _check_torch_free(result)


def test_the_core_modules_import_no_torch():
    code = ("import sys, audit.cli, audit.claims, audit.runner, audit.report, "
            "audit.coverage, audit.keys, audit.seeds, audit.tuning, audit.estimate, "
            "audit.pool, audit.distributed; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def _lint_imports() -> str | None:
    here = Path(sys.executable).with_name("lint-imports")
    return str(here) if here.exists() else shutil.which("lint-imports")


@pytest.mark.skipif(_lint_imports() is None, reason="import-linter is not installed")
def test_import_contracts_are_kept():
    proc = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# ------------------------------------------------------------------ the low modules
def test_old_names_are_the_low_modules_own():
    from audit import keys, runner, seeds, tuning

    assert runner.code_version is keys.code_version
    assert runner.data_identity is keys.data_identity
    for name in ("resolve_seeds", "max_seeds", "MAX_SEEDS", "MAX_SEED_VALUE"):
        assert getattr(runner, name) is getattr(seeds, name)
    for name in ("TUNING_SEED_START", "MAX_PILOT_SEEDS", "tuning_seeds", "is_tuning"):
        assert getattr(tuning, name) is getattr(seeds, name)


def test_a_report_is_a_tuning_run_by_the_seed_rule():
    from audit.report import _tuning_run

    assert _tuning_run([1000, 1001]) and not _tuning_run([0, 1])
    assert not _tuning_run([]) and not _tuning_run(None)
    assert not _tuning_run([0, 1000])  # a stored list mixing the ranges: no tuning run


def test_run_context_round_trips_every_field_but_the_progress_callback(toy):
    from audit.claims import RunContext
    from audit.runner import make_context

    ctx = dataclasses.replace(make_context(toy.CLAIM, "smoke"), plugin_version="p1",
                              checkpoint_dir="/tmp/ck", alpha_fraction=0.25,
                              on_round=print)
    data = ctx.to_dict()
    assert "on_round" not in data and data["plugin_version"] == "p1"
    assert json.loads(json.dumps(data)) == data  # plain data
    back = RunContext.from_dict(data)
    assert back.on_round is None
    for f in dataclasses.fields(RunContext):
        if f.name != "on_round":
            assert getattr(back, f.name) == getattr(ctx, f.name), f.name
    assert back.cache_version() == ctx.cache_version()  # plugin_version kept


def test_the_pool_and_ray_workers_get_the_whole_context(toy):
    import pickle

    from audit.distributed import _context_fields
    from audit.pool import PoolBackend
    from audit.runner import make_context

    ctx = dataclasses.replace(make_context(toy.CLAIM, "smoke"), plugin_version="p1",
                              on_round=print)
    assert _context_fields(ctx) == ctx.to_dict()
    payload, why = PoolBackend._payload(object.__new__(PoolBackend), toy.CLAIM, ctx)
    assert payload is not None, why
    _, wctx = pickle.loads(payload)
    assert wctx.plugin_version == "p1" and wctx.on_round is None and wctx == ctx


def test_flayer_server_arms_are_the_engines_named_compositions():
    from audit.papers.flayer.algorithm import ARMS, SERVER_RULES
    from audit.fl.aggregate import MASKED_COMPOSITIONS

    assert list(SERVER_RULES) == list(MASKED_COMPOSITIONS)
    for name, rule in MASKED_COMPOSITIONS.items():
        assert SERVER_RULES[name] is rule and ARMS[name].server is rule


# ------------------------------------------------------------------ declarations apart
PAPERS = ROOT / "audit" / "papers"
# what a declaration module may import: value types and constants, never a claim's code,
# the engine, the algorithms or an array library (see audit.papers's docstring); of the
# paper folders, only the shared constants of audit.papers itself and declarations
_DECLARATION_IMPORTS = ("audit.claims", "audit.verdict", "audit.tuning", "audit.seeds",
                        "audit.questions", "__future__",
                        "math", "dataclasses", "typing", "fractions")


def _imports(path: Path) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def _declaration_modules() -> list[Path]:
    return sorted(p for p in PAPERS.glob("*/declarations/*.py") if p.name != "__init__.py")


def _declaration_import_ok(name: str, paper: str) -> bool:
    if name == "audit.papers" or name == f"audit.papers.{paper}.declarations" or \
            name.startswith(f"audit.papers.{paper}.declarations."):
        return True
    return any(name == ok or name.startswith(ok + ".") for ok in _DECLARATION_IMPORTS)


@pytest.mark.parametrize("path", _declaration_modules(),
                         ids=lambda p: f"{p.parent.parent.name}.{p.stem}")
def test_a_declaration_module_imports_only_value_types(path):
    paper = path.parent.parent.name
    bad = sorted(n for n in _imports(path) if not _declaration_import_ok(n, paper))
    assert not bad, f"{path.name} imports {bad}: a declaration module holds literals only"


@pytest.mark.parametrize("path", _declaration_modules(),
                         ids=lambda p: f"{p.parent.parent.name}.{p.stem}")
def test_a_declaration_module_belongs_to_a_claim_that_uses_it(path):
    paper = path.parent.parent.name
    claim = path.parent.parent / path.name
    assert claim.is_file(), f"{path.name} declares no claim module of that name"
    assert f"audit.papers.{paper}.declarations.{path.stem}" in _imports(claim) or \
        f"audit.papers.{paper}.declarations" in _imports(claim), \
        f"{claim.name} does not import its declarations"
    assert f"audit.papers.{paper}.{path.stem}" in CLAIM_MODULES, \
        f"{claim.name} is not registered as a claim (no top-level CLAIM)"


@pytest.mark.parametrize("side", ["server", "client"])
def test_the_scaffold_writes_declarations_by_the_same_rules(side, tmp_path):
    """`audit new` writes a claim's declarations apart, as the built-in claims keep them:
    value types only, no function or class, imported by the claim module it writes."""
    import ast

    from audit import scaffold

    files = scaffold.render("demo-x", "2401.01234", side=side)
    decl = tmp_path / "decl.py"
    decl.write_text(files["claim_demo_x/declarations/demo_x.py"])
    bad = sorted(n for n in _imports(decl)
                 if not any(n == ok or n.startswith(ok + ".") for ok in _DECLARATION_IMPORTS))
    assert not bad, f"the scaffold's declarations import {bad}"
    tree = ast.parse(decl.read_text())
    assert not [n for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
    code = tmp_path / "code.py"
    code.write_text(files["claim_demo_x/demo_x.py"])
    assert "claim_demo_x.declarations.demo_x" in _imports(code)
