"""The `audit` command: listing, running end to end, verifying locks, bad input."""
import json
import subprocess
import sys

import pytest

from audit.cli import main

FIVE = {"flayer-masked-zero", "fedtlu-lower-bound", "genefl-inverted-cosine",
        "genefl-uplink-bytes", "lips-dropout-control"}


def test_list_json_names_the_five_claims(capsys):
    assert main(["list", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert FIVE <= {i["id"] for i in items}
    assert all({"id", "paper", "title", "locked", "scales"} <= set(i) for i in items)


def test_python_dash_m_audit_works():
    out = subprocess.run([sys.executable, "-m", "audit", "list"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "genefl-uplink-bytes" in out.stdout


def test_run_writes_json_markdown_figures_and_index(toy, tmp_path, capsys):
    out = tmp_path / "reports"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    assert "toy-claim: CONFIRMED (locked: CONFIRMED)" in capsys.readouterr().out
    data = json.loads((out / "toy-claim.json").read_text())
    for key in ("id", "paper", "verdict", "rule", "scale", "seeds", "arms", "estimates",
                "environment", "runtime_s", "parts", "questions", "findings"):
        assert key in data
    assert data["seeds"] == list(range(8)) and data["arms"] == ["base", "better"]
    # the toy declares no questions: it answers one, `claim`, decided by its combination
    assert [(q["id"], q["verdict"]) for q in data["questions"]] == [("claim", "CONFIRMED")]
    assert {"python", "torch", "device", "commit"} <= set(data["environment"])
    gain = next(e for e in data["estimates"] if e["name"] == "gain")
    assert gain["low"] < gain["value"] < gain["high"] and gain["n"] == 8
    exact = next(e for e in data["estimates"] if e["name"] == "n_arms")
    assert exact["low"] is None and exact["high"] is None
    md = (out / "toy-claim.md").read_text()
    assert md.startswith("# toy-claim")
    assert md.splitlines()[2] == "## The reviewer's questions, one verdict each"
    assert "CONFIRMED" in md.splitlines()[4]
    assert "paper's value" in md and "audit run toy-claim --scale smoke" in md
    assert (out / "toy-claim" / "curve.png").stat().st_size > 1000
    assert "[`toy-claim`](toy-claim.md)" in (out / "README.md").read_text()


def test_report_rerenders_from_json_without_running(toy, tmp_path):
    out = tmp_path / "r"
    main(["run", "toy-claim", "--out", str(out), "--quiet"])
    (out / "toy-claim.md").unlink()
    toy.CALLS.clear()
    assert main(["report", "--out", str(out)]) == 0
    assert (out / "toy-claim.md").exists() and toy.CALLS == []


def test_verify_passes_on_the_lock_and_fails_on_a_flip(toy, tmp_path, monkeypatch, capsys):
    assert main(["verify", "toy-claim", "--quiet"]) == 0
    lock = tmp_path / "locks.json"
    lock.write_text(json.dumps({"toy-claim": {"smoke": {"verdict": "REFUTED", "parts": {}}}}))
    assert main(["verify", "toy-claim", "--quiet"]) == 1
    assert "FLIPPED toy-claim: locked REFUTED, now CONFIRMED" in capsys.readouterr().err
    # the claim's word and its parts as locked, but a question's verdict is not: a flip
    lock.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"},
        "questions": {"claim": "REFUTED"}}}}))
    assert main(["verify", "toy-claim", "--quiet"]) == 1
    assert ("FLIPPED toy-claim / claim: locked REFUTED, now CONFIRMED at smoke scale"
            in capsys.readouterr().err)


def test_the_paper_folders_are_the_registry(tmp_path):
    """Every module of a paper folder that assigns CLAIM is a built-in claim (no second
    list of modules or titles is kept), each defines the claim its folder and file name,
    and a paper's algorithm, notes and declarations are not claims."""
    from pathlib import Path

    from audit import claims

    folder = Path(claims.__file__).with_name("papers")
    files = sorted(f"{p.parent.name}_{p.stem}" for p in folder.glob("*/*.py")
                   if p.stem not in ("__init__", "algorithm", "notes", "simulation"))
    assert sorted(m.split(".", 2)[2].replace(".", "_") for m in claims._built_in_modules()) \
        == files
    built = {cid: c for cid, c in claims.registry().items() if not c.origin}
    assert sorted(c.id.replace("-", "_") for c in built.values()) == files
    assert not hasattr(claims, "PENDING") and not hasattr(claims, "PendingClaim")
    # the test is the source, read, not run: an assignment at the top level counts; one
    # inside a function, a name that merely contains CLAIM, or a broken file does not
    cases = {"a.py": "CLAIM = make()\n", "b.py": "CLAIM: object = make()\n",
             "c.py": "def f():\n    CLAIM = 1\n", "d.py": "MY_CLAIM = 1\nCLAIMS = []\n",
             "e.py": "CLAIM = (\n", "f.py": "import os\nos.system('false')\nCLAIM = 1\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    assert {n for n in cases if claims._assigns_claim(tmp_path / n)} == {"a.py", "b.py", "f.py"}


@pytest.mark.parametrize("argv, message", [
    pytest.param(["run", "no-such-claim"], "unknown claim id 'no-such-claim'; known ids:",
                 id="unknown-id"),
    pytest.param(["run", "toy-claim", "--seeds", "1"], "needs at least 2 seeds", id="one-seed"),
    pytest.param(["run", "toy-claim", "--scale", "huge"], "unknown scale 'huge'",
                 id="unknown-scale"),
    pytest.param(["run", "toy-claim", "--data-dir", "/no/such/dir"],
                 "data directory '/no/such/dir' does not exist", id="missing-data-dir"),
    pytest.param(["run", "toy-claim", "--out", "/no/such/parent/reports"],
                 "cannot be created", id="unwritable-out"),
    pytest.param(["run"], "name at least one claim id", id="no-id"),
    pytest.param(["run", "toy-claim", "--device", "cuda:9"], "CUDA is not available",
                 id="no-cuda"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(toy, tmp_path, capsys, argv, message,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    import torch

    if "cuda:9" in argv and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("audit: error: ") and message in err[0]
    assert "Traceback" not in captured.err
    assert not (tmp_path / "reports").exists()
    assert toy.CALLS == []


def test_out_path_that_is_a_file_is_refused(toy, tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("keep me")
    assert main(["run", "toy-claim", "--out", str(f)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert f.read_text() == "keep me"


def test_set_overrides_a_config_value_and_the_report_says_how(toy, tmp_path):
    out = tmp_path / "r"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet", "--set", "effect=0.0",
                 "--set", "noise=0.5"]) == 0
    data = json.loads((out / "toy-claim.json").read_text())
    assert data["config"] == {"effect": 0.0, "noise": 0.5, "equivalence_margin": 0.05,
                              "gated": False}
    assert data["command"].endswith("--set effect=0.0 --set noise=0.5")


def test_set_with_an_unknown_key_is_refused(toy, capsys):
    assert main(["run", "toy-claim", "--set", "rounds=2"]) == 2
    assert "has no config key(s) rounds" in capsys.readouterr().err


def test_bench_refuses_an_unknown_device(capsys):
    assert main(["bench", "--device", "tpu"]) == 2
    assert "unknown device 'tpu'" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bench_refuses_a_bad_repeat_count(value, capsys):
    with pytest.raises(SystemExit) as err:
        main(["bench", "--repeats", value])
    assert err.value.code == 2
    assert "positive whole number" in capsys.readouterr().err


def test_verify_does_not_call_other_seeds_a_flip(toy, tmp_path, capsys):
    lock = tmp_path / "locks.json"
    lock.write_text(json.dumps({"toy-claim": {"smoke": {
        "verdict": "REFUTED", "parts": {}, "seeds": list(range(8))}}}))
    assert main(["verify", "toy-claim", "--quiet", "--seeds", "3"]) == 0
    assert "no lock at smoke scale with these seeds for: toy-claim" in capsys.readouterr().out
    assert main(["verify", "toy-claim", "--quiet"]) == 1  # the locked seeds: a real flip
