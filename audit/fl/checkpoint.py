"""Checkpoint files of the round loop: atomic writes (:func:`save_atomic`) and, before a
run resumes, one check that a saved run state belongs to this run (same config, same
algorithm) and can be restored into it (:func:`resumable`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

import torch

from .config import FLConfig

__all__ = ["resumable", "save_atomic"]


def save_atomic(path: str, payload: dict) -> bool:
    """``torch.save`` to a fresh temporary file in the target's folder (created
    exclusively, so a link planted at a predictable name is never written through), then
    rename: a kill mid-write keeps the old file. A checkpoint only saves time, so a write
    that cannot be made (a link at ``path``, a full or read-only disk) is one warning, the
    run goes on, and no partial ``.tmp`` is left behind. True when written."""
    import os
    import tempfile
    import warnings

    tmp = None
    try:
        if os.path.islink(path):
            raise OSError(f"{path} is a symlink")
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                   suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
        os.replace(tmp, path)  # atomic: a kill during the write keeps the previous one
        tmp = None
        return True
    except (OSError, RuntimeError) as exc:  # torch reports a full disk as RuntimeError
        text = " ".join(str(getattr(exc, "strerror", None) or exc).split())[:120]
        warnings.warn(f"cannot write checkpoint {path} ({text}); the run goes on without "
                      f"it", stacklevel=2)
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


#: what a saved run state holds, and the type of each entry
_CHECKPOINT_SHAPE = {"round": int, "global_state": dict, "client_states": (list, dict),
                     "rec": dict, "sample_rng": dict, "server_rng": dict,
                     "torch_rng": torch.Tensor, "cuda_rng": torch.Tensor,
                     "algorithm_state": dict}


def _load_checkpoint(path: str, cfg: FLConfig, alg_name: str) -> Optional[dict]:
    import os
    import stat

    if not path or not os.path.lexists(path):
        return None
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if not stat.S_ISREG(mode):  # a link, folder or FIFO (torch.load would wait forever)
        import warnings

        warnings.warn(f"ignoring checkpoint {path}: not a regular file", stacklevel=4)
        return None
    try:
        payload = torch.load(path, map_location=cfg.device, weights_only=True)
    except Exception as exc:  # a corrupt checkpoint is reported and ignored
        import warnings

        warnings.warn(f"ignoring unreadable checkpoint {path} ({exc})", stacklevel=4)
        return None
    if not isinstance(payload, dict):
        import warnings

        warnings.warn(f"ignoring checkpoint {path}: not a saved run state", stacklevel=4)
        return None
    if payload.get("config") != asdict(cfg) or payload.get("algorithm") != alg_name:
        return None  # written by another run: start afresh
    bad = [k for k, t in _CHECKPOINT_SHAPE.items()
           if not isinstance(payload.get(k), t) or isinstance(payload.get(k), bool)]
    if not bad and not 1 <= payload["round"] < cfg.rounds:
        bad = ["round"]
    if not bad and not all(isinstance(v, list) for v in payload["rec"].values()):
        bad = ["rec"]
    if not bad and not isinstance(payload.get("reference", False), (dict, type(None))):
        bad = ["reference"]
    if bad:  # tampered or truncated: start afresh rather than fail mid-resume
        import warnings

        warnings.warn(f"ignoring checkpoint {path}: {', '.join(bad)} missing or of the "
                      f"wrong type", stacklevel=4)
        return None
    return payload


def resumable(path: str, cfg: FLConfig, alg, global_state: dict, client_states,
              sample_rng, server_rng, device: Optional[torch.device] = None
              ) -> Optional[dict]:
    """The run state saved at ``path`` when this run can resume from it, else None (no
    file, another run's, or one that cannot be restored: a warning, and the run starts
    afresh, never fails). Everything is checked before the run is changed: the file
    (:func:`_load_checkpoint`: a regular file, this config and algorithm, each entry of
    its type), then what it holds against this run (:func:`_unrestorable`), then the
    algorithm's own state, loaded into ``alg`` and taken back where it is refused. On
    success ``alg`` holds the saved state; the caller restores the rest."""
    import copy
    import warnings

    payload = _load_checkpoint(path, cfg, alg.name)
    if payload is None:
        return None
    bad = _unrestorable(payload, global_state, client_states, sample_rng, server_rng,
                        device)
    if not bad:
        before = copy.deepcopy(alg.state_dict())
        try:
            alg.load_state_dict(payload["algorithm_state"])
        except Exception as exc:  # noqa: BLE001 (an algorithm's own state check)
            alg.load_state_dict(before)
            bad = [f"algorithm_state ({type(exc).__name__})"]
    if bad:  # tampered, or from another code's shapes: start afresh, never fail
        warnings.warn(f"ignoring checkpoint {path}: cannot restore {', '.join(bad)}; the "
                      f"run starts afresh", stacklevel=3)
        return None
    return payload


def _unrestorable(payload: dict, global_state: dict, client_states, sample_rng,
                  server_rng, device: Optional[torch.device] = None) -> list[str]:
    """What in a loaded run state (:func:`_load_checkpoint`) cannot be restored into this
    run, checked before anything is changed: the global model's (and the reference's)
    names, shapes and dtypes, the client states' container and count, and each random
    state, tried on a fresh generator of the run's kind. [] when it can be."""
    bad = []

    def same_model(state) -> bool:
        return isinstance(state, dict) and set(state) == set(global_state) and all(
            isinstance(state[k], torch.Tensor) and state[k].shape == v.shape
            and state[k].dtype == v.dtype for k, v in global_state.items())

    if not same_model(payload["global_state"]):
        bad.append("global_state")
    if payload["reference"] is not None and not same_model(payload["reference"]):
        bad.append("reference")
    saved = payload["client_states"]
    if type(saved) is not type(client_states) or len(saved) != len(client_states) or (
            isinstance(saved, dict) and set(saved) != set(client_states)):
        bad.append("client_states")
    for name, rng in (("sample_rng", sample_rng), ("server_rng", server_rng)):
        try:
            type(rng.bit_generator)().state = payload[name]
        except (TypeError, ValueError, KeyError):
            bad.append(name)
    try:
        torch.Generator().set_state(payload["torch_rng"].cpu())
    except (RuntimeError, TypeError):
        bad.append("torch_rng")
    if device is not None and device.type == "cuda" and payload["cuda_rng"].numel():
        try:
            torch.Generator(device).set_state(payload["cuda_rng"].cpu())
        except (RuntimeError, TypeError):
            bad.append("cuda_rng")
    return bad
