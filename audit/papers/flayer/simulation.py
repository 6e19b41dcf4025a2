"""FLAYER's federated runs (``flayer-masked-zero``): the Dirichlet split of the clients,
one arm at one seed in one setting of the claim's sweeps (model depth, clients per
round, layer unit, head size s, the reading of Eq. 2's A_l, the release's x20 rate), and
the planted handicap behind the claim's assay sensitivity. It imports the engine and the
paper's algorithm only, never a claim (import-linter: algorithms-below-claims): the
claim hands in the names it declares (the x20 setting, the per-round keys it keeps).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from audit.errors import AuditError


def head_of(setting: str, cfg: Mapping) -> int:
    """The head size s of Eq. 2 in ``setting``: the config's, or a head=s sweep's."""
    if setting.startswith("head="):
        return int(setting.split("=", 1)[1])
    return int(cfg["head_layers"])


def a_map_of(setting: str) -> str:
    """The reading of Eq. 2's A_l in ``setting``: identity, or an amap=reading sweep's."""
    return setting.split("=", 1)[1] if setting.startswith("amap=") else "identity"


def setting_of(setting: str, cfg: Mapping, x20: str) -> tuple[str, dict, Any, str, float]:
    """(model, model kwargs, clients per round, layer unit, as-released rate factor) of a
    sweep ``setting`` ("" is the base); ``x20`` names the release's x20 rate setting."""
    model, kw, cpr = cfg["model"], dict(cfg["model_kw"]), cfg["clients_per_round"]
    unit, factor = cfg.get("layer_unit", "tensor"), 1.0
    if setting.startswith("depth="):
        model = setting.split("=", 1)[1]
        kw = dict(dict(cfg["depth_sweep"])[model])
    elif setting.startswith("cpr="):
        cpr = int(setting.split("=", 1)[1])
    elif setting.startswith("layer="):
        unit = setting.split("=", 1)[1]
    elif setting.startswith(("head=", "amap=")):
        pass  # the head size s or the A_l reading of Eq. 2: read by head_of(), a_map_of()
    elif setting == x20:
        if not model.startswith("cnn"):
            raise AuditError("the release's x20 rate factor applies to its CNN only")
        factor = 20.0
    elif setting:
        raise AuditError(f"unknown setting {setting!r}")
    return model, kw, cpr, unit, factor


def federated(cfg: Mapping, seed: int, data_dir: str | None):
    """(dataset, federated split) of one seed: Dirichlet(alpha) over ``n_clients``, with
    validation and test splits per client; the same for every arm at a seed (paired)."""
    from audit.fl.data import dirichlet_partition, load_dataset, make_federated

    ds = load_dataset(cfg["dataset"], data_dir=data_dir, seed=0)  # DatasetNotFound: AuditError
    rng = np.random.default_rng([seed, 0])  # partition and splits: paired across arms
    part = dirichlet_partition(ds.y_train, cfg["n_clients"], cfg["alpha"], rng)
    return ds, make_federated(ds, part, cfg["val_fraction"], cfg["test_fraction"], rng)


def fl_run(arm: str, seed: int, setting: str, cfg: Mapping, *, device: str,
           data_dir: str | None, x20: str, keep_per_round, checkpoint=None,
           on_round: Callable | None = None) -> dict:
    """One arm at one seed in one setting: per-round structure (the keys named in
    ``keep_per_round``, and every per-layer ``name:layer`` key), accuracy curves, the
    planted handicap of ``cfg["margin"]``."""
    import torch

    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_model
    from audit.papers.flayer import algorithm as flayer

    torch.set_num_threads(1)
    model_name, kw, cpr, unit, factor = setting_of(setting, cfg, x20)
    ds, fed = federated(cfg, seed, data_dir)

    def model_fn():
        return build_model(model_name, ds.num_classes, ds.in_channels, ds.image_size, **kw)

    with torch.random.fork_rng(), torch.no_grad():  # the engine's initial model
        torch.manual_seed(seed)
        init_norm = math.sqrt(sum(float((p.double() ** 2).sum())
                                  for p in model_fn().parameters()))
    alg = flayer.make_algorithm(arm, head_layers=head_of(setting, cfg), layer_unit=unit,
                                released_lr_factor=factor, a_map=a_map_of(setting))
    fl = FLConfig(rounds=cfg["rounds"], clients_per_round=cpr,
                  local_epochs=cfg["local_epochs"], batch_size=cfg["batch_size"],
                  lr=cfg["lr"], seed=seed, device=device,
                  eval_every=cfg["eval_every"], eval_init=True, layer_metrics=False,
                  eval_val=True, amp=cfg.get("amp"))
    h = run_federated(model_fn, fed, alg, fl, checkpoint=checkpoint, on_round=on_round)
    per_round = [{k: v for k, v in m.items() if k in keep_per_round or ":" in k}
                 for m in h.algo]
    planted, n_test_personal = planted_personal_accuracy(model_fn, fed, alg, h,
                                                         float(cfg["margin"]), seed, device)
    return {
        "planted_personal_acc": planted,
        "n_test_personal": n_test_personal,
        "init_norm": init_norm,
        "eval_rounds": list(h.rounds),
        "personal_acc": list(h.personal_acc),
        "global_acc": list(h.test_acc),
        "final_personal_acc": h.personal_acc[-1],
        "final_global_acc": h.test_acc[-1],
        # the verdict's metric read on the clients' validation splits instead of their test
        # splits: what `audit tune` may choose settings by (the claim's validation_metrics)
        "val_personal_acc": list(h.val_acc),
        "final_val_personal_acc": h.val_acc[-1],
        "init_personal_acc": h.personal_acc[0],
        "final_zero_frac": per_round[-1]["zero_frac"],
        "norm_ratio": per_round[-1]["norm"] / init_norm,
        "per_round": per_round,
        "n_test_global": int(len(fed.y_test)),
        "seconds": h.seconds,
    }


def planted_personal_accuracy(model_fn, fed, alg, h, drop: float, seed: int,
                              device) -> tuple[float, int]:
    """Assay sensitivity through the pipeline: the final personal models' predictions on
    each client's test split, with each CORRECT prediction relabelled to a random wrong
    class with probability min(1, drop / acc_c) (acc_c the client's accuracy), so the
    expected drop of every client's accuracy, and of their mean, is ``drop``. Returns
    (planted mean personalised accuracy, total personal test examples)."""
    import torch

    model = model_fn().to(device)
    rng = np.random.default_rng([seed, 7])
    n_cls = int(fed.num_classes)
    accs, total = [], 0
    with torch.no_grad():
        for k, c in enumerate(fed.clients):
            n = len(c.y_test)
            total += n
            if n == 0:
                continue
            model.load_state_dict(alg.personal_state(h.final_state, h.client_states[k], k,
                                                     len(h.algo)))
            model.eval()
            pred = model(c.x_test.to(device)).argmax(1).cpu().numpy()
            y = c.y_test.cpu().numpy()
            correct = pred == y
            acc = float(correct.mean())
            flip = correct & (rng.random(n) < (min(1.0, drop / acc) if acc > 0 else 0.0))
            pred = pred.copy()
            pred[flip] = (y[flip] + rng.integers(1, n_cls, int(flip.sum()))) % n_cls
            accs.append(float((pred == y).mean()))
    return float(np.mean(accs)), int(total)
