"""The engine's reference workload through Apple's pfl-research simulation, for
``audit bench --against pfl`` (optional: needs the ``pfl`` extra, ``pip install -e
'.[pfl]'``; nothing in the core package imports this module).

pfl (``pfl`` on the package index, 0.6) is a single-process simulator: a
``FederatedDataset`` hands out one user's data at a time, ``SimulatedBackend`` trains
the users of a cohort one after the other and sums their weighted statistics, and a
``FederatedAveraging`` algorithm averages them and lets a central optimizer apply the
result to a ``PyTorchModel``.

What runs here, so that both sides compute the same thing and only the machinery around
local training differs (as in the Flower comparison, :mod:`audit.fl.flower`):

- users: the reference workload's 20 clients, each a pfl ``Dataset`` keyed by its client
  index; pfl's ``minimize_reuse`` sampler with a cohort of 20 trains every client once a
  round (checked: the run refuses to report when a round saw any other set);
- local training: pfl's ``train_one_user`` hook runs the engine's own sequential local
  SGD (``audit.fl.training._Trainer.train_one``: one epoch, batch 32, lr 0.05, the
  engine's minibatch order for that client and round) on the parameters pfl hands it,
  writes the result into pfl's model, and returns pfl's own model difference;
- weighting: pfl's ``WeightByDatapoints`` (each difference weighted by the client's
  sample count), ``FederatedAveraging``'s average, and a central
  ``torch.optim.SGD(lr=1.0)``: the new global model is the old one plus the
  sample-weighted mean difference, i.e. FedAvg. Float rounding differs from the
  engine's weighted mean of states, so the final models agree to about 1e-6, not
  bit for bit (``pfl_max_abs_diff``);
- pfl's own evaluation runs at its first iteration only (pfl evaluates whenever the
  iteration is a multiple of ``evaluation_frequency``, and 0 always is); the final
  model's test accuracy is the engine's ``evaluate``.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from pfl.aggregate.simulate import SimulatedBackend
from pfl.aggregate.weighting import WeightByDatapoints
from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
from pfl.data.dataset import Dataset
from pfl.data.federated_dataset import FederatedDataset
from pfl.data.sampling import get_user_sampler
from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
from pfl.metrics import Metrics, Weighted
from pfl.model.pytorch import PyTorchModel

from audit.fl.data import FederatedData
from audit.fl.engine import Algorithm, FLConfig, _Trainer, evaluate

__all__ = ["PflOutcome", "simulate"]

_PREFIX = "net."


class _PflModule(nn.Module):
    """pfl's contract for a torch model: ``loss(x, y)`` and ``metrics(x, y)``."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)

    def loss(self, x, y, eval: bool = False):  # noqa: A002 (pfl's keyword)
        return F.cross_entropy(self.net(x), y)

    @torch.no_grad()
    def metrics(self, x, y, eval: bool = True):  # noqa: A002
        out = self.net(x)
        n = len(y)
        return {"loss": Weighted(float(F.cross_entropy(out, y, reduction="sum")), n),
                "accuracy": Weighted(float((out.argmax(1) == y).sum()), n)}


class _EngineLocalSGD(FederatedAveraging):
    """pfl's FedAvg whose local step is the engine's sequential local SGD."""

    def __init__(self, trainer: _Trainer, fed: FederatedData):
        super().__init__()
        self.trainer, self.fed = trainer, fed
        self.seen: dict[int, list[int]] = {}

    def train_one_user(self, initial_model_state, model, user_dataset, central_context):
        k = int(user_dataset.user_id)
        r = int(central_context.current_central_iteration) + 1  # the engine's rounds are 1-based
        self.seen.setdefault(r, []).append(k)
        module = model.pytorch_model
        start = {name[len(_PREFIX):]: v.detach().clone()
                 for name, v in module.state_dict().items()}
        c = self.fed.clients[k]
        after = self.trainer.train_one(start, c.x_train, c.y_train, k, r)
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(after[name[len(_PREFIX):]])
        return model.get_model_difference(initial_model_state), Metrics()


@dataclass
class PflOutcome:
    """One run of the workload through pfl."""

    seconds: float              # wall time of ``algorithm.run`` (every round)
    setup_seconds: float        # building pfl's datasets, backend and model
    final_state: dict           # the global model after the last round (engine names)
    accuracy: float             # its test accuracy (the engine's ``evaluate``)
    clients_per_round: dict = dataclasses.field(default_factory=dict)  # round -> distinct


def simulate(model_fn: Callable[[], nn.Module], fed: FederatedData, config: FLConfig,
             initial: dict) -> PflOutcome:
    """FedAvg over every client of ``fed`` for ``config.rounds`` rounds through pfl, from
    the engine's initial global state ``initial`` (see the module docstring)."""
    t0 = time.perf_counter()
    cfg = dataclasses.replace(config, fast=False)  # the sequential reference
    dev = torch.device(cfg.device)
    fed = fed.to(dev)
    template = model_fn().to(dev)
    template.train()
    alg_engine = Algorithm()
    alg_engine.setup(template, fed, cfg)
    trainer = _Trainer(template, alg_engine, cfg)

    net = model_fn().to(dev)
    net.load_state_dict(initial)
    module = _PflModule(net)
    ids = list(range(len(fed.clients)))
    data = {k: [fed.clients[k].x_train, fed.clients[k].y_train] for k in ids}
    train = FederatedDataset(lambda k: Dataset(data[k], user_id=k),
                             get_user_sampler("minimize_reuse", ids))
    val = FederatedDataset(lambda k: Dataset(data[k], user_id=k),
                           get_user_sampler("minimize_reuse", ids))
    model = PyTorchModel(module, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(module.parameters(), lr=1.0))
    backend = SimulatedBackend(training_data=train, val_data=val,
                               postprocessors=[WeightByDatapoints()])
    algorithm = _EngineLocalSGD(trainer, fed)
    params = NNAlgorithmParams(central_num_iterations=cfg.rounds,
                               evaluation_frequency=cfg.rounds + 1,
                               train_cohort_size=len(ids), val_cohort_size=0)
    train_params = NNTrainHyperParams(local_num_epochs=cfg.local_epochs,
                                      local_learning_rate=cfg.lr,
                                      local_batch_size=cfg.batch_size)
    eval_params = NNEvalHyperParams(local_batch_size=1024)
    t1 = time.perf_counter()
    algorithm.run(algorithm_params=params, backend=backend, model=model,
                  model_train_params=train_params, model_eval_params=eval_params,
                  callbacks=[], send_metrics_to_platform=False)
    t2 = time.perf_counter()
    final = {name[len(_PREFIX):]: v.detach().clone()
             for name, v in module.state_dict().items()}
    acc, _ = evaluate(template, final, fed.x_test, fed.y_test)
    per_round = {r: len(set(ks)) if len(ks) == len(set(ks)) else -len(ks)
                 for r, ks in sorted(algorithm.seen.items())}
    return PflOutcome(seconds=t2 - t1, setup_seconds=t1 - t0, final_state=final,
                      accuracy=acc, clients_per_round=per_round)


def pfl_version() -> str:
    """The installed pfl's version."""
    from importlib.metadata import version

    return version("pfl")

