"""The claim registry.

A :class:`Claim` is one reviewer's checkable statement about one paper: where it comes
from (the review record and its fields), our paraphrase of it, the arms that test it, the
rules that decide it, and the verdicts locked for each scale (``audit/locks.json``).

Each claim lives in its own module under ``audit/experiments/`` and defines a module-level
``CLAIM``. Adding a claim is one new module plus one line in :data:`CLAIM_MODULES`; until
the module exists, the claim is listed as pending from :data:`PENDING`.
"""
from __future__ import annotations

import importlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from audit.errors import AuditError  # re-exported: claim modules import it from here
from audit.verdict import Combination, Estimate, Outcome, Part, Premise, Rule

LOCKS_PATH = Path(__file__).with_name("locks.json")

# One registration line per claim: the module under audit/experiments/ that defines
# ``CLAIM``. While a module does not exist yet, its claim is listed from PENDING below.
CLAIM_MODULES: tuple[str, ...] = (
    "audit.experiments.flayer_masked_zero",
    "audit.experiments.fedtlu_lower_bound",
    "audit.experiments.genefl_inverted_cosine",
    "audit.experiments.genefl_uplink_bytes",
    "audit.experiments.lips_dropout_control",
    "audit.experiments.flayer_eq4_unbounded",
    "audit.experiments.fedtlu_score_undefined",
)


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

    file: str  # name in shared/reviews/
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

    def checkpoint(self, spec: "RunSpec") -> str | None:
        """A checkpoint file for one unit (engine runs save and resume there), or None.

        Its name hashes everything the unit's state depends on, as the run cache's key
        does: the spec, scale, config, device, the code version (a run killed before a
        code change does not resume from the old code's state) and the fingerprint of
        the data files the config reads under ``data_dir`` (another copy of a data set
        does not resume from this one's state)."""
        if not self.checkpoint_dir:
            return None
        import hashlib

        from audit.runner import code_version, data_identity

        key = json.dumps([spec.to_dict(), self.scale, dict(self.config), self.device,
                          code_version(), data_identity(self)], sort_keys=True, default=str)
        folder = Path(self.checkpoint_dir) / self.claim_id
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.pt")


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
        specs: the units to run for a context; default: every arm x every seed.
        paper_numbers: the paper's reported numbers, shown as the paper's.
        answers: extra record fields answered (for ``audit review``), field -> part id.
        default_seeds: seeds used when none are given.
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
    paper_numbers: tuple[PaperNumber, ...] = ()
    answers: Mapping[str, str] = field(default_factory=dict)
    default_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    status: str = "ready"

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

    def locks(self) -> dict[str, dict]:
        return read_locks().get(self.id, {})

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


@dataclass(frozen=True)
class PendingClaim:
    """A claim whose falsifier is not built yet: listed, never run."""

    id: str
    paper: Paper
    record: RecordRef
    title: str
    statement: str
    status: str = "pending"
    stochastic: bool = True

    def locks(self) -> dict[str, dict]:
        return {}


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

# The fixed claims, listed (as pending) until their module in CLAIM_MODULES exists.
PENDING: tuple[PendingClaim, ...] = (
    PendingClaim("flayer-masked-zero", FLAYER,
                 RecordRef(RECORDS[FLAYER.arxiv_id], ("skeptic_critique.concrete_test",)),
                 "masked-zero aggregation collapse",
                 "Run as printed, the server average lets masked-out coordinates enter as "
                 "zeros, so unselected weights vanish and selected ones shrink; the "
                 "reported accuracy could not come from that rule."),
    PendingClaim("fedtlu-lower-bound", FEDTLU,
                 RecordRef(RECORDS[FEDTLU.arxiv_id], ("skeptic_critique.concrete_test",)),
                 "lower-bound fallacy",
                 "Comparing two lower bounds does not order the true loss decreases, the "
                 "score is never tied to the gradient-mass assumption, and the reported "
                 "gains over random selection sit inside run-to-run noise."),
    PendingClaim("genefl-inverted-cosine", GENEFL,
                 RecordRef(RECORDS[GENEFL.arxiv_id], ("skeptic_critique.concrete_test",)),
                 "inverted cosine score",
                 "A high cosine to the previous weights means a layer moved little, so "
                 "keeping the top-scored layers keeps the most stable ones, the opposite "
                 "of what the prose says the score measures."),
    PendingClaim("genefl-uplink-bytes", GENEFL,
                 RecordRef(RECORDS[GENEFL.arxiv_id], ("skeptic_critique.concrete_test",)),
                 "uplink vs bidirectional bytes",
                 "The fourfold saving counts only uploads; with the full cluster model sent "
                 "down every round the total saving is well under two, and the paper's own "
                 "formula does not give its tables' totals."),
    PendingClaim("lips-dropout-control", LIPS,
                 RecordRef(RECORDS[LIPS.arxiv_id], ("skeptic_critique.concrete_test",)),
                 "dropout control",
                 "The accuracy gain is never compared with generic regularisation of the "
                 "middle layers, so it is not shown to come from curing layer inertia."),
)


# --------------------------------------------------------------------------- registry
def locks_path() -> Path:
    """The lock file: ``audit/locks.json``, or ``$AUDIT_LOCKS`` (for tests of the locks)."""
    return Path(os.environ.get("AUDIT_LOCKS", LOCKS_PATH))


LOCK_VERDICTS = ("CONFIRMED", "REFUTED", "INCONCLUSIVE")


def _lock_problem(locks: Any) -> str | None:
    """What is wrong with the shape of a parsed lock file, or None when it is usable.

    Shape: {claim id: {scale: {"verdict": V, "parts": {part id: V}, "seeds": [int]}}},
    V one of CONFIRMED / REFUTED / INCONCLUSIVE; "parts" and "seeds" may be absent.
    """
    def kind(x: Any) -> str:
        return type(x).__name__

    if not isinstance(locks, dict):
        return f"the top level must be an object of claim ids, got {kind(locks)}"
    for cid, scales in locks.items():
        if not isinstance(scales, dict):
            return f"entry {cid!r} must be an object of scales, got {kind(scales)}"
        for scale, lock in scales.items():
            where = f"entry {cid!r} at scale {scale!r}"
            if not isinstance(lock, dict):
                return f"{where} must be an object, got {kind(lock)}"
            if lock.get("verdict") not in LOCK_VERDICTS:
                return (f"{where} has verdict {lock.get('verdict')!r}; expected one of "
                        f"{', '.join(LOCK_VERDICTS)}")
            parts = lock.get("parts", {})
            if not isinstance(parts, dict):
                return f"{where}: 'parts' must be an object, got {kind(parts)}"
            for pid, v in parts.items():
                if v not in LOCK_VERDICTS:
                    return (f"{where}: part {pid!r} has verdict {v!r}; expected one of "
                            f"{', '.join(LOCK_VERDICTS)}")
            seeds = lock.get("seeds", [])
            if not isinstance(seeds, list) or not all(
                    isinstance(x, int) and not isinstance(x, bool) for x in seeds):
                return f"{where}: 'seeds' must be a list of whole numbers"
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
               plan: Mapping | None = None) -> None:
    """Record a lock; the file is replaced atomically (never left half written).

    ``plan``: the sequential stopping rule (``audit.sequential.Plan.to_dict()``) when the
    verdict came from ``--until-decided``; ``seeds`` are then the seeds it stopped at."""
    from audit.safeio import atomic_write

    path = path or locks_path()
    locks = read_locks(path)
    locks.setdefault(claim_id, {})[scale] = {
        "verdict": verdict.value, "parts": {p.id: p.verdict.value for p in parts},
        "seeds": [int(s) for s in seeds]}
    if plan:
        locks[claim_id][scale]["plan"] = {"looks": [int(n) for n in plan["looks"]],
                                          "spending": str(plan["spending"])}
    atomic_write(path, json.dumps(locks, indent=2, sort_keys=True) + "\n")


def registry() -> dict[str, Claim | PendingClaim]:
    """Every claim, built or pending, by id (built claims first, in registration order)."""
    built: dict[str, Claim] = {}
    for name in CLAIM_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but one of its imports is missing
                raise
            continue
        built[module.CLAIM.id] = module.CLAIM
    out: dict[str, Claim | PendingClaim] = {}
    for pending in PENDING:  # the five fixed ids keep their order
        out[pending.id] = built.pop(pending.id, pending)
    out.update(built)
    return out


def get(claim_id: str) -> Claim | PendingClaim:
    claims = registry()
    if claim_id not in claims:
        raise AuditError(f"unknown claim id {claim_id!r}; known ids: {', '.join(claims)}")
    return claims[claim_id]
