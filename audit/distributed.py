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


def _run_unit(module: str, spec: dict, ctx: dict) -> dict:
    """Executed on a Ray worker: import the claim's module and run one unit."""
    import importlib

    import torch

    torch.set_num_threads(max(1, int(ctx.pop("threads", 1))))
    claim = importlib.import_module(module).CLAIM
    ctx["seeds"] = tuple(ctx["seeds"])
    return dict(claim.run(RunSpec(**spec), RunContext(**ctx)))


class RayBackend:
    """Runs units as Ray tasks; see the module docstring."""

    name = "ray"

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
        try:
            ray.init(**kwargs)
        except ConnectionError as exc:
            raise AuditError(f"cannot reach the Ray cluster at {self.address!r}: {exc}") \
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
        ctx_dict = {"claim_id": ctx.claim_id, "scale": ctx.scale, "config": dict(ctx.config),
                    "seeds": list(ctx.seeds), "device": ctx.device,
                    "data_dir": ctx.data_dir, "checkpoint_dir": ctx.checkpoint_dir,
                    "threads": max(1, int(self.cpus_per_run))}
        module = claim.run.__module__  # the module that defines CLAIM (and its run)
        pending = {task.remote(module, spec.to_dict(), dict(ctx_dict)): spec
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
                        failures.append(f"{spec.label()}: {type(exc).__name__}: "
                                        f"{str(exc).splitlines()[0] if str(exc) else ''}")
                        continue
                    yield spec, result
        finally:
            for ref in pending:  # stopped midway: cancel what has not finished
                ray.cancel(ref, force=True)
        if failures:
            raise AuditError(f"{len(failures)} run(s) of {claim.id} failed on Ray "
                             f"(the others are cached): {failures[0]}")
