"""Byte accounting (audit/fl/comm.py) against hand counts."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.fl import comm
from audit.fl.aggregate import Upload
from audit.fl.engine import Algorithm, FLConfig, run_federated
from fl_stubs import CountingFedAvg, Killed


class Tiny(nn.Module):
    """conv(1->2, 3x3) + BN(2) + linear(8->3): sizes small enough to count by hand."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)  # weight 2*1*3*3 = 18, bias 2
        self.bn = nn.BatchNorm2d(2)  # weight 2, bias 2; buffers mean 2, var 2, nbt 1 (int64)
        self.fc = nn.Linear(8, 3)  # weight 24, bias 3


def test_dense_message_of_tiny_model_matches_hand_count():
    # Prepare
    m = Tiny()
    params = dict(m.named_parameters())
    # Execute
    msg = comm.message(m.state_dict(), param_names=params)
    # Assert: hand count. params: 18+2+2+2+24+3 = 51 floats x 4 B = 204 B;
    # buffers: running_mean 2 + running_var 2 floats = 16 B, num_batches_tracked 1 int64 = 8 B.
    by = {t.name: t for t in msg}
    assert by["conv.weight"].bytes == 72
    assert by["bn.num_batches_tracked"].bytes == 8
    assert by["bn.num_batches_tracked"].kind == "buffer"
    assert sum(t.bytes for t in msg if t.kind == "param") == 204
    assert sum(t.bytes for t in msg if t.kind == "buffer") == 24


def test_sparse_and_auto_encodings_hand_count():
    t = torch.zeros(10, 10)  # dense 400 B
    mask = torch.zeros(10, 10, dtype=torch.bool)
    mask.view(-1)[:7] = True
    # sparse: 7 values x 4 B + 7 int32 indices x 4 B = 56 B
    assert comm.tensor_bytes("w", t, mask=mask, encoding="sparse").bytes == 56
    assert comm.tensor_bytes("w", t, mask=mask, encoding="auto").bytes == 56
    # int64 indices: 7 x (4 + 8) = 84 B
    assert comm.tensor_bytes("w", t, mask=mask, encoding="sparse", index_bytes=8).bytes == 84
    assert comm.tensor_bytes("w", t, mask=mask, encoding="dense").bytes == 400
    # 60 selected: sparse 480 B > dense 400 B, so auto sends dense
    mask.view(-1)[:60] = True
    tb = comm.tensor_bytes("w", t, mask=mask, encoding="auto")
    assert (tb.bytes, tb.encoding, tb.nnz) == (400, "dense", 100)
    # nothing selected: nothing sent
    assert comm.tensor_bytes("w", t, mask=torch.zeros(10, 10, dtype=torch.bool)).bytes == 0


def test_element_size_follows_dtype_and_meta_tensors_count():
    assert comm.dense_bytes(torch.zeros(5, dtype=torch.float16)) == 10
    assert comm.dense_bytes(torch.zeros(5, dtype=torch.float64)) == 40
    # meta tensors: no storage, same count (used for the paper-size ResNet-18)
    assert comm.dense_bytes(torch.empty(1000, 1000, device="meta")) == 4_000_000


def test_mask_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="mask of 'w' has shape"):
        comm.tensor_bytes("w", torch.zeros(3), mask=torch.ones(4, dtype=torch.bool))


def test_log_totals_per_round_and_direction():
    # Prepare: 2 rounds x 3 clients; down = whole Tiny state (228 B), up = fc only (108 B)
    m = Tiny()
    params = dict(m.named_parameters())
    state = m.state_dict()
    fc = {k: v for k, v in state.items() if k.startswith("fc.")}
    log = comm.CommLog()
    # Execute
    for r in (1, 2):
        for k in (0, 1, 2):
            log.record("down", r, k, state, param_names=params)
            log.record("up", r, k, fc, param_names=params)
    # Assert (hand count: 204 + 24 = 228 down; (24 + 3) x 4 = 108 up)
    assert log.per_round() == {1: {"up": 324, "down": 684}, 2: {"up": 324, "down": 684}}
    assert log.total("down") == 2 * 3 * 228
    assert log.total("down", "buffer") == 2 * 3 * 24
    assert log.total("up") == 2 * 3 * 108
    assert log.per_client()[1] == {"up": 216, "down": 456}
    assert log.summary()["transfers"] == 12
    with pytest.raises(ValueError, match="direction"):
        log.record("sideways", 1, 0, fc)


class _Stub(Algorithm):
    name = "stub"

    def upload(self, before, after, k, r, n_samples):
        return Upload({"a": after["a"]}, {"a": after["a"] > 0}, float(n_samples))


def test_metered_records_engine_calls_only():
    log = comm.CommLog()
    alg = comm.metered(_Stub(), log)
    g = {"a": torch.tensor([1.0, -1.0, 2.0, 0.0]), "b": torch.zeros(2, dtype=torch.float64)}
    alg.broadcast(g, 3, 1)
    up = alg.upload(g, g, 3, 1, n_samples=7)
    alg.personal_state(g, None, 3, 1)  # evaluation: not a transfer
    assert up.weight == 7.0 and alg.name == "stub" and isinstance(alg, _Stub)
    # down: a 16 B + b 16 B; up: 2 of 4 selected -> auto: sparse 2 x 8 = 16 <= dense 16? ties
    # go to dense, so 16 B dense
    assert [t.bytes for t in log.transfers] == [32, 16]
    assert log.transfers[1].tensors[0].encoding == "dense"


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 300), st.integers(0, 2 ** 32 - 1), st.sampled_from([4, 8]))
def test_auto_is_min_of_dense_and_sparse(n, seed, ib):
    rng = np.random.default_rng(seed)
    mask = torch.from_numpy(rng.random(n) < rng.random())
    t = torch.zeros(n)
    nnz = int(mask.sum())
    got = comm.tensor_bytes("w", t, mask=mask, encoding="auto", index_bytes=ib).bytes
    assert got == min(4 * n, nnz * (4 + ib))


def test_metered_engine_run_counts_every_round_and_client():
    # Prepare: 3 clients, 2 rounds of FedAvg with the Tiny-free reference CNN on blobs
    from audit.fl.data import make_federated, iid_partition, synthetic_classification
    from audit.fl.models import build_model

    ds = synthetic_classification(0, n=120, num_classes=3, shape=(1, 4, 4))
    rng = np.random.default_rng(0)
    fed = make_federated(ds, iid_partition(len(ds.y_train), 3, rng), 0.0, 0.2, rng)
    model_fn = lambda: build_model("cnn", 3, 1, 4)  # noqa: E731
    m = model_fn()
    log = comm.CommLog()
    # Execute
    run_federated(model_fn, fed, comm.metered(Algorithm(), log, dict(m.named_parameters())),
                  FLConfig(rounds=2, seed=0))
    # Assert: cnn on 4x4: conv1 1*16*9+16 = 160, conv2 16*32*9+32 = 4640, fc 32*16*3+3
    # = 1539 -> 6339 floats = 25,356 B per message; 2 rounds x 3 clients x 2 directions
    per = 6339 * 4
    assert comm.dense_bytes(torch.zeros(6339)) == per
    assert log.per_round() == {1: {"up": 3 * per, "down": 3 * per},
                               2: {"up": 3 * per, "down": 3 * per}}


# ------------------------------------------------------------------------- checkpoints
def _mixed_log():
    """Dense and sparse tensors, params and buffers, labels: every field of a transfer."""
    m = Tiny()
    params = dict(m.named_parameters())
    state = m.state_dict()
    mask = {"fc.weight": torch.arange(24).reshape(3, 8) % 5 == 0}  # 5 of 24 selected
    log = comm.CommLog()
    log.record("down", 1, 0, state, param_names=params, label="broadcast")
    log.record("up", 1, 0, state, param_names=params, mask=mask, encoding="sparse",
               index_bytes=8, label="upload")
    log.record("up", 2, 4, {"fc.bias": state["fc.bias"]}, param_names=params)
    return log


def test_comm_log_state_round_trips_through_a_checkpoint_file(tmp_path):
    # Prepare
    log = _mixed_log()
    torch.save(log.state_dict(), tmp_path / "log.pt")
    # Execute: load into a log that already holds a transfer (it must be replaced)
    back = comm.CommLog()
    back.record("down", 9, 9, {"x": torch.zeros(3)})
    back.load_state_dict(torch.load(tmp_path / "log.pt", weights_only=True))
    # Assert: the very same transfers (dataclass equality of every field) and totals;
    # fc.weight sparse: 5 x (4 + 8) = 60 B
    assert back.transfers == log.transfers
    assert back.transfers[1].tensors[-2].bytes == 60
    assert back.summary() == log.summary()
    assert back.total() == 228 + log.transfers[1].bytes + 12


def test_metered_state_dict_wraps_the_algorithm_and_its_log():
    log = _mixed_log()
    alg = comm.metered(CountingFedAvg(), log)
    alg.seen = 7
    st = alg.state_dict()
    assert st["algorithm"] == {"seen": 7} and st["comm_log"] == log.state_dict()
    other_log = comm.CommLog()
    other = comm.metered(CountingFedAvg(), other_log)
    other.load_state_dict(st)
    assert other.seen == 7 and other_log.transfers == log.transfers


def test_metered_run_resumed_from_a_checkpoint_counts_every_round_once(tmp_path):
    # Prepare: 3 clients, 2 sampled a round, 5 rounds; the killed run checkpointed at
    # round 2 and died in round 3 (after its transfers of round 3 were logged)
    from audit.fl.data import iid_partition, make_federated, synthetic_classification
    from audit.fl.models import build_model

    ds = synthetic_classification(0, n=120, num_classes=3, shape=(1, 4, 4))
    rng = np.random.default_rng(0)
    fed = make_federated(ds, iid_partition(len(ds.y_train), 3, rng), 0.0, 0.2, rng)
    model_fn = lambda: build_model("cnn", 3, 1, 4)  # noqa: E731
    params = dict(model_fn().named_parameters())
    cfg = FLConfig(rounds=5, clients_per_round=2, seed=0)
    full_log = comm.CommLog()
    full = run_federated(model_fn, fed, comm.metered(CountingFedAvg(), full_log, params), cfg)
    ck = str(tmp_path / "run.pt")
    dead_log = comm.CommLog()
    with pytest.raises(Killed):
        run_federated(model_fn, fed, comm.metered(CountingFedAvg(kill_at=3), dead_log, params),
                      cfg, checkpoint=ck, checkpoint_every=2)
    assert sorted(dead_log.per_round()) == [1, 2, 3]
    # Execute
    log = comm.CommLog()
    resumed = run_federated(model_fn, fed, comm.metered(CountingFedAvg(), log, params), cfg,
                            checkpoint=ck, checkpoint_every=2)
    # Assert: 2 clients x 2 directions x 6339 floats every round, rounds 1-5 once each
    per = 6339 * 4
    assert log.per_round() == {r: {"up": 2 * per, "down": 2 * per} for r in range(1, 6)}
    assert log.rows() == full_log.rows()
    assert resumed.test_loss == full.test_loss and resumed.algo == full.algo
