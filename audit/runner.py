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
import functools
import hashlib
import json
import math
import numbers
import os
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import audit
from audit.claims import AuditError, Claim, RunContext, RunSpec
# re-exported where they used to live: the version and data keys (audit.keys) and the
# seed rules (audit.seeds) sit below the run-context types, which use them
from audit.keys import code_version, data_identity  # noqa: F401
from audit.seeds import MAX_SEED_VALUE, MAX_SEEDS, max_seeds, resolve_seeds  # noqa: F401
from audit.verdict import Outcome, Verdict, verdict_from_parts

from audit.fl.cores import usable_cores  # noqa: E402,F401  (re-exported)

SCALES = ("smoke", "full", "paper")
PACKAGE_DIR = Path(audit.__file__).resolve().parent
CACHE_FORMAT = 1
SOURCE_PATHS = ("audit", "falsifiers", "conftest.py", "pyproject.toml")


class CacheWarning(UserWarning):
    """A cache entry could not be used (corrupt, or written by other inputs)."""


# ---------------------------------------------------------------------------- version
def git_commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PACKAGE_DIR,
                             capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        # "dirty" means the code differs from the commit; generated reports do not count
        # the lock file is written by --audit-update-locks during the very run that
        # records the commit: it is data, not code, so it does not make the code dirty
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *SOURCE_PATHS,
                                ":(exclude)audit/locks.json"],
                               cwd=PACKAGE_DIR.parent, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    cores, total = usable_cores(), os.cpu_count() or 1
    of = f" of {total}" if cores != total else ""
    return f"cpu ({platform.processor() or platform.machine()}, {cores}{of} cores)"


def cpu_identity() -> str:
    """The processor as its float kernels see it: the model name, a digest of its feature
    flags (Linux's ``/proc/cpuinfo``) and the vector kernels torch dispatches to. Two
    machines with the same identity and the same software versions compute a trained
    model's numbers alike; across identities the last digits may move."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in (platform.machine(), ""):
                    model = " ".join(value.split())
                elif key.strip() in ("flags", "Features") and not flags:
                    flags = hashlib.sha256(" ".join(sorted(value.split())).encode()
                                           ).hexdigest()[:12]
                if flags and model != platform.machine():
                    break
    except OSError:
        pass
    try:
        import torch

        kernels = torch.backends.cpu.get_cpu_capability()
    except (ImportError, AttributeError):  # pragma: no cover - torch is a hard dependency
        kernels = "unknown"
    return f"{model}; flags {flags or 'unknown'}; torch kernels {kernels}"


def torch_threads() -> int:
    """torch's intra-op thread count in this process now (0 without torch)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return 0
    return int(torch.get_num_threads())


#: what a trained model's numbers depend on besides the code, the seeds and the device
#: kind: two runs agree to the last digit only where all of these are equal
KERNEL_FIELDS = ("python", "torch", "numpy", "scipy", "cpu", "libc")


def device_kind(device_text: str) -> str:
    """The device of a report's ``environment["device"]`` without the CPU's core count
    (threads are the claims' own): ``cpu``, or a GPU's whole name."""
    text = str(device_text)
    return "cpu" if text.startswith("cpu") else text


def machine_identity(device: str) -> dict:
    """This process's :data:`KERNEL_FIELDS` and device kind: recorded in every cache
    entry it computes, so that a later run can tell a unit computed on a twin machine
    from one computed elsewhere."""
    return dict(_machine_identity(device))


@functools.lru_cache(maxsize=None)
def _machine_identity(device: str) -> tuple:
    return (*_kernel_fields().items(), ("device", device_kind(device_name(device))))


def _kernel_fields() -> dict:
    """This process's :data:`KERNEL_FIELDS`, as :func:`environment` reports them."""
    import numpy
    import scipy

    try:
        import torch

        torch_v = torch.__version__
    except ImportError:  # pragma: no cover - torch is a hard dependency
        torch_v = "absent"
    return {"python": platform.python_version(), "torch": torch_v,
            "numpy": numpy.__version__, "scipy": scipy.__version__,
            "cpu": cpu_identity(),
            "libc": " ".join(platform.libc_ver()).strip() or "unknown"}


def environment(device: str, threads: int | None = None, backend: str = "local") -> dict:
    """The software and machine a report came from.

    ``torch_threads`` is ``threads`` when given: :func:`execute` passes the count read
    before any unit ran (units may set their own, e.g. ``torch.set_num_threads(1)``, and
    :func:`execute` restores it after them), so the field does not depend on whether the
    units were computed or came from the cache. ``backend``: where the units ran
    (:func:`_backend_text`: one after another in this process, in a local process pool,
    or on Ray; a parallel backend says how many torch threads each unit had, which can
    move the last digits of a float sum where a claim does not fix its own)."""
    if threads is None:
        threads = torch_threads()
    k = _kernel_fields()
    return {
        "python": k["python"],
        "torch": k["torch"],
        "numpy": k["numpy"],
        "scipy": k["scipy"],
        "audit": audit.__version__,
        "code_version": code_version(),
        "device": device_name(device),
        "cpu": k["cpu"],
        "libc": k["libc"],
        "torch_threads": threads,
        "backend": backend,
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
        """``$AUDIT_CACHE``, else ``audit`` under the user's cache directory
        (``$XDG_CACHE_HOME``, else ``~/.cache``): outside the work tree, so a long sweep
        survives a fresh clone or a work tree laid anew and continues from its cached
        units and checkpoints. Keys carry the code version and data fingerprint, so a
        cache shared by several checkouts never hands one the other's numbers."""
        env = os.environ.get("AUDIT_CACHE")
        if env:
            return Path(env)
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
        return base / "audit"

    def problem(self) -> str | None:
        """Why the root cannot be a cache folder at all (a file or a device there, or at
        the folder it would be made in), or None: checked before a run, so a bad
        ``$AUDIT_CACHE`` is one error line and not a failure after the units ran. Writes
        nothing; a folder that is only read-only stays usable (its hits are served, a
        store is one warning)."""
        if not self.enabled:
            return None
        path = Path(os.path.abspath(self.root))
        while not os.path.lexists(path) and path != path.parent:
            path = path.parent
        if not path.is_dir():
            return "not a folder" if path == Path(os.path.abspath(self.root)) else \
                f"{path} is not a folder"
        return None

    def key_material(self, claim_id: str, spec: RunSpec, ctx: RunContext,
                     version: str, data: Mapping[str, str] | None = None) -> dict:
        """Everything a unit's result depends on: claim, spec, scale, config, device, code
        version and ``data``, the fingerprint of the data files read (see
        :func:`data_identity`; computed here when not given)."""
        if data is None:
            data = data_identity(ctx)
        return {"format": CACHE_FORMAT, "claim": claim_id, "spec": spec.to_dict(),
                "scale": ctx.scale, "config": dict(ctx.config), "device": ctx.device,
                "version": version, "data": dict(data)}

    def path(self, material: Mapping) -> Path:
        digest = hashlib.sha256(_canonical(material).encode()).hexdigest()
        return self.root / material["claim"] / f"{digest[:24]}.json"

    def load(self, material: Mapping) -> Mapping | None:
        """The cached result of ``material``, or None (absent, disabled, or corrupt:
        warned about, then recomputed)."""
        entry = self.load_entry(material)
        return None if entry is None else entry[0]

    def load_entry(self, material: Mapping) -> tuple[Mapping, Mapping | None] | None:
        """(result, the machine that computed it) of ``material``, or None as
        :meth:`load`. The machine is :func:`machine_identity` of the storing run, None
        where unknown (an older entry, units run on a cluster)."""
        if not self.enabled:
            return None
        path = self.path(material)
        if not os.path.lexists(path):
            return None
        try:
            if path.is_symlink() or not path.is_file():
                raise ValueError("not a regular file")
            entry = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(entry, dict) or not {"key", "result", "checksum"} <= set(entry):
                raise ValueError("not an object with key, result and checksum")
            if _canonical(entry["key"]) != _canonical(material):
                raise ValueError("key does not match its inputs")
            result = entry["result"]
            if hashlib.sha256(_canonical(result).encode()).hexdigest() != entry["checksum"]:
                raise ValueError("checksum mismatch")
            if not isinstance(result, dict):
                raise ValueError(f"result is a {type(result).__name__}, not an object")
            machine = entry.get("machine")
            if not (isinstance(machine, dict) and all(
                    isinstance(k, str) and isinstance(v, str) for k, v in machine.items())):
                machine = None  # unknown: never taken for this machine
            return result, machine
        except (ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
            warnings.warn(f"corrupt cache entry {path} ({exc}); recomputing", CacheWarning,
                          stacklevel=2)
            return None

    def store(self, material: Mapping, result: Mapping,
              machine: Mapping | None = None) -> None:
        """Cache ``result`` under ``material``; ``machine``: where it was computed
        (:func:`machine_identity`), None where unknown."""
        if not self.enabled:
            return
        path = self.path(material)
        entry = {"key": material, "result": result,
                 "checksum": hashlib.sha256(_canonical(result).encode()).hexdigest()}
        if machine is not None:
            entry["machine"] = dict(machine)
        text = json.dumps(entry, default=_json_default)  # a result that is not JSON raises
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.parent.is_symlink() or (os.path.lexists(path) and (
                    path.is_symlink() or not path.is_file())):
                raise IsADirectoryError(f"{path} is not a regular file")
            # a fresh name, created exclusively (O_EXCL): a link planted at a predictable
            # temporary name in a shared cache is never written through
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.",
                                       suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)  # atomic: an interrupted write leaves no half entry
            tmp = None
        except OSError as exc:  # a directory in the way, a full disk: the run goes on
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            warnings.warn(f"cannot store cache entry {path} ({exc.strerror or exc}); the "
                          f"result is used but not cached", CacheWarning, stacklevel=2)


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
    plan: Any = None  # audit.sequential.Plan of a sequential run (None: fixed seeds)
    # of the cached units, those whose cache entries were computed on another machine or
    # on one not recorded (an older entry, a cluster): see machine_identity
    cached_elsewhere: int = 0

    @property
    def locked(self) -> Outcome | None:
        return self.claim.locked(self.ctx.scale, self.ctx.seeds)

    @property
    def answers(self) -> list[dict]:
        """Every reviewer question of the claim with its own verdict (audit.questions)."""
        from audit import questions

        return questions.answers(self.claim, self.verdict.parts, self.analysis,
                                 self.ctx.scale)

    def question_flips(self) -> list[tuple[str, str, str]]:
        """(question id, locked verdict, verdict now) for every question whose verdict
        differs from the lock at this scale and these seeds (none without a lock)."""
        lock = self.claim.lock(self.ctx.scale, self.ctx.seeds) or {}
        locked = lock.get("questions") or {}
        return [(a["id"], locked[a["id"]], a["verdict"]) for a in self.answers
                if a["id"] in locked and locked[a["id"]] != a["verdict"]]


def check_device(device: str) -> None:
    """``cpu``, or ``cuda`` / ``cuda:N`` on a machine that has CUDA; else an AuditError."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise AuditError(f"device {device!r} was asked for but CUDA is not available "
                             f"on this machine")
    elif device != "cpu":
        raise AuditError(f"unknown device {device!r}; use cpu, cuda or cuda:N")


_FRACTION_WORDS = ("fraction", "portion", "ratio", "prob", "dropout")
# names whose 0 is no ablation but an invalid setting: a rate, a width, a Dirichlet
# concentration or a significance level (``alpha``, ``alpha_*``)
_POSITIVE_NAMES = ("lr", "learning_rate", "width", "alpha")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _override_problem(key: str, default: Any, value: Any) -> str | None:
    """Why ``value`` cannot replace ``default`` at config key ``key``, or None.

    The rules (kept simple, and the same for every claim): a null default takes anything;
    otherwise the value has the default's JSON type (true/false for true/false; a whole
    number, not true/false, for a whole number; any number for a number; a string; a list;
    an object, whose keys shared with the default are checked by these same rules).
    Numbers must be finite. A whole number whose default is positive (a count, size,
    round, period) must be positive. A number whose default is positive must not be
    negative (0 is allowed: switching a weight such as ``lam_gen`` off is an ablation),
    and must be positive when the key is a learning rate, width, Dirichlet concentration
    or significance level (``lr``, ``*_lr``, ``width``, ``alpha``, ``alpha_*``). A default of zero admits no negative value. A key named like a fraction
    (fraction, portion, ratio, prob, dropout) whose default lies in [0, 1] stays in
    [0, 1]."""
    if default is None:
        return None
    want = _kind(default)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return f"{key} must be {want} like its default {_short(default)}, got " \
                   f"{_kind(value)} {_short(value)}"
        if len(value) > MAX_OVERRIDE_ITEMS:
            return f"{key} lists {len(value)} values; at most {MAX_OVERRIDE_ITEMS}"
        like = _element_default(default)
        if like is not _MIXED:  # a list of one kind: each element checked like its default
            for i, v in enumerate(value):
                problem = _override_problem(f"{key}[{i}]", like, v)
                if problem:
                    return problem
        return None
    elif isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            return f"{key} must be {want}, got {_kind(value)} {_short(value)}"
        for sub in sorted(set(default) & set(value), key=str):
            problem = _override_problem(f"{key}.{sub}", default[sub], value[sub])
            if problem:
                return problem
        return None
    else:
        return None
    if not ok:
        return f"{key} must be {want} like its default {_short(default)}, got " \
               f"{_kind(value)} {_short(value)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key} must be finite, got {value}"
    name = key.rsplit(".", 1)[-1].lower()
    strict = (isinstance(default, int) or name in _POSITIVE_NAMES or name.endswith("_lr")
              or name.startswith("alpha_"))
    if default > 0 and strict and value <= 0:
        return f"{key} must be positive (default {_short(default)}), got {_short(value)}"
    if default >= 0 and value < 0:
        return f"{key} must not be negative (default {_short(default)}), got {_short(value)}"
    if isinstance(default, int) and abs(value) > max(MAX_COUNT_OVERRIDE,
                                                      1000 * abs(default)):
        return (f"{key} is {_short(value)}, more than 1000 times its default "
                f"{_short(default)}; at most {max(MAX_COUNT_OVERRIDE, 1000 * abs(default))}")
    if 0 <= default <= 1 and any(w in name for w in _FRACTION_WORDS) and not 0 <= value <= 1:
        return f"{key} is a fraction and must lie in [0, 1], got {_short(value)}"
    return None


MAX_OVERRIDE_ITEMS = 10_000  # the longest list a --set value may give
MAX_COUNT_OVERRIDE = 100_000  # a whole-number --set value may reach this (or 1000 x default)
_MIXED = object()


def _element_default(default: Sequence) -> Any:
    """The default an element of a list override is checked against: for a list of
    numbers the smallest (its rules are the loosest), for a list of one other kind its
    first element; ``_MIXED`` for an empty list or one of mixed kinds (not checked)."""
    if not default or len({_kind(v) for v in default}) != 1:
        return _MIXED
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in default):
        return min(default)
    return default[0]


# the data sets and models a config may name (audit.fl.data.load_dataset,
# audit.fl.models.build_model), compared as load_dataset compares them
_DATASETS = ("digits", "synthetic", "stdlibchars", "cifar10", "cifar100", "svhn",
             "tinyimagenet", "ptb")
_MODELS = ("cnn", "cnn2", "vgg", "resnet8", "resnet10", "resnet18")


def _model_options() -> set[str]:
    import inspect

    from audit.fl import models

    names = {"width"}
    for cls in (models.CNN, models.CNN2, models.VGG, models.CifarResNet):
        names |= set(inspect.signature(cls.__init__).parameters)
    return names - {"self", "num_classes", "in_channels", "image_size", "widths", "kw",
                    "kwargs"}


def _name_problem(key: str, default: Any, value: Any) -> str | None:
    """A data set, model or model option a run could not build (the type already
    checked): ``dataset``/``datasets`` must name a known data set, ``model`` a known
    classifier (where its default is one), ``model_kw`` only options the classifiers
    take. Found here, before any work, instead of as a traceback mid-run."""
    name = key.rsplit(".", 1)[-1].split("[", 1)[0].lower()
    norm = (lambda v: v.lower().replace("_", "").replace("-", ""))
    if name in ("dataset", "datasets"):
        given = [value] if isinstance(value, str) else \
            [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) \
            else []
        bad = [v for v in given if norm(v) not in _DATASETS]
        if bad:
            return (f"{key} names unknown data set {_short(bad[0])}; known: "
                    f"{', '.join(_DATASETS)}")
    if name == "model" and isinstance(value, str) and isinstance(default, str) \
            and default.lower() in _MODELS and value.lower() not in _MODELS:
        return f"{key} names unknown model {_short(value)}; known: {', '.join(_MODELS)}"
    if name == "model_kw" and isinstance(value, Mapping) and isinstance(default, Mapping):
        bad = sorted(str(k) for k in value if k not in default
                     and k not in _model_options())
        if bad:
            return (f"{key} has unknown option(s) {', '.join(bad)[:60]}; the models take "
                    f"{', '.join(sorted(_model_options()))}")
    return None


def _deep_name_problem(key: str, default: Any, value: Any, depth: int = 0) -> str | None:
    """:func:`_name_problem` at ``key`` and inside nested objects (``sim.dataset``)."""
    problem = _name_problem(key, default, value)
    if problem or depth > 20:
        return problem
    if isinstance(default, Mapping) and isinstance(value, Mapping):
        for sub in sorted(set(default) & set(value), key=str):
            problem = _deep_name_problem(f"{key}.{sub}", default[sub], value[sub],
                                         depth + 1)
            if problem:
                return problem
    return None


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, float) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def check_overrides(claim: Claim, scale: str, overrides: Mapping) -> dict:
    """``--set`` values checked against the scale's config before any work: each key must
    exist there and each value must pass :func:`_override_problem` against its default.
    A problem is one AuditError line (the CLI exits with status 2)."""
    base = claim.scales[scale]
    unknown = sorted(str(k) for k in overrides if k not in base)
    if unknown:
        raise AuditError(f"claim {claim.id!r} has no config key(s) {', '.join(unknown)} at "
                         f"{scale!r} scale; keys: {', '.join(sorted(map(str, base)))}")
    for key, value in overrides.items():
        try:
            problem = _override_problem(str(key), base[key], value) or \
                _deep_name_problem(str(key), base[key], value)
        except RecursionError:
            problem = f"{key} is nested too deeply"
        if problem:
            raise AuditError(f"--set {problem} (claim {claim.id!r}, {scale!r} scale)")
    return dict(overrides)


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
    config.update(check_overrides(claim, scale, overrides or {}))
    return RunContext(claim_id=claim.id, scale=scale, config=config,
                      seeds=resolve_seeds(claim, seeds), device=device, data_dir=data_dir,
                      plugin_version=claim.plugin_version(), code_module=claim.code_module())


class _PlainProgress:
    """Progress for a stream that is not a terminal (a log, a pipe, CI): one plain line
    per finished unit, never the carriage-return frames of a live bar."""

    def __init__(self, total: int, desc: str, stream):
        self.total, self.desc, self.stream, self.n, self.postfix = total, desc, stream, 0, ""

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, k: int = 1) -> None:
        self.n += k
        tail = f" ({self.postfix})" if self.postfix else ""
        print(f"{self.desc}: {self.n}/{self.total} run(s) done{tail}", file=self.stream,
              flush=True)

    def close(self) -> None:
        pass


def _progress(total: int, desc: str, enabled: bool, stream=None):
    """A live tqdm bar on a terminal; on any other stream (``isatty`` false or absent) a
    :class:`_PlainProgress` that writes one line per finished unit; None when disabled."""
    if not enabled:
        return None
    stream = sys.stderr if stream is None else stream
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        tty = False
    if not tty:
        return _PlainProgress(total, desc, stream)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="run", file=stream, leave=False)


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
    """Runs units one after another in this process (the reference backend; ``audit run
    --backend local``). ``audit run`` uses :class:`audit.pool.PoolBackend` by default where
    more than one core is usable (:func:`audit.pool.choose_backend`); :func:`execute`
    called without a backend uses this one. Each unit runs with one BLAS thread and one
    torch thread, as in a pool worker (:func:`run_as_in_a_worker`)."""

    name = "local"

    def describe(self) -> str:
        return "one after another in this process (local backend)"

    def imap(self, claim: Claim, ctx: RunContext, specs: Sequence[RunSpec]):
        for spec in specs:
            yield spec, run_as_in_a_worker(claim, spec, ctx)


def run_as_in_a_worker(claim: Claim, spec: RunSpec, ctx: RunContext) -> Any:
    """``claim.run(spec, ctx)`` in this process with the threads a pool worker gives a
    unit: one BLAS thread and, on the CPU, one torch thread (both restored afterwards; a
    unit may still set its own). A unit's float sums then run in the same order whichever
    backend ran it, a plugin's that sets no threads of its own included."""
    from threadpoolctl import threadpool_limits

    before = torch_threads()
    if str(getattr(ctx, "device", "cpu")).startswith("cpu"):
        _set_torch_threads(1)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            return claim.run(spec, ctx)
    finally:
        _set_torch_threads(before)


class FunctionBackend(LocalBackend):
    """Runs units through a given function ``fn(spec) -> result`` (tests, wrappers)."""

    def __init__(self, fn: Callable[[RunSpec], Mapping]):
        self.fn = fn

    def imap(self, claim, ctx, specs):
        for spec in specs:
            yield spec, self.fn(spec)


def _keyed_context(claim: Claim, ctx: RunContext, cache: Cache
                   ) -> tuple[RunContext, str, dict]:
    """What every unit of ``claim`` runs under, for ``execute`` and ``run_units`` alike:
    ``ctx`` with the claim's code module and a plugin's own source version (both enter the
    cache's and the checkpoints' keys) and, with a cache, checkpoints beside it; the code
    version of its keys; the data files' fingerprint (hashed once per run)."""
    ctx = dataclasses.replace(ctx, plugin_version=claim.plugin_version(),
                              code_module=claim.code_module())
    if cache.enabled and ctx.checkpoint_dir is None:  # long runs checkpoint beside the cache
        ctx = dataclasses.replace(ctx, checkpoint_dir=str(cache.root / "checkpoints"))
    return ctx, ctx.cache_version(), data_identity(ctx)


def _from_cache(claim: Claim, specs: Sequence[RunSpec], ctx: RunContext, cache: Cache,
                version: str, data: dict, elsewhere: set | None = None
                ) -> tuple[dict[RunSpec, Mapping], dict[RunSpec, dict]]:
    """(cached results by spec, the key material of every spec still to compute); the
    specs whose entries were computed on another or an unknown machine are added to
    ``elsewhere`` when given."""
    results: dict[RunSpec, Mapping] = {}
    todo: dict[RunSpec, dict] = {}
    here = machine_identity(ctx.device) if elsewhere is not None else None
    for spec in specs:
        material = cache.key_material(claim.id, spec, ctx, version, data)
        hit = cache.load_entry(material)
        if hit is None:
            todo[spec] = material
        else:
            results[spec] = hit[0]
            if elsewhere is not None and hit[1] != here:
                elsewhere.add(spec)
    return results, todo


def _computed_on(backend: Any, device: str) -> dict | None:
    """The machine a backend's units are computed on: this one, or None (unknown) for
    a backend whose units run on other machines (``runs_here = False``: Ray)."""
    return machine_identity(device) if getattr(backend, "runs_here", True) else None


def _collect(claim: Claim, ctx: RunContext, *, cache: Cache, backend: Any,
             progress: bool, known: Mapping[RunSpec, Mapping] | None = None):
    """Every unit of ``claim`` under ``ctx``: from ``known`` (results this run already
    holds: an earlier look's), then the cache, the rest through ``backend``, each checked
    and cached the moment it arrives, so an interrupted sweep loses only the units still
    in flight. Returns (keyed context, code version, data fingerprint, specs, results,
    the specs computed here (with their key material), the specs read from the cache,
    torch's thread count before the units ran)."""
    ctx, version, data = _keyed_context(claim, ctx, cache)
    specs = claim.unit_specs(ctx)
    threads = torch_threads()  # read before any unit runs (units may set their own)
    held = {s: known[s] for s in specs if s in (known or {})}
    elsewhere: set = set()
    hits, todo = _from_cache(claim, [s for s in specs if s not in held], ctx, cache,
                             version, data, elsewhere)
    machine = _computed_on(backend, ctx.device)
    results = {s: held.get(s, hits.get(s)) for s in specs if s in held or s in hits}
    bar = _progress(len(todo), claim.id, progress and len(todo) > 0)
    unit_ctx = ctx  # long units: the current federated run's round beside the bar
    if bar is not None:
        unit_ctx = dataclasses.replace(ctx, on_round=_round_postfix(bar))
    try:
        for spec, result in _guarded(claim, backend.imap(claim, unit_ctx, list(todo))):
            result = checked_result(claim, spec, result)  # as the cache will give it back
            # stored at once: nothing lost if interrupted
            cache.store(todo[spec], result, machine)
            results[spec] = result
            if bar is not None:
                bar.set_postfix_str(spec.label())
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        _set_torch_threads(threads)  # a unit's own setting does not outlive the run
    # in the specs' order, whatever order the backend finished them in: an analysis that
    # sums over the results then gives the same last digits from a pool, a cluster, the
    # cache or one unit after another
    results = in_spec_order(specs, results)
    return ctx, version, data, specs, results, todo, set(hits), threads, elsewhere


def in_spec_order(specs: Sequence[RunSpec], results: Mapping[RunSpec, Mapping]
                  ) -> dict[RunSpec, Mapping]:
    """``results`` in the order of ``specs`` (those it holds; any others after them)."""
    ordered = {s: results[s] for s in specs if s in results}
    ordered.update((s, r) for s, r in results.items() if s not in ordered)
    return ordered


def execute(claim: Claim, ctx: RunContext, *, cache: Cache,
            progress: bool = True, backend: Any = None,
            runner: Callable | None = None, command: str = "",
            known: Mapping[RunSpec, Mapping] | None = None) -> ClaimResult:
    """Run every unit of ``claim`` (from the cache where possible), analyse and decide.

    ``backend`` has ``imap(claim, ctx, specs)`` yielding ``(spec, result)`` in completion
    order (:class:`LocalBackend` by default; ``audit.distributed.RayBackend`` spreads
    units over a Ray cluster). Each result is cached the moment it arrives, so an
    interrupted sweep loses only the units still in flight. ``known``: results this run
    already holds (a sequential plan's earlier looks), used before the cache and counted
    as cached here, so a run with the cache off does not compute a unit twice.
    """
    if backend is None:
        backend = FunctionBackend(runner) if runner is not None else LocalBackend()
    t0 = time.perf_counter()
    ctx, version, data, specs, results, todo, hits, threads, elsewhere = _collect(
        claim, ctx, cache=cache, backend=backend, progress=progress, known=known)
    recomputed = 0
    diverged = non_finite_units(results)
    if diverged:  # statistics on NaN decide nothing: report which runs diverged, and where
        analysis, verdict = diverged_analysis(claim.id, diverged, len(results))
    else:
        try:
            analysis = _analysed(claim, results, ctx)
        except _SHAPE_ERRORS as exc:
            odd = _odd_cached_results(  # (never a unit this run computed)
                results, hits, types=isinstance(exc, ValueError))
            if not odd and hits and not claim.origin and not isinstance(exc, ValueError):
                # no entry stands out (an arm of one unit, an exact claim): every cached
                # unit is a suspect, and computing them again is the one cure
                odd = sorted(hits, key=_spec_sort_key)
            if not odd:
                if claim.origin:  # a plugin's analyse failed on its own results
                    exc = sys.exc_info()[1]
                    raise AuditError(f"{_plugin_name(claim)}: analyse raised "
                                     f"{_exc_line(exc)}") from None
                raise
            warnings.warn(f"cache entries of the wrong shape for {len(odd)} unit(s) "
                          f"({', '.join(s.label() for s in odd[:3])}); recomputing them",
                          CacheWarning, stacklevel=2)
            for spec, result in _guarded(claim, backend.imap(claim, ctx, odd)):
                result = checked_result(claim, spec, result)
                cache.store(cache.key_material(claim.id, spec, ctx, version, data), result,
                            _computed_on(backend, ctx.device))
                results[spec] = result
            _set_torch_threads(threads)
            recomputed = len(odd)
            elsewhere -= set(odd)
            try:
                analysis = _analysed(claim, results, ctx)
            except _SHAPE_ERRORS as again:
                if not claim.origin:
                    raise
                # the suspects computed afresh and the analysis fails the same way: the
                # plugin's own analyse, named in one line as on the first try
                raise AuditError(f"{_plugin_name(claim)}: analyse raised "
                                 f"{_exc_line(again)} (also after {len(odd)} odd cached "
                                 f"unit(s) were computed again)") from None
        verdict = verdict_from_parts(claim.id, claim.combination, analysis.parts,
                                     analysis.estimates, getattr(analysis, "premise", None))
        verdict = with_stability(claim, results, ctx, verdict)
    env = environment(ctx.device, threads, _backend_text(backend))
    env["claim_code_version"] = version  # the source this claim's units ran (cache key)
    return ClaimResult(claim=claim, ctx=ctx, verdict=verdict, analysis=analysis,
                       environment=env,
                       runtime_s=time.perf_counter() - t0, computed=len(todo) + recomputed,
                       cached=len(specs) - len(todo) - recomputed, command=command,
                       cached_elsewhere=len(elsewhere))


def run_units(claim: Claim, ctx: RunContext, specs: Sequence[RunSpec], *, cache: Cache,
              backend: Any = None,
              on_result: Callable[[RunSpec, dict], None] | None = None
              ) -> tuple[dict[RunSpec, dict], int]:
    """Results of ``specs`` under ``ctx`` from the cache where possible, the rest through
    ``backend`` (one at a time here by default), each checked and cached the moment it
    arrives; ``on_result(spec, result)`` after each computed unit (it may raise to stop
    early: what was computed stays cached). Returns (results, how many were computed).
    For pilots and regime maps: units without analysis or verdict."""
    backend = backend or LocalBackend()
    ctx, version, data = _keyed_context(claim, ctx, cache)
    results, todo = _from_cache(claim, specs, ctx, cache, version, data)
    threads = torch_threads()
    try:
        for spec, result in _guarded(claim, backend.imap(claim, ctx, list(todo))):
            result = checked_result(claim, spec, result)
            cache.store(todo[spec], result,  # nothing lost when interrupted
                        _computed_on(backend, ctx.device))
            results[spec] = result
            if on_result is not None:
                on_result(spec, result)
    finally:
        _set_torch_threads(threads)  # a unit's own setting does not outlive the call
    return in_spec_order(specs, results), len(todo)


def _plugin_name(claim: Claim) -> str:
    return f"claim {claim.id!r}" + (f" (plugin {claim.origin})" if claim.origin else "")


def _guarded(claim: Claim, units):
    """The ``(spec, result)`` pairs of a backend; a plugin's unit that raises is one
    AuditError naming the plugin and what it raised (a built-in claim's exception stays
    a traceback: a bug of ours to see whole). ``SystemExit`` from a plugin is caught too:
    it must not end the run silently."""
    if not claim.origin:
        yield from units
        return
    from audit.fl.data import PartitionError

    try:
        yield from units
    except PartitionError as exc:  # the data cannot give the plugin's split: say whose
        raise PartitionError(f"{_plugin_name(claim)}: {exc}") from None
    except (AuditError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as exc:
        raise AuditError(f"{_plugin_name(claim)}: a unit raised {_exc_line(exc)}") from None


def _exc_line(exc: BaseException) -> str:
    from audit.safeio import term_text

    text = " ".join(str(exc).split())
    text = term_text(text if len(text) <= 160 else text[:157] + "...")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: what an analysis raises on a cached result of the wrong shape (a missing key, a list
#: where a mapping was stored): :func:`execute` recomputes the cached units then. A
#: ValueError (a string where a number was stored) recomputes only units whose values are
#: provably of another type than their arm's others: analyses raise it for real problems
#: too, and recomputing a whole cached claim before the same error costs hours
_SHAPE_ERRORS = (KeyError, TypeError, IndexError, ValueError)


def _analysed(claim: Claim, results, ctx):
    """``claim.analyse(results, ctx)``, checked: it must return an
    :class:`audit.claims.Analysis`. A plugin's other exceptions are one AuditError naming
    it (a KeyError, TypeError, IndexError or ValueError passes through unchanged, for the
    cache's wrong-shape recovery in :func:`execute`, and is named by the caller's
    caller)."""
    from audit.claims import Analysis

    try:
        analysis = claim.analyse(results, ctx)
    except (AuditError, KeyboardInterrupt) + _SHAPE_ERRORS:
        raise
    except (Exception, SystemExit) as exc:
        if not claim.origin:
            raise
        raise AuditError(f"{_plugin_name(claim)}: analyse raised {_exc_line(exc)}") \
            from None
    if not isinstance(analysis, Analysis):
        raise AuditError(f"{_plugin_name(claim)}: analyse returned a "
                         f"{type(analysis).__name__}, not an audit.claims.Analysis")
    return analysis


def _decided(claim: Claim, results, ctx) -> tuple[tuple, Any]:
    """``claim.decided(results, ctx)``, checked: ``decide`` must return a pair (parts,
    premise) of :class:`audit.verdict.Part` objects and a Premise or None. A plugin's
    exception, or a malformed pair, is one AuditError naming it."""
    from audit.verdict import Part, Premise

    try:
        out = claim.decided(results, ctx)
    except (AuditError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as exc:
        if not claim.origin:
            raise
        raise AuditError(f"{_plugin_name(claim)}: decide raised {_exc_line(exc)}") from None
    parts, premise = out
    if not all(isinstance(p, Part) for p in parts) or not (
            premise is None or isinstance(premise, Premise)):
        raise AuditError(f"{_plugin_name(claim)}: decide must return (parts, premise): "
                         f"audit.verdict.Part objects and a Premise or None")
    return parts, premise


def _interim_verdict(claim: Claim, results, ctx) -> Verdict | None:
    """An interim look's verdict from the claim's decisions alone (``Claim.decide``: no
    estimates, tables or figures are built for a look that does not end the plan, and no
    flip distance is sought); None where they cannot give it: a claim whose ``decide`` was
    not made by :func:`audit.kit.staged` (only there are its decisions those of
    ``analyse`` by construction; a look that goes on is never checked against an
    analysis), a unit that diverged, or decisions that raise. The look is then analysed in full,
    which recovers from odd cache entries or reports the error as a run would."""
    from audit import stats

    if not getattr(claim.decide, "staged", False) or non_finite_units(results):
        return None  # a decide not built with its analyse (kit.staged) is not trusted alone
    try:
        with stats.without_flip():
            parts, premise = _decided(claim, results, ctx)
    except Exception:  # the full analysis of this look meets it again and says what it is
        return None
    return verdict_from_parts(claim.id, claim.combination, parts, (), premise)


def checked_result(claim: Claim, spec: RunSpec, result: Any) -> dict:
    """A unit's result as the cache stores and gives it back: an object whose JSON round
    trip is itself. Numpy values become numbers and lists, tuples lists; a result that is
    not an object, holds a value JSON cannot hold (a set, an object) or a key that is not
    a string (``0``: a cached rerun would see ``"0"``) is one AuditError naming the claim
    and the unit. A fresh result and a cached one are then the same to ``analyse``."""
    where = f"{_plugin_name(claim)}: unit {spec.label()}"
    if not isinstance(result, Mapping):
        raise AuditError(f"{where} returned a {type(result).__name__}, not an object of "
                         f"results")
    bad = _non_string_key(result)
    if bad is not _NO_KEY:
        raise AuditError(f"{where} returned a result with key {bad!r}, which is not a "
                         f"string (JSON, and so the cache, would turn it into a string)")
    try:
        text = json.dumps(result, default=_json_default)
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise AuditError(f"{where} returned a result the cache cannot hold: "
                         f"{_exc_line(exc)}") from None


_NO_KEY = object()


def _non_string_key(obj: Any) -> Any:
    """The first object key in ``obj`` (at any depth) that is not a string, else
    ``_NO_KEY``."""
    stack, seen = [obj], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > 1_000_000:
            return _NO_KEY  # json.dumps below bounds the rest
        if isinstance(node, Mapping):
            for k, v in node.items():
                if not isinstance(k, str):
                    return k
                stack.append(v)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return _NO_KEY


def _backend_text(backend: Any) -> str:
    describe = getattr(backend, "describe", None)
    return describe() if callable(describe) else str(getattr(backend, "name", "local"))


def _set_torch_threads(n: int) -> None:
    if n > 0:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def _odd_cached_results(results: Mapping[RunSpec, Mapping],
                        cached: set[RunSpec], types: bool = False) -> list[RunSpec]:
    """Cached units whose result has other top-level keys than most units of the same arm
    and setting (a well-formed entry of the wrong shape, e.g. written by hand): the
    suspects when an analysis fails with a KeyError or TypeError. ``types``: compare the
    kinds of the values too, at every depth (:func:`_skeleton`: a string where the
    others hold a number), the suspects of a ValueError."""
    from collections import Counter

    def shape(result):
        return _skeleton(result) if types else frozenset(result)

    groups: dict[tuple[str, str], list[RunSpec]] = {}
    for spec in results:
        groups.setdefault((spec.arm, spec.setting), []).append(spec)
    odd = []
    for members in groups.values():
        shapes = Counter(shape(results[s]) for s in members)
        (common, count), = shapes.most_common(1)
        if len(members) < 2 or count * 2 <= len(members):
            continue
        odd += [s for s in members if s in cached and shape(results[s]) != common]
    return sorted(odd, key=_spec_sort_key)


def _skeleton(value: Any, depth: int = 0) -> Any:
    """The kinds in a result, without its values: a mapping's keys with their kinds, the
    set of kinds in a list, "number" for ints and floats alike (a float that happens to
    be whole is stored as a float), "bool", "str", "none". Six levels deep at most."""
    if depth > 6:
        return "deep"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return frozenset((str(k), _skeleton(v, depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ("list", frozenset(_skeleton(v, depth + 1) for v in value))
    return type(value).__name__


def _spec_sort_key(s: RunSpec) -> tuple:
    return (s.setting, s.arm, -1 if s.seed is None else s.seed)


# ------------------------------------------------------------------------- divergence
def _non_finite_paths(obj: Any, path: str = "", index: int | None = None):
    """Yield ``(path, index)`` for each NaN in a result: ``path`` like
    ``per_round[3].norm``, ``index`` the first list index on that path (the round, in a
    per-round list) or None. Infinities are not yielded: alone they can be a value a
    result records by definition (FedTLU's score of a constant update is +inf), while
    diverged training ends in NaN (inf - inf, 0 * inf)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, numbers.Real):
        if math.isnan(float(obj)):
            yield (path or "value"), index
        return
    if isinstance(obj, Mapping):
        for k in obj:
            yield from _non_finite_paths(obj[k], f"{path}.{k}" if path else str(k), index)
        return
    if hasattr(obj, "tolist") and not isinstance(obj, (list, tuple)):
        obj = obj.tolist()  # numpy arrays and scalars
        if not isinstance(obj, (list, tuple)):
            yield from _non_finite_paths(obj, path, index)
            return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _non_finite_paths(v, f"{path}[{i}]", i if index is None else index)


def _first_non_finite(result: Any) -> str | None:
    """Where a result first holds NaN: the path with the smallest per-round index
    (``index 3 (`acc[3]`)``), else the first NaN scalar's key; None if there is none."""
    found = list(_non_finite_paths(result))
    if not found:
        return None
    indexed = [(i, n, p) for n, (p, i) in enumerate(found) if i is not None]
    if indexed:
        i, _, p = min(indexed)
        return f"index {i} (`{p}`)"
    return f"`{found[0][0]}`"


def non_finite_units(results: Mapping[RunSpec, Any]) -> dict[RunSpec, str]:
    """Each seeded unit whose result holds a NaN (its training diverged), with where it
    first is: ``index 3 (`acc[3]`)`` (index 3 of the per-round list ``acc``) or a key.

    Only seeded units (stochastic training runs) are scanned: an exact unit (seed None)
    computes a quantity whose NaN or inf can be the finding itself (FedTLU's score is
    undefined, NaN, at a zero update; Eq. 4 of FLAYER is unbounded)."""
    out = {}
    for spec, result in results.items():
        if spec.seed is None:
            continue
        try:
            where = _first_non_finite(result)
        except RecursionError:
            where = "a too deeply nested value"
        if where:
            out[spec] = where
    return out


DIVERGED_RULE = ("A seeded run whose result holds a NaN (training diverged) decides "
                 "nothing; the claim's statistics are not computed, the verdict is "
                 "INCONCLUSIVE, and the diverged arms and seeds are listed with the "
                 "earliest per-round index (or key) holding a NaN.")


def diverged_analysis(claim_id: str, diverged: Mapping[RunSpec, str], n_units: int):
    """The Analysis and the INCONCLUSIVE Verdict of a run in which units diverged."""
    from audit.claims import Analysis
    from audit.verdict import DIVERGED_PART, Combination, Estimate, Part

    by_arm: dict[str, list[str]] = {}
    for spec in sorted(diverged, key=lambda s: (s.setting, s.arm,
                                                -1 if s.seed is None else s.seed)):
        arm = f"{spec.setting}/{spec.arm}" if spec.setting else spec.arm
        who = "the run" if spec.seed is None else f"seed {spec.seed}"
        by_arm.setdefault(arm, []).append(f"{who} from {diverged[spec]}")
    listed = "; ".join(f"arm `{arm}`: {', '.join(items)}" for arm, items in by_arm.items())
    reason = (f"{len(diverged)} of {n_units} unit(s) produced NaN (training diverged): "
              f"{listed}")
    needs = ("settings under which training stays finite (e.g. a smaller learning rate; "
             "the scale's defaults)")
    part = Part(DIVERGED_PART, Outcome.INCONCLUSIVE, DIVERGED_RULE, reason, needs)
    estimates = (Estimate("diverged_units", float(len(diverged)), n=n_units, method="count",
                          unit="units", description="units whose result holds a NaN"),)
    analysis = Analysis(estimates=estimates, parts=(part,),
                        notes=("No statistic was computed: " + reason + ".",))
    combination = Combination("A run with diverged units is INCONCLUSIVE: " + DIVERGED_RULE,
                              lambda parts: Outcome.INCONCLUSIVE)
    return analysis, verdict_from_parts(claim_id, combination, (part,), estimates)


def regenerate_command(ctx: RunContext, plan=None) -> str:
    cmd = f"audit run {ctx.claim_id} --scale {ctx.scale}"
    if plan is not None:
        cmd += f" --until-decided --max-seeds {plan.cap}"
        if plan.spending != "pocock":
            cmd += f" --spending {plan.spending}"
    elif ctx.seeds:
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


# -------------------------------------------------------------------------- stability
def _decisive(verdict: Verdict, combination) -> list:
    """The parts the claim's verdict rests on: those entering it that agree with it (all
    entering parts when the verdict is INCONCLUSIVE)."""
    entering = combination.entering(verdict.parts) if combination is not None else list(
        verdict.parts)
    if verdict.verdict == Outcome.INCONCLUSIVE:
        return entering
    if verdict.verdict == Outcome.SPLIT:  # questions went both ways: each decided part
        return [p for p in entering if p.verdict != Outcome.INCONCLUSIVE]
    return [p for p in entering if p.verdict == verdict.verdict]


def _question_stability(asked: Mapping[str, str], q_loo: Mapping[str, Mapping],
                        q_held: Mapping[str, Mapping] | None = None) -> dict:
    """Per question: how many leave-one-seed-out subsets give its full-data word, and
    whether it is fragile (decided, and one subset disagrees); {} without subsets.
    ``q_held``: per question, {seed: why the premise gate held that subset's answer}
    (``Part.held``), kept as ``held`` beside the words (a word is a word alone)."""
    out = {}
    for qid, word in asked.items():
        subsets = dict(q_loo.get(qid) or {})
        if not subsets:
            continue
        agree = sum(w == word for w in subsets.values())
        out[qid] = {"loo_agree": agree, "loo_total": len(subsets), "loo": subsets,
                    "held": dict((q_held or {}).get(qid) or {}),
                    "fragile": word in ("CONFIRMED", "REFUTED") and agree < len(subsets)}
    return out


def _premise_stability(premise: Any, subsets: Mapping[str, str]) -> dict | None:
    """The premise's status in every leave-one-seed-out subset: ``{status, loo_agree,
    loo_total, loo: {seed: status}, fragile}``, fragile where it is decided (reproduced or
    not reproduced) and one left-out seed changes it; None without a premise or subsets.
    A fragile premise is the paper's own effect resting on one seed: the parts it gates
    are what it moves, and their questions' own subsets say by how much."""
    if premise is None or not subsets:
        return None
    agree = sum(s == premise.status for s in subsets.values())
    return {"status": premise.status, "loo_agree": agree, "loo_total": len(subsets),
            "loo": dict(subsets),
            "fragile": premise.status != "undecided" and agree < len(subsets)}


def with_stability(claim: Claim, results: Mapping[RunSpec, Mapping], ctx: RunContext,
                   verdict: Verdict) -> Verdict:
    """Attach how far the verdict is from flipping (STATISTICS.md): the verdicts of the
    leave-one-seed-out re-decisions ("5 of 5 subsets agree"; ``Claim.decided``: the
    claim's ``decide`` where it has one, so no report is rebuilt per seed), and the
    smallest change of
    one seed's metric that flips a decisive part's test, in the metric's units, with the
    metric's resolution. A decided verdict whose flip distance is within three steps of
    the resolution, or that a single left-out seed overturns, is fragile.

    Each question of the claim (``audit.questions.answers``, as the report answers them)
    is answered again from each subset's parts: ``stability["questions"]`` holds, per
    question that carries a verdict (no measurement), ``{loo_agree, loo_total, loo:
    {seed: verdict}, held: {seed: why the premise gate held it}, fragile}``; a decided
    question that one left-out seed overturns is fragile, and so is the claim's word (its
    own ``loo`` counts the claim's word alone). A claim with a premise gets
    ``stability["premise"]`` (:func:`_premise_stability`): its status in every subset."""
    from audit import questions, stats

    seeds = tuple(ctx.seeds)
    loo: dict[str, str] = {}
    # the questions' full-data words, answered as the report answers them (no analysis:
    # its settings and caveats change a question's rows and texts, never its word)
    try:
        asked = {a["id"]: str(a["verdict"]) for a in questions.answers(
            claim, verdict.parts, None, ctx.scale) if a.get("kind") != "measurement"}
    except (KeyError, ValueError):  # questions its parts cannot answer: none checked
        asked = {}
    q_loo: dict[str, dict[str, str]] = {qid: {} for qid in asked}
    q_held: dict[str, dict[str, str]] = {qid: {} for qid in asked}
    premise_loo: dict[str, str] = {}
    if claim.decide is not None and claim.stochastic and len(seeds) >= 3:
        # the claim's decide must decide as its analyse did, or the stability check below
        # would describe another verdict: checked on all the seeds of every analysis
        # that gets a stability check (every run, and every look of a sequential one)
        with stats.without_flip():
            parts, premise = _decided(claim, results, ctx)

        def said(ps, pr):  # all a verdict and a sequential stop read of the parts
            return ([(p.id, p.verdict.value, p.kind, bool(p.gated), p.alpha_share,
                      p.reachable) for p in ps], None if pr is None else pr.status)

        if said(parts, premise) != said(verdict.parts, verdict.premise):
            raise AuditError(f"{claim.id}: its decide gives {said(parts, premise)}, its "
                             f"analyse {said(verdict.parts, verdict.premise)}")
    if claim.stochastic and len(seeds) >= 3:
        with stats.without_flip():
            for s in seeds:
                keep = tuple(x for x in seeds if x != s)
                sub_ctx = dataclasses.replace(ctx, seeds=keep)
                sub = {spec: r for spec, r in results.items() if spec.seed != s}
                try:  # the decisions alone: no estimates, tables or figures are built
                    parts, premise = _decided(claim, sub, sub_ctx)
                    v = verdict_from_parts(claim.id, claim.combination, parts, (), premise)
                    loo[str(s)] = v.verdict.value
                except (ValueError, KeyError, ZeroDivisionError, IndexError) as exc:
                    loo[str(s)] = f"error: {type(exc).__name__}"
                    for qid in q_loo:
                        q_loo[qid][str(s)] = loo[str(s)]
                    if verdict.premise is not None:
                        premise_loo[str(s)] = loo[str(s)]
                    continue
                if verdict.premise is not None:
                    premise_loo[str(s)] = premise.status if premise is not None else \
                        "error: no premise"
                # why the premise gate held a subset's answer, kept beside its word: a
                # left-out seed that leaves the premise unshown is another story than
                # one that moves the part's test
                held = {p.id: p.held for p in v.parts if p.held}
                try:  # each question answered from this subset's parts
                    answered = questions.answers(claim, v.parts, None, sub_ctx.scale)
                except (KeyError, ValueError) as exc:
                    answered = []
                    missing = f"error: {type(exc).__name__}"
                else:
                    missing = "error: not answered"
                sub_words = {a["id"]: str(a["verdict"]) for a in answered}
                for a in answered:
                    why = next((held[pid] for pid in a.get("parts", ())
                                if a["verdict"] == "INCONCLUSIVE" and pid in held), "")
                    if why and a["id"] in q_held:
                        q_held[a["id"]][str(s)] = why
                for qid in q_loo:
                    q_loo[qid][str(s)] = sub_words.get(qid, missing)
    agree = sum(v == verdict.verdict.value for v in loo.values())
    decisive = [p for p in _decisive(verdict, claim.combination) if p.flip is not None]
    flip_part = min(decisive, key=lambda p: p.flip, default=None)
    fragile_parts = [p.id for p in _decisive(verdict, claim.combination) if p.fragile]
    decided = verdict.verdict != Outcome.INCONCLUSIVE
    by_question = _question_stability(asked, q_loo, q_held)
    # a decided word is fragile where a part it rests on is, where one left-out seed
    # changes it, or where one changes a decided question it summarises
    fragile = decided and (bool(fragile_parts) or (bool(loo) and agree < len(loo))
                           or any(q["fragile"] for q in by_question.values()))
    stability = {
        "loo": loo, "loo_agree": agree, "loo_total": len(loo),
        "flip": flip_part.flip if flip_part else None,
        "flip_part": flip_part.id if flip_part else None,
        "unit": flip_part.unit if flip_part else "",
        "resolution": flip_part.resolution if flip_part else None,
        "fragile_parts": fragile_parts,
        "fragile": bool(fragile),
        "questions": by_question,
        **({"premise": p_stab} if (p_stab := _premise_stability(verdict.premise,
                                                                 premise_loo)) else {}),
    }
    return dataclasses.replace(verdict, stability=stability)


# ------------------------------------------------------------------------- sequential
#: why a look stopped the plan before the cap
STOP_DECIDED = "decided"
STOP_PREMISE = "premise not reproduced"


def stop_reason(claim: Claim, verdict: Verdict) -> str | None:
    """Whether a look's verdict ends the sequential plan: ``"decided"`` when every part
    entering the claim's verdict is decided; ``"premise not reproduced"`` when the
    premise is decided not reproduced and every entering part still undecided is gated by
    it (none of them can be decided while the premise stands); None to go on. A futility
    stop keeps that look's verdict: INCONCLUSIVE, unless an entering part that is not
    gated is already decided and settles the combination (under ``all_of``, one REFUTED
    part ends the claim REFUTED)."""
    entering = claim.combination.entering(verdict.parts)
    # a derivation's verdict is a proof: more seeds cannot decide it, so it never holds
    # the plan open
    open_ = [p for p in entering if p.verdict == Outcome.INCONCLUSIVE
             and p.kind != "derivation"]
    if not open_:
        return STOP_DECIDED
    premise = verdict.premise
    if premise is not None and premise.status == "not reproduced" and all(
            p.gated for p in open_):
        return STOP_PREMISE
    return None


def execute_sequential(claim: Claim, ctx: RunContext, plan, *, cache: Cache,
                       progress: bool = True, backend: Any = None,
                       runner: Callable | None = None, command: str = "",
                       on_look: Callable | None = None) -> ClaimResult:
    """Run ``claim`` over the looks of ``plan`` (``audit.sequential.Plan``): at look k the
    first ``plan.looks[k]`` seeds of ``ctx.seeds`` (or 0..cap-1) are analysed with every
    rule's alpha times the look's share; stop at the first look where every part that
    enters the verdict is decided, or at the cap. Units finished at an earlier look are
    held by this run (and cached). The result is the stopping look's, with every look
    recorded. A look before the cap runs the claim's decisions alone where it has a
    ``decide`` (no estimates, tables or figures); only the look that ends the plan is
    analysed and reported in full, and its ``decide`` is checked against that analysis.

    A look also stops the plan when the paper's own effect (the premise) is decided *not
    reproduced* there and every entering part still undecided is gated by it
    (``Part.gated``): a futility stop. The premise's three-way rule ran at the look's
    share of alpha like every other rule, so this is one more decision covered by the
    plan's spending (the union bound holds for any stopping rule); it can only end a run
    INCONCLUSIVE, never add a CONFIRMED or REFUTED (``audit.calibration.futility_rates``
    measures both error rates)."""
    pool = tuple(ctx.seeds) if len(ctx.seeds) >= plan.cap else tuple(range(plan.cap))
    if backend is None:
        backend = FunctionBackend(runner) if runner is not None else LocalBackend()
    looks: list[dict] = []
    t0 = time.perf_counter()
    computed = 0
    held: dict[RunSpec, Mapping] = {}  # every unit this run has, look by look
    res = None
    for k, (n, share) in enumerate(zip(plan.looks, plan.fractions())):
        look_ctx = dataclasses.replace(ctx, seeds=pool[:n], alpha_fraction=float(share))
        verdict = None
        if n < plan.cap:  # an interim look: the decisions alone, where the claim has them
            keyed, _, _, _, results, todo, _, _, _ = _collect(
                claim, look_ctx, cache=cache, backend=backend, progress=progress, known=held)
            computed += len(todo)
            # held: what this run computed; a cached unit is read from the cache again at
            # the next look (so an odd entry, once recomputed there, is not read twice)
            held.update({spec: results[spec] for spec in todo})
            verdict = _interim_verdict(claim, results, keyed)
        stop = None if verdict is None else stop_reason(claim, verdict)
        if verdict is None or stop is not None or n == plan.cap:
            # the look that ends the plan (or one the decisions alone cannot settle):
            # analysed and reported in full, from the units this run already holds
            res = execute(claim, look_ctx, cache=cache, progress=progress, backend=backend,
                          command=command, known=held)
            computed += res.computed
            verdict = res.verdict
            stop = stop_reason(claim, verdict)
        premise = verdict.premise
        looks.append({"look": k + 1, "n": n, "seeds": [int(s) for s in pool[:n]],
                      "alpha_fraction": float(share), "verdict": verdict.verdict.value,
                      "parts": {p.id: p.verdict.value for p in verdict.parts},
                      "premise": premise.status if premise is not None else None,
                      "decided": stop is not None, "stop_reason": stop or (
                          "cap" if n == plan.cap else None),
                      "stopped": bool(stop is not None or n == plan.cap)})
        if on_look is not None:
            on_look(looks[-1])
        if stop is not None or n == plan.cap:
            break
    verdict = dataclasses.replace(res.verdict, looks=tuple(looks))
    # cached: the stopping look's units that this run did not compute (an earlier run's);
    # a unit computed at look 1 and read again at look 2 is counted once, as computed
    cached = max(0, res.computed + res.cached - computed)
    return dataclasses.replace(res, verdict=verdict, runtime_s=time.perf_counter() - t0,
                               computed=computed, cached=cached, plan=plan)
