"""LIPS's federated runs: one arm's algorithm (built by the claim from the arm's piece) on
the clients' split of :mod:`audit.papers.lips.algorithm`, FedBN's local training, and
what the claim reads from the run: final personalised test and validation accuracy, the
middle layers' cosine to their reference round and share of zeros, and the accuracy
curves behind the overfitting gap and the best round. It imports the engine and the
paper's algorithm only, never a claim (import-linter: algorithms-below-claims).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping


def curve_every(cfg: Mapping) -> int:
    """The accuracy curves (train / test per client, for the overfitting gap and the best
    round) are read every ``rounds // curve_points`` rounds of the scale (the same rounds
    for every arm; at least 1) and at each arm's last round. Reading them does not touch
    training (eval mode, no RNG), so every other number is the same at any value."""
    return max(1, int(cfg["rounds"]) // max(1, int(cfg["curve_points"])))


def fl_run(alg, model_kw: Mapping[str, Any], over: Mapping[str, Any], cfg: Mapping, seed: int,
           *, device: str, data_dir: str | None, checkpoint=None,
           on_round: Callable | None = None) -> dict:
    """One run of ``alg`` (a ``FedBNProbe``) with the model options ``model_kw`` and the
    config overrides ``over`` (``rounds``, ``weight_decay``) of an arm's piece, under the
    scale's ``cfg``, at ``seed``. ``checkpoint``: where a killed long run resumes (None:
    no checkpoints)."""
    import torch

    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_model
    from audit.papers.lips import algorithm as lips

    torch.set_num_threads(1 if device == "cpu" else torch.get_num_threads())
    ds = lips.dataset(cfg, data_dir)
    fed = lips.build_clients(ds, cfg, seed)
    rounds = int(over.get("rounds", cfg["rounds"]))
    fl = FLConfig(rounds=rounds, batch_size=int(cfg["batch_size"]), lr=float(cfg["lr"]),
                  momentum=float(cfg["momentum"]), local_epochs=int(cfg["local_epochs"]),
                  weight_decay=float(over.get("weight_decay", 0.0)), seed=int(seed),
                  device=device, eval_every=rounds, eval_val=True,
                  layer_metrics=False, amp=cfg.get("amp"))

    def model_fn():
        return build_model(cfg["model"], ds.num_classes, ds.in_channels, ds.image_size,
                           width=cfg["width"], **model_kw)

    t0 = time.perf_counter()
    h = run_federated(model_fn, fed, alg, fl, checkpoint=checkpoint,
                      checkpoint_every=int(cfg.get("checkpoint_every", 5)),
                      on_round=on_round)
    cos = [a.get("middle_cos") for a in h.algo]
    zero = [a["middle_zero_frac"] for a in h.algo]
    last = h.algo[-1]
    # every curve round: the personalised test accuracy and train minus test (the
    # overfitting gap; train accuracy on each client's own training split, averaged over
    # clients as the test accuracy is), from the probe
    curve = [(t, a) for t, a in enumerate(h.algo, 1) if "curve_test_acc" in a]
    return {
        "rounds": rounds,
        "test_acc": float(h.personal_acc[-1]),  # personalised, client test splits
        "val_acc": float(h.val_acc[-1]),  # personalised, client validation splits
        "n_test": int(sum(len(c.y_test) for c in fed.clients)),
        "middle_cos": cos, "middle_zero_frac": zero,
        "final_layer_cos": {k[4:]: v for k, v in last.items() if k.startswith("cos:")},
        "curve_rounds": [t for t, _ in curve],
        "test_curve": [a["curve_test_acc"] for _, a in curve],
        "gap_curve": [a["curve_train_acc"] - a["curve_test_acc"] for _, a in curve],
        "seconds": time.perf_counter() - t0,
    }
