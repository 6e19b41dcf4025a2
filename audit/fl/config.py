"""The settings of one federated run (:class:`FLConfig`) and its mixed precision.

``FLConfig.amp = "bf16"`` runs local training's forward pass under bfloat16 autocast on
CUDA (:func:`_autocast`), with normalisation layers kept in float32
(:func:`_float32_norms`); on other devices it has no effect. The round loop is
:mod:`audit.fl.engine`.
"""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

__all__ = ["AMP_MODES", "CPU_CLIENT_CHUNK", "FLConfig"]


@dataclass(frozen=True)
class FLConfig:
    """Settings of one federated run.

    Attributes:
        rounds: number of communication rounds R.
        clients_per_round: clients sampled per round without replacement (None = all).
        local_epochs, batch_size, lr, momentum, weight_decay: local SGD.
        seed: drives init, sampling, minibatch order, server rng, dropout.
        device: "cpu", "cuda", "cuda:0", ...
        eval_every: evaluate (global, personalised, layer metrics) every this many
            rounds and at the last round.
        fast: batched-clients path (True) or the sequential reference (False).
        drop_last: drop a client's last incomplete minibatch (unless it is the only one).
        eval_personal: evaluate every client's personal state on its own test split.
        eval_val: also evaluate personal states on the clients' validation splits.
        eval_init: also evaluate the initial model (recorded as round 0).
        layer_metrics: record per-layer norm / zero fraction / cosine to reference.
        eval_batch_size: batch size of evaluation forward passes.
        client_chunk: at most this many clients per vmap call in the batched path
            (bounds memory for large models or many clients). None: the device's
            default, :data:`CPU_CLIENT_CHUNK` (100) on the CPU and no limit elsewhere;
            0: no limit. On ``vmap`` and on the grouped chain of the reference CNN a
            chunk changes no number: each client's arithmetic does not depend on how
            many others share its call (bitwise the same at 30, 50 and 200 clients in
            chunks of 20; tests/test_fl_bench.py). On the chain of other models (VGG,
            cnn2) the CPU's grouped convolution can block by the total channel count,
            so a chunk moves the last bit of a logit (about 5e-8) and a run's numbers
            as rounding does; the claims never set it. Measured on the CPU, one
            round of the reference CNN at one thread (load 8 on 2 cores, two runs each):
            1000 clients of 72 samples 34-35 s without a limit, 23-25 s in chunks of 20,
            19-25 s in chunks of 100; 200 clients 5.7 s, 5.5 s and 5.3-5.4 s. At 30
            clients (LIPS's smoke VGG) chunks of 20 were slower (12.2-12.5 s against
            10.8 s for three units), which a chunk of 100 leaves alone.
        amp: None (float32 throughout) or "bf16": on CUDA, local training's forward
            pass runs under ``torch.autocast(dtype=torch.bfloat16)``; weights, gradients,
            the SGD step, aggregation, evaluation and normalisation layers stay float32
            (the last as in usual mixed-precision training). It has no effect on
            other devices (CPU runs stay float32, so CPU numbers do not depend on it).
            Claims use it only where it cannot change the verdict (never for byte
            counts or exact values).
    """

    rounds: int
    clients_per_round: Optional[int] = None
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "cpu"
    eval_every: int = 1
    fast: bool = True
    drop_last: bool = False
    eval_personal: bool = True
    eval_val: bool = False
    eval_init: bool = False
    layer_metrics: bool = True
    eval_batch_size: int = 1024
    client_chunk: Optional[int] = None
    amp: Optional[str] = None

    def __post_init__(self):
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp must be one of {AMP_MODES}, not {self.amp!r}")
        if self.client_chunk is not None and (
                isinstance(self.client_chunk, bool) or
                not isinstance(self.client_chunk, numbers.Integral) or self.client_chunk < 0):
            raise ValueError(f"client_chunk must be None or a whole number >= 0, not "
                             f"{self.client_chunk!r}")
        if self.client_chunk is None:  # the device's default (see the attribute)
            cpu = torch.device(self.device).type == "cpu"
            object.__setattr__(self, "client_chunk", CPU_CLIENT_CHUNK if cpu else 0)


#: clients per batched call on the CPU when ``FLConfig.client_chunk`` is None (measured)
CPU_CLIENT_CHUNK = 100


AMP_MODES = (None, "bf16")
_AMP_DEVICES = ("cuda",)  # device types where ``amp`` applies (tests add "cpu")


def _amp_device(cfg: FLConfig) -> Optional[str]:
    """The device type to autocast on, or None (see ``FLConfig.amp``)."""
    dev = torch.device(cfg.device).type
    return dev if cfg.amp == "bf16" and dev in _AMP_DEVICES else None


def _autocast(cfg: FLConfig):
    """The training forward's precision context."""
    dev = _amp_device(cfg)
    if dev is None:
        return contextlib.nullcontext()
    return torch.autocast(dev, dtype=torch.bfloat16)


_NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def _float32_norms(model: nn.Module, device_type: str) -> None:
    """Normalisation layers run in float32 with autocast off (their input is cast up).

    Under ``vmap(grad(...))`` a bf16 input to batch norm fails in the backward pass
    (a float32 grad_output meets a bf16 kernel); float32 statistics are also what
    mixed-precision training keeps anyway. Patches this template model's instances."""
    for mod in model.modules():
        if isinstance(mod, _NORMS):
            def forward(x, _orig=mod.forward):
                with torch.autocast(device_type, enabled=False):
                    return _orig(x.float())
            mod.forward = forward
