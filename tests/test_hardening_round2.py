"""Hardening, second round (issue 28): nothing of the user's overwritten, no write
through a planted link, locks and plans checked, work bounded before it is allocated,
special files refused without hanging, Ray errors readable, the remaining tracebacks one
line, plugins named when they break, and text from elsewhere escaped."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from audit import claims as claims_mod
from audit import safeio
from audit.claims import AuditError
from audit.cli import main as _main
from audit.runner import Cache, CacheWarning, execute, make_context

REPO = Path(__file__).resolve().parents[1]


def main(argv) -> int:
    """The CLI's exit status, whether it returns it or argparse raises it."""
    try:
        return _main(argv)
    except SystemExit as exc:
        return exc.code


def _one_error_line(capsys, start: str = "audit") -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith(start), err
    return lines[0]


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "other"
    return out


# ------------------------------------------------- 1. --out replaces no file of the user's
@pytest.mark.parametrize("foreign", ["README.md", "toy-claim.json", "notes.txt"])
def test_run_out_refuses_a_folder_holding_files_audit_did_not_write(toy, tmp_path, capsys,
                                                                   foreign):
    out = tmp_path / "project"
    out.mkdir()
    (out / foreign).write_text("the user's own file")
    before = _tree(tmp_path)
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 2
    assert "audit did not write" in _one_error_line(capsys)
    assert _tree(tmp_path) == before and toy.CALLS == []


def test_out_dot_in_a_project_keeps_its_readme(toy, tmp_path, capsys, monkeypatch):
    (tmp_path / "README.md").write_text("# my project\n")
    monkeypatch.chdir(tmp_path)
    for argv in (["run", "toy-claim", "--out", ".", "--quiet"], ["report", "--out", "."]):
        assert main(argv) == 2, argv
        _one_error_line(capsys)
    assert (tmp_path / "README.md").read_text() == "# my project\n"


def test_report_and_review_markdown_refuse_a_foreign_folder(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    assert (out / safeio.OUTPUT_MARKER).is_file()
    (out / safeio.OUTPUT_MARKER).unlink()
    (out / "README.md").write_text("mine, not audit's")
    capsys.readouterr()
    before = _tree(tmp_path)
    assert main(["report", "--out", str(out)]) == 2
    assert "README.md" in _one_error_line(capsys)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"arxiv_id": "2412.07062"}))
    assert main(["review", str(rec), "--markdown", "--out", str(out)]) == 2
    _one_error_line(capsys)
    assert _tree(tmp_path) == {**before, "rec.json": _tree(tmp_path)["rec.json"]}


def test_an_audit_output_folder_is_reused_and_recognised_without_a_marker(toy, tmp_path,
                                                                         capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    (out / safeio.OUTPUT_MARKER).unlink()  # an older output folder: every file is ours
    assert safeio.foreign_entry(out) is None
    assert main(["report", "--out", str(out)]) == 0
    assert (out / safeio.OUTPUT_MARKER).is_file()


def test_the_committed_reports_folders_stay_valid_output_folders():
    for folder in (REPO / "reports", REPO / "reports" / "full"):
        assert (folder / safeio.OUTPUT_MARKER).is_file(), folder
        assert safeio.foreign_entry(folder) is None, folder


# ------------------------------------------------------------- 2. no write through links
def test_cache_store_never_writes_through_a_planted_temp_link(toy, tmp_path):
    cache = Cache(tmp_path / "cache")
    ctx = make_context(toy.CLAIM, "smoke")
    spec = toy.CLAIM.unit_specs(ctx)[0]
    material = cache.key_material("toy-claim", spec, ctx, "v")
    path = cache.path(material)
    path.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for name in (path.with_suffix(f".tmp{os.getpid()}"), path.with_suffix(".tmp"),
                 path.parent / f".{path.stem}.tmp"):
        name.symlink_to(victim)  # the old predictable names, planted in a shared cache
    cache.store(material, {"score": 1.0})
    assert victim.read_text() == "keep me"
    assert cache.load(material) == {"score": 1.0}
    # a link at the entry itself is refused (a warning), never replaced or followed
    path.unlink()
    path.symlink_to(victim)
    with pytest.warns(CacheWarning):
        cache.store(material, {"score": 2.0})
    assert victim.read_text() == "keep me" and path.is_symlink()


def test_save_atomic_never_writes_through_a_link(tmp_path):
    from audit.fl.checkpoint import save_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "run.pt"
    Path(f"{target}.tmp{os.getpid()}").symlink_to(victim)  # the old predictable name
    assert save_atomic(str(target), {"round": 1}) is True
    assert victim.read_text() == "keep me" and target.is_file()
    target.unlink()
    target.symlink_to(victim)
    with pytest.warns(UserWarning, match="symlink"):
        assert save_atomic(str(target), {"round": 2}) is False
    assert victim.read_text() == "keep me"


def test_a_checkpoint_on_a_full_disk_warns_and_leaves_no_partial_tmp(tmp_path, monkeypatch):
    import errno

    import torch

    from audit.fl import checkpoint

    def full(obj, fh):
        fh.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.warns(UserWarning, match="No space left"):
        assert checkpoint.save_atomic(str(tmp_path / "run.pt"), {"round": 1}) is False
    assert list(tmp_path.iterdir()) == []


def test_a_tampered_checkpoint_is_ignored_not_a_traceback(tmp_path):
    import torch

    from audit.fl.checkpoint import _load_checkpoint
    from audit.fl.config import FLConfig

    cfg = FLConfig(rounds=5) if "rounds" in {f.name for f in dataclasses.fields(FLConfig)
                                              if f.default is dataclasses.MISSING} else None
    if cfg is None:
        pytest.skip("FLConfig needs more than rounds")
    path = tmp_path / "run.pt"
    for payload in ([1, 2], {"config": dataclasses.asdict(cfg), "algorithm": "fedavg",
                             "round": "x"},
                    {"config": dataclasses.asdict(cfg), "algorithm": "fedavg",
                     "round": 99, "global_state": {}, "client_states": [], "rec": {},
                     "sample_rng": {}, "server_rng": {}, "torch_rng": torch.zeros(1),
                     "cuda_rng": torch.zeros(0), "algorithm_state": {}}):
        torch.save(payload, path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert _load_checkpoint(str(path), cfg, "fedavg") is None


# ----------------------------------------------------------------- 4. locks and plans
def _lock(**entry) -> dict:
    return {"toy-claim": {"smoke": {"verdict": "CONFIRMED", **entry}}}


@pytest.mark.parametrize("plan, message", [
    ({"looks": [5, 10, 1000000]}, "seed cap"),
    ({"looks": [2.7, 3.9]}, "whole numbers"),
    ({"looks": [True, 3]}, "whole numbers"),
    ({"looks": [10, 5]}, "increase strictly"),
    ({"looks": [5, 5]}, "increase strictly"),
    ({"looks": [1, 5]}, "between 2"),
    ({"looks": []}, "non-empty"),
    ({"looks": "5,10"}, "non-empty"),
    ({"looks": [5, 10], "spending": "linear"}, "spending"),
    ([5, 10], "must be an object"),
])
def test_a_tampered_lock_plan_is_one_line(tmp_path, plan, message):
    path = tmp_path / "locks.json"
    path.write_text(json.dumps(_lock(plan=plan)))
    with pytest.raises(AuditError, match=message):
        claims_mod.read_locks(path)


def test_lock_questions_and_a_split_verdict_are_accepted_and_checked(tmp_path):
    path = tmp_path / "locks.json"
    ok = {"toy-claim": {"smoke": {"verdict": "SPLIT", "plan": {"looks": [5, 10, 20],
                                                                "spending": "pocock"},
                                  "questions": {"q1": "SPLIT", "q2": "REFUTED"}}}}
    path.write_text(json.dumps(ok))
    assert claims_mod.read_locks(path) == ok
    for bad in ({"q1": "MAYBE"}, ["q1"], {"q1": 1}):
        path.write_text(json.dumps(_lock(questions=bad)))
        with pytest.raises(AuditError, match="questions|question"):
            claims_mod.read_locks(path)
    path.write_text(json.dumps(_lock(parts={"p": "SPLIT"})))
    with pytest.raises(AuditError, match="part"):
        claims_mod.read_locks(path)


@pytest.mark.parametrize("content", [
    '{"toy-claim": {"smoke": {"verdict": "CONFIRMED", "seeds": [' + "9" * 5000 + "]}}}",
    '{"toy-claim": {"smoke": {"verdict": "CONFIRMED", "seeds": [' + "9" * 40 + "]}}}",
    '{"toy-claim": {"smoke": {"verdict": "CONFIRMED", "parts": {"\\ud800": "REFUTED"}}}}',
])
def test_huge_numbers_and_lone_surrogates_in_a_lock_are_one_line(toy, content, capsys):
    Path(os.environ["AUDIT_LOCKS"]).write_text(content)
    assert main(["list"]) == 2
    assert "lock file" in _one_error_line(capsys)


def test_verify_with_a_tampered_plan_is_one_line(toy, capsys):
    Path(os.environ["AUDIT_LOCKS"]).write_text(json.dumps(_lock(plan={"looks": [2.5]})))
    assert main(["verify", "toy-claim", "--quiet"]) == 2
    _one_error_line(capsys)
    assert toy.CALLS == []


# ------------------------------------------------------------------ 5. bounded work
@pytest.mark.parametrize("argv", [
    ["tune", "toy-claim", "--arms", "base", "--metric", "score", "--seeds", "1" + "0" * 12],
    ["tune", "toy-claim", "--arms", "base", "--metric", "score", "--seeds", "20000000"],
    ["tune", "toy-claim", "--arms", "base", "--metric", "score",
     "--grid", "effect=" + ",".join(str(i) for i in range(1000)),
     "--grid", "noise=" + ",".join(str(i / 1e4) for i in range(1000))],
    ["tune", "toy-claim", "--arms", "base", "--metric", "score",
     "--grid", "effect=" + ",".join(str(i) for i in range(100)),
     "--grid", "noise=" + ",".join(str(i / 1e4) for i in range(100))],
    ["run", "toy-claim", "--seeds", "9" * 40, "--quiet"],
    ["run", "toy-claim", "--seed-list", ",".join(["1"] * 200_001), "--quiet"],
])
def test_unbounded_work_is_refused_before_allocating(toy, capsys, argv):
    assert main(argv) == 2
    _one_error_line(capsys)
    assert toy.CALLS == []


def test_count_overrides_are_bounded(toy):
    from audit.runner import check_overrides

    claim = claims_mod.get("flayer-masked-zero")
    with pytest.raises(AuditError, match="1000 times"):
        check_overrides(claim, "smoke", {"rounds": 10**23})
    with pytest.raises(AuditError, match="whole number"):
        check_overrides(claim, "smoke", {"rounds": 1e23})
    assert check_overrides(claim, "smoke", {"rounds": 2}) == {"rounds": 2}


# ------------------------------------------------------------------ 6. special files
def test_a_report_that_is_a_fifo_or_dev_zero_is_refused_without_hanging(toy, tmp_path,
                                                                        capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    (out / "toy-claim.json").unlink()
    os.mkfifo(out / "toy-claim.json")
    assert main(["report", "--out", str(out)]) == 2
    assert "not a regular file" in _one_error_line(capsys)
    (out / "toy-claim.json").unlink()
    (out / "toy-claim.json").symlink_to("/dev/zero")
    assert main(["report", "--out", str(out)]) == 2
    assert "not a regular file" in _one_error_line(capsys)


def test_read_json_is_bounded(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    monkeypatch.setattr(safeio, "MAX_JSON_BYTES", 1000)
    with pytest.raises(AuditError, match="larger than"):
        safeio.read_regular(big, "report", limit=1000)


def test_a_fifo_or_dev_zero_in_the_data_dir_is_refused_without_hanging(tmp_path):
    from audit.fl.data import dataset_fingerprint

    base = tmp_path / "cifar-10-batches-py"
    base.mkdir()
    os.mkfifo(base / "data_batch_1")
    with pytest.raises(AuditError, match="not a regular file"):
        dataset_fingerprint("cifar10", tmp_path)
    (base / "data_batch_1").unlink()
    (base / "data_batch_1").symlink_to("/dev/zero")
    with pytest.raises(AuditError, match="not a regular file"):
        dataset_fingerprint("cifar10", tmp_path)


# ---------------------------------------------------------------------------- 7. Ray
class _FakeRayTaskError(Exception):
    def __init__(self, cause):
        super().__init__("\x1b[36mray::_run_unit()\x1b[39m (pid=1)\n  File \"x.py\", line 3"
                         "\n" + f"{type(cause).__name__}: {cause}")
        self.cause = cause


def test_a_failed_ray_unit_reports_the_real_error_without_colour():
    from audit.distributed import _unit_error

    line = _unit_error(_FakeRayTaskError(ValueError("bad width 0")))
    assert line == "ValueError: bad width 0"
    line = _unit_error(RuntimeError("\x1b[31mred\x1b[0m\nthe real error"))
    assert "\x1b" not in line and line.endswith("the real error")


def test_the_ray_worker_runs_the_claims_own_run_with_its_whole_context(toy):
    from audit.distributed import _context_fields, _run_unit

    ctx = dataclasses.replace(make_context(toy.CLAIM, "smoke"), plugin_version="p1",
                              on_round=print)
    fields = _context_fields(ctx)
    assert fields["plugin_version"] == "p1" and "on_round" not in fields
    seen = []

    def run(spec, c):  # a run function living anywhere, not a module's CLAIM
        seen.append(c.plugin_version)
        return {"score": 1.0}

    spec = toy.CLAIM.unit_specs(ctx)[0]
    out = _run_unit(run, spec.to_dict(), {**fields, "seeds": list(ctx.seeds),
                                          "threads": 1})
    assert out == {"score": 1.0} and seen == ["p1"]


@pytest.mark.parametrize("address, message", [
    ("not an address", "expected auto"), ("ray://host:99999", "expected auto"),
    ("127.0.0.1:1", "nothing answers")])
def test_a_bad_ray_address_is_one_line_at_once(address, message):
    from audit.distributed import _address_problem

    assert message in _address_problem(address, timeout=2.0)


# -------------------------------------------------------- 8. the remaining tracebacks
@pytest.mark.parametrize("claim, key, value, message", [
    ("flayer-masked-zero", "dataset", '"nosuchset"', "unknown data set"),
    ("flayer-masked-zero", "model", '"nosuchnet"', "unknown model"),
    ("flayer-masked-zero", "model_kw", '{"colour": 1}', "unknown option"),
    ("flayer-masked-zero", "cpr_sweep", '["x"]', "cpr_sweep[0]"),
    ("flayer-masked-zero", "cpr_sweep", "[-3]", "positive"),
    ("genefl-uplink-bytes", "sim", '{"dataset": "nosuchset"}', "unknown data set"),
    ("flayer-masked-zero", "rounds", "9" * 5000, "too long"),
    ("flayer-masked-zero", "rounds", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_bad_set_values_are_one_line_before_any_work(claim, key, value, message, capsys):
    assert main(["run", claim, "--set", f"{key}={value}", "--quiet", "--no-cache"]) == 2
    assert message in _one_error_line(capsys)


def test_max_seeds_one_and_a_list_valued_metric_are_one_line(toy, capsys):
    assert main(["run", "toy-claim", "--until-decided", "--max-seeds", "1", "--quiet"]) == 2
    assert "at least 2" in _one_error_line(capsys)
    assert main(["tune", "toy-claim", "--arms", "base", "--metric", "curve",
                 "--seeds", "2"]) == 2
    assert "not a number" in _one_error_line(capsys)


def test_a_cache_that_is_a_file_is_refused_and_no_cache_goes_on(toy, tmp_path, capsys,
                                                                 monkeypatch):
    # it used to warn and go on; a checkpointing claim then failed after its units ran
    # (the fifth hostile round), so the bad root is now one line before the run
    blocker = tmp_path / "cachefile"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AUDIT_CACHE", str(blocker))
    assert main(["run", "toy-claim", "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "as the run cache" in _one_error_line(capsys)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert main(["run", "toy-claim", "--out", str(tmp_path / "out"), "--quiet",
                     "--no-cache"]) == 0
    assert blocker.read_text() == "not a folder"


def test_a_report_with_a_lone_surrogate_or_a_huge_number_is_one_line(toy, tmp_path,
                                                                     capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    text = (out / "toy-claim.json").read_text()
    md = (out / "toy-claim.md").read_bytes()
    for bad in (text.replace('"id": "toy-claim"', '"id": "toy-claim", "x": "\\udc80"', 1),
                text.replace('"id": "toy-claim"', '"id": "toy-claim", "x": ' + "7" * 5000,
                             1)):
        (out / "toy-claim.json").write_text(bad)
        assert main(["report", "--out", str(out)]) == 2
        _one_error_line(capsys)
        assert (out / "toy-claim.json").read_text() == bad  # not rewritten...
        assert (out / "toy-claim.md").read_bytes() == md  # ...beside a stale .md


class _BrokenPipe(io.StringIO):
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise io.UnsupportedOperation


def test_a_broken_pipe_is_no_traceback(toy, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _BrokenPipe())
    assert main(["list"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_an_ascii_terminal_gets_escapes_not_a_traceback(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "AUDIT_LOCKS": str(tmp_path / "l")}
    res = subprocess.run([sys.executable, "-m", "audit", "run", "ünknown-\u2603"],
                         capture_output=True, env=env, cwd=REPO, timeout=120)
    assert res.returncode == 2
    err = res.stderr.decode("ascii")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ------------------------------------------------------------------------ 9. plugins
def _plugin(toy, **kw):
    return dataclasses.replace(toy.CLAIM, origin="entry point 'bad = badpkg.claim'", **kw)


def _results(value):
    return lambda spec, ctx: value


@pytest.mark.parametrize("run, message", [
    (lambda spec, ctx: 1 / 0, "ZeroDivisionError"),
    (lambda spec, ctx: sys.exit(3), "SystemExit"),
    (_results({"score": {1, 2}}), "cannot hold"),
    (_results({(1, 2): 1.0}), "not a string"),
    (_results({"score": 1.0, "per": {0: 1.0}}), "not a string"),
    (_results([1.0]), "not an object"),
])
def test_a_plugins_failures_are_one_line_naming_it(toy, tmp_path, run, message):
    claim = _plugin(toy, run=run)
    ctx = make_context(claim, "smoke")
    for enabled in (True, False):  # the same with and without the cache
        with pytest.raises(AuditError, match=message) as info:
            execute(claim, ctx, cache=Cache(tmp_path / "c", enabled=enabled),
                    progress=False)
        assert "badpkg.claim" in str(info.value)


def _too_few(spec, ctx):
    import numpy as np

    from audit.fl.data import dirichlet_partition

    return dirichlet_partition(np.arange(12) % 3, 5, 0.5, np.random.default_rng(0))


def test_a_split_the_plugins_data_cannot_give_names_the_plugin(toy, tmp_path):
    """PartitionError is an AuditError, which passes a plugin's guard unchanged; it
    still says whose split it was."""
    from audit.fl.data import PartitionError

    claim = _plugin(toy, run=_too_few)
    with pytest.raises(PartitionError, match="cannot give 5 clients") as info:
        execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                progress=False)
    assert "badpkg.claim" in str(info.value) and "\n" not in str(info.value)


def test_a_plugin_result_is_the_one_the_cache_gives_back(toy, tmp_path):
    import numpy as np

    seen = []

    def analyse(results, ctx):
        seen.append(sorted(type(r["score"]).__name__ for r in results.values())[0])
        return toy.analyse(results, ctx)

    def run(spec, ctx):
        out = toy.run(spec, ctx)
        return {**out, "score": np.float32(out["score"]), "curve": tuple(out["curve"])}

    claim = _plugin(toy, run=run, analyse=analyse)
    ctx = make_context(claim, "smoke")
    first = execute(claim, ctx, cache=Cache(tmp_path / "c"), progress=False)
    again = execute(claim, ctx, cache=Cache(tmp_path / "c"), progress=False)
    assert set(seen) == {"float"} and again.cached == len(claim.unit_specs(ctx))
    assert first.verdict.verdict == again.verdict.verdict


def test_a_plugin_analyse_of_the_wrong_type_is_one_line(toy, tmp_path):
    claim = _plugin(toy, analyse=lambda results, ctx: {"parts": []})
    with pytest.raises(AuditError, match="analyse returned a dict"):
        execute(claim, make_context(claim, "smoke"), cache=Cache(tmp_path / "c"),
                progress=False)


def test_a_plugin_that_exits_at_import_is_skipped_with_a_warning(monkeypatch):
    class EP:
        name, value, dist, module = "bad", "badpkg.claim", None, "badpkg.claim"

        def load(self):
            raise SystemExit(3)

    monkeypatch.setattr(claims_mod, "_entry_points", lambda: [EP()])
    with pytest.warns(claims_mod.ClaimPluginWarning, match="SystemExit"):
        assert claims_mod.plugin_claims({}) == {}


@pytest.mark.parametrize("package", ["audit", "torch", "os", "numpy", "json"])
def test_audit_new_refuses_a_package_that_would_overwrite_another(tmp_path, capsys,
                                                                  package):
    assert main(["new", "my-claim", "--paper", "2412.07062", "--out-dir", str(tmp_path),
                 "--package", package]) == 2
    _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ 10. text from elsewhere
def test_term_text_removes_escape_sequences_and_control_characters():
    hostile = "ok\x1b[2J\x1b[H\x1b]0;pwned\x07\x1bP1\x9b31m\r\x00\x7fend\ud800"
    text = safeio.term_text(hostile)
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)
    assert text.startswith("ok") and "end" in text and "pwned" not in text
    text.encode("utf-8")  # no lone surrogate left
    assert safeio.term_text("Zürich — naïve ✓") == "Zürich — naïve ✓"
    assert safeio.term_text("two\nlines") == "two\\nlines"


def test_md_text_keeps_markdown_inert():
    assert safeio.md_text("# Title") == "\\# Title"
    assert safeio.md_text("ok\n## injected\n<img src=x onerror=alert(1)>") == \
        "ok ## injected &lt;img src=x onerror=alert(1)&gt;"
    assert safeio.md_text("a | b") == "a \\| b"
    assert safeio.md_text("1. item") == "1\\. item"
    assert safeio.md_text("> quote") == "&gt; quote"  # no blockquote
    assert safeio.md_text("plain words, 3 < 4") == "plain words, 3 &lt; 4"
    assert "\x1b" not in safeio.md_text("\x1b[31mred")


def test_error_lines_and_claim_listings_are_escaped(toy, capsys):
    assert main(["run", "toy-\x1b]0;title\x07claim"]) == 2
    line = _one_error_line(capsys)
    assert "\x1b" not in line and "\x07" not in line


def test_a_plugin_whose_analyse_fails_after_the_cache_repair_is_one_line(toy, tmp_path):
    """A plugin's analyse with a bug of its own, on cached units whose keys differ
    legitimately: the odd units were computed again and the second analysis raised a raw
    KeyError traceback (helper-42). It is now one AuditError naming the plugin."""
    def run(spec, ctx):
        out = toy.run(spec, ctx)
        return {**out, "extra": 1.0} if spec.seed == 0 else out

    def analyse(results, ctx):
        raise KeyError("a key the plugin never wrote")

    claim = _plugin(toy, run=run, analyse=analyse)
    ctx = make_context(claim, "smoke")
    cache = Cache(tmp_path / "c")
    for _ in range(2):  # computed, then cached (where the odd units are found)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(AuditError, match="analyse raised KeyError") as info:
                execute(claim, ctx, cache=cache, progress=False)
        assert "badpkg.claim" in str(info.value)
