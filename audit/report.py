"""Audit reports: ``<id>.json`` (the contract other tools read), ``<id>.md`` rendered from
that JSON alone, PNG figures redrawn from the JSON's figure data, and the ``README.md``
index of every claim.

JSON contract (keys always present): ``id``, ``paper``, ``verdict``, ``rule``, ``scale``,
``seeds`` (list of int), ``arms`` (list of names), ``estimates`` (objects with ``name``,
``value``, ``low``, ``high``, ``level``, ``n``; ``low``/``high`` null for exact values),
``environment`` (``python``, ``torch``, ``device``, ``commit``, ...), ``runtime_s`` and
``parts`` (objects with ``id``, ``verdict``, ``rule``).
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

from audit.claims import AuditError, Claim, PendingClaim
from audit.runner import ClaimResult, regenerate_command, with_overrides

SCHEMA_VERSION = 1
REQUIRED_KEYS = ("id", "paper", "verdict", "rule", "scale", "seeds", "arms", "estimates",
                 "environment", "runtime_s", "parts")


# ------------------------------------------------------------------------------ data
def to_json(result: ClaimResult) -> dict:
    claim, ctx, v, a = result.claim, result.ctx, result.verdict, result.analysis
    locked = result.locked
    return {
        "schema": SCHEMA_VERSION,
        "id": claim.id,
        "title": claim.title,
        "paper": {"arxiv_id": claim.paper.arxiv_id, "title": claim.paper.title,
                  "version": claim.paper.version, "short": claim.paper.short},
        "record": {"file": claim.record.file, "fields": list(claim.record.fields)},
        "statement": claim.statement,
        "verdict": v.verdict.value,
        "locked_verdict": locked.value if locked else None,
        "rule": v.rule,
        "reason": v.reason,
        "needs": v.needs,
        "parts": [p.to_dict() for p in v.parts],
        "scale": ctx.scale,
        "config": dict(ctx.config),
        "seeds": list(ctx.seeds),
        "device": ctx.device,
        "arms": [a_.name for a_ in claim.arms],
        "arm_details": [{"name": a_.name, "description": a_.description,
                         "differs": a_.differs} for a_ in claim.arms],
        "estimates": [e.to_dict() for e in v.estimates],
        "paper_numbers": [{"name": p.name, "value": p.value, "where": p.where,
                           "ours": p.ours} for p in claim.paper_numbers],
        "tables": [t.to_dict() for t in a.tables],
        "figures": [f.to_dict() for f in a.figures],
        "notes": list(a.notes),
        "environment": dict(result.environment),
        "runtime_s": round(result.runtime_s, 3),
        "runs": {"computed": result.computed, "cached": result.cached},
        "command": result.command or with_overrides(regenerate_command(ctx),
                                                    claim.scales[ctx.scale], ctx.config),
    }


def validate(data: Mapping, source: str = "report") -> None:
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise AuditError(f"{source} lacks required keys: {', '.join(missing)}")


# ------------------------------------------------------------------------- rendering
def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if float(x).is_integer() and 1000 <= abs(x) < 1e15:  # counts, bytes: exact
            return f"{int(x):,}"
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.{digits}g}"
        return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:,.{digits}f}".rstrip("0").rstrip(".")
    return str(x).replace("|", "\\|").replace("\n", " ")


def _table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    columns = list(columns)
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _estimate_rows(estimates: list[Mapping]) -> list[list]:
    rows = []
    for e in estimates:
        if e.get("low") is None and e.get("high") is None:
            interval = "exact" if e.get("method") == "exact" else "—"
        else:
            level = e.get("level")
            interval = (f"[{_fmt(e['low'])}, {_fmt(e['high'])}]"
                        + (f" ({level:.0%})" if level else ""))
        rows.append([f"`{e['name']}`", e["value"], interval, e.get("n"), e.get("method", ""),
                     e.get("description", "")])
    return rows


def render_markdown(data: Mapping, figure_dir: str | None = None) -> str:
    """The markdown report, from the JSON data alone."""
    validate(data)
    paper = data["paper"]
    env = data["environment"]
    lines = [f"# {data['id']}: {data.get('title', '')}", ""]
    lock = data.get("locked_verdict")
    lock_txt = f" (locked: {lock})" if lock else " (no lock at this scale and these seeds)"
    lines += [f"**Verdict on the reviewer's claim: {data['verdict']}**{lock_txt} at "
              f"`{data['scale']}` scale.", ""]
    lines += [f"Paper: {paper['short']}, arXiv {paper['arxiv_id']}v{paper['version']} "
              f"({paper['title']}). Reviewer's claim (our paraphrase of "
              f"`{data['record']['file']}`, fields "
              f"{', '.join('`' + f + '`' for f in data['record']['fields'])}): "
              f"{data['statement']}", ""]
    if data.get("needs"):
        lines += [f"What would decide it: {data['needs']}", ""]

    lines += ["## Verdict by part", ""]
    lines += [_table(["part", "verdict", "how it decided"],
                     [[p["id"], f"**{p['verdict']}**", p.get("reason", "")]
                      for p in data["parts"]]), ""]
    lines += [f"Combination rule: {data['rule']}", ""]

    if data.get("paper_numbers"):
        ours = {e["name"]: e for e in data["estimates"]}
        rows = []
        for p in data["paper_numbers"]:
            o = ours.get(p.get("ours") or "")
            rows.append([p["name"], p["value"], p["where"],
                         f"`{p['ours']}` = {_fmt(o['value'])}" if o else
                         (p.get("ours") or "—")])
        caption = ("Left: as reported by the paper (not computed here). Right: ours, at "
                   f"`{data['scale']}` scale")
        if data["scale"] != "paper":
            caption += (", whose data set and model are smaller than the paper's: compare "
                        "directions and gaps, not levels")
        lines += ["## The paper's numbers beside ours", "", caption + ".", "",
                  _table(["quantity", "paper's value", "where in the paper", "ours"], rows),
                  ""]

    lines += ["## Arms", ""]
    lines += [_table(["arm", "what it is", "differs from the printed method in"],
                     [[f"`{a['name']}`", a["description"], a["differs"]]
                      for a in data.get("arm_details", [])]), ""]

    lines += ["## Estimates", ""]
    lines += [_table(["estimate", "value", "interval", "n", "method", "what"],
                     _estimate_rows(data["estimates"])), ""]

    for t in data.get("tables", []):
        lines += [f"### {t['title']}", "", _table(t["columns"], t["rows"]), ""]
        if t.get("note"):
            lines += [t["note"], ""]

    if data.get("figures"):
        lines += ["## Figures", ""]
        for f in data["figures"]:
            rel = f"{figure_dir or data['id']}/{f['name']}.png"
            lines += [f"![{f['title']}]({rel})", ""]
            if f.get("caption"):
                lines += [f"*{f['caption']}*", ""]

    if data.get("notes"):
        lines += ["## What this shows, and what it does not", ""]
        for n in data["notes"]:
            lines += [n, ""]

    lines += ["## Decision rules (fixed in code before the run)", ""]
    for p in data["parts"]:
        lines += [f"- **{p['id']}**: {p['rule']}"]
    lines += ["", "## Reproduce", ""]
    seeds = data["seeds"]
    lines += [f"- Seeds: {seeds if seeds else 'none (exact computation)'}",
              f"- Scale: `{data['scale']}`; config: `{json.dumps(data.get('config', {}), sort_keys=True)}`",
              f"- Environment: python {env.get('python')}, torch {env.get('torch')}, "
              f"numpy {env.get('numpy')}, device {env.get('device')}, commit "
              f"`{env.get('commit')}`, code `{env.get('code_version')}`, {env.get('date')}",
              f"- Runtime: {data['runtime_s']:.1f} s "
              f"({data.get('runs', {}).get('computed', '?')} runs computed, "
              f"{data.get('runs', {}).get('cached', '?')} from cache)",
              f"- Command: `{data['command']}`", ""]
    return "\n".join(lines)


def render_figures(data: Mapping, out_dir: Path) -> list[Path]:
    """Draw each figure of the report as ``out_dir/<id>/<name>.png``."""
    if not data.get("figures"):
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir = out_dir / data["id"]
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in data["figures"]:
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
        kind = f.get("kind", "line")
        for s in f["series"]:
            if kind == "hist":
                ax.hist(s["y"], bins=s.get("bins", 30), alpha=0.6, label=s["label"])
            elif kind == "bar":
                ax.bar(s["x"], s["y"], label=s["label"], alpha=0.8)
                if s.get("low") is not None:
                    err = [[y - lo for y, lo in zip(s["y"], s["low"])],
                           [hi - y for y, hi in zip(s["y"], s["high"])]]
                    ax.errorbar(s["x"], s["y"], yerr=err, fmt="none", ecolor="k")
            else:
                (line,) = ax.plot(s["x"], s["y"], label=s["label"], lw=1.5)
                if s.get("low") is not None and s.get("high") is not None:
                    ax.fill_between(s["x"], s["low"], s["high"], alpha=0.2,
                                    color=line.get_color(), lw=0)
        if f.get("logy"):
            ax.set_yscale("log")
        ax.set_title(f["title"], fontsize=10)
        ax.set_xlabel(f["xlabel"])
        ax.set_ylabel(f["ylabel"])
        if len(f["series"]) > 1:
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        with warnings.catch_warnings():  # long titles: a cramped layout is not an error
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout()
        path = fig_dir / f"{f['name']}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- writing
def check_writable(out_dir: Path) -> None:
    target = out_dir if out_dir.exists() else out_dir.parent
    if out_dir.exists() and not out_dir.is_dir():
        raise AuditError(f"output path {str(out_dir)!r} exists and is not a directory")
    if not target.exists():
        raise AuditError(f"output directory {str(out_dir)!r} cannot be created: "
                         f"{str(target)!r} does not exist")
    if not os.access(target, os.W_OK):
        raise AuditError(f"output directory {str(out_dir)!r} is not writable")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write(result: ClaimResult, out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    data = to_json(result)
    write_data(data, out_dir)
    return data


def write_data(data: Mapping, out_dir: Path) -> None:
    render_figures(data, out_dir)
    _atomic_write(out_dir / f"{data['id']}.json", json.dumps(data, indent=2) + "\n")
    _atomic_write(out_dir / f"{data['id']}.md", render_markdown(data))


def load(out_dir: Path, claim_id: str) -> dict | None:
    path = out_dir / f"{claim_id}.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AuditError(f"report {path} is not valid JSON ({exc})") from None
    validate(data, str(path))
    return data


def write_index(out_dir: Path, claims: Mapping[str, Claim | PendingClaim]) -> Path:
    rows = []
    for cid, claim in claims.items():
        data = load(out_dir, cid)
        locks = claim.locks()
        lock_txt = ", ".join(f"{s}: {v['verdict']}" for s, v in sorted(locks.items())) or "—"
        if data is None:
            status = "pending (falsifier not built)" if claim.status == "pending" else "not run"
            rows.append([f"`{cid}`", claim.paper.cite(), claim.title, "—", lock_txt, "—",
                         status])
        else:
            rows.append([f"[`{cid}`]({cid}.md)", claim.paper.cite(), claim.title,
                         f"**{data['verdict']}**", lock_txt, data["scale"],
                         (f"{len(data['seeds'])} seeds" if data["seeds"] else "exact")
                         + f", {data['runtime_s']:.0f} s, commit "
                         f"`{data['environment'].get('commit')}`"])
    text = ["# Audit reports", "",
            "Each verdict is about the reviewer's claim: CONFIRMED (the criticism holds on "
            "our runs), REFUTED (it does not), INCONCLUSIVE (this scale and seed count "
            "cannot decide). Regenerate with `audit run --all`; re-render without rerunning "
            "with `audit report`.", "",
            _table(["claim", "paper", "falsifier", "verdict", "locked", "scale", "run"],
                   rows), ""]
    if (out_dir / "coverage.md").exists():
        text += ["Coverage of the review records by claims: [coverage.md](coverage.md).", ""]
    path = out_dir / "README.md"
    _atomic_write(path, "\n".join(text))
    return path
