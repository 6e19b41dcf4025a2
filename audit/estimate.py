"""How long would a claim take at a scale, on this machine? Measure a little, extrapolate.

``estimate(claim, scale, ...)`` runs one discarded warm-up unit, then one unit of each
measured arm twice, with the config's round count overridden to ``r1`` and then ``r2``
rounds (no cache, no checkpoints), and fits wall time = setup + rounds x per_round.
By default (:func:`measured_rounds`) ``r1`` and ``r2`` grow with the scale's round count
R, up to 3 and 10 rounds: timing only rounds 1 and 2 under-predicted 60-round LIPS units
by about x2 (0.06 s a round against about 0.11 s measured over 10 to 30 rounds; the
difference of two sub-second timings is mostly noise). The whole claim is then estimated
as the sum over its units (every arm x seed of the scale) of setup + R x per_round, with
R the scale's own round count. Arms not measured (``arms=...``) take the mean fit of the
measured ones, and the output says so. A unit whose config has no round count (exact
claims) is timed once, as is; a unit that trains no rounds (an exact arm) fits a
per-round time near zero.

It is an estimate and is labelled one: per-round time varies with client sampling,
evaluation rounds and, on a GPU, kernel selection in the first rounds.
The ``audit estimate`` command prints the result as a table and, last, one JSON object.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Mapping, Optional, Sequence

from .claims import Claim, RunContext, RunSpec
from .errors import AuditError
from .runner import environment, make_context

__all__ = ["estimate", "measured_rounds", "rounds_key"]

#: the most rounds the default estimate times per unit (its second run)
MAX_MEASURED_ROUNDS = 10


def measured_rounds(R: int | None) -> tuple[int, int]:
    """The two round counts the estimate times by default for a run of ``R`` rounds:
    about R/6 (at most 10) and a third of that (at least 1): 3 and 10 for 60 rounds or
    more, 2 and 6 for 40, 1 and 5 for 30, 1 and 2 for a handful."""
    if not R or R < 3:
        return (1, 2)
    r2 = min(max(2, R // 6), MAX_MEASURED_ROUNDS, R)
    r1 = max(1, min(r2 // 3, r2 - 1))
    return (r1, r2)


def rounds_key(config: Mapping[str, Any]) -> Optional[tuple[str, ...]]:
    """Where the round count lives in a config: ("rounds",), ("sim", "rounds"), or None."""
    if isinstance(config.get("rounds"), int):
        return ("rounds",)
    for k, v in config.items():
        if isinstance(v, Mapping) and isinstance(v.get("rounds"), int):
            return (k, "rounds")
    return None


def _with_rounds(config: Mapping, key: tuple[str, ...], rounds: int) -> dict:
    if len(key) == 1:
        return {key[0]: rounds}
    return {key[0]: {**config[key[0]], key[1]: rounds}}


def _time_unit(claim: Claim, ctx: RunContext, spec: RunSpec) -> float:
    t = time.perf_counter()
    claim.run(spec, ctx)
    if ctx.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return time.perf_counter() - t


def estimate(claim: Claim, scale: str, seeds=None, device: str = "cpu",
             data_dir: str | None = None, overrides: Mapping | None = None,
             rounds: Sequence[int] | None = None, arms: Sequence[str] | None = None,
             progress=print) -> dict:
    """Measure and extrapolate (see the module docstring). Returns a JSON-able dict.
    ``rounds``: the two round counts timed (None: :func:`measured_rounds` of the
    scale's round count)."""
    base = make_context(claim, scale, seeds, device, data_dir, overrides)
    specs = claim.unit_specs(base)
    known = sorted({s.arm for s in specs})
    measure = list(arms) if arms else known
    bad = [a for a in measure if a not in known]
    if bad:
        raise AuditError(f"unknown arm(s) {', '.join(bad)} for {claim.id} at {scale}; "
                         f"arms: {', '.join(known)}")
    key = rounds_key(base.config)
    R = None if key is None else (base.config[key[0]] if len(key) == 1
                                  else base.config[key[0]][key[1]])
    r1, r2 = measured_rounds(R) if rounds is None else (int(r) for r in rounds)
    if not 0 < r1 < r2:
        raise AuditError(f"--rounds needs two counts 0 < r1 < r2, got {r1},{r2}")
    fits: dict[str, dict] = {}

    def with_rounds(r: int) -> RunContext:  # the scale's context at r rounds
        if key is None:
            return base
        return make_context(claim, scale, seeds, device, data_dir,
                            {**(overrides or {}), **_with_rounds(base.config, key, r)})

    # a discarded first run: imports, data loading caches, CUDA start-up
    warmup_s = _time_unit(claim, with_rounds(r1), next(s for s in specs if s.arm == measure[0]))
    for arm in measure:
        spec = next(s for s in specs if s.arm == arm)
        if key is None:
            t = _time_unit(claim, base, spec)
            fits[arm] = {"setup_s": t, "per_round_s": 0.0, "runs_s": [t]}
        else:
            t1 = _time_unit(claim, with_rounds(r1), spec)
            t2 = _time_unit(claim, with_rounds(r2), spec)
            per = max(0.0, (t2 - t1) / (r2 - r1))
            fits[arm] = {"setup_s": max(0.0, t1 - r1 * per), "per_round_s": per,
                         "runs_s": [t1, t2]}
        progress(f"{claim.id} {arm}: setup {fits[arm]['setup_s']:.1f} s, "
                 f"{fits[arm]['per_round_s']:.2f} s per round")
    mean = {k: statistics.fmean(f[k] for f in fits.values()) for k in ("setup_s", "per_round_s")}
    total, per_arm = 0.0, {}
    for s in specs:
        f = fits.get(s.arm, mean)
        sec = f["setup_s"] + (R or 0) * f["per_round_s"]
        total += sec
        per_arm[s.arm] = per_arm.get(s.arm, 0.0) + sec
    env = environment(device)
    return {"claim": claim.id, "scale": scale, "device": env["device"],
            "seeds": list(base.seeds), "units": len(specs), "rounds": R,
            "measured_rounds": [r1, r2], "measured_arms": measure,
            "extrapolated_arms": [a for a in known if a not in fits], "fits": fits,
            "warmup_s": warmup_s,
            "per_arm_s": per_arm, "total_s": total, "total_h": total / 3600,
            "label": "estimate: measured per-round times, extrapolated",
            "torch": env["torch"], "commit": env["commit"], "overrides": dict(overrides or {})}



# ------------------------------------------------------------------------ ETA of a run
def _stored_path(cache_root, claim: Claim, ctx: RunContext):
    import hashlib
    import json
    from pathlib import Path

    key = json.dumps({"claim": claim.id, "scale": ctx.scale, "config": dict(ctx.config),
                      "device": ctx.device, "version": ctx.cache_version()},
                     sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(cache_root) / "estimates" / f"{claim.id}-{ctx.scale}-{digest}.json"


def seconds_per_seed(claim: Claim, ctx: RunContext, cache_root=None,
                     progress=print) -> float:
    """Estimated wall seconds per seed of ``claim`` in ``ctx`` on this machine (for an
    exact claim: of the whole run). Read from an estimate stored under the run cache for
    this claim, scale, config, device and code version, else measured with
    :func:`estimate` (a few short units) and stored there. An input the run could not
    use either (a missing dataset) is the AuditError the run would raise."""
    import json

    import math
    import sys

    from .errors import AuditError
    from .safeio import read_regular

    path = _stored_path(cache_root, claim, ctx) if cache_root is not None else None
    if path is not None and (path.is_symlink() or path.parent.is_symlink()):
        path = None  # as the run cache: a link is never followed, read or written through
    if path is not None and path.is_file():
        try:
            est = json.loads(read_regular(path, "stored estimate").decode("utf-8"))
            value = est["per_seed_s"]
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value) and value >= 0:
                return float(value)
        except (AuditError, OSError, ValueError, KeyError, TypeError, RecursionError):
            pass  # a bad stored estimate is measured again
    overrides = {k: v for k, v in ctx.config.items() if claim.scales[ctx.scale].get(k) != v}
    # an AuditError (a missing dataset, a bad config) is raised: it is the run's error too,
    # found before anything ran
    est = estimate(claim, ctx.scale, list(ctx.seeds) or None, ctx.device, ctx.data_dir,
                   overrides, progress=lambda *_: None)
    n = max(1, len(ctx.seeds))
    per_seed = est["total_s"] / n
    if path is not None:
        from .safeio import atomic_write

        try:  # a store that fails (a folder in the way, a read-only cache) only warns
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps({"per_seed_s": per_seed, "estimate": est},
                                          sort_keys=True, default=str))
        except (AuditError, OSError) as exc:
            print(f"audit: warning: the estimate was not stored ({exc})", file=sys.stderr)
            path = None
    progress(f"{claim.id}: estimate {per_seed:.1f} s per seed at {ctx.scale} "
             f"(audit estimate, stored in {path.parent if path else 'memory'})")
    return per_seed


def eta_line(remaining: Sequence[tuple[str, float, int, int]], elapsed_s: float = 0.0,
             ratio: float = 1.0) -> str:
    """One line: what is left, from (claim id, seconds per seed, seeds at the first look,
    seeds at the cap) per claim still to run, scaled by ``ratio`` (measured / estimated so
    far in this run)."""
    lo = sum(s * n1 for _, s, n1, _ in remaining) * ratio
    hi = sum(s * cap for _, s, _, cap in remaining) * ratio
    span = (f"{lo / 60:.0f} min" if abs(hi - lo) < 1 else
            f"{lo / 60:.0f} min if every claim is decided at its first look, up to "
            f"{hi / 60:.0f} min at the cap")
    done = f"{elapsed_s / 60:.0f} min elapsed; " if elapsed_s else ""
    return (f"ETA: {done}{span} for {len(remaining)} claim(s) left "
            f"(audit estimate{'' if ratio == 1.0 else f', x{ratio:.2f} as measured so far'})")
