"""FedTLU's federated runs (parts 2 and 3 of ``fedtlu-lower-bound``): the character-level
corpus split into contiguous client stretches (optionally with held-out validation
windows), the noisy setting's shuffled targets, and one run of an arm with the probe of
Assumption (b), the planted handicap and the validation read-out. It imports the engine
and the paper's algorithm only, never a claim (import-linter: algorithms-below-claims).
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Mapping

import numpy as np

from audit.errors import AuditError

#: a paper-scale run names the corpus, and no copy is found
PTB_MISSING = ("the paper scale needs Penn Treebank: pass --data-dir (or set AUDIT_DATA) to "
               "a folder holding ptb.train.txt, ptb.valid.txt and ptb.test.txt")


@functools.lru_cache(maxsize=4)
def _dataset(name: str, max_chars: int, seq_len: int, data_dir: str | None):
    from audit.fl import data as fd

    if name == "stdlib-chars":
        return fd.load_stdlib_chars(seq_len=seq_len, max_chars=max_chars)
    if name == "ptb":
        if data_dir is None:
            raise AuditError(PTB_MISSING)
        return fd.load_ptb(data_dir, seq_len=seq_len)  # DatasetNotFound is an AuditError
    raise AuditError(f"unknown dataset {name!r}")


def fl_data(cfg, seed: int, setting: str, data_dir: str | None):
    """The data of one FL unit: (ds, fed, train_pools, val_idx).

    Non-IID: each client reads its own contiguous stretch of the corpus's training windows
    (``contiguous_partition``). With ``val_fraction`` > 0 the last floor(val_fraction * n)
    windows of each client's stretch are held out as validation text (``val_idx``,
    indices into ``ds.x_train``) and the client trains on the rest (``train_pools``); the
    test text (``ds.x_test``, the corpus's last 10 %) is never touched. At 0 the pools are
    the partition itself and the data are exactly those of a run without the key. In the
    noisy setting the chosen clients' training targets are shuffled; validation, like
    test, stays clean."""
    from audit.papers.fedtlu import algorithm as tlu
    from audit.fl import data as fd

    ds = _dataset(cfg["dataset"], int(cfg.get("max_chars", 0)), int(cfg["seq_len"]), data_dir)
    vf = float(cfg.get("val_fraction", 0.0))
    if not 0.0 <= vf < 1.0:
        raise AuditError(f"val_fraction must lie in [0, 1), not {vf}")
    if len(ds.y_train) < int(cfg["n_clients"]):
        raise AuditError(f"{ds.name}: {len(ds.y_train)} training windows of "
                         f"{cfg['seq_len']} tokens for {cfg['n_clients']} clients")
    pools = fd.contiguous_partition(len(ds.y_train), cfg["n_clients"])
    cut = [len(p) - int(len(p) * vf) for p in pools]
    if min(cut) < 1:
        raise AuditError(f"val_fraction {vf} leaves a client no training window")
    train = [p[:c] for p, c in zip(pools, cut)]
    val_idx = np.concatenate([p[c:] for p, c in zip(pools, cut)])
    fed = fd.make_federated(ds, train, 0.0, 0.0, np.random.default_rng([seed, 20]))
    if setting == "noisy":
        rng = np.random.default_rng([seed, 21])
        k = max(1, round(cfg["noisy_fraction"] * cfg["n_clients"]))
        fed = tlu.shuffle_targets(fed, rng.choice(cfg["n_clients"], k, replace=False).tolist(),
                                  rng)
    return ds, fed, train, val_idx


def _validated(selector: str, portion: float, probe, val):
    """``TargetedUpdate`` that also records, every round, the global model's mean loss on
    the validation windows ``val`` = (x, y) (``val_loss`` in ``History.algo``), by the
    engine's ``evaluate``: the code of the test perplexity, on the same state."""
    from audit.papers.fedtlu import algorithm as tlu
    from audit.fl.engine import evaluate

    class Validated(tlu.TargetedUpdate):
        def setup(self, model, fed, config):
            super().setup(model, fed, config)
            self._val = tuple(t.to(config.device) for t in val)
            self._eval_batch = config.eval_batch_size

        def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
            out = super().round_metrics(round, global_state, prev_global, uploads, client_ids)
            out["val_loss"] = evaluate(self.model, global_state, *self._val,
                                       self._eval_batch)[1]
            return out

    return Validated(selector, portion, probe=probe)


def fl_run(arm: str, seed: int, setting: str, cfg: Mapping, *, device: str = "cpu",
           data_dir: str | None = None, checkpoint: str | None = None,
           on_round: Callable | None = None) -> dict:
    """One FL unit: ``arm`` (``fedtlu``, ``random``, ``full``, ``last``, ``none``) at
    ``seed`` in ``setting`` (``clean`` or ``noisy``) under a scale's config ``cfg``; its
    perplexity curve, the selected blocks, Assumption (b)'s ratios on the probe (clean
    runs of ``fedtlu`` and ``random``), the planted handicap (``random``: an abstention
    costing the config's ``equiv_rel`` of the perplexity) and, with
    ``val_fraction`` > 0, the validation curve. ``checkpoint`` and ``on_round`` are the
    engine's (resume a killed run; progress)."""
    import torch

    from audit.papers.fedtlu import algorithm as tlu
    from audit.fl.engine import FLConfig, run_federated
    from audit.fl.models import build_lm

    torch.set_num_threads(int(cfg["threads"]))
    ds, fed, _, val_idx = fl_data(cfg, seed, setting, data_dir)
    probe = None
    if setting == "clean" and arm in ("fedtlu", "random"):
        idx = np.random.default_rng([seed, 22]).choice(len(ds.y_train),
                                                       min(cfg["probe_windows"], len(ds.y_train)),
                                                       replace=False)
        probe = (ds.x_train[np.sort(idx)], ds.y_train[np.sort(idx)])
    # (the probe only measures gradients, it trains nothing: drawn from every training
    # window as before, validation windows included when val_fraction > 0)
    if len(val_idx):  # val_fraction > 0: the validation read-out (audit tune reads it)
        val = (ds.x_train[val_idx], ds.y_train[val_idx])
        alg = _validated(arm, cfg["portion"], probe, val)
    else:
        alg = tlu.TargetedUpdate(arm, cfg["portion"], probe=probe)
    fl = FLConfig(rounds=cfg["rounds"], local_epochs=cfg["local_epochs"],
                  batch_size=cfg["batch_size"], lr=cfg["lr"], seed=seed, device=device,
                  eval_every=1, eval_personal=False, layer_metrics=False,
                  fast=bool(cfg.get("fast", True)))
    vocab = ds.num_classes

    def make():
        return build_lm(vocab_size=vocab, max_len=cfg["seq_len"], d_model=cfg["d_model"],
                        n_heads=cfg["n_heads"], n_layers=cfg["n_layers"])

    h = run_federated(make, fed, alg, fl, checkpoint=checkpoint, on_round=on_round)
    ppl = [math.exp(x) for x in h.test_loss]
    out = {"ppl": ppl, "rounds": list(h.rounds), "ppl_final": ppl[-1],
           "ppl_prev": ppl[-2] if len(ppl) > 1 else float("nan"),
           "ppl_min": min(ppl), "seconds": h.seconds, "vocab": int(vocab),
           "n_test_tokens": int(fed.y_test.numel()),
           "selected": [s.selected for s in alg.log]}
    if arm == "random":
        # the planted, margin-sized handicap (assay sensitivity at the margin's scale):
        # Random's own final model abstains on a random fraction of the test tokens
        model = make().to(device)
        losses = tlu.token_losses(model, h.final_state, fed.x_test.to(device),
                                  fed.y_test.to(device))
        pl = tlu.planted_abstention(losses, vocab, float(cfg["equiv_rel"]),
                                    np.random.default_rng([seed, 23]))
        # on the engine's own number: ppl_final * exp(planted - clean), the same test set
        out["ppl_final_planted"] = ppl[-1] * math.exp(pl["loss"] - float(losses.mean()))
        out["planted_fraction"], out["planted_tokens"] = pl["f"], pl["k"]
    for key in ("ratio_model", "ratio_model_oracle", "ratio_group", "ratio_group_random"):
        if probe is not None:
            out[key] = [a[key] for a in h.algo]
    if len(val_idx):
        # the global model after each round (the last: the final model) on the held-out
        # validation text; the verdict reads the test text only, `audit tune` this only
        val_ppl = [math.exp(a["val_loss"]) for a in h.algo]
        out.update(val_ppl=val_ppl, final_val_ppl=val_ppl[-1], val_ppl_min=min(val_ppl),
                   n_val_tokens=int(val[1].numel()))
    return out
