"""The pytest plugin, exercised through pytester in a separate directory."""
import json
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent

FALSIFIER = """
from audit.pytest_plugin import check_lock

def test_toy_verdict(audit_run):
    check_lock(audit_run("toy-claim"))
"""

CONFTEST = """
import audit.claims as c
c.CLAIM_MODULES = c.CLAIM_MODULES + ("toyclaim",)
"""


@pytest.fixture
def suite(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_toy=FALSIFIER)
    locks = tmp_path / "locks.json"
    monkeypatch.setenv("AUDIT_LOCKS", str(locks))
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))

    def run(lock: str | None, *args, lock_seeds=None):
        if lock is None:
            locks.write_text("{}")
        else:
            entry = {"verdict": lock}
            if lock_seeds is not None:
                entry["seeds"] = lock_seeds
            locks.write_text(json.dumps({"toy-claim": {"smoke": entry}}))
        return pytester.runpytest_subprocess("-p", "audit.pytest_plugin", *args)

    run.locks = locks
    return run


# the toy claim's default seeds (tests/toyclaim.py): the three-way rule decides nothing
# below 6 pairs, so a run of 3 seeds can no longer be CONFIRMED
EIGHT = list(range(8))
EIGHT_SHOWN = "[[]0, 1, 2, 3, 4, 5, 6, 7[]]"  # fnmatch: [[] and []] are literal brackets


def test_header_summary_and_pass_on_matching_lock(suite):
    result = suite("CONFIRMED", "--audit-seeds", ",".join(map(str, EIGHT)))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"audit: scale=smoke seeds={EIGHT_SHOWN} device=cpu",
                                 "*audit verdicts*",
                                 f"toy-claim*CONFIRMED*locked=CONFIRMED*seeds={EIGHT_SHOWN}"])


def test_three_seeds_cannot_confirm(suite):
    # below 6 pairs the three-way rule refuses to decide: the toy's large effect on 3
    # seeds is INCONCLUSIVE, and a CONFIRMED lock on those seeds is a flip
    result = suite("CONFIRMED", "--audit-seeds", "0,1,2", lock_seeds=[0, 1, 2])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*verdict flipped at smoke scale: locked CONFIRMED, now "
                                 "INCONCLUSIVE*"])


def test_fails_when_the_lock_says_another_verdict(suite):
    result = suite("REFUTED")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*verdict flipped at smoke scale: locked REFUTED, now "
                                 "CONFIRMED*", "*FLIPPED*"])


def test_fails_without_a_lock_and_update_locks_records_it(suite):
    suite(None).assert_outcomes(failed=1)
    result = suite(None, "--audit-update-locks")
    result.assert_outcomes(passed=1)
    lock = json.loads(suite.locks.read_text())["toy-claim"]["smoke"]
    # a claim without declared questions answers one, `claim`, decided by its combination
    assert lock == {"verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"},
                    "questions": {"claim": "CONFIRMED"}, "seeds": EIGHT}


def test_fails_when_a_locked_question_flips(suite, pytester):
    # the verdict and every part match the lock, but the question's verdict does not
    suite.locks.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"},
        "questions": {"claim": "INCONCLUSIVE"}, "seeds": EIGHT}}}))
    result = pytester.runpytest_subprocess("-p", "audit.pytest_plugin")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*question claim flipped at smoke scale: locked "
                                 "INCONCLUSIVE, now CONFIRMED*"])
    suite.locks.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"},
        "questions": {"claim": "CONFIRMED"}, "seeds": EIGHT}}}))
    pytester.runpytest_subprocess("-p", "audit.pytest_plugin").assert_outcomes(passed=1)


def test_report_dir_option_writes_reports(suite, tmp_path):
    out = tmp_path / "rep"
    suite("CONFIRMED", "--audit-report-dir", str(out)).assert_outcomes(passed=1)
    assert (out / "toy-claim.json").exists() and (out / "README.md").exists()


def test_a_lock_recorded_with_other_seeds_is_not_compared(suite):
    # a verdict from other seeds is another experiment: skipped, not a flip
    result = suite("REFUTED", "--audit-seeds", "10", lock_seeds=EIGHT)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*audit verdicts*",
                                 "toy-claim*CONFIRMED*locked=none*seeds=[[]0, 1, 2, 3, 4, 5, "
                                 "6, 7, 8, 9[]]"])
    suite("REFUTED", "--audit-seeds", ",".join(map(str, EIGHT)),
          lock_seeds=EIGHT).assert_outcomes(failed=1)  # same seeds: a flip


def test_a_sequential_lock_is_reproduced_with_its_looks(suite, pytester):
    # a lock recorded by --until-decided carries its plan; the plugin reruns the looks and
    # compares the verdict and the seeds it stopped at
    def write(seeds):
        suite.locks.write_text(json.dumps({"toy-claim": {"smoke": {
            "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"}, "seeds": seeds,
            "plan": {"looks": [10, 20], "spending": "pocock"}}}}))

    ten = "[[]0, 1, 2, 3, 4, 5, 6, 7, 8, 9[]]"
    write(list(range(10)))
    result = pytester.runpytest_subprocess("-p", "audit.pytest_plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"toy-claim*CONFIRMED*locked=CONFIRMED*seeds={ten}"])
    write(list(range(20)))  # the lock stopped later: the run must say so, not skip
    result = pytester.runpytest_subprocess("-p", "audit.pytest_plugin")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*sequential run stopped with seeds {ten}*"])


def test_summary_and_lock_updates_survive_pytest_xdist(suite, pytester):
    """Under ``-n 2 --dist loadfile`` two falsifier files run in two worker processes,
    each its own claim: both summary lines reach the controller (through the test
    reports), and both workers' lock updates land in the one lock file (the folder
    lock: neither read-modify-write loses the other's entry)."""
    pytest.importorskip("xdist")
    pytester.makepyfile(toy2=("import dataclasses\n"
                              "from toyclaim import CLAIM as _TOY, analyse, run  # noqa\n"
                              "CLAIM = dataclasses.replace(_TOY, id='toy-claim-2')\n"))
    pytester.makeconftest(CONFTEST + 'c.CLAIM_MODULES = c.CLAIM_MODULES + ("toy2",)\n')
    pytester.makepyfile(test_toy2=FALSIFIER.replace("toy-claim", "toy-claim-2")
                        .replace("def test_toy_verdict", "def test_toy2_verdict"))
    result = suite(None, "-n", "2", "--dist", "loadfile", "--audit-seeds",
                   ",".join(map(str, EIGHT)), "--audit-update-locks")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(["*audit verdicts*",
                                        f"toy-claim *CONFIRMED*seeds={EIGHT_SHOWN}",
                                        f"toy-claim-2 *CONFIRMED*seeds={EIGHT_SHOWN}"])
    locks = json.loads(suite.locks.read_text())
    assert {k: v["smoke"]["verdict"] for k, v in locks.items()} == {
        "toy-claim": "CONFIRMED", "toy-claim-2": "CONFIRMED"}
