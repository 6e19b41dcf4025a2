"""``audit review PATH...``: which items of a review record are covered by claims.

A review record (a JSON file, passed to ``audit review`` by path; the records are not in this repository) holds a referee report, a skeptic
critique and a falsifier sentence about one paper (``arxiv_id``). Its checkable items,
named by field path, are

- ``skeptic_critique.concrete_test`` and ``skeptic_critique.load_bearing_attack``,
- ``falsifier`` (top level),
- each ``referee_report.major_comments[i]`` and ``referee_report.minor_comments[i]``.

Every item is listed. An item is covered by a claim when the claim declares it: the
field paths in ``claim.record.fields`` are answered by the claim as a whole, and those in
``claim.answers`` (field path -> part id) by one part. Claims are matched to a record by
the paper's arXiv id. The declarations live next to each claim, never here.

The verdict shown comes from ``reports/<claim-id>.json`` (its ``verdict``, or the entry
of ``parts`` named by the part id); "not run" when no report exists. An uncovered item shows the one-line reason from the
paper's notes (``audit.papers``). The table shows our paraphrase of each item, never
the record's text.

Problems with one record (bad JSON, a missing field, an unknown arXiv id) are one line
each on stderr; the other records are still read and the exit status is 1. A path that
does not exist, or a folder with no records, is a fatal error (:class:`AuditError`).
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from audit import claims as claims_mod
from audit import papers, safeio
from audit.claims import AuditError

TOP_ITEMS = ("skeptic_critique.concrete_test", "skeptic_critique.load_bearing_attack",
             "falsifier")
COMMENT_LISTS = ("referee_report.major_comments", "referee_report.minor_comments")
RECORD_SUFFIXES = (".txt", ".json")
UNKNOWN_PAPER = "(no paraphrase: unknown paper)"
NO_CLAIM_FOR_PAPER = "no claim registered for this paper"
OTHER_RECORD = ("another review of this paper than the one its claims answer: items are "
                "matched by position, so none is taken as covered")


# ----------------------------------------------------------------------------- data
@dataclass
class Cover:
    """One claim (and optionally one of its parts) that answers an item."""

    claim: str
    part: str | None
    verdict: str  # CONFIRMED / REFUTED / INCONCLUSIVE, "not run", ...
    scale: str | None = None
    # what would decide the question where no committed scale decided it (its report's
    # "needs", per scale); "" where it is decided or says nothing
    needs: str = ""
    # the question's word at each committed scale that has a readable verdict report;
    # empty where a scale's report could not be read (then nothing is counted decided)
    words: tuple[str, ...] = ()
    # decided, but marked fragile at every scale that decides it
    fragile: bool = False

    @property
    def decided(self) -> bool:
        """CONFIRMED or REFUTED at some committed scale, read from the words themselves
        (never from the rendered text, which may quote a report's own)."""
        return any(w in DECIDED for w in self.words)

    @property
    def measurement(self) -> bool:
        """A measurement at every committed scale: it reports a number and decides
        nothing, so it neither makes its item decided nor leaves it open."""
        return bool(self.words) and all(w == "MEASURED" for w in self.words)


DECIDED = ("CONFIRMED", "REFUTED")
UNCHECKABLE = (papers.PRESENTATION, papers.DEFINITION, papers.AUTHORS_DATA,
               NO_CLAIM_FOR_PAPER, OTHER_RECORD)


@dataclass
class Row:
    path: str
    paraphrase: str
    covered_by: list[Cover] = field(default_factory=list)
    reason: str | None = None  # set when no claim covers the item

    @property
    def covered(self) -> bool:
        return bool(self.covered_by)

    @property
    def checkable(self) -> bool:
        """Answerable by computation, exact arithmetic or the paper's printed numbers: a
        covered item, or one whose reason is not presentation, a definition only the
        authors can supply, or the authors' own runs."""
        if self.covered:
            return True
        return not (self.reason or "").startswith(UNCHECKABLE)

    @property
    def _deciding(self) -> list[Cover]:
        return [c for c in self.covered_by if not c.measurement]

    @property
    def decided(self) -> bool:
        """Every question that answers the item with a verdict (measurements aside) is
        CONFIRMED or REFUTED at some committed scale: an item whose proof is decided and
        whose experiment is open is only partly decided (:attr:`partly_decided`)."""
        deciding = self._deciding
        return bool(deciding) and all(c.decided for c in deciding)

    @property
    def partly_decided(self) -> bool:
        return not self.decided and any(c.decided for c in self._deciding)

    @property
    def fragile(self) -> bool:
        """Decided, through a question decided only where its word is fragile."""
        return self.decided and any(c.fragile for c in self._deciding)


@dataclass
class RecordCoverage:
    source: str
    arxiv_id: str | None
    paper: str | None  # the paper's short name when known
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # field paths declared by a claim of this paper that the record does not have
    dangling: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"source": self.source, "arxiv_id": self.arxiv_id, "paper": self.paper,
                "items": [{"path": r.path, "paraphrase": r.paraphrase, "covered": r.covered,
                           "covered_by": [asdict(c) for c in r.covered_by],
                           "decided": r.decided, "fragile": r.fragile,
                           "reason": r.reason} for r in self.rows],
                "problems": list(self.problems), "dangling": list(self.dangling)}


# -------------------------------------------------------------------------- reading
def record_files(paths: list[Path]) -> list[Path]:
    """The record files named by ``paths``: a file as given, a folder's *.txt/*.json sorted."""
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(q for q in p.iterdir()
                           if q.is_file() and q.suffix in RECORD_SUFFIXES)
            if not found:
                raise AuditError(f"folder {str(p)!r} holds no *.txt or *.json review records")
            files += found
        elif p.is_file():
            files.append(p)
        elif p.exists():  # /dev/zero, a FIFO: never read (it could block or never end)
            raise AuditError(f"review record path {str(p)!r} is not a regular file or a "
                             "folder")
        else:
            raise AuditError(f"review record path {str(p)!r} does not exist")
    return files


def _get(record: Mapping, dotted: str) -> Any:
    node: Any = record
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            raise KeyError(dotted)
        node = node[key]
    return node


def validate(record: Any) -> list[str]:
    """The problems of one parsed record (empty when it is usable), one line each."""
    if not isinstance(record, Mapping):
        return [f"not a JSON object (got {type(record).__name__})"]
    problems = []
    arxiv = record.get("arxiv_id")
    if "arxiv_id" not in record:
        problems.append("missing field 'arxiv_id'")
    elif not isinstance(arxiv, str) or not arxiv.strip():
        problems.append("field 'arxiv_id' must be a non-empty string")
    for name in COMMENT_LISTS:
        try:
            value = _get(record, name)
        except KeyError:
            problems.append(f"missing field {name!r}")
            continue
        if not isinstance(value, list):
            problems.append(f"field {name!r} must be a list, got {type(value).__name__}")
            continue
        for i, c in enumerate(value):
            text = c.get("comment") if isinstance(c, Mapping) else c
            if not isinstance(text, str):
                problems.append(f"{name}[{i}] is neither a string nor an object with a "
                                "'comment' string")
    try:
        ct = _get(record, "skeptic_critique.concrete_test")
        if not isinstance(ct, str):
            problems.append("field 'skeptic_critique.concrete_test' must be a string")
    except KeyError:
        problems.append("missing field 'skeptic_critique.concrete_test'")
    for name in TOP_ITEMS[1:]:  # optional items, but never silently dropped for a type
        try:
            value = _get(record, name)
        except KeyError:
            continue
        if value is not None and not isinstance(value, str):
            problems.append(f"field {name!r} must be a string, got {type(value).__name__}")
    return problems


def record_items(record: Mapping) -> list[tuple[str, str | None]]:
    """The checkable items of a valid record: (field path, its ``section`` label or None)."""
    items: list[tuple[str, str | None]] = []
    for path in TOP_ITEMS:
        try:
            value = _get(record, path)
        except KeyError:
            continue
        if isinstance(value, str) and value.strip():
            items.append((path, None))
    for name in COMMENT_LISTS:
        for i, c in enumerate(_get(record, name)):
            section = c.get("section") if isinstance(c, Mapping) else None
            items.append((f"{name}[{i}]", section if isinstance(section, str) else None))
    return items


# ------------------------------------------------------------------------- coverage
def _entry_needs(data: Mapping, ref: str | None, claim=None) -> str:
    """What the report says would decide question ``ref`` ("" when it says nothing)."""
    from audit import report

    if ref is None:
        return str(data.get("needs") or "")
    for q in report.report_questions(data, claim):
        if q.get("id") == ref:
            return str(q.get("needs") or "")
    return ""


def _entry_verdict(data: Mapping, ref: str | None, claim=None) -> str | None:
    """The verdict of question (or, for a claim without questions, part) ``ref`` in one
    report's JSON (questions derived from its parts for a report written before
    questions existed); the claim's single word for ``ref`` None; None when absent."""
    from audit import report

    if ref is None:
        return str(data["verdict"])
    for q in report.report_questions(data, claim):
        if q.get("id") == ref:
            return str(q.get("verdict"))
    for q in data.get("parts") or []:
        if isinstance(q, Mapping) and q.get("id") == ref:
            return str(q.get("verdict"))
    return None


def _entry_ungated(data: Mapping, ref: str | None, claim=None) -> tuple[str, str]:
    """(what question ``ref``'s comparisons alone said where the premise gate held it
    INCONCLUSIVE in one report, "" where nothing was overridden; what its decided word
    rests on where less than the question asks, ``basis``, "" where nothing is said)."""
    from audit import questions, report

    if ref is None:
        return "", ""
    for q in report.report_questions(data, claim):
        if q.get("id") == ref:
            word, basis = q.get("ungated"), q.get("basis")
            # a basis with nothing to show (blank, control characters alone) is none,
            # as on the report page, which reads it made inert: no "REFUTED ( )" here
            return (str(word) if word in questions.UNGATED_WORDS else "",
                    basis if isinstance(basis, str) and safeio.md_text(basis) else "")
    return "", ""


def _verdict(claim, ref: str | None, out: Path) -> tuple[str, str | None]:
    """(verdict text, scale) of a claim's question (or part) from its reports: ``out`` and,
    where it exists, ``out/full``. Both scales side by side when both exist, with the
    question's word across scales (SPLIT when they differ, never one promoted)."""
    return _verdict_needs(claim, ref, out)[:2]


def _verdict_needs(claim, ref: str | None, out: Path
                   ) -> tuple[str, str | None, str, tuple[str, ...], bool]:
    """:func:`_verdict`, what would decide the question at the scales that left it open
    (each scale's "needs", named by scale when both exist), its word at each scale
    (none when a report could not be read: the other scale's word alone would promote
    it), and whether it is decided only where its word is marked fragile. A tuning run
    (tuning seeds) is no verdict and is named as such."""
    from audit import report

    from audit import questions

    found: dict[str, str] = {}
    needs: dict[str, str] = {}
    alone: dict[str, str] = {}  # scale -> the word the premise gate overrode, if any
    basis: dict[str, str] = {}  # scale -> what the shown decided word rests on, if said
    older: dict[str, str] = {}  # scale -> the commit of a report by earlier claim code
    frail: set[str] = set()  # the scales whose report marks the question fragile
    left_out: list[str] = []  # what a scale's report is, where it gives no verdict
    for folder, label in report.scale_folders(out):  # from reports/full, reports/ too
        if folder != out and not folder.is_dir():
            continue
        try:
            data = report.load(folder, claim.id)
        except AuditError as exc:
            if folder == out:
                return f"report unreadable ({exc})", None, "", (), False
            left_out.append(f"the {label} report is unreadable")
            continue
        if data is None:
            continue
        if data.get("tuning_run"):
            left_out.append(f"the {data.get('scale')} report is a tuning run (no verdict)")
            continue
        v = _entry_verdict(data, ref, claim)
        if v is None:
            if folder == out:
                return f"{ref!r} not in the report", str(data.get("scale")), "", (), False
            continue
        scale = str(data.get("scale"))
        if scale not in found:
            older[scale] = report.earlier_code(data, claim)
            alone[scale], basis[scale] = _entry_ungated(data, ref, claim)
            if ref is not None and ref in report._fragile_questions(data, claim):
                frail.add(scale)  # decided, and one seed or one left-out seed moves it
        found.setdefault(scale, v)
        if v not in DECIDED and v != "MEASURED":
            n = _entry_needs(data, ref, claim)
            if n:
                needs.setdefault(scale, n)
    if left_out:  # a scale without a verdict: no word is counted, and the page says why
        shown = ", ".join(f"{s} {v}" for s, v in found.items()) or "no verdict report"
        return f"{shown}; {'; '.join(left_out)}", None, "", (), False
    if not found:
        return "not run", None, "", (), False
    # the same order from either folder
    found = dict(sorted(found.items(), key=lambda kv: report.scale_rank(kv[0])))
    needs = dict(sorted(needs.items(), key=lambda kv: report.scale_rank(kv[0])))
    if any(v in DECIDED for v in found.values()):
        needs = {}  # decided at some scale: nothing more is needed to decide it
    # scales that need the same thing are named together, the text once
    same: dict[str, list[str]] = {}
    for s, n in needs.items():
        same.setdefault(n, []).append(s)
    need = (next(iter(needs.values())) if len(needs) == 1 and len(found) == 1 else
            "; ".join(f"{' and '.join(scales)}: {n}" for n, scales in same.items()))
    def shown(s: str, v: str) -> str:
        return questions.gated_text(v, alone.get(s), basis.get(s)) + (
            " (fragile)" if s in frail else "")

    # decided only where the word is fragile: no committed scale decides it firmly
    decided_at = {s for s, v in found.items() if v in DECIDED}
    firm_less = bool(decided_at) and decided_at <= frail

    if len(found) == 1:
        scale, v = next(iter(found.items()))
        return shown(scale, v), scale, need, (v,), firm_less
    words = set(found.values())
    word = next(iter(words)) if len(words) == 1 else "SPLIT"
    if len(words) == 1:  # the scales agree: an earlier code's report changes nothing
        older = {}
    each = ", ".join(f"{s} {shown(s, v)}" + _earlier(older.get(s)) for s, v in found.items())
    # the common word is no firmer than the scales it comes from: fragile where every
    # scale that decides it is
    mark = ", fragile" if firm_less and word in DECIDED else ""
    return f"{word}{mark} ({each})", None, need, tuple(found.values()), firm_less


def _earlier(commit: str | None) -> str:
    """The tag of a verdict from a report that earlier code of its claim wrote."""
    return f" at earlier code `{commit}`" if commit else ""


def declared_fields(claim) -> list[tuple[str, str | None]]:
    """The field paths a claim declares it answers: (path, question id), from its
    questions (``Claim.questions``); a claim without questions: (path, part id or None)
    from ``record.fields`` and ``answers``.
    """
    qs = tuple(getattr(claim, "questions", ()) or ())
    if qs:
        out: list[tuple[str, str | None]] = []
        for q in qs:
            out += [(f, q.id) for f in q.fields if (f, q.id) not in out]
        return out
    declared: dict[str, str | None] = {f: None for f in claim.record.fields}
    declared.update(dict(getattr(claim, "answers", {}) or {}))
    return list(declared.items())


def cover_record(record: Mapping, source: str, registry: Mapping, out: Path,
                 items: list[tuple[str, str | None]] | None = None) -> RecordCoverage:
    arxiv = re.sub(r"v\d+$", "", record["arxiv_id"].strip())  # 2412.07062v3: the paper
    claims = [c for c in registry.values() if c.paper.arxiv_id == arxiv]
    paper = claims[0].paper.short if claims else None
    if paper is None:
        for const in (claims_mod.FLAYER, claims_mod.FEDTLU, claims_mod.GENEFL,
                      claims_mod.LIPS):
            if const.arxiv_id == arxiv:
                paper = const.short
    cov = RecordCoverage(source=source, arxiv_id=arxiv, paper=paper)
    if arxiv not in claims_mod.RECORDS:
        cov.problems.append(f"unknown arXiv id {arxiv!r} (known: "
                            f"{', '.join(sorted(claims_mod.RECORDS))}); its items are "
                            "listed as not covered")
        claims = []
    known = claims_mod.RECORD_IDS.get(arxiv)
    other_record = bool(claims and known and "id" in record and record.get("id") != known)
    if other_record:
        # the questions name items by position: another review's items are other points
        cov.problems.append(f"record id {str(record.get('id'))[:60]!r} is not the review "
                            f"these claims answer ({known}): its items are matched by "
                            "position, so they are listed as not covered")
        claims = []
    notes = papers.notes(arxiv) if not cov.problems else None
    items = record_items(record) if items is None else items
    paths = {p for p, _ in items}
    by_path: dict[str, list[Cover]] = {}
    for claim in claims:
        for f, part in declared_fields(claim):
            if f not in paths:
                cov.dangling.append(f"{claim.id} declares {f!r}, which is not an item path "
                                   "of this record, so it covers nothing")
                continue
            verdict, scale, needs, words, fragile = _verdict_needs(claim, part, out)
            by_path.setdefault(f, []).append(Cover(claim.id, part, verdict, scale, needs,
                                                   words, fragile))
    for path, section in items:
        note = notes.get(path) if notes is not None else None
        if note is not None:
            paraphrase = note.paraphrase
        elif section:
            paraphrase = f"(section: {section})"
        else:
            paraphrase = UNKNOWN_PAPER
        row = Row(path, paraphrase, by_path.get(path, []))
        if not row.covered:
            row.reason = OTHER_RECORD if other_record else _reason(note, bool(claims))
        cov.rows.append(row)
    return cov


def from_notes(out: Path, registry: Mapping | None = None) -> list[RecordCoverage]:
    """Coverage of every audited paper's record from OUR notes (``audit.papers``: every
    item's field path and paraphrase) and the committed report JSON: what ``audit run``
    and ``audit report`` regenerate, with no review record needed."""
    registry = claims_mod.registry() if registry is None else registry
    out_cov = []
    for arxiv, module in papers.paper_modules().items():
        source = claims_mod.RECORDS.get(arxiv, f"{arxiv} (no record file)")
        items = [(path, None) for path in module.ITEMS]
        out_cov.append(cover_record({"arxiv_id": arxiv}, source, registry, out, items))
    return out_cov


def write_coverage(out: Path, registry: Mapping | None = None) -> Path:
    """Write ``out/coverage.md`` from :func:`from_notes` (atomic, inside ``out``)."""
    path = Path(out) / "coverage.md"
    safeio.atomic_write(safeio.inside(Path(out), path),
                        render_markdown(from_notes(Path(out), registry), Path(out)))
    return path


def _reason(note, paper_has_claims: bool) -> str:
    if not paper_has_claims:
        return NO_CLAIM_FOR_PAPER
    if note is None:
        return "no claim declares this item, and no reason is recorded for it"
    if note.reason and note.proposed:
        return f"{note.reason} (proposed for {note.proposed})"
    if note.reason:
        return note.reason
    if note.proposed:
        return (f"checkable; proposed for {note.proposed}, which does not declare this "
                "field yet")
    return "no claim declares this item, and no reason is recorded for it"


def review(paths: list[Path], out: Path, registry: Mapping | None = None
           ) -> list[RecordCoverage]:
    """Read, validate and cover every record named by ``paths`` (problems kept per record)."""
    registry = claims_mod.registry() if registry is None else registry
    result = []
    for f in record_files(paths):
        try:
            record = safeio.read_json(f, "review record")
        except AuditError as exc:
            # keep the problem with its record: one bad file does not stop the others
            result.append(RecordCoverage(str(f), None, None,
                                         problems=[str(exc).replace(f"review record {f} ", "", 1)]))
            continue
        problems = validate(record)
        if problems:
            arxiv = record.get("arxiv_id") if isinstance(record, Mapping) else None
            result.append(RecordCoverage(str(f), arxiv if isinstance(arxiv, str) else None,
                                         None, problems=problems))
            continue
        result.append(cover_record(record, str(f), registry, out))
    return result


# -------------------------------------------------------------------------- output
def _cover_text(c: Cover) -> tuple[str, str]:
    who = c.claim if c.part is None else f"{c.claim} / {c.part}"
    verdict = c.verdict if c.scale is None else f"{c.verdict} ({c.scale})"
    return who, verdict


def _table_rows(cov: RecordCoverage) -> list[tuple[str, str, str, str]]:
    return [r[:4] for r in _rows_with_needs(cov)]


def _rows_with_needs(cov: RecordCoverage) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for r in cov.rows:
        if not r.covered:
            rows.append((r.path, r.paraphrase, "—", f"not covered: {r.reason}",
                         "" if not r.checkable else "a claim that transcribes or runs it"))
            continue
        for i, c in enumerate(r.covered_by):
            who, verdict = _cover_text(c)
            if c.decided:  # an open question keeps its needs beside a decided one
                need = ""
            elif "MEASURED" in c.verdict and "INCONCLUSIVE" not in c.verdict:
                need = "a measurement: reported, no verdict to decide"
            else:
                need = c.needs or "(the report names nothing)"
            rows.append((r.path if i == 0 else "", r.paraphrase if i == 0 else "", who,
                         verdict, need))
    return rows


def decided_counts(coverages: list[RecordCoverage]) -> tuple[int, int, int]:
    """(checkable items, covered checkable items, decided items) over the records."""
    rows = [r for cov in coverages for r in cov.rows]
    return (sum(r.checkable for r in rows), sum(r.covered for r in rows),
            sum(r.decided for r in rows))


def fragile_count(coverages: list[RecordCoverage]) -> int:
    """Decided items that one seed, or one left-out seed, could undo (:attr:`Row.fragile`)."""
    return sum(r.fragile for cov in coverages for r in cov.rows)


def partly_decided_count(coverages: list[RecordCoverage]) -> int:
    """Items some of whose questions are decided and some open."""
    return sum(r.partly_decided for cov in coverages for r in cov.rows)


def _decided_line(coverages: list[RecordCoverage]) -> str:
    k, c, d = decided_counts(coverages)
    p = partly_decided_count(coverages)
    f = fragile_count(coverages)
    pct = f" ({100 * d / k:.0f} %)" if k else ""
    frail = (f", {f} of them resting on a word marked fragile (a question that one seed, or "
             f"one left-out seed, could leave undecided)" if f else "")
    return (f"Checkable items: {k} (by computation, exact arithmetic or the paper's printed "
            f"numbers); covered by a claim: {c}; decided (every question that answers it "
            f"CONFIRMED or REFUTED at some committed scale; measurements aside): {d}{pct}"
            f"{frail}; "
            f"partly decided (some of its questions open): {p}. Every open question names "
            f"what would decide it.")


def _heading(cov: RecordCoverage) -> str:
    name = cov.paper or "unknown paper"
    return f"{name}, arXiv {cov.arxiv_id} ({Path(cov.source).name})"


def _summary(cov: RecordCoverage) -> str:
    n = len(cov.rows)
    k = sum(r.covered for r in cov.rows)
    chk = sum(r.checkable for r in cov.rows)
    dec = sum(r.decided for r in cov.rows)
    part = sum(r.partly_decided for r in cov.rows)
    frail = sum(r.fragile for r in cov.rows)
    return (f"{k} of {n} items covered by a claim; {n - k} not covered, each with a "
            f"reason; {dec} of {chk} checkable items decided"
            + (f" ({frail} resting on a word marked fragile)" if frail else "")
            + (f", {part} partly" if part else ""))


def render_text(coverages: list[RecordCoverage]) -> str:
    lines = []
    for cov in coverages:
        if not cov.rows and cov.problems:
            continue  # unreadable record: its problems go to stderr
        lines.append(safeio.term_text(_heading(cov)))  # a record's id and file name
        # each cell inert for a terminal (a record's text may hold a newline or an
        # escape sequence); the line breaks are this table's own
        rows = [("item", "paraphrase (ours)", "claim / part", "verdict")] + [
            tuple(safeio.term_text(c) for c in r) for r in _table_rows(cov)]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(3))
                         + "  " + r[3])
        lines.append("  " + _summary(cov))
        lines.append("")
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    """A table cell from text that may come from a review record: inert markdown."""
    return safeio.md_text(text)


def render_markdown(coverages: list[RecordCoverage], out: Path | None = None) -> str:
    """The coverage page; a claim links to its report when ``out/<id>.md`` exists."""
    lines = ["# Coverage of the review records by claims", "",
             "Each checkable item of a review record (the skeptic's concrete test and "
             "load-bearing attack, the falsifier sentence, every major and minor referee "
             "comment), named by its field path, with the claim and the question that "
             "answers it and that question's verdict from the reports (smoke and full side "
             "by side where both exist; SPLIT when they differ, and then a verdict from a "
             "report that earlier code of its claim wrote is tagged with that code's commit, "
             "since its rules may differ), or the reason it is not "
             "covered. A decided verdict marked (fragile) is one that one seed moved by "
             "three test examples (three steps of its metric) or fewer, or one left-out "
             "seed, changes; it still counts as decided, and the counts say how many "
             "decided items rest on such a word alone. Paraphrases are ours; the records are cited by field path only. "
             "Which question answers which item is declared by each claim "
             "(`Claim.questions`). `audit run` and `audit report` regenerate this page "
             "from the reports' JSON; `audit review RECORDS --markdown` also checks the "
             "records themselves.", "", _decided_line(coverages), ""]
    for cov in coverages:
        if not cov.rows and cov.problems:
            continue
        # the heading names the record's file: a name from elsewhere, made inert
        lines += [f"## {_md_cell(_heading(cov))}", "", _summary(cov) + ".", "",
                  "| item | paraphrase (ours) | claim / question | verdict | what would "
                  "decide it |",
                  "|---|---|---|---|---|"]
        for path, para, who, verdict, need in _rows_with_needs(cov):
            claim_cell = who
            if who != "—":
                cid = who.split(" / ")[0]
                linked = out is not None and (out / f"{cid}.md").exists()
                claim_cell = f"[`{who}`]({cid}.md)" if linked else f"`{who}`"
            lines.append(f"| {'`' + path + '`' if path else ''} | {_md_cell(para)} | "
                         f"{claim_cell} | {_md_cell(verdict)} | {_md_cell(need)} |")
        if cov.dangling:
            lines += ["", "Declared fields the record lacks: "
                      + "; ".join(_md_cell(d) for d in cov.dangling) + "."]
        lines.append("")
    return "\n".join(lines)


def run_review(paths: list[Path], as_json: bool, markdown: bool, out: Path) -> int:
    """The ``audit review`` command: print coverage; exit 1 if any record was bad.

    With ``markdown``, every record is read and checked before anything is written: a bad
    record leaves ``coverage.md`` as it was and is one line, exit 2."""
    from audit import report, safeio

    registry = claims_mod.registry()
    coverages = review(paths, out, registry)
    bad = [c for c in coverages if c.problems]
    if markdown and bad:
        raise AuditError(
            f"{len(bad)} review record(s) invalid, {str(out / 'coverage.md')!r} left as it "
            "was: " + "; ".join(f"{c.source}: {', '.join(c.problems)}" for c in bad))
    if markdown:
        report.check_writable(out)
    for cov in bad:  # one line per record, its problems together
        print(safeio.term_text(f"audit review: {cov.source}: {'; '.join(cov.problems)}"),
              file=sys.stderr)
    for cov in coverages:
        for d in cov.dangling:
            print(safeio.term_text(f"audit review: warning: {cov.source}: {d}"),
              file=sys.stderr)
    if as_json:
        print(json.dumps([c.to_dict() for c in coverages], indent=2))
    else:
        print(render_text(coverages), end="")
    if markdown:
        path = out / "coverage.md"
        safeio.atomic_write(safeio.inside(out, path), render_markdown(coverages, out))
        report.write_index(out, registry)
        if not as_json:
            print(f"wrote {path}")
    return 1 if bad else 0
