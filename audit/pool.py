"""Units in parallel on this machine's cores: a process pool (the default local backend).

:class:`PoolBackend` runs each (claim, arm, seed) unit in one of a few worker processes
started from a fork server (or with ``spawn``; torch and a plain ``fork`` of this
process do not mix, see :func:`_context`), one per usable core
(:func:`audit.runner.usable_cores`, from ``os.sched_getaffinity``), each with one torch
thread, so no worker spins idle OpenMP threads on a shared machine. Results come back in
completion order to the main process, which caches each the moment it arrives (as with
every backend), so the cache, resume, sequential looks and the progress bar are those of
the one-at-a-time :class:`audit.runner.LocalBackend`, which stays the reference
(``--backend local``); a unit's result is the same in either (a unit is a pure function
of its spec and context, and the claims fix their own torch thread count).

What crosses to a worker is the claim's ``run`` function (pickled by reference: its module
and name, so a plugin claim's ``run`` defined in any importable module works) and the
unit's context without its ``on_round`` callback (a progress hook of the main process).
A ``run`` that cannot be pickled or imported in a worker (a lambda, a closure, a function
of an interactive ``__main__``) runs in this process instead, one unit at a time, and the
report's environment says so. CUDA runs stay in this process (one device, one unit at a
time). The pool is started at the first unit and reused across claims and sequential
looks, so its start-up (importing torch in each worker) is paid once per command.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pickle
import warnings
from typing import Any, Iterator, Sequence

from audit.claims import AuditError, Claim, RunContext, RunSpec

BACKENDS = ("auto", "pool", "local", "ray")


class PoolWarning(UserWarning):
    """A claim's units could not run in the pool and ran in this process instead."""


class _NotImportable(Exception):
    """Raised in a worker that cannot unpickle the claim's ``run`` (not importable there)."""


_ONE_THREAD = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _init_worker() -> None:
    """Each worker: one thread for every math library (torch reads ``OMP_NUM_THREADS`` at
    its import, BLAS at its load), so no worker spins idle threads; torch, imported by
    the fork server (or later, by the unit, in a spawned worker), gets one thread."""
    for var in _ONE_THREAD:
        os.environ[var] = "1"
    _die_with_parent()
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _die_with_parent() -> None:
    """A worker ends at once when the main process dies (killed, not only stopped with
    Ctrl-C, which reaches the whole process group), instead of finishing its unit for
    nobody: a daemon thread waits on the parent's sentinel (a pipe the main process holds
    open while it lives; a fork server, the worker's real parent, lives on as long as a
    worker does)."""
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()  # returns when the main process's end of the pipe closes
        os._exit(1)

    threading.Thread(target=watch, name="audit-pool-parent-watch", daemon=True).start()


_LOADED: dict[bytes, Any] = {}  # per worker: the last payload's (run, ctx), unpickled once


def _sync_environment(env: dict) -> None:
    """The worker's environment made the main process's at submission (a fork server's
    workers inherit the server's, fixed when it started), but for the thread settings."""
    for key in set(os.environ) - set(env) - set(_ONE_THREAD):
        del os.environ[key]
    for key, value in env.items():
        if key not in _ONE_THREAD and os.environ.get(key) != value:
            os.environ[key] = value


def _run_unit(payload: bytes, spec: RunSpec, env: dict) -> dict:
    """Executed in a worker: one unit of the claim in ``payload``."""
    _sync_environment(env)
    loaded = _LOADED.get(payload)
    if loaded is None:
        try:
            loaded = pickle.loads(payload)
        except Exception as exc:  # the run's module is not importable in a worker
            raise _NotImportable(f"{type(exc).__name__}: {exc}") from None
        _LOADED.clear()
        _LOADED[payload] = loaded
    run, ctx = loaded
    return dict(run(spec, ctx))


#: what the fork server imports once, so that each worker forked from it starts with them
PRELOAD = ("__main__", "audit.cli", "torch", "audit.fl.engine")


def _context():
    """``forkserver`` where the platform has it: a server process started once (fresh,
    like ``spawn``: it never ran a torch kernel, so forking it is safe) imports torch and
    the engine (:data:`PRELOAD`, with one thread for every math library) and forks each
    worker from itself, so workers start without importing them again (about 5 s of CPU
    each). Elsewhere ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    if not getattr(forkserver._forkserver, "_forkserver_pid", None):  # not yet started
        ctx.set_forkserver_preload(list(PRELOAD))
        saved = {k: os.environ.get(k) for k in _ONE_THREAD}
        os.environ.update({k: "1" for k in _ONE_THREAD})  # the server reads them now
        try:
            forkserver.ensure_running()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return ctx


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class PoolBackend:
    """Runs units in a pool of worker processes on this machine; see the module docstring.

    ``workers``: how many units run at once (default: the usable cores)."""

    name = "pool"

    def __init__(self, workers: int | None = None):
        from audit.runner import usable_cores

        self.workers = max(1, int(workers) if workers is not None else usable_cores())
        self._executor: cf.ProcessPoolExecutor | None = None
        self._running = 0  # units the last claim ran at once: min(workers, its units)
        self._here: str | None = None  # why the last claim's units ran in this process

    def describe(self) -> str:
        if self._here:
            return f"one after another in this process ({self._here}; pool backend)"
        n = self._running or self.workers
        how = f"in parallel in {n} local worker processes" if n > 1 else \
            "in 1 local worker process"
        return f"{how} (pool backend; 1 torch thread a unit)"

    # ------------------------------------------------------------------ the pool
    def _pool(self) -> cf.ProcessPoolExecutor:
        """One pool for every claim and look of the command. Its executor (forkserver or
        spawn) starts a worker only for a unit submitted while none is idle, so it never
        starts more workers than the units it was given at once, whatever ``workers``
        says."""
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=_context(), initializer=_init_worker)
        return self._executor

    def close(self) -> None:
        """Stop the workers (they also stop when this process exits)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _stop(self) -> None:
        """Stop the workers now, without waiting for the units they are running."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        procs = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --------------------------------------------------------------------- units
    def _payload(self, claim: Claim, ctx: RunContext) -> tuple[bytes | None, str]:
        """The pickled (run, ctx) a worker needs, or (None, why not)."""
        if not ctx.device.startswith("cpu"):
            return None, f"device {ctx.device}"
        # every field but the progress callback, through RunContext's one serialisation
        wctx = RunContext.from_dict(ctx.to_dict())
        try:
            return pickle.dumps((claim.run, wctx)), ""
        except Exception as exc:  # a lambda or closure: run it here
            return None, f"the claim's run cannot be sent to a worker: {_first_line(exc)}"

    def _here_imap(self, claim, ctx, specs, why: str):
        from audit.runner import run_as_in_a_worker

        self._here = why
        for spec in specs:  # with a worker's threads, as the local backend runs a unit
            yield spec, run_as_in_a_worker(claim, spec, ctx)

    def imap(self, claim: Claim, ctx: RunContext,
             specs: Sequence[RunSpec]) -> Iterator[tuple[RunSpec, dict]]:
        specs = list(specs)
        if not specs:
            return
        payload, why = self._payload(claim, ctx)
        if payload is None:
            if not ctx.device.startswith("cpu"):
                yield from self._here_imap(claim, ctx, specs, why)
                return
            warnings.warn(f"{claim.id}: {why}; its units run one after another in this "
                          f"process", PoolWarning, stacklevel=2)
            yield from self._here_imap(claim, ctx, specs, why)
            return
        self._here = None
        self._running = min(self.workers, len(specs))
        pool = self._pool()
        env = dict(os.environ)
        pending = {pool.submit(_run_unit, payload, spec, env): spec for spec in specs}
        failures: list[tuple[RunSpec, BaseException]] = []
        here: list[RunSpec] = []
        done_ok = False
        try:
            for fut in cf.as_completed(list(pending)):
                spec = pending.pop(fut)
                try:
                    result = fut.result()
                except _NotImportable:
                    here.append(spec)
                    continue
                except cf.process.BrokenProcessPool as exc:
                    self._executor = None  # a worker died (killed, out of memory)
                    failures.append((spec, exc))
                    continue
                except Exception as exc:  # a failed unit must not lose the others
                    failures.append((spec, exc))
                    continue
                yield spec, result
            done_ok = True
        finally:
            if not done_ok:  # stopped midway (Ctrl-C, an error storing a result): the
                self._stop()  # units in flight are lost, the finished ones are cached
        if here:
            why = "the claim's run is not importable in a worker process"
            warnings.warn(f"{claim.id}: {why}; {len(here)} unit(s) run one after another in "
                          f"this process", PoolWarning, stacklevel=2)
            yield from self._here_imap(claim, ctx, here, why)
        if failures:
            spec, exc = failures[0]
            if len(failures) == 1 and isinstance(exc, AuditError):
                raise exc
            raise AuditError(f"{len(failures)} run(s) of {claim.id} failed in the process "
                             f"pool (the others are cached): {spec.label()}: "
                             f"{_first_line(exc)}") from exc


def parallel_units(name: str, device: str = "cpu", workers: int | None = None) -> int:
    """How many units run at once under backend ``name`` on this machine (``ray``: the
    usable cores of a local instance)."""
    from audit.runner import usable_cores

    if name == "local" or (name == "auto" and not device.startswith("cpu")):
        return 1
    if name in ("auto", "pool"):
        n = workers if workers is not None else usable_cores()
        return 1 if name == "auto" and n < 2 else max(1, n)
    return usable_cores()


def choose_backend(name: str = "auto", *, device: str = "cpu", workers: int | None = None,
                   ray_address: str | None = None):
    """The backend ``audit run --backend NAME`` uses: ``auto`` (the default) is the
    process pool when more than one core is usable and the device is the CPU, else the
    one-at-a-time local backend; ``pool``, ``local`` and ``ray`` are those backends.
    ``workers``: the pool's size (default: the usable cores).

    Also sets this (the main) process's torch threads to at most the usable cores, so a
    process confined to fewer cores than the machine has does not oversubscribe them."""
    from audit.runner import LocalBackend, _set_torch_threads, torch_threads, usable_cores

    if name not in BACKENDS:
        raise AuditError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if workers is not None and workers < 1:
        raise AuditError(f"--workers must be at least 1, got {workers}")
    cores = usable_cores()
    if torch_threads() > cores:
        _set_torch_threads(cores)
    if name == "ray":
        from audit.distributed import RayBackend

        # a local instance gets the cores this process may use (Ray counts the machine's);
        # an address, given here or in $RAY_ADDRESS, joins a cluster of its own size
        local = ray_address is None and not os.environ.get("RAY_ADDRESS")
        return RayBackend(address=ray_address, num_cpus=cores if local else None)
    if name == "pool" and workers is not None and workers > cores:
        warnings.warn(f"--workers {workers} on {cores} usable core(s): the units share the "
                      f"cores (each still one torch thread; results are unchanged, only "
                      f"slower); the pool never starts more workers than units it is given",
                      PoolWarning, stacklevel=2)
    if name == "local" or parallel_units(name, device, workers) < 2 and name == "auto":
        return LocalBackend()
    return PoolBackend(workers)
