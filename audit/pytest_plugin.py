"""The pytest plugin: claims under regression.

Registered by the root ``conftest.py``. It adds an ``audit`` option group, prints the scale
and seeds in the header (so any run can be repeated by copy-paste), gives falsifier
modules the ``audit_run`` fixture (run a claim once per session, return its result), and
ends with one summary section: a line per claim with its verdict, its lock and seconds.
A falsifier checks its run against its lock (``check_lock``: the verdict, every part and
question) and, for a claim whose numbers no machine's float kernels move, against its
committed report (``check_committed_report``: every number that decides).

    pytest falsifiers/ --audit-scale smoke --audit-seeds 10
    pytest falsifiers/ --audit-update-locks      # rewrite locks from this run (snapshot)
    pytest falsifiers/ --audit-report-dir reports # also write the reports

A claim runs once per process: under pytest-xdist, use ``--dist loadfile`` so that a
falsifier module's tests share a worker. The summary lines travel in the test reports,
so the section appears on the controller; lock and index updates hold a folder lock.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from audit import claims as claims_mod
from audit.runner import (KERNEL_FIELDS, SCALES, Cache, ClaimResult, device_kind, execute,
                          execute_sequential, make_context)


def pytest_addoption(parser):
    group = parser.getgroup("audit", "audit: reviewers' claims under regression")
    group.addoption("--audit-scale", default="smoke", choices=SCALES,
                    help="scale of every claim run (default: smoke)")
    group.addoption("--audit-seeds", default=None,
                    help="N (seeds 0..N-1) or a comma list; default: each claim's own")
    group.addoption("--audit-update-locks", action="store_true", default=False,
                    help="rewrite the locked verdicts from this run instead of checking")
    group.addoption("--audit-report-dir", default=None,
                    help="also write <id>.json/.md reports and the index here")
    group.addoption("--audit-device", default="cpu", help="cpu or cuda")
    group.addoption("--audit-until-decided", action="store_true", default=False,
                    help="run every claim sequentially (looks 10, 20 ... up to "
                         "--audit-max-seeds); a lock recorded with a plan is always "
                         "reproduced with it")
    group.addoption("--audit-max-seeds", default=None, type=int,
                    help="cap of --audit-until-decided (default: 10 at smoke, 20 at "
                         "full and paper)")
    group.addoption("--audit-cache-dir", default=None,
                    help="run cache (default $AUDIT_CACHE, else ~/.cache/audit)")


def _parse_seeds(text: str | None):
    if text is None:
        return None
    text = text.strip()
    if "," in text:
        return [int(s) for s in text.split(",") if s.strip()]
    return int(text)


class AuditSession:
    """Runs each claim at most once per pytest session and remembers the outcome."""

    def __init__(self, config):
        self.config = config
        self.scale = config.getoption("audit_scale")
        self.seeds = _parse_seeds(config.getoption("audit_seeds"))
        self.device = config.getoption("audit_device")
        self.update_locks = config.getoption("audit_update_locks")
        self.until_decided = config.getoption("audit_until_decided")
        cap = config.getoption("audit_max_seeds")
        if cap is None:
            from audit.sequential import default_cap

            cap = default_cap(self.scale)
        self.max_seeds = int(cap)
        rd = config.getoption("audit_report_dir")
        self.report_dir = Path(rd) if rd else None
        cd = config.getoption("audit_cache_dir")
        self.cache = Cache(Path(cd) if cd else Cache.default_root())
        self.results: dict[str, ClaimResult] = {}
        # summary lines, by claim id: filled from test reports (``pytest_runtest_logreport``)
        # so that they reach the controller under pytest-xdist too
        self.summary: dict[str, dict] = {}
        self._unreported: list[dict] = []  # runs of this process not yet in a test report

    def plan_for(self, claim):
        """The sequential plan to run: ``--audit-until-decided`` (cap 10 at smoke, 20
        above), else the plan
        the claim's lock at this scale was recorded with; none when seeds are given."""
        if not claim.stochastic or self.seeds is not None:
            return None
        from audit.sequential import Plan, plan

        if self.until_decided:
            return plan(self.max_seeds)
        lock = claim.locks().get(self.scale) or {}
        if lock.get("plan") and not self.update_locks:
            return Plan(tuple(lock["plan"]["looks"]), lock["plan"].get("spending", "pocock"))
        return None

    def run(self, claim_id: str) -> ClaimResult:
        if claim_id in self.results:
            return self.results[claim_id]
        claim = claims_mod.get(claim_id)
        ctx = make_context(claim, self.scale, seeds=self.seeds, device=self.device)
        plan = self.plan_for(claim)
        if plan is not None:  # the lock's stopping rule: the same looks are reproduced
            result = execute_sequential(claim, ctx, plan, cache=self.cache, progress=False)
        else:
            result = execute(claim, ctx, cache=self.cache, progress=False)
        if self.update_locks:
            claims_mod.write_lock(claim.id, result.ctx.scale, result.verdict.verdict,
                                  result.verdict.parts, result.ctx.seeds,
                                  path=claim.locks_path(),  # a plugin's own lock file
                                  plan=plan.to_dict() if plan is not None else None,
                                  questions={a["id"]: a["verdict"]
                                             for a in result.answers})
        if self.report_dir is not None:
            from audit import report

            report.write(result, self.report_dir)
            report.write_index(self.report_dir, claims_mod.registry())
        self.results[claim_id] = result
        lock = result.locked
        self._unreported.append({
            "id": claim_id, "verdict": result.verdict.verdict.value,
            "locked": lock.value if lock else None, "runtime_s": result.runtime_s,
            "scale": result.ctx.scale, "seeds": list(result.ctx.seeds)})
        return result


_SESSION_KEY = pytest.StashKey[AuditSession]()


def pytest_configure(config):
    session = AuditSession(config)
    config.stash[_SESSION_KEY] = session
    config.pluginmanager.register(_Collector(session), f"audit-collector-{id(config)}")


def pytest_report_header(config):
    s = config.stash[_SESSION_KEY]
    seeds = ("each claim's default, or its lock's sequential looks"
             if s.seeds is None else s.seeds)
    return [f"audit: scale={s.scale} seeds={seeds} device={s.device}"
            + (" (updating locks)" if s.update_locks else "")]


@pytest.fixture(scope="session")
def audit_session(request) -> AuditSession:
    return request.config.stash[_SESSION_KEY]


@pytest.fixture(scope="session")
def audit_run(audit_session):
    """``audit_run(claim_id) -> ClaimResult``: run (once per session) and return."""
    return audit_session.run


def check_lock(result: ClaimResult) -> None:
    """Fail the calling test when the verdict (or a part's) differs from its lock."""
    claim, scale, seeds = result.claim, result.ctx.scale, list(result.ctx.seeds)
    lock = claim.lock(scale, seeds)
    recorded = claim.locks().get(scale)
    if recorded is not None and recorded.get("plan") and result.plan is not None \
            and lock is None:
        # a sequential lock: the run must stop at the same look, with the same seeds
        pytest.fail(f"{claim.id}: the sequential run stopped with seeds {seeds}; the lock "
                    f"stopped with {recorded.get('seeds')} (looks {recorded['plan']['looks']})",
                    pytrace=False)
    if lock is None and recorded is not None:
        pytest.skip(f"{claim.id}: the {scale} lock was recorded with seeds "
                    f"{recorded.get('seeds')}; this run used {seeds}, so there is nothing "
                    f"to compare")
    if lock is None:
        pytest.fail(f"{claim.id}: no locked verdict at {scale!r} scale; run with "
                    f"--audit-update-locks to record {result.verdict.verdict.value}",
                    pytrace=False)
    got = result.verdict.verdict.value
    if got != lock["verdict"]:
        pytest.fail(f"{claim.id}: verdict flipped at {scale} scale: locked "
                    f"{lock['verdict']}, now {got} ({result.verdict.reason})", pytrace=False)
    for qid, was, now in result.question_flips():
        pytest.fail(f"{claim.id}: question {qid} flipped at {scale} scale: locked {was}, "
                    f"now {now}", pytrace=False)
    for part in result.verdict.parts:
        locked_part = lock.get("parts", {}).get(part.id)
        if locked_part is not None and locked_part != part.verdict.value:
            pytest.fail(f"{claim.id}: part {part.id} flipped at {scale} scale: locked "
                        f"{locked_part}, now {part.verdict.value} ({part.reason})",
                        pytrace=False)


#: the committed reports of a clone: <repo>/reports (smoke) and reports/<scale>
COMMITTED_REPORTS = Path(__file__).resolve().parent.parent / "reports"


def check_committed_report(result: ClaimResult, *, rtol: float = 0.0, atol: float = 0.0,
                           reports: Path | None = None, same_machine: bool = False) -> None:
    """Fail the calling test when this run differs, in what decides, from the committed
    report of its claim at its scale (``reports/<id>.json``, ``reports/<scale>/<id>.json``
    beyond smoke): every estimate, part, question, premise, setting and look, compared by
    :func:`audit.report.compare` within ``atol + rtol x magnitude``. A code change that
    moves a number must come with its regenerated report.

    A claim whose numbers do not depend on the machine's float kernels (exact counts and
    proofs) is compared anywhere. A trained model's numbers move in their last digits on
    another processor or library build, so with ``same_machine`` the comparison is made
    only where the committed report's :data:`KERNEL_FIELDS` and device kind equal this
    run's (the machine that wrote the reports, or its twin), and exactly there by default;
    elsewhere it is skipped, saying why, and ``audit diff`` compares the numbers when the
    reports are regenerated. Skipped too where there is no committed report (an installed
    package) or it was run with other seeds or config."""
    import json

    from audit import report
    from audit.safeio import term_text

    root = COMMITTED_REPORTS if reports is None else Path(reports)
    scale = result.ctx.scale
    folder = root if scale == "smoke" else root / scale
    path = folder / f"{result.claim.id}.json"
    # report.load: read, checked for shape and for being this claim's (else one error)
    committed = report.load(folder, result.claim.id) if folder.is_dir() else None
    if committed is None:
        pytest.skip(f"{result.claim.id}: no committed {scale} report at {path}")
    ours = json.loads(json.dumps(report.strict_json(report.to_json(result)),
                                 allow_nan=False))
    for key in ("scale", "seeds", "config"):
        if committed.get(key) != ours.get(key):
            pytest.skip(f"{result.claim.id}: the committed {scale} report was run with other "
                        f"{key}; nothing to compare")
    if same_machine:
        why = _other_machine(committed, ours)
        if why:
            pytest.skip(f"{result.claim.id}: {why}; a trained model's last digits may differ, "
                        f"so `audit diff` compares them when the reports are regenerated")
    found, _ = report.compare(committed, ours, rtol=rtol, atol=atol)
    if found:
        commit = term_text(str(committed["environment"].get("commit"))[:40])
        pytest.fail(f"{result.claim.id}: this run differs from the committed {scale} report "
                    f"({path.name}, commit {commit}) "
                    f"in what decides; regenerate the report (`audit run {result.claim.id}"
                    f"{'' if scale == 'smoke' else ' --scale ' + scale}`) or find the cause:\n"
                    + "\n".join(found), pytrace=False)


def _other_machine(committed, ours) -> str:
    """Why the units behind two reports may not have run on one machine and software
    (empty when they did): another processor, library, libc or device; units read from a
    cache (the report's environment is where it was assembled, not where those ran); units
    run on a cluster (its workers' machines are not recorded). A unit read from the
    cache counts as run here when its entry records this machine's kernel fields and
    device kind (``runs.cached_elsewhere``, :func:`audit.runner.machine_identity`); a
    report without that count (an older one) counts every cached unit as elsewhere."""
    theirs, mine = committed.get("environment") or {}, ours.get("environment") or {}
    other = [k for k in KERNEL_FIELDS if not mine.get(k) or theirs.get(k) != mine.get(k)]
    if device_kind(theirs.get("device", "")) != device_kind(mine.get("device", "")):
        other.append("device")
    if other:
        return f"the committed report was computed with another {', '.join(other)}"
    for name, data in (("the committed report", committed), ("this run", ours)):
        runs = data.get("runs") or {}
        if runs.get("cached_elsewhere", runs.get("cached", 1)) != 0:
            return (f"{name} read units from a cache computed on another machine, or on "
                    f"one not recorded")
        if re.search(r"\bRay\b", str((data.get("environment") or {}).get("backend", ""))):
            return f"{name} ran its units on a Ray cluster"
    return ""


_PROPERTY = "audit_verdict"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A claim run during this test phase goes into the phase's report (its
    ``user_properties``), which pytest-xdist sends from a worker to the controller."""
    outcome = yield
    s = item.config.stash.get(_SESSION_KEY, None)
    if s is not None and s._unreported:
        report = outcome.get_result()
        report.user_properties.extend((_PROPERTY, line) for line in s._unreported)
        s._unreported.clear()


class _Collector:
    """Per-session hook object: gathers the summary lines from every test report (local,
    or sent by pytest-xdist workers) into this session's :class:`AuditSession`."""

    def __init__(self, session: AuditSession):
        self.session = session

    def pytest_runtest_logreport(self, report):
        for name, value in getattr(report, "user_properties", ()):
            if name == _PROPERTY and isinstance(value, dict) and "id" in value:
                self.session.summary[value["id"]] = value


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    s = config.stash.get(_SESSION_KEY, None)
    if s is None or not s.summary:
        return
    tr = terminalreporter
    tr.section("audit verdicts")
    for cid, r in s.summary.items():
        lock = r.get("locked")
        mark = "" if lock is None or lock == r["verdict"] else "  <-- FLIPPED"
        tr.write_line(f"{cid:<26} {r['verdict']:<13} locked={lock or 'none':<13} "
                      f"{float(r['runtime_s']):7.1f} s  scale={r['scale']} "
                      f"seeds={r['seeds']}{mark}")
