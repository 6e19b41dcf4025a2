"""Checkpoint files of the round loop: atomic writes and the check that a saved run
state belongs to this run (same config, same algorithm) before it is resumed."""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

import torch

from .config import FLConfig

__all__ = ["save_atomic"]


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

    if not path or not os.path.exists(path):
        return None
    try:
        payload = torch.load(path, map_location=cfg.device, weights_only=True)
    except Exception as exc:  # a corrupt checkpoint is reported and ignored
        import warnings

        warnings.warn(f"ignoring unreadable checkpoint {path} ({exc})", stacklevel=3)
        return None
    if not isinstance(payload, dict):
        import warnings

        warnings.warn(f"ignoring checkpoint {path}: not a saved run state", stacklevel=3)
        return None
    if payload.get("config") != asdict(cfg) or payload.get("algorithm") != alg_name:
        return None  # written by another run: start afresh
    bad = [k for k, t in _CHECKPOINT_SHAPE.items()
           if not isinstance(payload.get(k), t) or isinstance(payload.get(k), bool)]
    if not bad and not 1 <= payload["round"] < cfg.rounds:
        bad = ["round"]
    if not bad and not all(isinstance(v, list) for v in payload["rec"].values()):
        bad = ["rec"]
    if bad:  # tampered or truncated: start afresh rather than fail mid-resume
        import warnings

        warnings.warn(f"ignoring checkpoint {path}: {', '.join(bad)} missing or of the "
                      f"wrong type", stacklevel=3)
        return None
    return payload
