"""The engine's reference workload, timed against a plain per-client loop in one process.

``run_bench(device="cpu") -> dict`` (the ``audit bench`` command prints it as JSON):

Workload (issue 3, item 5): scikit-learn digits, 80/20 stratified split (seed 0),
Dirichlet(0.1) label skew over 20 clients (seed 0, min 10 samples each), all clients
every round, 50 rounds, 1 local epoch, batch 32, SGD lr 0.05, the reference CNN
conv(1->16, 3x3, pad 1)-relu-conv(16->32, 3x3, pad 1)-relu-flatten-linear(2048->10).
FedAvg weighted by client sample counts; global test accuracy after the last round.

Returned keys (times from the repeat with the median ratio, see ``run_bench``):
    seconds            wall time of the engine's batched path (``fast=True``)
    baseline_seconds   wall time of a plain loop (nn.Module + torch.optim.SGD per client,
                       load_state_dict / state_dict, weighted average), same process
    ratio              baseline_seconds / seconds
    accuracy           engine's global test accuracy
    baseline_accuracy  plain loop's global test accuracy
    floor_seconds      the same samples through one model in batches of 20 x 32
                       (``floor_loop``): one set of weights, large batches, autograd
    max_ratio          baseline_seconds / floor_seconds: roughly what batching clients
                       can approach here (per-client weights make every kernel grouped)
    floor_ratio        seconds / floor_seconds: how far the engine is from the floor
                       (1.0 would be one model's speed with per-client weights)
    sequential_seconds the engine's sequential reference path (only if ``sequential``)
    cpu_seconds, baseline_cpu_seconds   process CPU time of each
    rounds_per_second  rounds / seconds (for GPU reports)
    seconds_samples, baseline_seconds_samples, floor_seconds_samples   every sample
    batched_path       "chain" (grouped forward + hand-written backward) or "vmap"
    malloc             "tuned" (``alloc.keep_freed_memory``, which ``run_federated``
                       applies on the CPU), "environment" or "default"
    repeats, threads, device, torch, workload (the settings above)
    load               the 1-minute load average when the reported repeat started
                       (``os.getloadavg``; other jobs on the machine), and
                       ``load_samples`` at the start of every repeat
    cores              the cores this process may use (``os.sched_getaffinity``)
With ``against="flower"`` (``audit bench --against flower``; needs the ``flower`` extra),
the same workload also runs once through Flower's simulation (``audit.fl.flower``:
``run_simulation``, Ray backend, one CPU per client, Flower's FedAvg sampling and
messages, ``AuditStrategy("fedavg")`` on the server, each client the engine's own
sequential local SGD on the engine's minibatch order), after the timed repeats:
    flower_seconds         wall time of the whole ``run_simulation`` call (Ray start-up,
                           actors, all rounds, shutdown): what a Flower user waits
    flower_rounds_seconds  the strategy's rounds inside the ServerApp (no Ray start-up;
                           the first round still starts the client actors)
    flower_ratio           flower_seconds / seconds
    flower_accuracy        global test accuracy of Flower's final model
    flower_max_abs_diff    max |our final model - Flower's| over all coordinates
    flower_version, flower_supernodes, flower_client_cpus
    flower_clients_per_round  clients Flower sampled in each round (all 20 in every one)
With ``against="pfl"`` (``audit bench --against pfl``; needs the ``pfl`` extra), the same
workload runs once through Apple's pfl-research simulation (``audit.fl.pflsim``:
``SimulatedBackend``, pfl's ``FederatedAveraging`` weighted by data points, a central SGD
of rate 1, each client the engine's own sequential local SGD), after the timed repeats:
    pfl_seconds            wall time of pfl's ``algorithm.run`` (all rounds)
    pfl_setup_seconds      building pfl's datasets, backend and model
    pfl_ratio              pfl_seconds / seconds
    pfl_accuracy, pfl_max_abs_diff, pfl_version, pfl_clients_per_round   as for Flower
``against="flower,pfl"`` runs both, one after the other, in the same process, so every
figure of one ``audit bench`` comes from one run on one machine state.
Both paths are warmed up on one round first (lazy imports, allocator), so that the
timed numbers compare steady-state loops, and run under the same thread count.

Threads matter more than anything else on a 2-core CPU. The batched path runs few,
large kernels that use two threads well; the plain loop runs many small ones. With
OpenMP's default (active) waiting on a CPU shared with other jobs, idle threads spin
and both timings inflate several-fold; ``OMP_WAIT_POLICY=PASSIVE`` (set before torch is
imported) avoids that, but makes each small kernel of the plain loop pay a thread
wake-up. The output records ``threads`` and ``omp_wait_policy`` so a reader can tell.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

from .alloc import keep_freed_memory, malloc_setting
from .data import FederatedData, dirichlet_partition, load_digits, make_federated
from .engine import Algorithm, FLConfig, batched_path, evaluate, run_federated
from .models import build_model

__all__ = ["floor_loop", "plain_loop", "reference_workload", "run_bench", "run_bench_threads",
           "thread_counts"]

MAX_THREADS = 1024  # torch refuses counts past a C int; more than this only oversubscribes

WORKLOAD = dict(dataset="digits", test_fraction=0.2, n_clients=20, alpha=0.1, seed=0,
                rounds=50, local_epochs=1, batch_size=32, lr=0.05, model="cnn")


def reference_workload(seed: int = 0) -> FederatedData:
    """The issue's federated digits split (the whole client pool is training data)."""
    ds = load_digits(seed=seed, test_fraction=WORKLOAD["test_fraction"])
    parts = dirichlet_partition(ds.y_train, WORKLOAD["n_clients"], WORKLOAD["alpha"],
                                np.random.default_rng(seed))
    return make_federated(ds, parts, 0.0, 0.0, np.random.default_rng(seed))


def _model():
    return build_model("cnn", 10, 1, 8)


def plain_loop(fed: FederatedData, rounds: int, device: str = "cpu", seed: int = 0) -> dict:
    """What a typical FedAvg script does: one nn.Module, a fresh torch.optim.SGD per
    client, ``load_state_dict`` / ``state_dict`` copies, minibatches by random
    permutation, sample-weighted average. Returns its global state."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _model().to(device)
    global_state = {k: v.clone() for k, v in model.state_dict().items()}
    clients = [c.to(device) for c in fed.clients]
    bs = WORKLOAD["batch_size"]
    for _ in range(rounds):
        acc = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in global_state.items()}
        total = 0
        for c in clients:
            model.load_state_dict(global_state)
            opt = torch.optim.SGD(model.parameters(), lr=WORKLOAD["lr"])
            n = len(c.y_train)
            for _ in range(WORKLOAD["local_epochs"]):
                perm = torch.randperm(n, generator=gen).to(device)
                for i in range(0, n, bs):
                    idx = perm[i:i + bs]
                    opt.zero_grad()
                    F.cross_entropy(model(c.x_train[idx]), c.y_train[idx]).backward()
                    opt.step()
            for k, v in model.state_dict().items():
                acc[k] += n * v.float()
            total += n
        global_state = {k: (v / total).to(global_state[k].dtype) for k, v in acc.items()}
    return global_state


def floor_loop(fed: FederatedData, rounds: int, device: str = "cpu", seed: int = 0) -> None:
    """A throughput reference: every round, all clients' training samples go through
    ONE model in batches of n_clients x batch_size (SGD, autograd). Same samples, same
    model, same forward/backward work as a round of the workload, but with one set of
    weights, large batches and no padding: about what this machine's kernels do at best.
    An engine with per-client weights runs grouped kernels on padded batches, so it
    should not be expected below this (it is not a proven bound: another formulation of
    the same arithmetic could beat autograd's)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _model().to(device)
    x = torch.cat([c.x_train for c in fed.clients]).to(device)
    y = torch.cat([c.y_train for c in fed.clients]).to(device)
    bs = WORKLOAD["batch_size"] * WORKLOAD["n_clients"]
    opt = torch.optim.SGD(model.parameters(), lr=WORKLOAD["lr"])
    for _ in range(rounds):
        perm = torch.randperm(len(y), generator=gen).to(device)
        for i in range(0, len(y), bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run_bench(device: str = "cpu", rounds: int | None = None, sequential: bool = False,
              threads: int | None = None, repeats: int = 3,
              against: str | None = None) -> dict:
    """Time the reference workload (batched engine vs plain loop) in this process.

    ``threads``: torch intra-op threads for the measurement (restored afterwards);
    None keeps the current setting. ``repeats``: the engine, the plain loop and the
    floor are timed this many times, one after the other in each repeat; the reported
    times are those of the repeat whose ratio is the median, and every sample is listed
    under ``*_samples``. On a CPU shared with other jobs, 1 thread (or
    ``OMP_WAIT_POLICY=PASSIVE``) avoids OpenMP spin-waiting, which otherwise dominates
    both timings. ``against``: ``"flower"``, ``"pfl"`` or ``"flower,pfl"``, the peers
    that also run the workload once, after the timed repeats (see the module docstring)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    peers = peer_names(against)
    if "flower" in peers:
        _flower_module()  # fail before the timings when an extra is missing
    if "pfl" in peers:
        _pfl_module()
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        out = _bench(device, rounds, sequential, repeats)
        final = out.pop("_final_state")
        if "flower" in peers:
            out.update(_against_flower(device, out, final, rounds))
        if "pfl" in peers:
            out.update(_against_pfl(device, out, final, rounds))
        return out
    finally:
        torch.set_num_threads(before)


def _timed(fn, device: str):
    _sync(device)
    t, c = time.perf_counter(), time.process_time()
    result = fn()
    _sync(device)
    return time.perf_counter() - t, time.process_time() - c, result


def _bench(device: str, rounds: int | None, sequential: bool, repeats: int) -> dict:
    rounds = rounds or WORKLOAD["rounds"]
    fed = reference_workload(WORKLOAD["seed"])
    cfg = FLConfig(rounds=rounds, clients_per_round=None, local_epochs=WORKLOAD["local_epochs"],
                   batch_size=WORKLOAD["batch_size"], lr=WORKLOAD["lr"], seed=WORKLOAD["seed"],
                   device=device, eval_every=rounds, fast=True, eval_personal=False,
                   layer_metrics=False)
    if torch.device(device).type == "cpu":
        keep_freed_memory()  # what run_federated does: both loops run under it
    warm = FLConfig(**{**cfg.__dict__, "rounds": 1, "eval_every": 1})
    run_federated(_model, fed, Algorithm(), warm)
    run_federated(_model, fed, Algorithm(), FLConfig(**{**warm.__dict__, "fast": False}))
    plain_loop(fed, 1, device)
    floor_loop(fed, 1, device)

    samples = {"seconds": [], "baseline_seconds": [], "floor_seconds": []}
    cpu = {"seconds": [], "baseline_seconds": []}
    loads = []
    for _ in range(repeats):
        loads.append(_load())
        wall, proc, hist = _timed(lambda: run_federated(_model, fed, Algorithm(), cfg), device)
        samples["seconds"].append(wall)
        cpu["seconds"].append(proc)
        wall, proc, state = _timed(lambda: plain_loop(fed, rounds, device), device)
        samples["baseline_seconds"].append(wall)
        cpu["baseline_seconds"].append(proc)
        samples["floor_seconds"].append(_timed(lambda: floor_loop(fed, rounds, device),
                                               device)[0])
    # the repeat with the median ratio: engine and plain loop were timed back to back
    # in it, so a slow spell of the machine that hits one of them and not the other
    # (a shared VM) cannot make the ratio, and one bad repeat cannot move it
    ratios = [b / e for e, b in zip(samples["seconds"], samples["baseline_seconds"])]
    mid = sorted(range(repeats), key=lambda i: ratios[i])[(repeats - 1) // 2]
    out = {k: v[mid] for k, v in samples.items()}
    out["cpu_seconds"] = cpu["seconds"][mid]
    out["load"], out["load_samples"] = loads[mid], loads
    out["baseline_cpu_seconds"] = cpu["baseline_seconds"][mid]
    out["accuracy"] = hist.test_acc[-1]
    model = _model().to(device)
    out["baseline_accuracy"] = evaluate(model, state, fed.x_test.to(device),
                                        fed.y_test.to(device))[0]
    out["ratio"] = out["baseline_seconds"] / out["seconds"]
    out["max_ratio"] = out["baseline_seconds"] / out["floor_seconds"]
    out["floor_ratio"] = out["seconds"] / out["floor_seconds"]
    if sequential:
        seq = FLConfig(**{**cfg.__dict__, "fast": False})
        out["sequential_seconds"] = _timed(
            lambda: run_federated(_model, fed, Algorithm(), seq), device)[0]
    out["rounds_per_second"] = rounds / out["seconds"]
    out.update({f"{k}_samples": v for k, v in samples.items()})
    out["_final_state"] = hist.final_state
    out.update(repeats=repeats, batched_path=batched_path(_model(), cfg),
               threads=torch.get_num_threads(), cores=_cores(), device=device,
               torch=torch.__version__,
               omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), malloc=malloc_setting(),
               machine=platform.machine(), workload={**WORKLOAD, "rounds": rounds})
    return out


def _load() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cores() -> int:
    from audit.fl.cores import usable_cores

    return usable_cores()


def thread_counts(text: str) -> list[int]:
    """``audit bench --threads``: a comma list of thread counts, ``all`` meaning the usable
    cores (``os.sched_getaffinity``), e.g. ``1``, ``all``, ``1,all``; repeats dropped."""
    out: list[int] = []
    for item in str(text).split(","):
        item = item.strip().lower()
        n = _cores() if item == "all" else \
            int(item) if item.isascii() and item.isdigit() else 0
        if not 1 <= n <= MAX_THREADS:
            raise ValueError(f"thread counts are whole numbers from 1 to {MAX_THREADS} or "
                             f"'all', got {text!r}")
        if n not in out:
            out.append(n)
    return out


def run_bench_threads(device: str = "cpu", threads: str | list[int] = "1",
                      repeats: int = 3, against: str | None = None,
                      rounds: int | None = None) -> dict:
    """:func:`run_bench` at each thread count of ``threads`` (see :func:`thread_counts`),
    one after the other in this process, each with the peers of ``against``. One count:
    that run's dict, as before. Several: ``{"runs": [...], "table": [...]}``, ``table``
    one row per count with the engine, plain loop, floor and peers' seconds, the ratios
    and the load average beside them. (Flower's clients run in Ray's worker processes,
    one CPU each, whatever this process's thread count; pfl runs in this process.)"""
    counts = thread_counts(threads) if isinstance(threads, str) else list(threads)
    runs = [run_bench(device, rounds=rounds, threads=n, repeats=repeats, against=against)
            for n in counts]
    if len(runs) == 1:
        return runs[0]
    keys = TABLE_KEYS + tuple(f"{p}_{k}" for p in peer_names(against)
                              for k in ("seconds", "ratio"))
    return {"runs": runs, "table": [{k: r.get(k) for k in keys} for r in runs]}


TABLE_KEYS = ("threads", "seconds", "baseline_seconds", "floor_seconds", "ratio", "max_ratio",
              "floor_ratio", "cpu_seconds", "load")
_HEADS = {"threads": "threads", "seconds": "engine s", "baseline_seconds": "loop s",
          "floor_seconds": "floor s", "ratio": "loop/engine", "max_ratio": "loop/floor",
          "floor_ratio": "engine/floor", "cpu_seconds": "engine cpu s", "load": "load",
          "flower_seconds": "flower s", "flower_ratio": "flower/engine",
          "pfl_seconds": "pfl s", "pfl_ratio": "pfl/engine"}


def format_table(table: list[dict]) -> str:
    """The rows of :func:`run_bench_threads`'s ``table`` as aligned text (a column per
    key of the rows, in their order)."""
    keys = tuple(table[0]) if table else TABLE_KEYS
    head = tuple(_HEADS.get(k, k) for k in keys)
    rows = [head] + [tuple(f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])
                           for k in keys) for r in table]
    width = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, width)) for row in rows)


PEERS = ("flower", "pfl")


def peer_names(against) -> tuple[str, ...]:
    """The peers of ``audit bench --against``: None, or a comma list (or sequence) of
    ``flower`` and ``pfl``, in the order given, repeats dropped."""
    if against is None:
        return ()
    items = against.split(",") if isinstance(against, str) else list(against)
    out: list[str] = []
    for item in items:
        name = str(item).strip().lower()
        if name not in PEERS:
            raise ValueError(f"against must name peers among {', '.join(PEERS)} "
                             f"(comma-separated), not {against!r}")
        if name not in out:
            out.append(name)
    return tuple(out)


def _pfl_module():
    import importlib

    try:
        return importlib.import_module("audit.fl.pflsim")
    except ImportError as exc:
        from audit.errors import AuditError

        raise AuditError(f"--against pfl needs the pfl extra (pip install -e "
                         f"'.[pfl]'): {exc}") from None


def _peer_config(device: str, rounds: int) -> FLConfig:
    """The workload's config for a peer: every client every round, the engine's
    sequential local SGD (each peer's clients run one at a time)."""
    return FLConfig(rounds=rounds, clients_per_round=None, local_epochs=WORKLOAD["local_epochs"],
                    batch_size=WORKLOAD["batch_size"], lr=WORKLOAD["lr"], seed=WORKLOAD["seed"],
                    device=device, fast=False)


def _peer_checked(peer: str, clients_per_round: dict, rounds: int, mine: dict,
                  theirs: dict) -> tuple[list, float]:
    """(clients per round, max |our final model - the peer's|), or a RuntimeError when
    the peer did not train every client once in every round: then it ran another
    workload and no figure of it may be reported beside ours."""
    per_round = [clients_per_round.get(r) for r in range(1, rounds + 1)]
    if any(c != WORKLOAD["n_clients"] for c in per_round):
        raise RuntimeError(f"{peer} trained {per_round} clients in its rounds, not "
                           f"all {WORKLOAD['n_clients']} once: the comparison would be "
                           "meaningless")
    diff = max(float((mine[k].cpu().double() - theirs[k].cpu().double()).abs().max())
               for k in mine)
    return per_round, diff


def _against_pfl(device: str, ours: dict, mine: dict, rounds: int | None) -> dict:
    """The workload once through pfl-research's simulation; keys ``pfl_*``."""
    pflsim = _pfl_module()
    rounds = rounds or WORKLOAD["rounds"]
    with torch.random.fork_rng(devices=[]):  # the engine's initial model (seeded build)
        torch.manual_seed(WORKLOAD["seed"])
        initial = {k: v.detach().clone() for k, v in _model().state_dict().items()}
    res = pflsim.simulate(_model, reference_workload(WORKLOAD["seed"]),
                          _peer_config(device, rounds), initial)
    per_round, diff = _peer_checked("pfl", res.clients_per_round, rounds, mine,
                                    res.final_state)
    return {"pfl_seconds": res.seconds, "pfl_setup_seconds": res.setup_seconds,
            "pfl_ratio": res.seconds / ours["seconds"], "pfl_accuracy": res.accuracy,
            "pfl_max_abs_diff": diff, "pfl_version": pflsim.pfl_version(),
            "pfl_clients_per_round": per_round}


def _flower_module():
    import importlib

    try:
        flower = importlib.import_module("audit.fl.flower")
    except ImportError as exc:
        from audit.errors import AuditError

        raise AuditError(f"--against flower needs the flower extra (pip install -e "
                         f"'.[flower]'): {exc}") from None
    return flower


def _against_flower(device: str, ours: dict, mine: dict, rounds: int | None) -> dict:
    """The workload once through Flower's simulation; keys ``flower_*``."""
    import flwr

    flower = _flower_module()
    rounds = rounds or WORKLOAD["rounds"]
    res = flower.simulate(flower.AuditStrategy("fedavg"), _model, reference_workload,
                          _peer_config(device, rounds), num_supernodes=WORKLOAD["n_clients"],
                          num_cpus=1.0)
    per_round, diff = _peer_checked("Flower", res.clients_per_round, rounds, mine,
                                    res.final_state)
    return {"flower_seconds": res.seconds, "flower_rounds_seconds": res.rounds_seconds,
            "flower_ratio": res.seconds / ours["seconds"], "flower_accuracy": res.accuracy,
            "flower_max_abs_diff": diff, "flower_version": flwr.__version__,
            "flower_supernodes": WORKLOAD["n_clients"], "flower_client_cpus": 1.0,
            "flower_clients_per_round": per_round}


if __name__ == "__main__":  # python -m audit.fl.bench
    import json
    import sys

    print(json.dumps(run_bench(sys.argv[1] if len(sys.argv) > 1 else "cpu")))
