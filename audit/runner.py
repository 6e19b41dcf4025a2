"""Running a claim: arms x seeds -> cached runs -> analysis -> verdict -> report data.

A run is a pure function of (claim, spec, scale, config, code version). Each finished run
is written to the on-disk cache at once (JSON, atomically), so an interrupted sweep
resumes without redoing finished runs. A corrupt cache entry is reported and recomputed,
never used.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import audit
from audit.claims import AuditError, Claim, PendingClaim, RunContext, RunSpec
from audit.verdict import Outcome, Verdict, verdict_from_parts

SCALES = ("smoke", "full", "paper")
PACKAGE_DIR = Path(audit.__file__).resolve().parent
CACHE_FORMAT = 1
SOURCE_PATHS = ("audit", "falsifiers", "conftest.py", "pyproject.toml")


class CacheWarning(UserWarning):
    """A cache entry could not be used (corrupt, or written by other inputs)."""


# ---------------------------------------------------------------------------- version
def code_version() -> str:
    """A hash of the package source: any code change invalidates cached runs."""
    h = hashlib.sha256(audit.__version__.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return f"{audit.__version__}+{h.hexdigest()[:12]}"


def git_commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PACKAGE_DIR,
                             capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        # "dirty" means the code differs from the commit; generated reports do not count
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *SOURCE_PATHS],
                               cwd=PACKAGE_DIR.parent, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def environment(device: str) -> dict:
    import numpy
    import scipy

    try:
        import torch

        torch_v = torch.__version__
        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover - torch is a hard dependency
        torch_v, threads = "absent", 0
    return {
        "python": platform.python_version(),
        "torch": torch_v,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "audit": audit.__version__,
        "code_version": code_version(),
        "device": device_name(device),
        "torch_threads": threads,
        "platform": platform.platform(),
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# ------------------------------------------------------------------------------ cache
def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Cache:
    """A directory of JSON run results keyed by a hash of everything the run depends on."""

    root: Path
    enabled: bool = True

    @staticmethod
    def default_root() -> Path:
        return Path(os.environ.get("AUDIT_CACHE", ".audit-cache"))

    def key_material(self, claim_id: str, spec: RunSpec, ctx: RunContext,
                     version: str) -> dict:
        return {"format": CACHE_FORMAT, "claim": claim_id, "spec": spec.to_dict(),
                "scale": ctx.scale, "config": dict(ctx.config), "device": ctx.device,
                "version": version}

    def path(self, material: Mapping) -> Path:
        digest = hashlib.sha256(_canonical(material).encode()).hexdigest()
        return self.root / material["claim"] / f"{digest[:24]}.json"

    def load(self, material: Mapping) -> Mapping | None:
        if not self.enabled:
            return None
        path = self.path(material)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text())
            if _canonical(entry["key"]) != _canonical(material):
                raise ValueError("key does not match its inputs")
            result = entry["result"]
            if hashlib.sha256(_canonical(result).encode()).hexdigest() != entry["checksum"]:
                raise ValueError("checksum mismatch")
            return result
        except (ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"corrupt cache entry {path} ({exc}); recomputing", CacheWarning,
                          stacklevel=2)
            return None

    def store(self, material: Mapping, result: Mapping) -> None:
        if not self.enabled:
            return
        path = self.path(material)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"key": material, "result": result,
                 "checksum": hashlib.sha256(_canonical(result).encode()).hexdigest()}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry, default=_json_default))
        os.replace(tmp, path)  # atomic: an interrupted write leaves no half entry


def _json_default(o: Any):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"run result holds a {type(o).__name__}, which is not JSON")


# ----------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class ClaimResult:
    """Everything one audit of one claim produced (the report is rendered from this)."""

    claim: Claim
    ctx: RunContext
    verdict: Verdict
    analysis: Any
    environment: Mapping[str, Any]
    runtime_s: float
    computed: int  # runs computed now (the rest came from the cache)
    cached: int
    command: str

    @property
    def locked(self) -> Outcome | None:
        return self.claim.locked(self.ctx.scale, self.ctx.seeds)


def resolve_seeds(claim: Claim, seeds: int | Sequence[int] | None) -> tuple[int, ...]:
    if not claim.stochastic:
        return ()
    if seeds is None:
        out = tuple(claim.default_seeds)
    elif isinstance(seeds, int):
        out = tuple(range(seeds))
    else:
        out = tuple(int(s) for s in seeds)
    if len(out) < 2:
        raise AuditError(f"claim {claim.id!r} is stochastic and needs at least 2 seeds "
                         f"(got {len(out)})")
    if len(set(out)) != len(out):
        raise AuditError(f"seed list has repeats: {list(out)}")
    if any(s < 0 for s in out):
        raise AuditError(f"seeds must be non-negative integers: {list(out)}")
    return out


def check_device(device: str) -> None:
    """``cpu``, or ``cuda`` / ``cuda:N`` on a machine that has CUDA; else an AuditError."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise AuditError(f"device {device!r} was asked for but CUDA is not available "
                             f"on this machine")
    elif device != "cpu":
        raise AuditError(f"unknown device {device!r}; use cpu, cuda or cuda:N")


def make_context(claim: Claim, scale: str, seeds=None, device: str = "cpu",
                 data_dir: str | None = None, overrides: Mapping | None = None) -> RunContext:
    if scale not in SCALES:
        raise AuditError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    if scale not in claim.scales:
        raise AuditError(f"claim {claim.id!r} has no {scale!r} scale; it has "
                         f"{', '.join(claim.scales)}")
    check_device(device)
    if data_dir is None:
        data_dir = os.environ.get("AUDIT_DATA")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise AuditError(f"data directory {data_dir!r} does not exist")
    config = dict(claim.scales[scale])
    config.update(overrides or {})
    return RunContext(claim_id=claim.id, scale=scale, config=config,
                      seeds=resolve_seeds(claim, seeds), device=device, data_dir=data_dir)


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False)


def _round_postfix(bar, every_s: float = 0.5, clock: Callable[[], float] = time.monotonic):
    """``fn(round, rounds)`` showing "round r/R" beside ``bar``, at most every ``every_s``
    seconds (smoke rounds take milliseconds). The first round is always shown: the
    throttle starts from the first call, not from the clock's origin (``monotonic`` may
    read less than ``every_s`` on a machine booted minutes ago)."""
    last: list[float | None] = [None]

    def show(r: int, total: int) -> None:
        now = clock()
        if last[0] is None or now - last[0] >= every_s or r == total:
            last[0] = now
            bar.set_postfix_str(f"round {r}/{total}")

    return show


class LocalBackend:
    """Runs units one after another in this process (the reference backend)."""

    name = "local"

    def imap(self, claim: Claim, ctx: RunContext, specs: Sequence[RunSpec]):
        for spec in specs:
            yield spec, claim.run(spec, ctx)


class FunctionBackend(LocalBackend):
    """Runs units through a given function ``fn(spec) -> result`` (tests, wrappers)."""

    def __init__(self, fn: Callable[[RunSpec], Mapping]):
        self.fn = fn

    def imap(self, claim, ctx, specs):
        for spec in specs:
            yield spec, self.fn(spec)


def execute(claim: Claim | PendingClaim, ctx: RunContext, *, cache: Cache,
            progress: bool = True, backend: Any = None,
            runner: Callable | None = None, command: str = "") -> ClaimResult:
    """Run every unit of ``claim`` (from the cache where possible), analyse and decide.

    ``backend`` has ``imap(claim, ctx, specs)`` yielding ``(spec, result)`` in completion
    order (:class:`LocalBackend` by default; ``audit.distributed.RayBackend`` spreads
    units over a Ray cluster). Each result is cached the moment it arrives, so an
    interrupted sweep loses only the units still in flight.
    """
    if isinstance(claim, PendingClaim):
        raise AuditError(f"claim {claim.id!r} is pending: its falsifier is not built yet")
    if backend is None:
        backend = FunctionBackend(runner) if runner is not None else LocalBackend()
    t0 = time.perf_counter()
    version = code_version()
    if cache.enabled and ctx.checkpoint_dir is None:  # long runs checkpoint beside the cache
        ctx = dataclasses.replace(ctx, checkpoint_dir=str(cache.root / "checkpoints"))
    specs = claim.unit_specs(ctx)
    results: dict[RunSpec, Mapping] = {}
    todo: dict[RunSpec, dict] = {}
    for spec in specs:
        material = cache.key_material(claim.id, spec, ctx, version)
        hit = cache.load(material)
        if hit is not None:
            results[spec] = hit
        else:
            todo[spec] = material
    bar = _progress(len(todo), claim.id, progress and len(todo) > 0)
    rounds = contextlib.nullcontext()
    if bar is not None:  # long units: the current federated run's round beside the bar
        from audit.fl.engine import on_rounds

        rounds = on_rounds(_round_postfix(bar))
    try:
        with rounds:
            for spec, result in backend.imap(claim, ctx, list(todo)):
                cache.store(todo[spec], result)  # stored at once: nothing lost if interrupted
                results[spec] = result
                if bar is not None:
                    bar.set_postfix_str(spec.label())
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    analysis = claim.analyse(results, ctx)
    verdict = verdict_from_parts(claim.id, claim.combination, analysis.parts,
                                 analysis.estimates)
    return ClaimResult(claim=claim, ctx=ctx, verdict=verdict, analysis=analysis,
                       environment=environment(ctx.device),
                       runtime_s=time.perf_counter() - t0, computed=len(todo),
                       cached=len(specs) - len(todo), command=command)


def regenerate_command(ctx: RunContext) -> str:
    cmd = f"audit run {ctx.claim_id} --scale {ctx.scale}"
    if ctx.seeds:
        cmd += " --seed-list " + ",".join(str(s) for s in ctx.seeds)
    if ctx.device != "cpu":
        cmd += f" --device {ctx.device}"
    if ctx.data_dir:
        cmd += " --data-dir PATH"
    return cmd


def with_overrides(cmd: str, base: Mapping, config: Mapping) -> str:
    """Append ``--set`` for every config value that differs from the scale's default."""
    for key in sorted(config):
        if key not in base or base[key] != config[key]:
            cmd += f" --set {key}={json.dumps(config[key], separators=(',', ':'))}"
    return cmd


def results_table(results: Mapping[RunSpec, Mapping], key: str,
                  arms: Iterable[str], seeds: Sequence[int], setting: str = ""):
    """Per-seed values of ``key`` for each arm, aligned on ``seeds`` (paired)."""
    import numpy as np

    return {arm: np.array([float(results[RunSpec(arm, s, setting)][key]) for s in seeds])
            for arm in arms}
