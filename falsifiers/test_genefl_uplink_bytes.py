"""Falsifier: GENE-FL's 4x (arXiv 2504.14628) counted in both directions.

The byte counts come from audit.fl.comm over the real torchvision ResNet-18; here they
are checked against a hand computation, and the verdict against its lock.
"""
import pytest

from audit.pytest_plugin import check_committed_report, check_lock

CLAIM = "genefl-uplink-bytes"

# Hand computation. torchvision resnet18(num_classes=1000) has 11,689,512 parameters
# (torchvision docs); a 10-class head removes 512*1000 + 1000 and adds 512*10 + 10:
# 11,689,512 - 513,000 + 5,130 = 11,181,642 float32 parameters.
M = 11_181_642 * 4  # 44,726,568 bytes = 42.6546 MiB
G = round(9.04 * 2 ** 20 / 4) * 4  # 9.04 MiB of float32: 2,369,782 elements
R, K, A = 100, 10, 10  # rounds, participants a round, agnostic clients (smoke config)

NAMES = ("model_bytes", "fedavg_up_bytes_total", "fedavg_down_bytes_total",
         "genefl_up_bytes_total", "genefl_down_bytes_total", "ratio_uplink",
         "ratio_bidirectional", "genefl_up_bytes_total_selected",
         "genefl_down_bytes_total_selected", "ratio_uplink_selected",
         "ratio_bidirectional_selected")


@pytest.fixture(scope="module")
def result(audit_run):
    return audit_run(CLAIM)


def test_estimates_have_the_issue_names_and_are_exact(result):
    for name in NAMES:
        e = result.verdict.estimate(name)
        assert e.exact, name  # a byte count has no interval


def test_byte_counts_match_hand_computation(result):
    est = result.verdict.estimate
    assert est("model_bytes").value == M
    assert est("fedavg_up_bytes_total").value == R * K * M
    assert est("fedavg_down_bytes_total").value == R * K * M
    assert est("genefl_up_bytes_total").value == R * K * G
    # the cluster model to every participant every round, the gene to each agnostic client
    assert est("genefl_down_bytes_total").value == R * K * M + A * G
    assert est("ratio_uplink").value == pytest.approx(M / G, rel=1e-12)  # 4.7184
    assert est("ratio_bidirectional").value == pytest.approx(
        2 * R * K * M / (R * K * G + R * K * M + A * G), rel=1e-12)  # 1.6475


def test_selected_gene_is_real_layers_and_counted_the_same_way(result):
    est = result.verdict.estimate
    g = est("learngene_bytes_selected").value
    assert 0 < g < M and g % 4 == 0  # whole float32 layers
    assert est("genefl_up_bytes_total_selected").value == R * K * g
    assert est("genefl_down_bytes_total_selected").value == R * K * M + A * g


def test_once_per_client_reading(result):
    # 100 clients, 10 a round for 100 rounds: every client takes part (seeded sampling),
    # so the cluster model goes down 100 times instead of 1000
    est = result.verdict.estimate
    assert est("genefl_down_bytes_total_once").value == 100 * M + A * G


def test_once_per_client_is_swept_over_the_client_count(result):
    # closed form: ratio(P) = (R K G + P M + A G) / (2 R K M) with P distinct
    # participants; above 0.5 from P > R K (1 - G / M) - A G / M = 788.07 on: P = 790 in
    # steps of 10. The answer flips inside P = 10..1000, so the part is undecided.
    # A measurement (the client count is not given): it reports the crossover and has no
    # verdict of its own; its question is MEASURED and never enters the claim's word.
    v = result.verdict
    assert v.part("once-per-client").kind == "measurement"
    assert v.estimate("once_flip_participants").value == 790
    assert v.part("once-per-client").verdict.value == "INCONCLUSIVE"
    once = [a for a in result.answers if a["id"] == "once-per-client"]
    assert [(a["kind"], a["verdict"]) for a in once] == [("measurement", "MEASURED")]


def test_verdict_is_locked(result):
    check_lock(result)



def test_simulated_run_metered_uploads_equal_the_selected_layers(result):
    # the engine's metered uploads (audit.fl.comm) against the algorithm's own count of
    # the layers it selected: two independent counts of the same learnGene bytes
    assert result.verdict.estimate("sim_metered_minus_selected_bytes").value == 0
    assert result.verdict.estimate("sim_metered_down_minus_model_bytes").value == 0


def test_paper_scale_simulation_without_data_is_a_clear_error(monkeypatch):
    from audit.claims import AuditError, RunSpec
    from audit.papers.genefl.uplink_bytes import CLAIM
    from audit.runner import make_context

    monkeypatch.delenv("AUDIT_DATA", raising=False)
    ctx = make_context(CLAIM, "paper")
    with pytest.raises(AuditError, match="cifar10"):
        CLAIM.run(RunSpec("simulated-run"), ctx)


def test_the_committed_report_is_what_this_code_computes(result):
    # byte counts and their ratios: the same on any machine (the selected gene's layers come
    # from a 3-step update whose float rounding does not reorder them)
    check_committed_report(result, rtol=1e-6, atol=1e-9)
