"""``audit new CLAIM_ID --paper ARXIV_ID``: write a claim that runs at once at smoke scale.

What it writes, under ``--out-dir`` (default: the current directory), as a package that
registers the claim through the ``audit.claims`` entry point (no edit to this
repository):

    <out>/claim_<module>/__init__.py          (when absent)
    <out>/claim_<module>/declarations/<module>.py
                                              what the claim declares, as literals: paper,
                                              margin, seeds, scales, rule text, questions
    <out>/claim_<module>/<module>.py          its code: the one differing piece and the
                                              arms, run, analyse, rule, premise, CLAIM
    <out>/falsifiers/test_<module>.py         its falsifier test (lock, rule outcomes)
    <out>/pyproject.toml                      (when absent; else the snippet is printed)
    <out>/conftest.py                         (when absent: loads audit.pytest_plugin)

``<module>`` is the claim id with ``-`` and ``.`` turned into ``_``. An existing claim
module or falsifier is never overwritten: nothing is written when either exists. The
example experiment is a real one on the engine (``audit.fl``): FedAvg on scikit-learn's
digits with the server step "as printed" (``literal``: the global model moves a tenth of
the way to the clients' mean) against the corrected step (``corrected``: the whole way).
The writer replaces that piece, the margin and the texts with their own claim's; the
guide is ``docs/WRITING_A_CLAIM.md``.

``--side client`` writes the same claim with a client-side piece instead: FedAvg on
digits with five of ten clients a round, where each round most sampled clients are
stragglers that take an eighth of their planned local steps (``stragglers``, through
``Algorithm.on_round_start`` and ``Algorithm.local_steps``), against every client doing
all its steps (``full``). It is decided by the same three-way rule on the final test
accuracy, and returns the same validation accuracy for tuning.
"""
from __future__ import annotations

import keyword
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from audit.errors import AuditError
from audit.safeio import check_name

# New-style arXiv ids (2007-): YYMM.NNNN or YYMM.NNNNN, optionally vN; old style:
# archive(.SUBJ)/YYMMNNN, optionally vN.
ARXIV_NEW = re.compile(r"(?P<id>\d{4}\.\d{4,5})(?:v(?P<v>[1-9]\d*))?")
ARXIV_OLD = re.compile(r"(?P<id>[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})(?:v(?P<v>[1-9]\d*))?")


@dataclass(frozen=True)
class Written:
    """What ``audit new`` did: files written, files left alone, what to do next."""

    claim_id: str
    package: str
    module: str
    written: tuple[Path, ...]
    kept: tuple[Path, ...]
    next_steps: str


def parse_arxiv(text: str) -> tuple[str, str]:
    """``(id, version)`` of an arXiv identifier (version "1" when none is given); an
    AuditError for anything else."""
    text = str(text).strip()
    text = text.removeprefix("arXiv:").removeprefix("arxiv:")
    m = ARXIV_NEW.fullmatch(text) or ARXIV_OLD.fullmatch(text)
    if m is None:
        raise AuditError(f"--paper {text!r} is not an arXiv identifier (e.g. 2412.07062, "
                         f"2412.07062v3 or hep-th/9901001)")
    if ARXIV_NEW.fullmatch(text) and not 1 <= int(text[2:4]) <= 12:
        raise AuditError(f"--paper {text!r}: the month in YYMM must be 01 to 12")
    return m.group("id"), m.group("v") or "1"


def module_name(claim_id: str) -> str:
    """The Python module name of a claim id (``my-claim`` -> ``my_claim``)."""
    check_name(claim_id, "claim id", "audit new")
    name = re.sub(r"[-.]", "_", claim_id).lower()
    if name == "declarations":  # the package of the claims' declarations has that name
        raise AuditError(f"audit new: claim id {claim_id!r} would be shadowed by the "
                         f"package's declarations folder; choose another id")
    if not name.isidentifier() or keyword.iskeyword(name) or not claim_id[0].isalpha():
        raise AuditError(f"audit new: claim id {claim_id!r} must start with a letter and "
                         f"give a Python module name once '-' and '.' become '_'")
    return name


def _check_package(package: str) -> str:
    if not package.isidentifier() or keyword.iskeyword(package):
        raise AuditError(f"audit new: --package {package!r} is not a Python package name")
    import sys

    stdlib = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    if package in stdlib or package.lower() in ("audit", "tests", "test") or \
            package.startswith("_"):
        raise AuditError(f"audit new: --package {package!r} is taken (the standard "
                         f"library's, the harness's own, or private); installing the "
                         f"claim's wheel would shadow or overwrite it")
    return package


def _check_not_installed(package: str, out: Path) -> None:
    """Refuse a package name that an installed package already has (``torch``,
    ``numpy``), unless it is the one being written under ``out``: the claim's wheel would
    overwrite it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return
    if spec is None:
        return
    mine = (Path(out) / package).resolve()
    where = [Path(p).resolve() for p in (spec.submodule_search_locations or ())] or \
        ([Path(spec.origin).resolve().parent] if spec.origin else [])
    if where and all(w == mine for w in where):
        return
    raise AuditError(f"audit new: --package {package!r} is an installed package "
                     f"({', '.join(str(w) for w in where) or 'built in'}); installing the "
                     f"claim's wheel would overwrite it; choose another --package")


#: the sides ``audit new --side`` offers: where the piece in which the arms differ lives
SIDES = ("server", "client")


def render(claim_id: str, arxiv: str, package: str | None = None,
           side: str = "server") -> dict[str, str]:
    """The files ``audit new`` writes, relative path -> text (nothing is written).
    ``side``: "server" (the arms differ in a server rule) or "client" (in a client hook:
    the stragglers' work budget)."""
    if side not in SIDES:
        raise AuditError(f"audit new: --side {side!r} is not one of {', '.join(SIDES)}")
    module = module_name(claim_id)
    paper_id, version = parse_arxiv(arxiv)
    package = _check_package(package or f"claim_{module}")
    subs = {"claim_id": claim_id, "module": module, "package": package,
            "arxiv": paper_id, "version": version}
    # the side's pieces are filled first, then set into the shared templates' holes
    pieces = {k: _fill(v, subs) for k, v in SIDE_PIECES[side].items()}
    return {
        f"{package}/__init__.py": _fill(INIT, subs),
        f"{package}/declarations/__init__.py": DECLARATIONS_INIT,
        f"{package}/declarations/{module}.py": _fill(DECLARATIONS, {**subs, **pieces}),
        f"{package}/{module}.py": _fill(CLAIM_MODULE, {**subs, **pieces}),
        f"falsifiers/test_{module}.py": _fill(FALSIFIER, {**subs, **pieces}),
        "pyproject.toml": _fill(PYPROJECT, subs),
        "conftest.py": CONFTEST,
    }


def _fill(template: str, subs: Mapping[str, str]) -> str:
    return string.Template(template).substitute(subs)


# files that are written only when absent (the others must not exist)
OPTIONAL = ("__init__.py", "pyproject.toml", "conftest.py")


def write(claim_id: str, arxiv: str, out_dir: Path | str = ".",
          package: str | None = None, known_ids=(), side: str = "server") -> Written:
    """Write a new claim under ``out_dir`` (see the module docstring; ``side`` as in
    :func:`render`). Refuses, writing nothing, when the claim module or its falsifier
    exists, or the id is taken."""
    from audit.safeio import atomic_write, make_dir

    files = render(claim_id, arxiv, package, side)
    _check_not_installed(Path(next(iter(files))).parts[0], Path(out_dir))
    if claim_id in set(known_ids):
        raise AuditError(f"audit new: claim id {claim_id!r} is already registered; "
                         f"`audit list` shows the ids in use")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AuditError(f"audit new: --out-dir {str(out)!r} is not a folder")
    todo, kept = {}, []
    for rel, text in files.items():
        path = out / rel
        if path.exists() or path.is_symlink():
            if Path(rel).name in OPTIONAL:
                kept.append(path)
                continue
            raise AuditError(f"audit new: {str(path)!r} exists; refusing to overwrite it "
                             f"(choose another claim id or --out-dir)")
        todo[path] = text
    # every folder checked before the first file is written: a refusal (a symlinked
    # folder) writes nothing, as promised, and a rerun is not refused by half a claim
    for folder in dict.fromkeys(p.parent for p in todo):
        cur = out
        for part in folder.relative_to(out).parts:
            cur = cur / part
            if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
                raise AuditError(f"audit new: refusing to write into {str(cur)!r}: it is a "
                                 f"symbolic link or not a folder")
    written = []
    for path, text in todo.items():
        make_dir(out, path.parent)
        atomic_write(path, text)
        written.append(path)
    module = module_name(claim_id)
    pkg = Path(next(iter(files))).parts[0]
    snippet = (f'[project.entry-points."audit.claims"]\n'
               f'"{claim_id}" = "{pkg}.{module}"')  # quoted: an id may hold dots
    steps = [f"Next ({out}):"]
    if any(p.name == "pyproject.toml" for p in kept):
        steps.append("  add to your pyproject.toml (and list the package for setuptools):\n"
                     + "\n".join("    " + s for s in snippet.splitlines()))
    steps += [f"  pip install --no-build-isolation -e {out}   # registers the entry point",
              f"  audit run {claim_id}                          # a verdict at smoke scale "
              f"(8 seeds)",
              f"  pytest {out / 'falsifiers' / f'test_{module}.py'} --audit-update-locks"
              f"   # lock it ({out / pkg / 'locks.json'})",
              f"  audit verify {claim_id}",
              "Then replace every EXAMPLE with your claim's own: the piece in the claim "
              f"module, the margin, scales and texts in {pkg}/declarations/{module}.py "
              "(docs/WRITING_A_CLAIM.md)."]
    if any(p.name == "conftest.py" for p in kept):
        steps.append("  your conftest.py must load the plugin: "
                     "pytest_plugins = [\"audit.pytest_plugin\"]")
    return Written(claim_id, pkg, module, tuple(written), tuple(kept), "\n".join(steps))


# ------------------------------------------------------------------------------ templates
INIT = '''"""Claims for the audit harness (registered through the ``audit.claims`` entry point)."""
'''

DECLARATIONS_INIT = '''"""The claims' declarations: one module of literals per claim."""
'''

CONFTEST = '''"""Loads the audit pytest plugin (the audit_run fixture, --audit-* options)."""
pytest_plugins = ["audit.pytest_plugin"]
'''

PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "audit-${module}"
version = "0.1.0"
description = "The audit claim ${claim_id} (arXiv ${arxiv})"
requires-python = ">=3.10"
dependencies = ["audit"]

# the harness finds the claim here: `audit list` shows it once the package is installed
[project.entry-points."audit.claims"]
"${claim_id}" = "${package}.${module}"

[tool.setuptools.packages.find]
include = ["${package}*"]

[tool.setuptools.package-data]
${package} = ["locks.json"]
'''

# The claim module and its falsifier, written once for both sides. Their ``${...}`` holes
# take the claim's names (``subs`` in ``render``) and the pieces of the side
# (``SIDE_PIECES[side]``: the docstring, the one differing piece, its arms, the scales
# and the words that name the arms), which are templates of the claim's names themselves.
DECLARATIONS = '''"""${claim_id}: ${docstring}
The declarations of the claim (literals only); its code is :mod:`${package}.${module}`.
"""
from __future__ import annotations

from audit.claims import Paper
from audit.questions import Question

CLAIM_ID = "${claim_id}"
PAPER = Paper("${arxiv}", "EXAMPLE: the paper's title, in your words", "${version}",
              "EXAMPLE")
RECORD_FILE = "EXAMPLE: the review record's file"
TITLE = "EXAMPLE: a short name of the falsifier"
STATEMENT = "EXAMPLE: our paraphrase of the reviewer's claim (never the record's words)."

# The margin of the reviewer's claim, fixed before any run. EXAMPLE: take it from the
# paper (e.g. its reported gain over the baselines), never from our own results.
MARGIN = 0.05
EQUIV = MARGIN  # the equivalence margin of the three-way rule
ALPHA = 0.05
${settings}


# ----------------------------------------------------------------------------- scales
${scales}


# ------------------------------------------------------------------- rule and questions
RULE_GAP_TEXT = (
    "Paired over seeds, metric = final global test accuracy, A = ${arm_a}, B = ${arm_b}: "
${rule_text}
)

${questions_note}QUESTIONS = (
${question}
)
'''

CLAIM_MODULE = '''"""${claim_id}: the claim's code (its declarations, as literals, are
:mod:`${package}.declarations.${module}`)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from audit import kit, questions, stats
from audit.analysis import results_table
from audit.claims import Analysis, Arm, Claim, RecordRef, RunContext, RunSpec
${piece_import}
from audit.verdict import Estimate, Premise
from ${package}.declarations.${module} import (  # noqa: F401 (the falsifier reads MARGIN)
    ALPHA, CLAIM_ID, DEFAULT_SEEDS, MARGIN, PAPER, QUESTIONS, RECORD_FIELDS, RECORD_FILE,
    RULE_GAP_TEXT, SCALES, STATEMENT, TITLE, VAL_FRACTION)


# ------------------------------------------------------------- arms and their one piece
${piece}

#: Each arm, declared with the one piece it changes (``Arm.differs``) ...
ARMS = (
${arms}
)
${piece_map}
ARM_NAMES = tuple(a.name for a in ARMS)


# -------------------------------------------------------------------------------- run
def run(spec: RunSpec, ctx: RunContext) -> dict:
    """One arm at one seed: a pure function of (spec, ctx), JSON-able (it is cached)."""
    import torch

    from audit.fl.data import dirichlet_partition, load_dataset, make_federated
    from audit.fl.engine import ${engine_names}
    from audit.fl.models import build_model

    cfg = ctx.config
    torch.set_num_threads(1)
    ds = load_dataset(cfg["dataset"], data_dir=ctx.data_dir, seed=0)
    rng = np.random.default_rng([spec.seed, 0])  # the same clients for every arm: paired
    part = dirichlet_partition(ds.y_train, cfg["n_clients"], cfg["dirichlet_alpha"], rng)
    fed = make_federated(ds, part, VAL_FRACTION, 0.0, rng)  # train / val per client

    def model_fn():
        return build_model(cfg["model"], ds.num_classes, ds.in_channels, ds.image_size,
                           **cfg["model_kw"])

${fl_config}
    h = run_federated(model_fn, fed, ${algorithm}, fl,
                      checkpoint=ctx.checkpoint(spec), on_round=ctx.on_round)
    # assay sensitivity: the final model's own test predictions with correct ones marked
    # wrong at random, an expected drop of the equivalence margin (kit.planted_accuracy)
    model = model_fn().to(ctx.device)
    model.load_state_dict(h.final_state)
    model.eval()
    with torch.no_grad():
        correct = (model(fed.x_test.to(ctx.device)).argmax(1).cpu() == fed.y_test.cpu())
    planted = kit.planted_accuracy(correct.numpy(), float(cfg["equivalence_margin"]),
                                   np.random.default_rng([spec.seed, 7]))
${result_note}    return {"init_acc": float(h.test_acc[0]), "final_acc": float(h.test_acc[-1]),
            "planted_acc": planted, "val_acc": float(h.val_acc[-1]),
            "n_test": int(len(fed.y_test)), "seconds": float(h.seconds)}


# --------------------------------------------------------------------- rule and premise
RULE_GAP = kit.pair_rule(
    "gap", RULE_GAP_TEXT, a="${arm_a}", b="${arm_b}", metric="final accuracy",
    holds_when="SUPPORTED")  # the reviewer: ${winner} wins by more than the margin


def decide_gap(${arm_a}, ${arg_b}, config: Mapping[str, Any], *, sensitive: bool,
               alpha: float = ALPHA, resolution: float | None = None,
               premise: Premise | None = None):
    """The part ``gap`` from per-seed accuracies (the falsifier drives it to each of its
    reachable outcomes). ``sensitive``: whether the planted handicap was seen (no
    equivalence counts without it); ``premise``: the gate (the gap explains the effect)."""
    return kit.decide_pair(RULE_GAP, ${arm_a}, ${arg_b}, margin=float(config["margin"]),
                           equivalence_margin=float(config["equivalence_margin"]),
                           alpha=alpha, sensitive=sensitive, resolution=resolution,
                           unit="accuracy", gate=premise)


def premise_of(final, init, config: Mapping[str, Any], alpha: float) -> Premise:
    """EXAMPLE premise: ${learner} learns (final beats initial accuracy). No planted
    handicap checks this comparison, so it is never decided "not reproduced" by
    equivalence (sensitive=False)."""
    tw = stats.three_way(final, init, margin=0.0,
                         equivalence_margin=float(config["equivalence_margin"]), alpha=alpha,
                         sensitive=False)
    est = Estimate.of("premise_final_minus_init", tw.difference, "accuracy",
                      "${arm_a} arm: final - initial global accuracy (paired)")
    return kit.premise("${learner} learns: its final accuracy beats the initial model's",
                       tw, estimate=est)


# ---------------------------------------------------------------------------- analyse
def analyse(results: Mapping[RunSpec, Mapping], ctx: RunContext) -> Analysis:
    seeds = list(ctx.seeds)
    alpha = kit.look_alpha(ALPHA, ctx)  # a sequential look spends a share of alpha
    final = results_table(results, "final_acc", ARM_NAMES, seeds)  # arm -> per-seed array
    init = results_table(results, "init_acc", ["${arm_a}"], seeds)["${arm_a}"]
    planted = results_table(results, "planted_acc", ["${arm_a}"], seeds)["${arm_a}"]
    n_test = int(results[RunSpec("${arm_a}", seeds[0])]["n_test"])
    d = float(ctx.config["equivalence_margin"])

    premise = premise_of(final["${arm_a}"], init, ctx.config, alpha)
    assay = kit.planted_assay(final["${arm_a}"], planted, detect_above=d / 2,
                              equivalence_margin=d, alpha=alpha,
                              label=f"${arm_a} minus its copy with a planted drop of {d:g}")
    tw, part = decide_gap(final["${arm_a}"], final["${arm_b}"], ctx.config,
                          sensitive=assay.sensitive, alpha=alpha, resolution=1.0 / n_test,
                          premise=premise)
    estimates = (
        Estimate.of("gap", tw.difference, "accuracy",
                    "${arm_a} - ${arm_b}, final global accuracy (the rule's interval)"),
        *kit.arm_means(final, ARM_NAMES, "final_acc", "accuracy", "final global accuracy"),
    )
    table = kit.per_seed_table("Final global accuracy per seed", final, ARM_NAMES, seeds)
    notes = (f"Assay sensitivity ({assay.text}): "
             f"{'shown' if assay.sensitive else 'not shown, so no equivalence counts'}.",
             "EXAMPLE notes: say plainly what this test shows and what it does not.")
    return Analysis(estimates, (part,), (table,), (), notes, premise=premise)


# ------------------------------------------------------------------------------ claim
COMBINATION = questions.combination(QUESTIONS)


CLAIM = Claim(
    id=CLAIM_ID,
    paper=PAPER,
    record=RecordRef(RECORD_FILE, RECORD_FIELDS),
    title=TITLE,
    statement=STATEMENT,
    arms=ARMS,
    rules=(RULE_GAP,),
    combination=COMBINATION,
    questions=QUESTIONS,
    stochastic=True,
    # what `audit tune` and regime maps may read: the clients' validation accuracy, never
    # final_acc / init_acc / planted_acc (the test set the verdict reads)
    validation_metrics=("val_acc",),
    default_seeds=DEFAULT_SEEDS,
    scales=SCALES,
    run=run,
    analyse=analyse,
)
'''

FALSIFIER = '''"""Falsifier: ${claim_id} (arXiv ${arxiv}), ${written_by}.

    pytest falsifiers/test_${module}.py --audit-update-locks   # record the lock (once)
    pytest falsifiers/test_${module}.py                        # check it
"""
import numpy as np
import pytest

from audit.pytest_plugin import check_lock
from ${package} import ${module} as claim_module

CLAIM = "${claim_id}"


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_verdict_is_locked(result):
    check_lock(result)


def test_premise_is_measured(result):
    assert result.verdict.premise is not None


def test_each_arm_declares_its_one_piece():
    assert [a.name for a in claim_module.ARMS] == list(claim_module.${piece_map_name})
    assert all(a.differs for a in claim_module.ARMS)


${own_test}# the rule reaches every outcome it declares: driven with made-up per-seed accuracies on
# 8 seeds (the three-way rule decides nothing below 6 pairs, nor when every difference
# is the same number, so each case carries some noise)
BASE = np.random.default_rng(0).normal(0.6, 0.02, 8)
CASES = {${confirmed_note}
    "CONFIRMED": BASE + 4 * claim_module.MARGIN + np.random.default_rng(3).normal(0, 0.01, 8),
    "REFUTED": BASE + np.random.default_rng(1).normal(0, 1e-3, 8),  # no gap at all
    "INCONCLUSIVE": BASE + claim_module.MARGIN + np.random.default_rng(2).normal(0, 0.2, 8),
}


@pytest.mark.parametrize("outcome", claim_module.RULE_GAP.reachable)
def test_rule_reaches_each_declared_outcome(outcome):
    config = claim_module.SCALES["smoke"]
    _, part = claim_module.decide_gap(CASES[outcome], BASE, config, sensitive=True)
    assert part.verdict.value == outcome
'''

# ------------------------------------------------------------------- the sides' pieces
# Each fills the hole of its name in CLAIM_MODULE or FALSIFIER. A block stops short of its
# last newline, except where one side leaves the hole empty ("") and so the piece carries
# its own line breaks.
SERVER_PIECES = {
    "docstring": '''EXAMPLE: the server step as printed costs accuracy against the corrected one.

Paper: arXiv ${arxiv}v${version} (EXAMPLE: name the equation or algorithm line here).
Reviewer's claim, in our words (never copy the review's sentences): EXAMPLE: run as
printed, the server moves the global model only a tenth of the way to the clients' mean,
so after the paper's rounds it is well behind the same method with the step corrected.

Written by ``audit new`` and runnable at once (``audit run ${claim_id}``). Replace every
EXAMPLE: the one differing piece (``SERVER_RULES``), the margin (from the paper, never
from our runs), the premise, the texts and the scales. Guide: docs/WRITING_A_CLAIM.md.

Premise (the paper's own effect, measured first): EXAMPLE: the corrected method learns
(its final accuracy beats the initial model's). It gates ``gap``.

Parts: ``gap`` (experiment): corrected - literal final global accuracy, paired over
seeds, three-way rule at margin MARGIN; CONFIRMED when the reviewer is right.

Questions (``QUESTIONS``, one verdict each; the claim's single word is their common
verdict, SPLIT when they disagree): ``gap``, decided by the part ``gap``.

Seeds: 8 by default (``default_seeds``): the three-way rule decides nothing below 6
pairs, and its exact sign test at alpha / 2 needs every one of 6 or 7 pairs (and 7 of 8)
on one side. Each unit also returns a validation accuracy (``val_acc``, on the clients'
validation splits) for choosing settings with ``audit tune --metric val_acc``; the
verdict reads the test accuracy only.
''',
    "piece_import": "from audit.fl.aggregate import chain, weighted_mean",
    "settings": '''\
# verdict seeds when none are given: the three-way rule needs at least 6 pairs, all on one
# side at 6 or 7 pairs (its exact sign test at alpha / 2), so 8 leaves one seed to spare
DEFAULT_SEEDS = tuple(range(8))
# each client's share held out for validation: ``val_acc`` is read for choosing settings
# (``audit tune --metric val_acc``), never the test accuracy the verdict reads
VAL_FRACTION = 0.1
# EXAMPLE: the review record's fields this claim answers (paths such as "falsifier" or
# "referee_report.major_comments[1]"; coverage.md maps each record item to them)
RECORD_FIELDS = ("falsifier",)''',
    "piece": '''\
def server_step(eta: float):
    """A server piece (``audit.fl.aggregate``): global <- prev + eta * (proposed - prev).
    EXAMPLE of the one piece in which the arms differ."""

    def piece(prev, uploads, proposed):
        return {k: prev[k] + eta * (v - prev[k]) if v.is_floating_point() else v
                for k, v in proposed.items()}

    return piece


LITERAL_ETA = 0.1  # EXAMPLE: the server step as printed''',
    "arms": '''\
    Arm("literal", "FedAvg clients; the server step as printed: the global model moves "
        f"eta = {LITERAL_ETA} of the way to the weighted mean of the uploads", "as printed"),
    Arm("corrected", "as literal, with the server step corrected: the global model is the "
        "weighted mean of the uploads (FedAvg)", "server: server_step(eta) removed"),''',
    "piece_map_name": "SERVER_RULES",
    "piece_map": '''\
#: ... and the server rule that is that piece, beside it (the arms share everything else).
SERVER_RULES = {
    "literal": chain(weighted_mean(), server_step(LITERAL_ETA)),
    "corrected": chain(weighted_mean()),
}''',
    "scales": '''\
SCALES: dict[str, dict] = {
    # CPU, seconds: scikit-learn's digits (no download), 10 clients, a few rounds
    "smoke": {"dataset": "digits", "model": "cnn", "model_kw": {"width": 0.5},
              "n_clients": 10, "dirichlet_alpha": 0.5, "rounds": 10, "local_epochs": 1,
              "batch_size": 32, "lr": 0.2, "margin": MARGIN, "equivalence_margin": EQUIV},
    "full": {"dataset": "digits", "model": "cnn", "model_kw": {},
             "n_clients": 20, "dirichlet_alpha": 0.5, "rounds": 30, "local_epochs": 1,
             "batch_size": 16, "lr": 0.05, "margin": MARGIN, "equivalence_margin": EQUIV},
    # EXAMPLE: the paper's setting; the data are read from --data-dir / $$AUDIT_DATA
    # (layouts: audit.fl.data), on --device
    "paper": {"dataset": "cifar10", "model": "cnn2", "model_kw": {},
              "n_clients": 20, "dirichlet_alpha": 0.5, "rounds": 100, "local_epochs": 1,
              "batch_size": 32, "lr": 0.05, "margin": MARGIN, "equivalence_margin": EQUIV},
}''',
    "engine_names": "Algorithm, FLConfig, run_federated",
    "fl_config": '''\
    fl = FLConfig(rounds=cfg["rounds"], local_epochs=cfg["local_epochs"],
                  batch_size=cfg["batch_size"], lr=cfg["lr"], seed=spec.seed,
                  device=ctx.device, eval_every=cfg["rounds"], eval_init=True,
                  eval_personal=False, eval_val=True, layer_metrics=False)''',
    "algorithm": "Algorithm(rule=SERVER_RULES[spec.arm])",
    "result_note": '''\
    # test accuracy decides the verdict; val_acc (the global model on the clients'
    # validation splits, mean over clients) is the metric for tuning settings
''',
    # the arms (A, whose win the reviewer claims, and B), named in the rule and analyse
    "arm_a": "corrected",
    "arm_b": "literal",
    "arg_b": "literal",  # decide_gap's parameter for B's accuracies
    "winner": "corrected",
    "learner": "the corrected method",  # the premise: it learns
    "rule_text": '''\
    "{rule}. CONFIRMED when SUPPORTED (the printed step costs more than m = {margin}), "
    "REFUTED when FALSIFIED, INCONCLUSIVE otherwise and whenever the premise is not "
    "reproduced."''',
    "questions_note": '''\
#: The reviewer's questions, one verdict each (``audit.questions``). EXAMPLE: one
#: experiment; a proof (a derivation part) would be a question of its own, never merged
#: with an experiment into one word.
''',
    "question": '''\
    Question("gap", "EXAMPLE: does the server step as printed cost more than the margin "
             "in final accuracy against the corrected step?", RECORD_FIELDS, ("gap",),
             kind="experiment",
             decides="the corrected method must first learn (the premise) at this scale"),''',
    # the falsifier's
    "written_by": "written by ``audit new``",
    "own_test": "",
    "confirmed_note": "\n    # far above the margin",
}

CLIENT_PIECES = {
    "docstring": '''EXAMPLE: stragglers' cut local work costs accuracy.

Paper: arXiv ${arxiv}v${version} (EXAMPLE: name the equation or algorithm line here).
Reviewer's claim, in our words (never copy the review's sentences): EXAMPLE: the paper
assumes every sampled client finishes its local epochs; when most of them manage only an
eighth of their steps in a round, FedAvg ends well below the same run with full work.

Written by ``audit new --side client`` and runnable at once (``audit run ${claim_id}``).
The arms differ in one client-side piece, the work budget of a round's stragglers
(``Algorithm.local_steps``, chosen per round in ``Algorithm.on_round_start``; an upload
hook that returns None would drop a straggler's message instead). Replace every
EXAMPLE: the piece (``Stragglers``, ``ALGORITHMS``), the margin (from the paper, never
from our runs), the premise, the texts and the scales. Guide: docs/WRITING_A_CLAIM.md.

Premise (the paper's own effect, measured first): EXAMPLE: FedAvg with full work learns
(its final accuracy beats the initial model's). It gates ``gap``.

Parts: ``gap`` (experiment): full - stragglers final global accuracy, paired over seeds,
three-way rule at margin MARGIN; CONFIRMED when the reviewer is right.

Seeds: 8 by default (``default_seeds``): the three-way rule decides nothing below 6
pairs. Each unit also returns a validation accuracy (``val_acc``) for choosing settings
with ``audit tune --metric val_acc``; the verdict reads the test accuracy only.
''',
    "piece_import": "from audit.fl.engine import Algorithm",
    "settings": '''\
DEFAULT_SEEDS = tuple(range(8))  # the three-way rule needs at least 6 pairs
VAL_FRACTION = 0.1  # each client's share held out for val_acc (tuning, never the verdict)
RECORD_FIELDS = ("falsifier",)  # EXAMPLE: the review record's fields this claim answers''',
    "piece": '''\
class Stragglers(Algorithm):
    """FedAvg in which, each round, a share of the sampled clients are stragglers that
    take only ``fraction`` of their planned minibatch steps (at least one). EXAMPLE of
    the one client-side piece in which the arms differ."""

    name = "stragglers"

    def __init__(self, share: float, fraction: float, seed: int):
        super().__init__()
        self.share, self.fraction, self.seed = float(share), float(fraction), int(seed)
        self.slow: frozenset = frozenset()

    def on_round_start(self, round, sampled_client_ids):
        # drawn from the seed and the round only, so both training paths agree
        rng = np.random.default_rng([self.seed, 7, round])
        k = int(self.share * len(sampled_client_ids) + 0.5)  # the nearest whole number
        self.slow = frozenset(rng.choice(sampled_client_ids, k, replace=False).tolist())

    def local_steps(self, client_id, round, planned):
        if client_id not in self.slow:
            return None  # every planned step
        return max(1, int(self.fraction * planned))
''',
    "arms": '''\
    Arm("full", "FedAvg; every sampled client takes all its planned local steps",
        "as the paper runs it"),
    Arm("stragglers", "as full, but each round a share of the sampled clients take only a "
        "fraction of their planned local steps", "client: local_steps cut for stragglers"),''',
    "piece_map_name": "ALGORITHMS",
    "piece_map": '''\
#: ... and the algorithm that is that piece, beside it (config, seed) -> Algorithm.
ALGORITHMS = {
    "full": lambda cfg, seed: Algorithm(),
    "stragglers": lambda cfg, seed: Stragglers(cfg["straggler_share"],
                                               cfg["straggler_fraction"], seed),
}''',
    "scales": '''\
_COMMON = {"model": "cnn", "dirichlet_alpha": 0.5, "local_epochs": 2, "batch_size": 32,
           "straggler_share": 0.8, "straggler_fraction": 0.125, "margin": MARGIN,
           "equivalence_margin": EQUIV}
SCALES: dict[str, dict] = {
    # CPU, seconds: scikit-learn's digits (no download), 10 clients, half a round each
    "smoke": {**_COMMON, "dataset": "digits", "model_kw": {"width": 0.5}, "n_clients": 10,
              "clients_per_round": 5, "rounds": 10, "lr": 0.1},
    "full": {**_COMMON, "dataset": "digits", "model_kw": {}, "n_clients": 20,
             "clients_per_round": 10, "rounds": 30, "lr": 0.05},
    # EXAMPLE: the paper's setting; the data are read from --data-dir / $$AUDIT_DATA
    "paper": {**_COMMON, "dataset": "cifar10", "model": "cnn2", "model_kw": {},
              "n_clients": 20, "clients_per_round": 10, "rounds": 100, "lr": 0.05},
}''',
    "engine_names": "FLConfig, run_federated",
    "fl_config": '''\
    fl = FLConfig(rounds=cfg["rounds"], clients_per_round=cfg["clients_per_round"],
                  local_epochs=cfg["local_epochs"], batch_size=cfg["batch_size"],
                  lr=cfg["lr"], seed=spec.seed, device=ctx.device, eval_every=cfg["rounds"],
                  eval_init=True, eval_personal=False, eval_val=True, layer_metrics=False)''',
    "algorithm": "ALGORITHMS[spec.arm](cfg, spec.seed)",
    "result_note": "",
    "arm_a": "full",
    "arm_b": "stragglers",
    "arg_b": "slow",
    "winner": "full work",
    "learner": "FedAvg with full work",
    "rule_text": '''\
    "{rule}. CONFIRMED when SUPPORTED (stragglers cost more than m = {margin}), REFUTED "
    "when FALSIFIED, INCONCLUSIVE otherwise and whenever the premise is not reproduced."''',
    "questions_note": "",
    "question": '''\
    Question("gap", "EXAMPLE: do stragglers doing a fraction of their local steps cost "
             "more than the margin in final accuracy against full work?", RECORD_FIELDS,
             ("gap",), kind="experiment",
             decides="FedAvg with full work must first learn (the premise) at this scale"),''',
    "written_by": "by ``audit new --side client``",
    "own_test": '''\
def test_the_piece_cuts_the_budget_of_a_share_of_the_sampled_clients():
    alg = claim_module.Stragglers(share=0.6, fraction=0.25, seed=0)
    alg.on_round_start(1, (1, 3, 4, 7, 9))
    assert len(alg.slow) == 3 and alg.slow <= {1, 3, 4, 7, 9}
    budgets = {k: alg.local_steps(k, 1, 8) for k in (1, 3, 4, 7, 9)}
    assert sorted(b for b in budgets.values() if b is not None) == [2, 2, 2]
    assert sum(b is None for b in budgets.values()) == 2  # the others do all 8 steps


''',
    "confirmed_note": "",
}

#: side -> the pieces that fill the shared templates' holes
SIDE_PIECES = {"server": SERVER_PIECES, "client": CLIENT_PIECES}
