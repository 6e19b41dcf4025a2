"""The ``audit`` command (also ``python -m audit``).

    audit list [--json]
    audit run ID... | --all [--scale S] [--seeds N | --seed-list a,b,c] [--device D]
              [--data-dir PATH] [--out DIR] [--no-cache] [--backend auto|pool|local|ray]
              [--workers N]   (default: units in parallel on the usable cores)
    audit report [--out DIR]
    audit verify [--scale S] [ID...]
    audit bench [--device D] [--against flower,pfl] [--threads 1|all|1,all]
    audit estimate ID... [--scale S] [--device D] [--data-dir PATH] [--rounds R1,R2]
              [--arms a,b]   (time a few rounds, extrapolate the whole claim)
    audit review PATH... [--json] [--markdown]
    audit new CLAIM_ID --paper ARXIV_ID [--out-dir DIR] [--package NAME]
              [--side server|client]
              (write a claim that runs at smoke scale at once; docs/WRITING_A_CLAIM.md)
    audit tune ID --arms a,b --metric KEY [--grid KEY=V1,V2]... [--contrast A:B]
              [--scale S] [--seeds N]   (a pilot on tuning seeds 1000+, never a verdict's)

Claims come from the paper folders (audit/papers/<paper>/) and from installed packages'
``audit.claims`` entry points. Bad input is one line on stderr naming the problem, exit
status 2, nothing written.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Sequence

from audit import claims as claims_mod
from audit import safeio
from audit.claims import AuditError, Claim
from audit.runner import SCALES, Cache, check_device, execute, make_context

DEFAULT_OUT = Path("reports")
MAX_GRID_POINTS = 256  # the most grid points (combinations) one `audit tune` runs
MAX_TUNING_SEEDS = 200  # the most tuning seeds one pilot runs (as for a verdict run)


def _seed_list(text: str) -> list[int]:
    try:
        tokens = [s for s in text.split(",") if s.strip() != ""]
        if any(len(s.strip()) > 30 for s in tokens) or len(tokens) > 100_000:
            raise ValueError(text)
        return [int(s) for s in tokens]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"seed list must be comma-separated integers, got {_shown(text)}") from None


def _positive_int(text: str) -> int:
    try:
        n = int(text) if len(text) <= 30 else 0
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got "
                                         f"{_shown(text)}")
    return n


def _seed_count(text: str) -> int:
    """A seed count given on the command line: a whole number of at most 30 digits (the
    cap itself is checked later, against ``AUDIT_MAX_SEEDS``)."""
    try:
        return int(text) if len(text) <= 30 else int("x")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got "
                                         f"{_shown(text)}") from None


def _shown(text: str, width: int = 40) -> str:
    """``text`` quoted for an error line: escaped, and cut to ``width`` characters."""
    from audit.safeio import term_text

    text = term_text(text)
    return repr(text if len(text) <= width else text[:width - 3] + "...")


def _override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value  # a bare string
    except RecursionError:
        raise argparse.ArgumentTypeError(f"value of {key} is nested too deeply") from None
    except ValueError:  # an integer of more digits than int() converts
        raise argparse.ArgumentTypeError(f"value of {key} is a number too long to "
                                         f"read") from None


def _grid_axis(text: str) -> tuple[str, list]:
    key, sep, values = text.partition("=")
    if not sep or not key or not values:
        raise argparse.ArgumentTypeError(f"expected KEY=V1,V2,..., got {text!r}")
    try:  # a JSON list as a whole (values that hold commas), else comma-separated
        whole = json.loads(values)
        if isinstance(whole, list):
            axis = whole
        else:
            axis = None
    except json.JSONDecodeError:
        axis = None
    except (RecursionError, ValueError):
        raise argparse.ArgumentTypeError(f"--grid {key}: values nested too deeply or a "
                                         f"number too long to read") from None
    if axis is None:
        axis = [_override(f"{key}={v}")[1] for v in values.split(",")]
    if len(axis) > MAX_GRID_POINTS:
        raise argparse.ArgumentTypeError(f"--grid {key} lists {len(axis)} values; at most "
                                         f"{MAX_GRID_POINTS} points in all")
    return key, axis


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as one line (no usage block), exit 2."""

    def error(self, message: str):
        from audit.safeio import term_text

        print(f"{self.prog}: error: {term_text(' '.join(message.split()))} (see "
              f"`{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="audit", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    ls = sub.add_parser("list", help="list the claims, their papers and locked verdicts")
    ls.add_argument("--json", action="store_true", help="print JSON")

    def run_options(sp, out_default=DEFAULT_OUT):
        sp.add_argument("ids", nargs="*", metavar="ID", help="claim ids")
        sp.add_argument("--all", action="store_true", help="every built claim")
        sp.add_argument("--scale", default="smoke", help=f"one of {', '.join(SCALES)}")
        g = sp.add_mutually_exclusive_group()
        g.add_argument("--seeds", type=_seed_count, help="use seeds 0..N-1")
        g.add_argument("--seed-list", type=_seed_list, help="explicit seeds, e.g. 0,1,2")
        sp.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
        sp.add_argument("--data-dir", help="local dataset root (or set AUDIT_DATA)")
        sp.add_argument("--out", type=Path, default=out_default,
                        help="directory for <id>.json and <id>.md")
        sp.add_argument("--no-cache", action="store_true", help="recompute every run")
        sp.add_argument("--cache-dir", type=Path, default=None,
                        help="run cache (default $AUDIT_CACHE, else "
                             "$XDG_CACHE_HOME/audit, else ~/.cache/audit)")
        sp.add_argument("--backend", default=os.environ.get("AUDIT_BACKEND") or "auto",
                        choices=("auto", "pool", "local", "ray"),
                        help="where units run: auto (default, or $AUDIT_BACKEND: a process "
                             "pool on the usable cores when there are two or more, else "
                             "local), pool, local (one after another in this process, the "
                             "reference) or ray")
        sp.add_argument("--workers", type=_positive_int, default=None,
                        help="units at once in the pool (default: the usable cores)")
        sp.add_argument("--ray-address", default=None, help="join an existing Ray cluster")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        type=_override, dest="overrides",
                        help="override one config value of the scale (JSON value), "
                             "e.g. --set rounds=2; repeatable")
        sp.add_argument("--quiet", action="store_true",
                        help="no progress bars (and no ETA line)")
        sp.add_argument("--no-eta", action="store_true",
                        help="skip the ETA printed before a full or paper scale run (it "
                             "comes from `audit estimate`, stored in the cache once measured)")
        sp.add_argument("--until-decided", action="store_true",
                        help="add seeds in looks planned before the run (10, 20, ... up "
                             "to --max-seeds) with alpha spent across them; stop at the "
                             "first look where every part entering the verdict is decided")
        sp.add_argument("--max-seeds", type=_positive_int, default=None,
                        help="the cap of --until-decided (default: 10 at smoke scale, one "
                             "look; 20 at full and paper, looks at 10 and 20)")
        sp.add_argument("--spending", default="pocock", choices=("pocock", "obrien-fleming"),
                        help="alpha-spending shape of --until-decided (default pocock)")

    run_options(sub.add_parser("run", help="run claims and write their reports"))
    vf = sub.add_parser("verify", help="run claims; exit 1 if a verdict differs from its lock")
    run_options(vf, out_default=None)

    rp = sub.add_parser("report", help="re-render reports and the index from their JSON")
    rp.add_argument("--out", type=Path, default=DEFAULT_OUT)

    df = sub.add_parser("diff", help="compare two reports (or two report folders, claim by "
                        "claim) on what decides: seeds, verdicts, parts, questions, premise, "
                        "estimates; exit 1 when that differs")
    df.add_argument("first", type=Path, help="a report's JSON, or a folder of reports")
    df.add_argument("second", type=Path, help="the same claim's report, or another folder")
    df.add_argument("--rtol", type=float, default=0.0,
                    help="relative tolerance on numbers, those printed in texts included "
                    "(default 0: exactly equal)")
    df.add_argument("--atol", type=float, default=0.0,
                    help="absolute tolerance on numbers (default 0)")

    lk = sub.add_parser("lock", help="record each report's verdicts (claim, questions, "
                        "parts, seeds, plan) as its lock at the report's scale")
    lk.add_argument("ids", nargs="*", metavar="ID")
    lk.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="the folder of the reports to lock (default: reports)")

    bn = sub.add_parser("bench", help="time the engine on the reference FedAvg workload")
    bn.add_argument("--device", default="cpu")
    bn.add_argument("--repeats", type=_positive_int, default=3,
                    help="timed repeats; the one with the median ratio is reported (default 3)")
    bn.add_argument("--against", type=_bench_peers, default=None,
                    help="peers that also run the workload, after the timings: flower, "
                    "pfl or flower,pfl (Flower's simulation, Apple's pfl-research; each "
                    "needs its extra), reported beside ours from the same run")
    bn.add_argument("--threads", type=_bench_threads, default="1",
                    help="torch threads of the measurement: a count, 'all' (the usable "
                    "cores) or several, e.g. 1,all, timed one after another and shown in "
                    "one table with the load average (default 1: unaffected by other "
                    "jobs on the machine)")

    es = sub.add_parser("estimate", help="time a few rounds of a claim's units here and "
                        "extrapolate its whole run at a scale")
    es.add_argument("ids", nargs="+", metavar="ID", help="claim ids")
    es.add_argument("--scale", default="smoke", help=f"one of {', '.join(SCALES)}")
    es.add_argument("--seeds", type=_seed_count,
                    help="seeds the estimate counts (0..N-1)")
    es.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    es.add_argument("--data-dir", help="local dataset root (or set AUDIT_DATA)")
    es.add_argument("--rounds", type=_round_pair, default=None,
                    help="the two round counts timed, e.g. 1,3 (default: about R/6 of "
                         "the scale's R rounds, at most 10, and a third of that)")
    es.add_argument("--arms", type=lambda v: [a for a in v.split(",") if a],
                    help="time only these arms (the others take their mean)")
    es.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    type=_override, dest="overrides", help="as for run")

    rv = sub.add_parser("review", help="coverage of review records by claims")
    rv.add_argument("paths", nargs="+", type=Path)
    rv.add_argument("--json", action="store_true")
    rv.add_argument("--markdown", action="store_true",
                    help="also write OUT/coverage.md and OUT/README.md (OUT: --out)")
    rv.add_argument("--out", type=Path, default=DEFAULT_OUT)

    tu = sub.add_parser("tune", help="a pilot on tuning seeds (1000 and up, never a "
                        "verdict's): some arms of one claim over a grid of config values")
    tu.add_argument("id", metavar="ID", help="the claim")
    tu.add_argument("--scale", default="smoke", choices=SCALES)
    tu.add_argument("--arms", required=True, type=lambda t: [a for a in t.split(",") if a],
                    help="comma-separated arms to run, e.g. fedbn,lips")
    tu.add_argument("--metric", required=True,
                    help="a key of a unit's result that reads validation data, e.g. "
                         "val_acc; a key the claim does not declare in "
                         "validation_metrics, or named like a test-set metric "
                         "(test_acc, ...), is refused")
    tu.add_argument("--allow-test-metric", action="store_true",
                    help="run the pilot on a test-set metric anyway, with a warning (the "
                         "verdict reads the same test set: a setting chosen on it is "
                         "chosen on the verdict's data)")
    tu.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                    type=_grid_axis, help="config values to try (JSON each); repeatable: "
                    "every combination runs")
    tu.add_argument("--contrast", default=None, type=lambda t: t.split(":"),
                    metavar="A:B", help="paired per-seed A - B per candidate (arm names, "
                    "or arm/setting)")
    tu.add_argument("--seeds", type=_positive_int, default=3,
                    help="how many tuning seeds (1000, 1001, ...)")
    tu.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    type=_override, dest="overrides", help="as for run (held fixed)")
    tu.add_argument("--device", default="cpu")
    tu.add_argument("--data-dir", default=None)
    tu.add_argument("--cache-dir", type=Path, default=None)
    tu.add_argument("--json", action="store_true", help="print the rows as JSON")

    rg = sub.add_parser("regime", help="run a claim's declared regime map(s) on tuning "
                        "seeds: where the paper's own effect appears (written beside its "
                        "report and printed in it)")
    rg.add_argument("id", metavar="ID", help="the claim")
    rg.add_argument("--scale", default="smoke", choices=SCALES)
    rg.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="the report folder of that scale (writes OUT/ID/regime.json and "
                         "regime.png, and re-renders OUT/ID.md when it exists)")
    rg.add_argument("--device", default="cpu")
    rg.add_argument("--data-dir", default=None)
    rg.add_argument("--cache-dir", type=Path, default=None)
    rg.add_argument("--backend", default=os.environ.get("AUDIT_BACKEND") or "auto",
                    choices=("auto", "pool", "local", "ray"))
    rg.add_argument("--workers", type=_positive_int, default=None)
    rg.add_argument("--dry-run", action="store_true",
                    help="print the declared maps and their budgets; run nothing")

    nw = sub.add_parser("new", help="write a new claim (module, falsifier, package files) "
                        "that runs at smoke scale at once")
    nw.add_argument("claim_id", metavar="CLAIM_ID", help="e.g. mypaper-server-step")
    nw.add_argument("--paper", required=True, metavar="ARXIV_ID",
                    help="the audited paper, e.g. 2412.07062 or 2412.07062v3")
    nw.add_argument("--out-dir", type=Path, default=Path("."),
                    help="the package's root folder (default: the current directory)")
    nw.add_argument("--package", default=None,
                    help="the Python package for the claim (default claim_<module>)")
    nw.add_argument("--side", choices=("server", "client"), default="server",
                    help="where the arms' one differing piece lives: a server rule "
                    "(default) or a client hook (stragglers' local-step budget)")
    return p


# --------------------------------------------------------------------------- commands
def cmd_list(args) -> int:
    reg = claims_mod.registry()
    items = []
    for cid, c in reg.items():
        items.append({"id": cid, "paper": c.paper.arxiv_id, "paper_short": c.paper.short,
                      "title": c.title,
                      "locked": {s: v["verdict"] for s, v in c.locks().items()},
                      "scales": list(getattr(c, "scales", {}) or []),
                      "origin": getattr(c, "origin", "") or "built-in"})
    if args.json:
        print(json.dumps(items, indent=2))
        return 0
    w = max(len(i["id"]) for i in items)
    locked = [", ".join(f"{s}={v}" for s, v in sorted(i["locked"].items())) or "no lock"
              for i in items]
    scales = ["/".join(i["scales"]) for i in items]
    lw, sw = max(map(len, locked)), max(map(len, scales))
    for i, lock, sc in zip(items, locked, scales):
        print(safeio.term_text(f"{i['id']:<{w}}  {i['paper_short']:<8} {sc:<{sw}}  "
                               f"{lock:<{lw}}  {i['title']}"))
    return 0


def _select(args) -> list[Claim]:
    reg = claims_mod.registry()
    if args.all and args.ids:
        raise AuditError("give claim ids or --all, not both")
    if args.all:
        return list(reg.values())
    if not args.ids:
        raise AuditError("name at least one claim id, or --all; `audit list` shows them")
    return [claims_mod.get(i) for i in args.ids]


def _contexts(args, selected):
    seeds = args.seed_list if args.seed_list is not None else args.seeds
    if isinstance(seeds, int) and seeds < 1:  # an exact claim ignores seeds, not a bad count
        raise AuditError(f"the seed count must be positive, got {seeds}")
    out = []
    for c in selected:
        overrides = dict(args.overrides)
        unknown = sorted(set(overrides) - set(c.scales.get(args.scale, {})))
        if unknown and c.scales.get(args.scale) is not None:
            raise AuditError(f"claim {c.id!r} has no config key(s) {', '.join(unknown)} at "
                             f"{args.scale!r} scale; keys: "
                             f"{', '.join(sorted(c.scales[args.scale]))}")
        out.append((c, make_context(c, args.scale, seeds=seeds, device=args.device,
                                    data_dir=args.data_dir, overrides=overrides)))
    return out


def _check_locks(claims) -> None:
    """Read every lock file these claims use (``audit/locks.json``, a plugin's own): a
    malformed one is one AuditError line before any work."""
    claims_mod.read_locks()
    for claim in claims:
        if isinstance(claim, Claim):
            claim.locks()


def _check_report_paths(out: Path, ids: Sequence[str]) -> None:
    """What writing each claim's report into ``out`` would meet, checked before any unit
    runs: a folder where ``<id>.json`` or ``<id>.md`` goes, or an unreadable regime map
    (its report embeds it) is one error line now, not a failure after the work."""
    from audit import regime

    for cid in ids:
        for name in (f"{cid}.json", f"{cid}.md"):
            path = Path(out) / name
            if path.is_dir() and not path.is_symlink():
                raise AuditError(f"{safeio.term_text(str(path))} is a folder; the report of "
                                 f"{cid} cannot be written there")
        regime.read(out, cid)


def _execute_all(args, write_reports: bool, unlocked: list | None = None):
    """Run the selected claims. Given a list ``unlocked`` (verify), a claim with no lock
    at its scale is not run: its id is appended there instead."""
    from audit import report

    selected = _select(args)
    _check_locks(selected)  # a malformed lock file is found now, not after the run
    contexts = _contexts(args, selected)  # every input checked before anything runs
    if unlocked is not None:
        keep = []
        for claim, ctx in contexts:
            if ctx.scale not in claim.locks():
                unlocked.append(claim.id)
            else:
                keep.append((claim, ctx))
        contexts = keep
    # every plan checked before the first claim ran, and before --out is created
    plans = {claim.id: _plan(args, claim) for claim, _ in contexts}
    from audit.fl.data import check_present

    for claim, ctx in contexts:  # a data set missing under --data-dir: before --out exists
        try:
            check_present(ctx.config, ctx.data_dir)
        except AuditError as exc:
            raise AuditError(f"{claim.id} at {ctx.scale} scale: {exc}") from None
    cache = Cache(args.cache_dir or Cache.default_root(), enabled=not args.no_cache)
    why = cache.problem()
    if why:  # before --out exists: every checkpoint and result would fail to be kept
        raise AuditError(f"cannot use {safeio.term_text(str(cache.root))} as the run cache "
                         f"({why}); set $AUDIT_CACHE or --cache-dir to a folder, or pass "
                         f"--no-cache")
    if write_reports:
        safeio.check_output_folder(args.out)  # never replace a file audit did not write
        report.check_writable(args.out)
        _check_report_paths(args.out, [claim.id for claim, _ in contexts])
    from audit.pool import choose_backend

    backend = choose_backend(args.backend, device=args.device, ray_address=args.ray_address,
                             workers=getattr(args, "workers", None))
    eta = _Eta(args, contexts, plans, cache)
    results = []
    try:
        for claim, ctx in contexts:
            plan = plans[claim.id]  # every plan checked before the first claim ran
            if plan is not None:
                from audit.runner import execute_sequential

                def say(look, cid=claim.id):
                    print(f"{cid}: look {look['look']} at n = {look['n']} seeds: "
                          f"{look['verdict']}" + (f" ({look['stop_reason']})"
                                                   if look["decided"] else ""),
                          file=sys.stderr)

                res = execute_sequential(claim, ctx, plan, cache=cache,
                                         progress=not args.quiet, backend=backend,
                                         on_look=say)
            else:
                res = execute(claim, ctx, cache=cache, progress=not args.quiet, backend=backend)
            if write_reports:
                report.write(res, args.out)
                safeio.mark_output_folder(args.out)  # written there: an audit output folder
            results.append(res)
            lock = res.locked
            print(f"{claim.id}: {res.verdict.verdict.value} (locked: "
                  f"{lock.value if lock else 'none'}) in {res.runtime_s:.1f} s "
                  f"[{res.computed} run(s) computed, {res.cached} cached]")
            eta.finished(claim.id, res)
    finally:  # the pool's workers stop here, not in the interpreter's exit hooks
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    if write_reports and results:
        from audit import coverage

        report.write_index(args.out, claims_mod.registry())
        coverage.write_coverage(args.out, claims_mod.registry())
    return results


class _Eta:
    """The ETA of a full or paper scale run: from `audit estimate` (stored in the cache
    once measured) before the first claim, kept current after each claim by the ratio of
    measured to estimated time so far. Smoke runs (about a minute a claim) print none."""

    def __init__(self, args, contexts, plans, cache):
        import time

        self.start = time.perf_counter()
        self.todo: dict[str, tuple[float, int, int]] = {}
        self.spent_est = self.spent_real = 0.0
        if args.scale == "smoke" or args.quiet or getattr(args, "no_eta", False):
            return
        from audit.estimate import seconds_per_seed

        root = cache.root if cache.enabled else None
        # a local Ray instance runs one unit per core at once (a cluster's size is not
        # known here: the ratio measured after the first claim corrects the line)
        from audit.pool import parallel_units

        workers = 1
        name = getattr(args, "backend", "local")
        if name == "ray" and not getattr(args, "ray_address", None):
            workers = parallel_units("ray")  # the local instance's CPUs: the usable cores
        elif name in ("auto", "pool"):
            workers = parallel_units(name, getattr(args, "device", "cpu"),
                                     getattr(args, "workers", None))
        # no line before the first estimate: a bad input (a missing dataset) found while
        # timing is then the one error line, before anything ran or was written
        for claim, ctx in contexts:
            per = seconds_per_seed(claim, ctx, root, progress=lambda m: print(
                m, file=sys.stderr)) / workers
            plan = plans.get(claim.id)
            n = max(1, len(ctx.seeds))
            first, cap = (plan.looks[0], plan.looks[-1]) if plan is not None else (n, n)
            self.todo[claim.id] = (per, first, cap)
        self._say()

    def _say(self):
        import time

        from audit.estimate import eta_line

        if not self.todo:
            return
        ratio = self.spent_real / self.spent_est if self.spent_est > 0 else 1.0
        print(eta_line([(c, *v) for c, v in self.todo.items()],
                       time.perf_counter() - self.start if self.spent_est else 0.0, ratio),
              file=sys.stderr)

    def finished(self, claim_id: str, res) -> None:
        if claim_id not in self.todo:
            return
        per = self.todo.pop(claim_id)[0]
        if res.computed:  # a claim served from the cache says nothing about speed
            self.spent_est += per * max(1, len(res.ctx.seeds)) * res.computed / max(
                1, res.computed + res.cached)
            self.spent_real += res.runtime_s
        self._say()


def _plan(args, claim):
    """The sequential plan of ``--until-decided`` for a stochastic claim; for ``verify``
    without seeds, the plan the claim's lock was recorded with; else None."""
    if not getattr(args, "until_decided", False):
        if getattr(args, "max_seeds", None) is not None:
            raise AuditError("--max-seeds is the cap of --until-decided; give both")
        if (args.command == "verify" and claim.stochastic and args.seeds is None
                and args.seed_list is None):
            lock = claim.locks().get(args.scale) or {}
            if lock.get("plan"):
                from audit.sequential import Plan

                try:
                    return Plan(tuple(lock["plan"]["looks"]), lock["plan"].get("spending",
                                                                               "pocock"))
                except (ValueError, TypeError, KeyError) as exc:
                    raise AuditError(f"{claim.id}: the plan locked at {args.scale} scale "
                                     f"is unusable ({exc})") from None
        return None
    if not claim.stochastic:
        return None  # exact claims have no seeds to add
    if args.seeds is not None or args.seed_list is not None:
        if args.seed_list is None:
            raise AuditError("--until-decided chooses the seed counts itself; give "
                             "--max-seeds N (and optionally --seed-list as the seed pool)")
    from audit.sequential import default_cap, plan

    cap = args.max_seeds or default_cap(args.scale)
    from audit.runner import max_seeds

    if cap < 2:
        raise AuditError(f"--max-seeds {cap}: a stochastic claim needs at least 2 seeds")

    if cap > max_seeds():
        raise AuditError(f"--max-seeds {cap} is more than the {max_seeds()} seeds one run may "
                         f"ask for (set AUDIT_MAX_SEEDS to allow more)")
    if args.seed_list is not None and len(args.seed_list) < cap:
        raise AuditError(f"--seed-list gives {len(args.seed_list)} seeds, fewer than the "
                         f"cap --max-seeds {cap}")
    try:
        return plan(cap, spending=args.spending)
    except ValueError as exc:
        raise AuditError(f"--until-decided --max-seeds {cap}: {exc}") from None


def cmd_run(args) -> int:
    _execute_all(args, write_reports=True)
    return 0


def cmd_verify(args) -> int:
    if not args.ids:
        args.all = True
    write = args.out is not None
    no_lock: list[str] = []
    results = _execute_all(args, write_reports=write, unlocked=no_lock)
    for cid in no_lock:  # nothing to verify against: a failure, not a pass
        print(f"NO LOCK {cid}: no verdict is locked at {args.scale} scale, so there is "
              f"nothing to verify; not run", file=sys.stderr)
    flips = [r for r in results if r.locked is not None and r.locked != r.verdict.verdict]
    for r in flips:
        print(f"FLIPPED {r.claim.id}: locked {r.locked.value}, now "
              f"{r.verdict.verdict.value} at {r.ctx.scale} scale", file=sys.stderr)
    question_flips = [(r, f) for r in results for f in r.question_flips()]
    for r, (qid, was, now) in question_flips:
        print(f"FLIPPED {r.claim.id} / {qid}: locked {was}, now {now} at {r.ctx.scale} "
              f"scale", file=sys.stderr)
    # a sequential lock that stopped at another look is a change, not "other seeds"
    elsewhere = [r for r in results if r.locked is None and r.plan is not None
                 and (r.claim.locks().get(r.ctx.scale) or {}).get("plan")]
    for r in elsewhere:
        lock = r.claim.locks()[r.ctx.scale]
        print(f"FLIPPED {r.claim.id}: the sequential run stopped at n = {len(r.ctx.seeds)} "
              f"seeds with {r.verdict.verdict.value}; the lock stopped at n = "
              f"{len(lock.get('seeds', []))} with {lock['verdict']}", file=sys.stderr)
    unlocked = [r.claim.id for r in results if r.locked is None and r not in elsewhere]
    if unlocked:
        print(f"no lock at {args.scale} scale with these seeds for: {', '.join(unlocked)}")
    return 1 if flips or question_flips or no_lock or elsewhere else 0


def _check_report_dir(out: Path) -> None:
    """Refuse a report folder that is missing, or that is a file (named as such)."""
    if not out.is_dir():
        raise AuditError(f"report directory {str(out)!r} "
                         + ("is not a directory" if out.exists() else "does not exist"))


def cmd_report(args) -> int:
    from audit import report

    _check_report_dir(args.out)
    reg = claims_mod.registry()
    _check_locks(reg.values())  # a bad lock file: one line now, not after half the writes
    loaded = [(data, str(args.out / f"{cid}.json")) for cid in reg
              if (data := report.load(args.out, cid)) is not None]  # all read, then written
    safeio.check_output_folder(args.out)  # never replace a file audit did not write
    report.check_writable(args.out)
    # every report rendered in memory before the first is written: one that cannot be
    # rendered leaves the folder as it was
    done = [report.rendered(data, args.out, source=source) for data, source in loaded]
    for one in done:
        report.write_rendered(one)
    n = len(done)
    from audit import coverage

    report.write_index(args.out, reg)
    coverage.write_coverage(args.out, reg)
    safeio.mark_output_folder(args.out)  # all written: an audit output folder
    print(f"re-rendered {n} report(s) and {args.out / 'README.md'}")
    return 0


def _report_pairs(first: Path, second: Path) -> tuple[list, list[str]]:
    """(pairs of (claim id, first report, second report), notes on claims found in one
    folder only), from two report files or two report folders."""
    from audit import report

    if first.is_file() or second.is_file():
        for path in (first, second):
            if not path.is_file():
                raise AuditError(f"report {str(path)!r} " + (
                    "is a folder: compare a report with a report, or a folder with a folder"
                    if path.is_dir() else "does not exist"))
        a, b = report.read(first), report.read(second)
        return [(a["id"], a, b)], []
    for path in (first, second):
        _check_report_dir(path)
    pairs, notes = [], []
    # the claims registered here, and any other claim's report found in either folder
    ids = dict.fromkeys(list(claims_mod.registry()) + sorted(
        p.stem for folder in (first, second) for p in folder.glob("*.json") if p.is_file()))
    for cid in ids:
        a, b = report.load(first, cid), report.load(second, cid)
        if a is not None and b is not None:
            pairs.append((cid, a, b))
        elif a is not None or b is not None:
            notes.append(f"{safeio.term_text(cid)[:100]}: only in "
                         f"{safeio.term_text(str(first if b is None else second))}")
    if not pairs:
        raise AuditError(f"no claim has a report in both {str(first)!r} and {str(second)!r}")
    return pairs, notes


def cmd_diff(args) -> int:
    from audit import report

    pairs, notes = _report_pairs(args.first, args.second)
    differ = 0
    for cid, a, b in pairs:
        found, other = report.compare(a, b, rtol=args.rtol, atol=args.atol)
        cid = safeio.term_text(str(cid))[:100]
        tail = f" ({other} other field(s) differ: presentation)" if other else ""
        if found:
            differ += 1
            many = "at least " if len(found) >= report.COMPARE_LIMIT else ""
            print(f"{cid}: {many}{len(found)} difference(s) in what decides{tail}")
            for line in found:
                print(f"  {line}")
        else:
            print(f"{cid}: no difference in what decides{tail}")
    for line in notes:
        print(line)
    return 1 if differ else 0


def cmd_lock(args) -> int:
    """Record the locks from reports already written (no rerun): the verdict, every
    question's and part's verdict, the seeds the run stopped at and its plan."""
    from audit import report
    from audit.verdict import Outcome, Part

    _check_report_dir(args.out)
    reg = claims_mod.registry()
    _check_locks(reg.values())
    ids = list(args.ids) or [c for c in reg if isinstance(reg[c], claims_mod.Claim)]
    unknown = [c for c in ids if c not in reg]
    if unknown:
        raise AuditError(f"unknown claim id {unknown[0]!r}; known ids: {', '.join(reg)}")
    todo = []
    for cid in ids:
        data = report.load(args.out, cid)  # validated: a malformed report is one line
        if data is None:
            raise AuditError(f"no report of {cid!r} in {str(args.out)!r} to lock")
        if data.get("tuning_run"):
            raise AuditError(f"{cid}: the report in {str(args.out)!r} is a tuning run; no "
                             "lock is written from one")
        todo.append((reg[cid], data))
    def lock(claim, data, path):
        plan = data.get("plan")
        if plan is not None and not (isinstance(plan, dict) and "looks" in plan
                                     and "spending" in plan):
            raise AuditError(f"{claim.id}: the report's plan must be an object with "
                             "'looks' and 'spending'")
        problem = None if plan is None else claims_mod.plan_problem(plan)
        if problem:  # checked here, not by int() on the way into the lock
            raise AuditError(f"{claim.id}: the report's plan {problem}; nothing locked")
        if plan is not None and not data["seeds"]:
            raise AuditError(f"{claim.id}: the report has a sequential plan but no seeds "
                             "(an exact run has no looks); nothing locked")
        claims_mod.write_lock(claim.id, str(data["scale"]), Outcome(data["verdict"]),
                              [Part.from_dict(p) for p in data["parts"]],
                              [int(x) for x in data["seeds"]], path=path,
                              plan=({"looks": plan["looks"], "spending": plan["spending"]}
                                    if plan is not None else None),
                              questions={q["id"]: q["verdict"]
                                         for q in data.get("questions") or []})

    import tempfile

    for claim, data in todo:  # every report read and checked before any lock is written
        if data["scale"] not in claim.scales:
            raise AuditError(f"{claim.id}: the report's scale "
                             f"{safeio.term_text(str(data['scale']))[:40]!r} is not one of "
                             f"the claim's ({', '.join(claim.scales)})")
    with tempfile.TemporaryDirectory() as tmp:  # and every lock written and read back
        scratch = Path(tmp) / "locks.json"  # in a scratch file first: a lock the checks
        for claim, data in todo:  # of every later command refuse is never written
            lock(claim, data, scratch)
        try:
            claims_mod.read_locks(scratch)
        except AuditError as exc:
            raise AuditError(str(exc).replace(str(scratch), "the lock it would write")
                             + "; nothing locked") from None
    for claim, data in todo:
        lock(claim, data, claim.locks_path())
        print(f"locked {claim.id} at {data['scale']}: {data['verdict']} "
              f"({len(data['seeds'])} seeds)")
    return 0


def _bench_threads(text: str) -> str:
    from audit.fl.bench import thread_counts

    try:
        thread_counts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _bench_peers(text: str) -> str:
    from audit.fl.bench import peer_names

    try:
        peer_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def cmd_bench(args) -> int:
    from audit.fl.bench import format_table, run_bench_threads

    check_device(args.device)
    result = run_bench_threads(device=args.device, threads=getattr(args, "threads", "1"),
                               repeats=args.repeats, against=args.against)
    if "table" in result:
        print(format_table(result["table"]), file=sys.stderr)
    print(json.dumps(result))
    return 0


def _round_pair(value: str) -> tuple[int, int]:
    try:
        r1, r2 = (int(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two round counts like 1,2, got {value!r}")
    if not 0 < r1 < r2:
        raise argparse.ArgumentTypeError(f"need 0 < r1 < r2, got {value!r}")
    return r1, r2


def cmd_estimate(args) -> int:
    from audit.estimate import estimate

    out = []
    for cid in args.ids:
        claim = claims_mod.get(cid)
        est = estimate(claim, args.scale, args.seeds, args.device, args.data_dir,
                       dict(args.overrides), args.rounds, args.arms,
                       progress=lambda m: print(m, file=sys.stderr))
        print(f"{cid} at {args.scale} on {est['device']}: {est['units']} units, "
              f"{est['rounds']} rounds each: about {_hours(est['total_s'])} "
              f"({est['label']})")
        out.append(est)
    print(json.dumps(out if len(out) > 1 else out[0]))
    return 0


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cmd_review(args) -> int:
    from audit.coverage import run_review

    if args.markdown:  # coverage.md and the index: never over a file audit did not write
        safeio.check_output_folder(args.out)
    rc = run_review(args.paths, as_json=args.json, markdown=args.markdown, out=args.out)
    if args.markdown and rc == 0 and args.out.is_dir():
        safeio.mark_output_folder(args.out)
    return rc


def cmd_tune(args) -> int:
    from audit import tuning

    claim = claims_mod.get(args.id)
    check_device(args.device)
    if args.contrast is not None and len(args.contrast) != 2:
        raise AuditError(f"--contrast takes A:B, got {':'.join(args.contrast)}")
    keys = [k for k, _ in args.grid]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise AuditError(f"--grid gives {', '.join(repeated)} more than once; give each key "
                         f"once, with all its values")
    empty = [k for k, values in args.grid if not values]
    if empty:
        raise AuditError(f"--grid {empty[0]}=[] has no values to try")
    grid = dict(args.grid)
    if args.seeds > MAX_TUNING_SEEDS:
        raise AuditError(f"--seeds {args.seeds}: at most {MAX_TUNING_SEEDS} tuning seeds a "
                         f"pilot")
    points = 1
    for values in grid.values():
        points *= max(1, len(values))
        if points > MAX_GRID_POINTS:
            raise AuditError(f"--grid gives more than {MAX_GRID_POINTS} combinations; "
                             f"split the pilot")
    problem = tuning.test_metric_problem(claim, args.metric)
    if args.allow_test_metric and problem:
        print(f"warning: {problem}; a setting chosen on it is not a fair choice: record "
              f"the Search with test_metric_read=True", file=sys.stderr)
    cache = Cache(args.cache_dir or Cache.default_root())
    rows = tuning.pilot(claim, args.scale, grid, args.arms, args.metric, args.seeds,
                        cache=cache, overrides=dict(args.overrides),
                        contrast=args.contrast or (), device=args.device,
                        data_dir=args.data_dir,
                        progress=lambda m: print(m, file=sys.stderr, flush=True),
                        allow_test_metric=args.allow_test_metric)
    seeds = tuning.tuning_seeds(args.seeds)
    if getattr(claim, "validation_metrics", None) is None and not problem:
        print(f"warning: {claim.id} declares no validation_metrics, so only the name of "
              f"{args.metric!r} was checked; make sure it reads validation data, not the "
              f"test set the verdict reads", file=sys.stderr)
    if args.json:
        print(json.dumps(safeio.strict_json([{"overrides": r.overrides, "values": r.values,
                                              "contrast": r.contrast} for r in rows]),
                         allow_nan=False))  # a diverged value is null, not NaN
        return 0
    print(f"pilot of {claim.id} at {args.scale} on tuning seeds {seeds[0]}-{seeds[-1]} "
          f"(arms {', '.join(args.arms)}; metric {args.metric}):")
    for r in rows:
        print(f"  - {r.text(args.metric, args.contrast or ())}")
    return 0


def cmd_regime(args) -> int:
    from audit import regime, report

    claim = claims_mod.get(args.id)
    maps = [m for m in claim.regime_maps if m.scale == args.scale]
    if not maps:
        declared = sorted({m.scale for m in claim.regime_maps})
        raise AuditError(f"claim {claim.id!r} declares no regime map at {args.scale!r} "
                         f"scale" + (f" (it has: {', '.join(declared)})" if declared else ""))
    for m in maps:
        print(f"{claim.id} at {m.scale}: {m.cells()} cells x {m.seeds} tuning seeds"
              + (f" (+{m.refine_seeds} for the best {m.refine})" if m.refine else "")
              + f", effect {m.effect[0]} {m.metrics()[0]} - {m.effect[1]} {m.metrics()[1]}"
              f"; budget "
              f"{m.budget_units()} runs, about {m.budget_s:.0f} s of one core")
    if args.dry_run:
        return 0
    check_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    safeio.check_output_folder(args.out)
    report.check_writable(args.out)
    existing = report.load(args.out, claim.id)  # read before anything is written
    # and the maps already there: an unreadable regime.json stops here, not after the map
    kept = [m for m in regime.read(args.out, claim.id) or []
            if m["declared"].get("scale") != args.scale]
    from audit.pool import choose_backend

    backend = choose_backend(args.backend, device=args.device, workers=args.workers)
    cache = Cache(args.cache_dir or Cache.default_root())
    try:
        done = [regime.run(claim, m, cache=cache, backend=backend, device=args.device,
                           data_dir=args.data_dir,
                           progress=lambda t: print(t, file=sys.stderr, flush=True))
                for m in maps]
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    path = regime.write(args.out, claim.id, kept + done)
    print(f"wrote {path}")
    for m in done:
        ch = m["chosen"]
        print("  chosen: " + ("none (no cell shows the effect)" if ch is None else
                              json.dumps(m["cells"][ch]["labels"])))
    if existing is not None:
        report.write_data(existing, args.out, source=str(args.out / f"{claim.id}.json"))
        print(f"re-rendered {args.out / (claim.id + '.md')}")
    safeio.mark_output_folder(args.out)
    return 0


def cmd_new(args) -> int:
    from audit import scaffold

    done = scaffold.write(args.claim_id, args.paper, args.out_dir, package=args.package,
                          known_ids=claims_mod.registry(), side=args.side)
    for path in done.written:
        print(f"wrote {path}")
    for path in done.kept:
        print(f"kept  {path} (exists)")
    print(done.next_steps)
    return 0


def _one_line_warnings(show):
    """``warnings.showwarning`` that prints a claim plugin's warning as one line, once per
    command (the registry is read more than once in a run)."""
    said: set[str] = set()

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, claims_mod.ClaimPluginWarning):
            text = safeio.term_text(' '.join(str(message).split()))
            if text not in said:
                said.add(text)
                print(f"audit: warning: {text}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return showwarning


COMMANDS = {"list": cmd_list, "run": cmd_run, "verify": cmd_verify, "report": cmd_report,
            "lock": cmd_lock, "diff": cmd_diff,
            "bench": cmd_bench, "estimate": cmd_estimate, "review": cmd_review,
            "new": cmd_new, "tune": cmd_tune, "regime": cmd_regime}


def _tolerant_streams() -> None:
    """stdout and stderr that never fail on a character the terminal's encoding lacks
    (``PYTHONIOENCODING=ascii``): such a character is written as an escape instead."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a closed or odd stream
                pass


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_streams()
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except BrokenPipeError:  # `audit list | head`: the reader left; say nothing more
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0


def _main(args) -> int:
    try:
        with warnings.catch_warnings():  # a broken claim plugin: one warning line
            # every plugin warning reaches the printer, which says each once per command
            warnings.simplefilter("always", claims_mod.ClaimPluginWarning)
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return COMMANDS[args.command](args)
    except AuditError as exc:
        text = safeio.term_text(" ".join(str(exc).split()))  # one line, nothing hidden
        print(f"audit: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("audit: interrupted; finished runs are in the cache and the next run resumes "
              "from them", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
