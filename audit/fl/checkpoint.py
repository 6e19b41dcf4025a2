"""Checkpoint files of the round loop: atomic writes and the check that a saved run
state belongs to this run (same config, same algorithm) before it is resumed."""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

import torch

from .config import FLConfig

__all__ = ["save_atomic"]


def save_atomic(path: str, payload: dict) -> None:
    """``torch.save`` to a temporary file, then rename: a kill mid-write keeps the old file."""
    import os

    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: a kill during the write keeps the previous one


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
    if payload.get("config") != asdict(cfg) or payload.get("algorithm") != alg_name:
        return None  # written by another run: start afresh
    return payload
