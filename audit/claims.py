"""The claim registry.

A :class:`Claim` is one reviewer's checkable statement about one paper: where it comes
from (the review record and its fields), our paraphrase of it, the arms that test it, the
rules that decide it, and the verdicts locked for each scale (``audit/locks.json``).

Each claim lives in its own module in its paper's folder (``audit/papers/<paper>/``,
beside the paper's algorithm pieces, its declarations and our notes on its record) and
defines a module-level ``CLAIM``. Adding a claim is one new module there: the folders are
the list (:data:`CLAIM_MODULES`: every module of a paper folder that assigns ``CLAIM`` at
its top level, read from the source), so no second list of modules or titles is kept.
Code that a paper's claims share lives with its algorithm pieces (``algorithm.py``,
GENE-FL's ``simulation.py``).

A claim may also live in a separately installed package: each entry point of the group
``audit.claims`` (:data:`ENTRY_POINT_GROUP`) names a module that defines ``CLAIM`` (or the
``Claim`` object itself, ``"pkg.mod:CLAIM"``). Such a claim is listed after the built-in
ones; its locks are kept in ``locks.json`` beside its module (or in ``Claim.lock_file``,
or in ``$AUDIT_LOCKS`` when that is set); its package's source enters the run cache's
code version. A plugin that cannot be loaded is skipped with one
:class:`ClaimPluginWarning`; a claim id defined twice is an error naming both places.
See ``docs/WRITING_A_CLAIM.md``.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib
import itertools
import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from audit import keys as _keys
from audit.errors import AuditError  # re-exported: claim modules import it from here
from audit.seeds import is_tuning, max_seeds
from audit.verdict import Combination, Estimate, Outcome, Part, Premise, Rule

LOCKS_PATH = Path(__file__).with_name("locks.json")



def _assigns_claim(path: Path) -> bool:
    """Whether the module at ``path`` assigns ``CLAIM`` at its top level (read, not run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == "CLAIM" for t in targets):
            return True
    return False


def _built_in_modules() -> tuple[str, ...]:
    """Every module of a paper folder (``audit/papers/<paper>/*.py``) that assigns ``CLAIM``,
    by name, paper by paper; read from the folders without importing anything (``audit
    list`` stays torch-free). A paper's algorithm, notes and declarations assign none."""
    folder = Path(__file__).with_name("papers")
    return tuple(f"audit.papers.{p.parent.name}.{p.stem}"
                 for p in sorted(folder.glob("*/*.py"))
                 if not p.stem.startswith("_") and _assigns_claim(p))


#: The built-in claims' modules: one claim each, from the paper folders.
CLAIM_MODULES: tuple[str, ...] = _built_in_modules()


# ---------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Paper:
    arxiv_id: str
    title: str
    version: str
    short: str  # FLAYER, FedTLU, GENE-FL, LIPS

    def cite(self) -> str:
        return f"{self.short}, arXiv {self.arxiv_id}v{self.version}"


@dataclass(frozen=True)
class RecordRef:
    """Where the reviewer's claim is written: a review record and the fields it answers."""

    file: str  # the review record's file name (the records are not in this repository)
    fields: tuple[str, ...]  # field paths, e.g. "skeptic_critique.concrete_test"


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment and the single piece in which it differs."""

    name: str
    description: str
    differs: str = ""  # which equation / algorithm line it changes, or "as printed"


@dataclass(frozen=True)
class PaperNumber:
    """A number the paper reports; shown only as the paper's, beside ours."""

    name: str
    value: float | str
    where: str  # table / section of the paper
    ours: str = ""  # the name of our estimate it should be read beside


@dataclass(frozen=True)
class RunSpec:
    """One unit of work: an arm, a seed (None for exact claims) and a setting label."""

    arm: str
    seed: int | None = None
    setting: str = ""

    def to_dict(self) -> dict:
        return {"arm": self.arm, "seed": self.seed, "setting": self.setting}

    def label(self) -> str:
        s = self.arm if not self.setting else f"{self.setting}/{self.arm}"
        return s if self.seed is None else f"{s}/seed={self.seed}"


@dataclass(frozen=True)
class RunContext:
    """What one run or one analysis may know: scale, its config, seeds, device, data."""

    claim_id: str
    scale: str
    config: Mapping[str, Any]
    seeds: tuple[int, ...]
    device: str = "cpu"
    data_dir: str | None = None
    checkpoint_dir: str | None = None  # set by the runner; None: no checkpoints
    # Sequential seeds (audit.sequential): the share of every rule's alpha spent at this
    # look (1.0 for a fixed-seed run). Rules multiply their alpha by it; it is not part of
    # any cache or checkpoint key (a unit's result does not depend on it).
    alpha_fraction: float = 1.0
    # Progress of long units: ``on_round(round, rounds)`` after every federated round,
    # set by the runner while it shows a progress bar (None otherwise). Units hand it to
    # the engine (``run_federated(..., on_round=ctx.on_round)``). It changes no number and
    # is not part of any cache or checkpoint key, nor of equality.
    on_round: Callable[[int, int], None] | None = field(default=None, compare=False,
                                                        repr=False)
    # ``Claim.plugin_version()`` of the claim being run ("" for a built-in claim), set by
    # the runner: a checkpoint's key carries it as the run cache's key does
    plugin_version: str = field(default="", compare=False, repr=False)
    # ``Claim.code_module()``: the package module holding the claim's ``run``, set by the
    # runner, whose import closure is the code every key of this run hashes ("": the whole
    # package, as for a claim outside it)
    code_module: str = field(default="", compare=False, repr=False)

    def cache_version(self) -> str:
        """The code version every key of this run carries (run cache, checkpoints, stored
        estimates): the hash of the source the claim's ``run`` can reach by import
        (:func:`audit.keys.claim_code_version`), plus the claim's plugin version."""
        return _keys.claim_code_version(self.code_module) + self.plugin_version

    def checkpoint(self, spec: "RunSpec") -> str | None:
        """A checkpoint file for one unit (engine runs save and resume there), or None.

        Its name hashes everything the unit's state depends on, as the run cache's key
        does: the spec, scale, config, device, the code version (a run killed before a
        code change does not resume from the old code's state) and the fingerprint of
        the data files the config reads under ``data_dir`` (another copy of a data set
        does not resume from this one's state)."""
        if not self.checkpoint_dir:
            return None
        key = json.dumps([spec.to_dict(), self.scale, dict(self.config), self.device,
                          self.cache_version(), _keys.data_identity(self)],
                         sort_keys=True, default=str)
        root = Path(self.checkpoint_dir)
        folder = root / self.claim_id
        try:
            # never through a link planted in the checkpoint folders (a write would land
            # outside them), and a folder that cannot be made only costs the resume
            if any(p.is_symlink() for p in (root, folder)):
                raise OSError("a symlink in the checkpoint folders")
            folder.mkdir(parents=True, exist_ok=True)
            if folder.is_symlink() or not folder.is_dir():
                raise OSError("not a folder")
        except OSError as exc:
            import warnings

            text = " ".join(str(getattr(exc, "strerror", None) or exc).split())[:120]
            warnings.warn(f"no checkpoint for {spec.label()} under {folder} ({text}); the "
                          f"unit runs without one", stacklevel=2)
            return None
        return str(folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.pt")

    def to_dict(self) -> dict:
        """Every field as plain data (config a dict, seeds a list), to hand the context
        to a worker (a process pool's or Ray's) or store it: the one serialisation, so no
        field (``plugin_version`` included) is dropped on the way. ``on_round`` (a
        progress callback of this process) is left out; a worker's copy has none."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "on_round"}
        out["config"] = dict(self.config)
        out["seeds"] = [int(s) for s in self.seeds]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunContext":
        """The context :meth:`to_dict` wrote (seeds back to a tuple, no ``on_round``)."""
        data = dict(data)
        data["config"] = dict(data["config"])
        data["seeds"] = tuple(int(s) for s in data["seeds"])
        return cls(**data)


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    note: str = ""

    def to_dict(self) -> dict:
        return {"title": self.title, "columns": list(self.columns),
                "rows": [list(r) for r in self.rows], "note": self.note}


@dataclass(frozen=True)
class Figure:
    """A plot described as data, so that ``audit report`` can redraw it from JSON.

    ``series``: list of {"label", "x", "y", optional "low", "high"} (a band over seeds).
    ``kind``: "line" (default), "bar" or "hist".
    """

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: tuple[Mapping[str, Any], ...]
    kind: str = "line"
    logy: bool = False
    caption: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "xlabel": self.xlabel,
                "ylabel": self.ylabel, "series": [dict(s) for s in self.series],
                "kind": self.kind, "logy": self.logy, "caption": self.caption}


@dataclass(frozen=True)
class Analysis:
    """What a claim's analysis returns: estimates, decided parts, tables, figures."""

    estimates: tuple[Estimate, ...]
    parts: tuple[Part, ...]
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()  # paragraphs for the report: what the test shows and not
    premise: "Premise | None" = None  # the paper's own effect, measured first
    # which setting the verdict speaks for: one entry per setting the claim ran (the base
    # setting and each sweep), each {"setting", "verdict", "base": bool,
    # "closest_to_paper": bool, "why": str}; the report's headline says when they disagree
    settings: tuple = ()
    # audit.questions.Finding: what the evidence shows that a reader should see first
    findings: tuple = ()
    # question id -> a caveat printed with its verdict (e.g. read before convergence)
    caveats: Mapping[str, str] = field(default_factory=dict)


Results = Mapping[RunSpec, Mapping[str, Any]]


@dataclass(frozen=True)
class Claim:
    """A reviewer's claim with everything needed to run it and decide it.

    Attributes:
        id: the stable claim id (``flayer-masked-zero``, ...).
        paper: the audited paper.
        record: the review record and its fields this claim answers.
        title: a short name of the falsifier.
        statement: our paraphrase of the reviewer's claim (never the record's words).
        arms: the arms, each with the piece it changes.
        rules: the part rules (their text is printed in the report).
        combination: how the claim's verdict follows from the parts.
        stochastic: whether runs depend on a seed (then at least 2 seeds are required).
        scales: config per scale name ("smoke", "full", "paper").
        run: one unit of work ``run(spec, ctx) -> JSON-able dict``; a pure function of
            (spec, ctx); results are cached.
        analyse: ``analyse(results, ctx) -> Analysis``.
        decide: (optional) ``decide(results, ctx) -> (parts, premise)``: the decisions
            alone, without the presentation (estimates, tables, figures, notes), for what
            re-decides many times: the leave-one-seed-out stability check and the
            interim looks of ``--until-decided``. It must give
            the parts and premise ``analyse`` gives (ids, verdicts, premise status, and
            the ``gated`` and ``kind`` a stop reads): the runner checks that on the
            analysis of every run (a sequential run's stopping look), and refuses the run
            otherwise. ``kit.staged`` makes both from one ``evidence``, so they cannot
            differ, and marks the ``decide`` it makes (``decide.staged``): only such a
            ``decide`` settles an interim look alone (a look that goes on is never
            compared with an analysis); any other is used for the stability check, and
            interim looks are analysed in full. None: ``analyse`` is used.
        specs: the units to run for a context; default: every arm x every seed.
        paper_numbers: the paper's reported numbers, shown as the paper's.
        answers: extra record fields answered (for ``audit review``), field -> part id.
        default_seeds: seeds used when none are given; 10 by default, the regression
            scale's one look (the three-way rule decides nothing below 6 pairs, and at 6 or 7
            only with every pair on one side).
        lock_file: where this claim's locks are kept (None: ``audit/locks.json``); a
            claim from an entry point gets ``locks.json`` beside its module by default.
        origin: "" for a built-in claim; for a plugin, the entry point it came from.
        code_paths: files or folders whose ``*.py`` source enters the run cache's code
            version besides the ``audit`` package (a plugin's own package).
        searches: how settings were chosen (``audit.tuning.Search``, tuning seeds only).
    """

    id: str
    paper: Paper
    record: RecordRef
    title: str
    statement: str
    arms: tuple[Arm, ...]
    rules: tuple[Rule, ...]
    combination: Combination
    stochastic: bool
    scales: Mapping[str, Mapping[str, Any]]
    run: Callable[[RunSpec, RunContext], Mapping[str, Any]] = field(repr=False)
    analyse: Callable[[Results, RunContext], Analysis] = field(repr=False)
    specs: Callable[[RunContext], Sequence[RunSpec]] | None = field(default=None, repr=False)
    decide: Callable[[Results, RunContext], tuple] | None = field(default=None, repr=False)
    paper_numbers: tuple[PaperNumber, ...] = ()
    answers: Mapping[str, str] = field(default_factory=dict)
    default_seeds: tuple[int, ...] = tuple(range(10))
    # audit.tuning.Search records: how each scale's settings were chosen (on tuning seeds)
    searches: tuple = ()
    # audit.tuning.RegimeMap: declared searches for where the paper's own effect appears
    # (run by `audit regime ID`, on tuning seeds, printed in the report)
    regime_maps: tuple = ()
    # the result keys that read validation data only, the metrics `audit tune` may read;
    # None: not declared (a key named like a test-set metric is still refused); ():
    # the claim's runs read no validation data, so every pilot needs --allow-test-metric
    validation_metrics: tuple[str, ...] | None = None
    # audit.questions.Question: the reviewer's questions this claim answers, each with its
    # own verdict (none: one question, the whole statement, decided by `combination`)
    questions: tuple = ()
    lock_file: str | None = None
    origin: str = ""
    code_paths: tuple[str, ...] = ()

    def decided(self, results: Results, ctx: RunContext) -> tuple[tuple, Any]:
        """(parts, premise) of ``results``: by :attr:`decide` where the claim has one (no
        presentation is built), else from :attr:`analyse`."""
        if self.decide is not None:
            parts, premise = self.decide(results, ctx)
            return tuple(parts), premise
        a = self.analyse(results, ctx)
        return tuple(a.parts), getattr(a, "premise", None)

    def unit_specs(self, ctx: RunContext) -> list[RunSpec]:
        if self.specs is not None:
            return list(self.specs(ctx))
        if not self.stochastic:
            return [RunSpec(arm=a.name) for a in self.arms]
        return [RunSpec(arm=a.name, seed=s) for s, a in itertools.product(ctx.seeds, self.arms)]

    def rule(self, part: str) -> Rule:
        for r in self.rules:
            if r.part == part:
                return r
        raise KeyError(f"claim {self.id!r} has no rule for part {part!r}")

    def locks_path(self) -> Path:
        """This claim's lock file: ``$AUDIT_LOCKS`` when set (one file the user names for
        every claim), else :attr:`lock_file`, else ``audit/locks.json``."""
        if os.environ.get("AUDIT_LOCKS") or not self.lock_file:
            return locks_path()
        return Path(self.lock_file)

    def locks(self) -> dict[str, dict]:
        return read_locks(self.locks_path()).get(self.id, {})

    def code_module(self) -> str:
        """The package module holding :attr:`run` when it is one of the ``audit``
        package's own modules (its import closure keys the cache), else ``""``. Read from
        the file the function's code is in, so a wrapper (``functools.wraps`` copies the
        wrapped function's ``__module__``) is keyed on its own module."""
        code = getattr(self.run, "__code__", None)
        if code is not None:
            return _keys.package_module(code.co_filename)
        name = getattr(self.run, "__module__", "") or ""  # a callable object: its class's
        return name if name.startswith("audit.") and _keys.package_module(
            getattr(sys.modules.get(name), "__file__", "") or "") == name else ""

    def plugin_version(self) -> str:
        """A hash of :attr:`code_paths` (``""`` for a built-in claim, whose code is in the
        ``audit`` package's own version): appended to the cache key's code version, so
        a change in a plugin's source recomputes its runs."""
        if not self.code_paths:
            return ""
        h = hashlib.sha256()
        for root in map(Path, self.code_paths):
            files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
            for f in files:
                if "__pycache__" in f.parts or not f.is_file():
                    continue
                h.update(str(f.relative_to(root) if root.is_dir() else f.name).encode())
                h.update(f.read_bytes())
        return f"+{self.id}:{h.hexdigest()[:12]}"

    def lock(self, scale: str, seeds: Sequence[int] | None = None) -> dict | None:
        """The lock recorded at ``scale``; given ``seeds``, only when it was recorded with
        those seeds (a verdict from other seeds is another experiment, not a flip)."""
        lock = self.locks().get(scale)
        if lock is None:
            return None
        if seeds is not None and "seeds" in lock and list(lock["seeds"]) != list(seeds):
            return None
        return lock

    def locked(self, scale: str, seeds: Sequence[int] | None = None) -> Outcome | None:
        lock = self.lock(scale, seeds)
        return Outcome(lock["verdict"]) if lock else None


# ------------------------------------------------------------------------- the papers
# Titles are our one-line descriptions (the review records carry no titles); versions
# are the arXiv versions the records reviewed (their ``paper_version`` field).
FLAYER = Paper("2412.07062", "FLAYER: layer-wise head mixing, learning rates and upload "
               "masks for personalised FL", "3", "FLAYER")
FEDTLU = Paper("2412.17692", "FedTLU: server-scored targeted block updates for federated "
               "language-model training", "2", "FedTLU")
GENEFL = Paper("2504.14628", "GENE-FL: Fisher-constrained learnGene condensation for "
               "communication-light FL", "1", "GENE-FL")
LIPS = Paper("2506.00932", "LIPS: sensitivity pruning of middle layers against layer "
             "inertia in low-data FL", "1", "LIPS")

RECORDS = {
    "2412.07062": "000_87577804b4c438f8.txt",
    "2412.17692": "001_a7233aceeda11d26.txt",
    "2506.00932": "003_82127fc259f0efbc.txt",
    "2504.14628": "004_be6e3340ef2e80e7.txt",
}
#: Each record's own ``id``: the claims' questions name its items by position
#: (``referee_report.major_comments[2]``), so another review of the same paper (a new
#: version, a reordered list) would be matched to the wrong points; ``audit review``
#: covers only the record these ids name.
RECORD_IDS = {
    "2412.07062": "f063c3f2-5bed-4c59-84df-6b9b2355094b",
    "2412.17692": "b9c242ac-afd6-4a95-bbad-c9882bb6164f",
    "2506.00932": "cb9d69f1-4f11-49e1-9cb0-b2fba6a64db4",
    "2504.14628": "90726382-bd1f-4aff-9ad7-e9065ba2572e",
}


# --------------------------------------------------------------------------- registry
def locks_path() -> Path:
    """The lock file: ``audit/locks.json``, or ``$AUDIT_LOCKS`` (for tests of the locks)."""
    return Path(os.environ.get("AUDIT_LOCKS", LOCKS_PATH))


LOCK_VERDICTS = ("CONFIRMED", "REFUTED", "INCONCLUSIVE")


def _lock_problem(locks: Any) -> str | None:
    """What is wrong with the shape of a parsed lock file, or None when it is usable.

    Shape: {claim id: {scale: {"verdict": V, "parts": {part id: V}, "seeds": [int],
    "plan": {"looks": [int], "spending": S}, "questions": {question id: Q}}}}, V one of
    CONFIRMED / REFUTED / INCONCLUSIVE (the verdict may also be SPLIT), Q one of those
    four; seeds whole numbers in [0, 2**32 - 1]; the plan's looks strictly increasing
    whole numbers from 2 up to the seed cap (200, or ``$AUDIT_MAX_SEEDS``), its spending
    a known shape. Every key but "verdict" may be absent.
    """
    top_verdicts = LOCK_VERDICTS + ("SPLIT",)

    def kind(x: Any) -> str:
        return type(x).__name__

    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if not isinstance(locks, dict):
        return f"the top level must be an object of claim ids, got {kind(locks)}"
    for cid, scales in locks.items():
        if not isinstance(scales, dict):
            return (f"entry {_short_repr(cid)} must be an object of scales, got "
                    f"{kind(scales)}")
        for scale, lock in scales.items():
            where = f"entry {_short_repr(cid)} at scale {_short_repr(scale)}"
            if not isinstance(lock, dict):
                return f"{where} must be an object, got {kind(lock)}"
            verdict = lock.get("verdict")
            if not isinstance(verdict, str) or verdict not in top_verdicts:
                return (f"{where} has verdict {_short_repr(verdict)}; expected one of "
                        f"{', '.join(top_verdicts)}")
            for key, words in (("parts", LOCK_VERDICTS), ("questions", top_verdicts)):
                entries = lock.get(key, {})
                if not isinstance(entries, dict):
                    return f"{where}: {key!r} must be an object, got {kind(entries)}"
                for pid, v in entries.items():
                    if not isinstance(v, str) or v not in words:
                        return (f"{where}: {key[:-1]} {_short_repr(pid)} has verdict "
                                f"{_short_repr(v)}; expected one of {', '.join(words)}")
            seeds = lock.get("seeds", [])
            if not isinstance(seeds, list) or not all(
                    whole(x) and 0 <= x <= 2**32 - 1 for x in seeds):
                return (f"{where}: 'seeds' must be a list of whole numbers in "
                        f"[0, 2**32 - 1]")
            if "plan" in lock:
                problem = plan_problem(lock["plan"])
                if problem:
                    return f"{where}: 'plan' {problem}"
    return None


def _short_repr(value: Any, width: int = 40) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else \
        f"a {len(str(abs(value)))}-digit number"
    return text if len(text) <= width else text[:width - 3] + "..."


def plan_problem(plan: Any) -> str | None:
    """Why a sequential plan (a report's or a lock's ``plan``) cannot be locked, or None:
    the lock file's own check, with its seed cap (``cmd_lock`` runs it on a report's plan
    before anything is written, so a plan of odd types is one error line)."""
    from audit.sequential import SPENDING

    return _plan_problem(plan, _seed_cap(), SPENDING)


def _seed_cap() -> int:
    """The largest seed count a lock's plan may name: 200, or ``$AUDIT_MAX_SEEDS`` when
    larger (an unreadable setting falls back to 200; the run itself reports it)."""
    try:
        return max(200, max_seeds())
    except AuditError:
        return 200


def _plan_problem(plan: Any, cap: int, spending: Sequence[str]) -> str | None:
    """Why a lock's sequential plan is unusable, or None (see :func:`_lock_problem`)."""
    if not isinstance(plan, dict):
        return f"must be an object with 'looks' and 'spending', got {type(plan).__name__}"
    looks = plan.get("looks")
    if not isinstance(looks, list) or not looks:
        return "must hold 'looks', a non-empty list of seed counts"
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in looks):
        return f"looks must be whole numbers, got {_short_repr(looks)}"
    if not all(2 <= n <= cap for n in looks):
        return f"looks must lie between 2 and the seed cap {cap}, got {_short_repr(looks)}"
    if any(b <= a for a, b in zip(looks, looks[1:])):
        return f"looks must increase strictly, got {_short_repr(looks)}"
    shape = plan.get("spending", "pocock")
    if not isinstance(shape, str) or shape not in spending:
        return f"spending must be one of {', '.join(spending)}, got {_short_repr(shape)}"
    return None


def read_locks(path: Path | None = None) -> dict:
    """The locks, checked for shape: any problem is one AuditError naming the file."""
    path = path or locks_path()
    if not path.exists():
        return {}
    from audit.safeio import read_json

    locks = read_json(path, "lock file")
    problem = _lock_problem(locks)
    if problem is not None:
        raise AuditError(f"lock file {path} is malformed: {problem}")
    return locks


def write_lock(claim_id: str, scale: str, verdict: Outcome, parts: Sequence[Part],
               seeds: Sequence[int] = (), path: Path | None = None,
               plan: Mapping | None = None,
               questions: Mapping[str, str] | None = None) -> None:
    """Record a lock; the file is replaced atomically (never left half written).

    ``questions``: question id -> its verdict (``audit.questions``).
    ``plan``: the sequential stopping rule (``audit.sequential.Plan.to_dict()``) when the
    verdict came from ``--until-decided``; ``seeds`` are then the seeds it stopped at."""
    from audit.safeio import atomic_write, folder_lock

    if is_tuning([int(x) for x in seeds]):
        raise AuditError(f"{claim_id}: no lock from a tuning run (seeds {list(seeds)} are "
                         f"reserved for choosing settings)")
    path = Path(path or locks_path())
    with folder_lock(path.parent):  # concurrent writers (pytest-xdist) take turns
        locks = read_locks(path)
        locks.setdefault(claim_id, {})[scale] = {
            "verdict": verdict.value, "parts": {p.id: p.verdict.value for p in parts},
            "seeds": [int(s) for s in seeds]}
        # every question's verdict (verify fails when any of them flips); a measurement
        # question carries none ("MEASURED"), so it has nothing to lock
        decided = {str(k): str(v) for k, v in (questions or {}).items() if v != "MEASURED"}
        if decided:
            locks[claim_id][scale]["questions"] = decided
        if plan:
            locks[claim_id][scale]["plan"] = {"looks": [int(n) for n in plan["looks"]],
                                              "spending": str(plan["spending"])}
        atomic_write(path, json.dumps(locks, indent=2, sort_keys=True) + "\n")


#: The entry-point group through which installed packages add claims.
ENTRY_POINT_GROUP = "audit.claims"


class ClaimPluginWarning(UserWarning):
    """A claim plugin (an ``audit.claims`` entry point) could not be used; it is skipped."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _entry_points() -> list:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value))


def _describe(ep) -> str:
    dist = getattr(ep, "dist", None)
    where = f" (package {dist.metadata['Name']} {dist.version})" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}'{where} of group {ENTRY_POINT_GROUP}"


def _plugin_source(module_name: str) -> tuple[str | None, tuple[str, ...]]:
    """(the module's file, the source folders of its top-level package) of a loaded
    module; (None, ()) when it has no file."""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None, ()
    top = sys.modules.get(module_name.partition(".")[0])
    paths = tuple(str(p) for p in getattr(top, "__path__", ()) or ())
    return file, paths or (file,)


def plugin_claims(taken: Mapping[str, str]) -> dict[str, Claim]:
    """The claims of the installed ``audit.claims`` entry points, by id.

    ``taken``: ids already defined, each with where it is defined; an entry point whose
    claim has one of them is an AuditError naming both. An entry point that cannot be
    loaded, or that defines no usable ``CLAIM``, is skipped with one
    :class:`ClaimPluginWarning` naming it (the other claims stay usable)."""
    from audit.safeio import SAFE_NAME

    taken = dict(taken)
    out: dict[str, Claim] = {}
    for ep in _entry_points():
        where = _describe(ep)
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # a third-party module: any failure
            # (a sys.exit() at import included: never a silent end) skips it alone
            warnings.warn(f"{where} cannot be loaded ({_first_line(exc)}); its claim is "
                          f"skipped", ClaimPluginWarning, stacklevel=3)
            continue
        claim = obj if isinstance(obj, Claim) else getattr(obj, "CLAIM", None)
        if not isinstance(claim, Claim):
            warnings.warn(f"{where} defines no CLAIM (an audit.claims.Claim; got "
                          f"{type(claim).__name__}); skipped", ClaimPluginWarning,
                          stacklevel=3)
            continue
        if not isinstance(claim.id, str) or not SAFE_NAME.fullmatch(claim.id) \
                or ".." in claim.id:
            warnings.warn(f"{where} defines claim id {claim.id!r}, which is not a safe "
                          f"name (letters, digits, '.', '_', '-'); skipped",
                          ClaimPluginWarning, stacklevel=3)
            continue
        if claim.id in taken:
            raise AuditError(f"claim id {claim.id!r} is defined twice: by {taken[claim.id]} "
                             f"and by {where}; rename one of them")
        file, code = _plugin_source(ep.module)
        lock_file = claim.lock_file or (str(Path(file).with_name("locks.json"))
                                        if file else None)
        out[claim.id] = dataclasses.replace(claim, origin=where, lock_file=lock_file,
                                            code_paths=claim.code_paths or code)
        taken[claim.id] = where
    return out


def registry() -> dict[str, Claim]:
    """Every claim by id: the built-in ones (by module name), then the claims of installed
    plugins (by entry-point name)."""
    built: dict[str, Claim] = {}
    where: dict[str, str] = {}
    for name in CLAIM_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but one of its imports is missing
                raise
            continue
        built[module.CLAIM.id] = module.CLAIM
        where[module.CLAIM.id] = f"the built-in module {name}"
    out: dict[str, Claim] = dict(built)
    out.update(plugin_claims(where))
    return out


def get(claim_id: str) -> Claim:
    claims = registry()
    if claim_id not in claims:
        raise AuditError(f"unknown claim id {_short_repr(claim_id, 80)}; known ids: "
                         f"{', '.join(claims)}")
    return claims[claim_id]
