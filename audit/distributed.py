"""Sweeps across machines through Ray (optional extra ``ray``).

Each (claim, arm, seed) unit becomes one Ray task with its own resource request: one CPU,
and one GPU when the run's device is CUDA. ``address=None`` starts a local Ray instance;
an address (``ray://host:10001`` or ``auto``) joins an existing cluster, shipping this
package to the workers. Results come back in completion order, and the runner caches each
the moment it arrives, so a sweep stopped midway loses no finished unit and a rerun
computes only the missing ones. The local backend stays the default and works without
Ray installed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from audit.claims import AuditError, Claim, RunContext, RunSpec

PACKAGE_DIR = Path(__file__).resolve().parent


def _require_ray():
    try:
        import ray
    except ImportError:
        raise AuditError("the ray backend needs Ray: pip install -e '.[ray]'") from None
    return ray


def _run_unit(run, spec: dict, ctx: dict) -> dict:
    """Executed on a Ray worker: run one unit with the claim's own ``run`` function
    (shipped to the worker by reference, so a plugin registered as ``module:ATTR`` or whose
    ``run`` lives in another module works as a built-in claim does)."""
    import torch
    from threadpoolctl import threadpool_limits

    ctx = dict(ctx)
    torch.set_num_threads(max(1, int(ctx.pop("threads", 1))))
    with threadpool_limits(limits=1, user_api="blas"):  # as every backend runs a unit
        return dict(run(RunSpec(**spec), RunContext.from_dict(ctx)))


def _context_fields(ctx: RunContext) -> dict:
    """Every field of ``ctx`` a worker needs (``plugin_version`` included), without the
    progress callback, which stays in this process: :meth:`RunContext.to_dict`."""
    return ctx.to_dict()


def _unit_error(exc: BaseException) -> str:
    """One plain line for a failed Ray task: the unit's own exception (Ray wraps it, with
    a traceback and ANSI colour codes, in a RayTaskError), escaped for the terminal."""
    from audit.safeio import term_text

    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        exc = cause
    lines = [ln.strip() for ln in term_text(str(exc)).replace("\\n", "\n").splitlines()
             if ln.strip()]
    text = lines[-1] if lines else ""
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _address_problem(address: str, timeout: float = 5.0) -> str | None:
    """Why ``--ray-address`` cannot name a reachable cluster, or None: ``auto``,
    ``ray://host:port`` or ``host:port``, whose port answers within ``timeout`` seconds
    (checked here so that a typo is one line, not minutes of Ray's retries)."""
    import re
    import socket

    if address in ("auto", "local"):
        return None
    m = re.fullmatch(r"(?:ray://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]{1,253}):([0-9]{1,5})",
                     address)
    if m is None or not 0 < int(m.group(2)) < 65536:
        return "expected auto, ray://HOST:PORT or HOST:PORT"
    host = m.group(1).strip("[]")
    try:
        with socket.create_connection((host, int(m.group(2))), timeout=timeout):
            return None
    except OSError as exc:
        return f"nothing answers there ({exc.strerror or type(exc).__name__})"


class RayBackend:
    """Runs units as Ray tasks; see the module docstring."""

    name = "ray"
    runs_here = False  # units run on the cluster's machines: their cache entries say so

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 cpus_per_run: float = 1.0, gpus_per_run: float = 1.0,
                 runtime_env: Mapping[str, Any] | None = None):
        self.ray = _require_ray()
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_run = cpus_per_run
        self.gpus_per_run = gpus_per_run
        self.runtime_env = dict(runtime_env or {})

    def describe(self) -> str:
        where = f"cluster at {self.address}" if self.address else "local instance"
        threads = max(1, int(self.cpus_per_run))
        return (f"in parallel on Ray ({where}; {self.cpus_per_run:g} CPU and {threads} "
                f"torch thread{'s' if threads > 1 else ''} a unit)")

    def _init(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        env = dict(self.runtime_env)
        if self.address is not None:
            env.setdefault("py_modules", [str(PACKAGE_DIR)])  # workers import this code
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "runtime_env": env or None}
        if self.address is not None:
            kwargs["address"] = self.address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        if self.address is not None:
            problem = _address_problem(self.address)
            if problem:
                raise AuditError(f"cannot reach the Ray cluster at {self.address!r}: "
                                 f"{problem}")
        try:
            ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, ValueError, RuntimeError: one line
            where = f"the Ray cluster at {self.address!r}" if self.address else \
                "a local Ray instance"
            raise AuditError(f"cannot start or reach {where}: {_unit_error(exc)}") \
                from None

    def imap(self, claim: Claim, ctx: RunContext,
             specs: Sequence[RunSpec]) -> Iterator[tuple[RunSpec, dict]]:
        if not specs:
            return
        self._init()
        ray = self.ray
        gpus = self.gpus_per_run if ctx.device.startswith("cuda") else 0
        options: dict[str, Any] = {"num_cpus": self.cpus_per_run, "num_gpus": gpus}
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env  # per task: also on a running Ray
        task = ray.remote(**options)(_run_unit)
        # every field (plugin_version included) through RunContext's one serialisation
        ctx_dict = {**_context_fields(ctx), "threads": max(1, int(self.cpus_per_run))}
        pending = {task.remote(claim.run, spec.to_dict(), dict(ctx_dict)): spec
                   for spec in specs}
        failures: list[str] = []
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    spec = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except Exception as exc:  # a failed unit must not lose the others
                        failures.append(f"{spec.label()}: {_unit_error(exc)}")
                        continue
                    yield spec, result
        finally:
            for ref in pending:  # stopped midway: cancel what has not finished
                ray.cancel(ref, force=True)
        if failures:
            raise AuditError(f"{len(failures)} run(s) of {claim.id} failed on Ray "
                             f"(the others are cached): {failures[0]}")
